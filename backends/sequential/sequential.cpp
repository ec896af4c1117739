#include "sequential.hpp"

namespace ymlopt {
namespace {

class SequentialExecutor final : public Executor {
 public:
  std::string name() const override { return "sequential"; }
  ExecResult execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) override {
    ExecResult r;
    r.scheduler = "topological order";
    r.runtime = "sequential";
    r.workers = {"main"};
    TaskRunner runner(dag, opts, progress);
    std::vector<TensorView> views;
    for (auto id : dag.topo_order) {
      const TaskNode& t = dag.tasks[size_t(id)];
      views.assign(t.bindings.size(), TensorView{});
      for (size_t k = 0; k < t.bindings.size(); ++k)
        if (t.bindings[k].ref.data >= 0) views[k] = store.view(t.bindings[k].ref);
      if (opts.before_task) opts.before_task(t, views);
      if (!runner.run(t, views, 0)) break;
    }
    r.makespan_us = runner.now_us();
    runner.finish(r);
    return r;
  }
};

}  // namespace

std::unique_ptr<Executor> make_sequential_executor() { return std::make_unique<SequentialExecutor>(); }

}  // namespace ymlopt
