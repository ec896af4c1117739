# Sourced by the benchmarks: OpenBLAS 0.3.21 mis-detects the AVX-512 CPUs of these
# machines (as Prescott), so name SkylakeX there; on a CPU without AVX-512 its
# kernels are illegal instructions, so leave the choice to OpenBLAS. A value
# already set wins.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
