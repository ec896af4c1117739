#pragma once
#include <string>

namespace ymlopt {
/// The machine's single-call OpenBLAS sgemm rate with all cores (GFLOP/s),
/// the yardstick for a run's achieved GFLOP/s. Measured once (n = 1024, best
/// of 3) and cached in $XDG_CACHE_HOME/ymlopt (or ~/.cache/ymlopt), keyed by
/// CPU model, OpenBLAS core and thread count; 0 if it cannot be measured.
/// A cached figure below `achieved` (a run beat it: it was measured on a busy
/// machine) is measured again; the cache keeps the best figure seen.
double blas_peak_gflops(double achieved = 0);
}  // namespace ymlopt
