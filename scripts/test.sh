#!/usr/bin/env bash
# README command 2: install, build, run every test; then the same suite again
# in a build with AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/setup.sh build
(cd build && ctest --output-on-failure -j"$jobs")
if [ "${YMLOPT_SKIP_SANITIZERS:-0}" != 1 ]; then
  scripts/setup.sh build-asan -DYMLOPT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j"$jobs" -LE slow)
fi
