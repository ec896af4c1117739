#pragma once
#include <memory>
#include <string>

#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {
/// The executor of the backend named `name`, the one place a backend is picked
/// by name: "sequential", "starpu", and "starpu-mpi" in a build with StarPU-MPI
/// (every rank must have called mpi_world_init first). Commands check first the
/// names they accept; an unknown one throws std::invalid_argument. Commands
/// run a workflow through run_workflow (run_workflow.hpp), which calls it.
///
///   auto ex = make_executor(backend);
///   ExecResult r = ex->execute(dag, store, opts, progress);
std::unique_ptr<Executor> make_executor(const std::string& name);
}  // namespace ymlopt
