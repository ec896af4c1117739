#!/usr/bin/env bash
# README command 1: install, build, run the quickstart workflow.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
build/bin/ymlopt run examples/quickstart.xml --out runs/quickstart
