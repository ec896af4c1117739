// How the StarPU library was built (from starpu_config.h) and which version
// runs (starpu_get_version). Does not initialise StarPU; safe to call any time.
#pragma once

#include <string>

namespace ymlopt {

struct StarpuBuildInfo {
  std::string version;         // runtime library, "1.3.10"
  std::string header_version;  // headers built against, "1.3.10"
  bool cuda = false;           // STARPU_USE_CUDA
  bool opencl = false;         // STARPU_USE_OPENCL
  bool mpi = false;            // STARPU_USE_MPI (StarPU-MPI available)
  bool fxt = false;            // STARPU_USE_FXT (execution traces)
  bool simgrid = false;        // STARPU_SIMGRID
  bool hwloc = false;          // STARPU_HAVE_HWLOC
  int max_cpus = 0;            // STARPU_MAXCPUS: most CPU workers StarPU can drive
  int max_cuda = 0;            // STARPU_MAXCUDADEVS
  int max_workers = 0;         // STARPU_NMAXWORKERS
};

StarpuBuildInfo starpu_build_info();

/// One line, e.g. "StarPU 1.3.10 (CPU workers <= 4, CUDA no, OpenCL yes, MPI yes, FxT no)".
std::string format_starpu_build_info(const StarpuBuildInfo& info);

}  // namespace ymlopt
