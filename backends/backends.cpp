#include "backends.hpp"

#include <stdexcept>

#include "sequential.hpp"
#include "starpu_backend.hpp"
#ifdef YMLOPT_WITH_STARPU_MPI
#include "starpu_mpi_backend.hpp"
#endif

namespace ymlopt {

std::unique_ptr<Executor> make_executor(const std::string& name) {
  if (name == "sequential") return make_sequential_executor();
  if (name == "starpu") return make_starpu_executor();
#ifdef YMLOPT_WITH_STARPU_MPI
  if (name == "starpu-mpi") return std::make_unique<StarpuMpiExecutor>();
#endif
  throw std::invalid_argument("unknown backend '" + name + "'");
}

}  // namespace ymlopt
