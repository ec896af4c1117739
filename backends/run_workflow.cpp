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
  if (run.result.records.size() != dag.tasks.size()) {  // the backend failed to start: no task ran
    run.result.records.assign(dag.tasks.size(), TaskRecord{});
    for (size_t i = 0; i < dag.tasks.size(); ++i) run.result.records[i].task = std::int32_t(i);
  }
  return run;
}

}  // namespace ymlopt
