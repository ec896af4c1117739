#pragma once
#include <memory>

#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {
/// The StarPU backend: every tensor is a StarPU matrix handle, tiles are its
/// children through a partition plan (switched with partition/unpartition
/// submits as tasks alternate between whole and tiled access), every
/// component a codelet with a history-based perf model, every task a
/// starpu_task whose data dependencies StarPU infers from access modes;
/// wait/notify events become explicit task dependencies.
///
///   auto ex = make_starpu_executor();
///   ExecOptions o; o.sched = "dmda"; o.ncpu = 2;
///   auto r = ex->execute(dag, store, o, progress);
std::unique_ptr<Executor> make_starpu_executor();

/// Names of the workers a default starpu_init() gives (starts and stops StarPU).
std::vector<std::string> starpu_worker_names();

/// Scheduling policies accepted by --sched.
const std::vector<std::string>& starpu_policies();
}  // namespace ymlopt
