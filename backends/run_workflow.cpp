#include "run_workflow.hpp"

#include "backends.hpp"

namespace ymlopt {

WorkflowRun run_workflow(const Dag& dag, DataStore& store, const RunOptions& o) {
  WorkflowRun run;
  run.executor = make_executor(o.backend);
  Progress own;
  Progress& progress = o.progress ? *o.progress : own;
  progress.total = dag.dynamic() ? 0 : std::int64_t(dag.tasks.size());
  run.result = run_program(*run.executor, dag, store, o.exec, progress);
  return run;
}

}  // namespace ymlopt
