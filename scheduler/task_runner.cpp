#include "ymlopt/scheduler/executor.hpp"

extern "C" void openblas_set_num_threads(int);

namespace ymlopt {
namespace {

class Context final : public KernelContext {
 public:
  Context(std::span<const TensorView> v, const Args& a, TaskRecord& r, const std::string& dir)
      : views_(v), args_(a), rec_(r), dir_(dir) {}
  std::span<const TensorView> ports() const override { return views_; }
  const Args& args() const override { return args_; }
  void report(std::string key, double value) override { rec_.results.emplace_back(std::move(key), value); }
  const std::string& run_dir() const override { return dir_; }

 private:
  std::span<const TensorView> views_;
  const Args& args_;
  TaskRecord& rec_;
  const std::string& dir_;
};

}  // namespace

TaskRunner::TaskRunner(const Dag& dag, const ExecOptions& opts, Progress& progress)
    : dag_(dag), opts_(opts), progress_(progress), t0_(std::chrono::steady_clock::now()),
      records_(dag.tasks.size()) {
  // The runtime provides the parallelism; BLAS inside a task is single-threaded,
  // which also makes every backend compute bit-identical results.
  openblas_set_num_threads(1);
  progress_.total = std::int64_t(dag.tasks.size());
}

double TaskRunner::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

void TaskRunner::port_templates(const TaskNode& t, TensorView* out) const {
  for (size_t k = 0; k < t.bindings.size(); ++k) {
    const auto& b = t.bindings[k];
    TensorView& v = out[k];
    v = TensorView{};
    if (b.ref.data < 0) continue;
    const DataDecl& d = dag_.data[size_t(b.ref.data)];
    v.dtype = d.dtype;
    v.shape = dag_.ref_shape(b.ref);
    if (b.ref.tile < 0) {
      v.rows = d.rows, v.cols = d.cols;
    } else {
      v.rows = d.tile_nrows(b.ref.tile / d.ntile_c);
      v.cols = d.tile_ncols(b.ref.tile % d.ntile_c);
    }
    v.ld = d.ld;
  }
}

bool TaskRunner::run(const TaskNode& t, std::span<const TensorView> views, std::int32_t worker) {
  TaskRecord& rec = records_[size_t(t.id)];
  rec.worker = worker;
  progress_.started.fetch_add(1, std::memory_order_relaxed);
  if (cancelled()) {
    progress_.done.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  rec.start_us = now_us();
  Context ctx(views, t.args, rec, opts_.run_dir);
  std::string err;
  try {
    t.comp->cpu(ctx);
  } catch (const std::exception& e) {
    err = e.what();
  } catch (...) {
    err = "unknown exception";
  }
  rec.end_us = now_us();
  rec.ran = err.empty();
  progress_.done.fetch_add(1, std::memory_order_relaxed);
  if (err.empty()) return true;
  std::int32_t expected = -1;
  if (failed_.compare_exchange_strong(expected, t.id)) {
    const std::string who = t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : "'" + t.label + "'";
    error_ = (t.loc.file ? *t.loc.file : dag_.file) + ":" + std::to_string(t.loc.line) + ":" +
             std::to_string(t.loc.col) + ": error: task " + who + " (component " + t.comp->name +
             ") failed: " + err;
  }
  cancelled_.store(true, std::memory_order_relaxed);
  return false;
}

void TaskRunner::finish(ExecResult& r) {
  r.records = std::move(records_);
  r.failed_task = failed_.load();
  r.ok = r.failed_task < 0;
  r.error = error_;
}

}  // namespace ymlopt
