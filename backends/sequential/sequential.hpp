#pragma once
#include <memory>

#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {
/// The reference backend: runs every task in the DAG's topological order on
/// the calling thread, with no runtime system. Results are what the StarPU
/// backend is compared against.
///
///   auto ex = make_sequential_executor();
///   auto r = ex->execute(dag, store, opts, progress);
std::unique_ptr<Executor> make_sequential_executor();
}  // namespace ymlopt
