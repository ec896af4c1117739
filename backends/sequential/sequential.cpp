#include "sequential.hpp"

#include "ymlopt/scheduler/task_order.hpp"

#include <algorithm>

namespace ymlopt {
namespace {

// Runs tasks in the calling thread, in topological order.
class SequentialSession final : public Session {
 public:
  SequentialSession(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress)
      : dag_(dag), store_(store), opts_(opts), runner_(dag, opts, progress), order_(dag) {}

  bool run(std::int32_t first, std::int32_t end, int /*context*/, int /*priority*/) override {
    std::vector<std::int32_t> ids;
    std::vector<TensorView> views;
    for (auto id : order_.range(first, end, ids)) {
      const TaskNode& t = dag_.tasks[size_t(id)];
      views.assign(t.bindings.size(), TensorView{});
      for (size_t k = 0; k < t.bindings.size(); ++k)
        if (t.bindings[k].ref.data >= 0) {
          views[k] = store_.view(t.bindings[k].ref);
          views[k].content_id = runner_.content_id(t.id, k);
        }
      if (opts_.before_task) opts_.before_task(t, views);
      if (!runner_.run(t, views, 0)) return false;
    }
    return true;
  }
  int create_context(const std::string&, const std::vector<int>&, const char*) override { return 0; }
  void delete_context(int) override {}
  int num_workers() const override { return 1; }
  void acquire(std::int32_t, bool) override {}  // every task has finished when run() returns
  void release(std::int32_t) override {}
  TaskRunner& runner() override { return runner_; }
  void close(ExecResult& r) override {
    r.makespan_us = runner_.now_us();
    runner_.finish(r);
  }

 private:
  const Dag& dag_;
  DataStore& store_;
  const ExecOptions& opts_;
  TaskRunner runner_;
  TaskOrder order_;
};

class SequentialExecutor final : public Executor {
 public:
  std::string name() const override { return "sequential"; }
  std::unique_ptr<Session> open(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress,
                                ExecResult& r) override {
    r.scheduler = "topological order";
    r.runtime = "sequential";
    r.workers = {"main"};
    r.worker_kinds = {Where::cpu};
    const auto pinned = std::count_if(dag.tasks.begin(), dag.tasks.end(),
                                      [](const TaskNode& t) { return t.where == Where::opencl || t.where == Where::cuda; });
    if (pinned > 0)
      r.warnings.push_back(std::to_string(pinned) + " task(s) with where=\"opencl\" or \"cuda\" ran on the host: the "
                           "sequential backend has no accelerator workers");
    return std::make_unique<SequentialSession>(dag, store, opts, progress);
  }
  ExecResult execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) override {
    ExecResult r;
    auto s = open(dag, store, opts, progress, r);
    s->run(0, std::int32_t(dag.tasks.size()), 0, 0);
    s->close(r);
    return r;
  }
};

}  // namespace

std::unique_ptr<Executor> make_sequential_executor() { return std::make_unique<SequentialExecutor>(); }

}  // namespace ymlopt
