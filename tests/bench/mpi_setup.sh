# Sourced by the StarPU-MPI benchmarks (estimate_vs_mpi.sh, mpi_memory.sh) with
# "$@" = YMLOPT_BINARY [WORKDIR]: sets y (the binary) and T (WORKDIR, else a new
# temporary directory), moves to the repository root, lets Open MPI run as root
# over shared memory with one OpenBLAS thread per rank, and defines write_ids.
y=$(realpath "$1")
T=${2:-$(mktemp -d)}
mkdir -p "$T"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1
source tests/bench/openblas_core.sh
source tests/write_ids.sh
