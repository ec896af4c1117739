#pragma once
#include <memory>
#include <string>

#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {

/// How a command runs a compiled workflow: the backend, by name, and the
/// options every backend takes.
struct RunOptions {
  std::string backend = "sequential";  // sequential, starpu or starpu-mpi (make_executor)
  ExecOptions exec;                    // run directory, scheduler, workers, checkpoint, capture hook
  Progress* progress = nullptr;        // live counters for a progress line; null: the run's own
};

/// One run of a workflow: its result and the executor that ran it (its name(),
/// the StarPU-MPI backend's statistics).
struct WorkflowRun {
  ExecResult result;
  std::unique_ptr<Executor> executor;
};

/// The one way a command runs a compiled workflow: picks and starts the
/// backend (make_executor), sets the progress total (the task count; 0 when
/// runtime loops decide it) and runs `dag` over `store` through run_program,
/// which opens a session for runtime loops and <unite> blocks. A failed run is
/// a result with ok false; an unknown backend throws std::invalid_argument.
///
///   RunOptions o;
///   o.backend = "starpu";
///   o.exec.run_dir = dir;
///   DataStore store(dag);
///   const WorkflowRun r = run_workflow(dag, store, o);
///   if (!r.result.ok) fail(r.result.error);
WorkflowRun run_workflow(const Dag& dag, DataStore& store, const RunOptions& o);

}  // namespace ymlopt
