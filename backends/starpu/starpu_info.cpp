#include "starpu_info.hpp"

#include <starpu.h>
#include <starpu_config.h>

namespace ymlopt {

StarpuBuildInfo starpu_build_info() {
  StarpuBuildInfo b;
  int major = 0, minor = 0, release = 0;
  starpu_get_version(&major, &minor, &release);  // does not need starpu_init
  b.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  b.header_version = std::to_string(STARPU_MAJOR_VERSION) + "." + std::to_string(STARPU_MINOR_VERSION) + "." +
                     std::to_string(STARPU_RELEASE_VERSION);
#ifdef STARPU_USE_CUDA
  b.cuda = true;
#endif
#ifdef STARPU_USE_OPENCL
  b.opencl = true;
#endif
#ifdef STARPU_USE_MPI
  b.mpi = true;
#endif
#ifdef STARPU_USE_FXT
  b.fxt = true;
#endif
#ifdef STARPU_SIMGRID
  b.simgrid = true;
#endif
#ifdef STARPU_HAVE_HWLOC
  b.hwloc = true;
#endif
  b.max_cpus = STARPU_MAXCPUS;
#ifdef STARPU_MAXCUDADEVS
  b.max_cuda = STARPU_MAXCUDADEVS;
#endif
#ifdef STARPU_NMAXWORKERS
  b.max_workers = STARPU_NMAXWORKERS;
#endif
  return b;
}

std::string format_starpu_build_info(const StarpuBuildInfo& b) {
  auto yn = [](bool v) { return v ? "yes" : "no"; };
  std::string s = "StarPU " + b.version;
  if (b.header_version != b.version) s += " (headers " + b.header_version + ")";
  s += " (CPU workers <= " + std::to_string(b.max_cpus) + ", CUDA " + yn(b.cuda);
  if (b.cuda) s += " <= " + std::to_string(b.max_cuda) + " devices";
  s += std::string(", OpenCL ") + yn(b.opencl) + ", MPI " + yn(b.mpi) + ", FxT " + yn(b.fxt);
  if (b.simgrid) s += ", SimGrid";
  return s + ")";
}

}  // namespace ymlopt
