#include "ymlopt/scheduler/executor.hpp"

#include <cmath>

#include "ymlopt/scheduler/checkpoint.hpp"

extern "C" void openblas_set_num_threads(int);

namespace ymlopt {
namespace {

class Context final : public KernelContext {
 public:
  Context(std::span<const TensorView> v, const Args& a, TaskRecord& r, const std::string& dir,
          const std::function<int(std::int32_t)>& peers, std::int32_t comethod, const DeviceCall& dev)
      : views_(v), args_(a), rec_(r), dir_(dir), peers_(peers), comethod_(comethod), dev_(dev) {}
  std::span<const TensorView> ports() const override { return views_; }
  const Args& args() const override { return args_; }
  void report(std::string key, double value) override { rec_.results.emplace_back(std::move(key), value); }
  const std::string& run_dir() const override { return dir_; }
  int remote_peers_at_work() const override { return peers_ && comethod_ >= 0 ? peers_(comethod_) : -1; }
  void* cuda_stream() const override { return dev_.kind == Where::cuda ? dev_.queue : nullptr; }
  void* opencl_queue() const override { return dev_.kind == Where::opencl ? dev_.queue : nullptr; }
  std::size_t opencl_offset(std::size_t port) const override {
    return dev_.kind == Where::opencl && dev_.offsets && port < views_.size() ? dev_.offsets[port] : 0;
  }

 private:
  std::span<const TensorView> views_;
  const Args& args_;
  TaskRecord& rec_;
  const std::string& dir_;
  const std::function<int(std::int32_t)>& peers_;
  std::int32_t comethod_;
  const DeviceCall& dev_;
};

// The component's kernel for the device, then the wait for its queue.
void run_kernel(const ComponentSpec& c, Context& ctx, const DeviceCall& dev) {
  switch (dev.kind) {
    case Where::opencl:
      if (!c.opencl) throw KernelError("an OpenCL worker ran " + c.name + ", which has no OpenCL kernel");
      c.opencl(ctx);
      break;
    case Where::cuda:
      if (!c.cuda) throw KernelError("a CUDA worker ran " + c.name + ", which has no CUDA kernel");
      c.cuda(ctx);
      break;
    case Where::cpu:
    case Where::any: c.cpu(ctx); return;
  }
  if (dev.sync) dev.sync(dev.queue);
}

}  // namespace

TaskRunner::TaskRunner(const Dag& dag, const ExecOptions& opts, Progress& progress)
    : dag_(dag), opts_(opts), progress_(progress), t0_(std::chrono::steady_clock::now()),
      records_(dag.tasks.size()), region_failed_(new std::atomic<bool>[dag.regions.size() + 1]),
      region_error_(dag.regions.size()) {
  for (size_t i = 0; i <= dag.regions.size(); ++i) region_failed_[i] = false;
  for (size_t i = 0; i < records_.size(); ++i) records_[i].task = std::int32_t(i);
  static std::atomic<std::uint64_t> epochs{0};
  epoch_ = epochs.fetch_add(1, std::memory_order_relaxed) + 1;
  if (epoch_ < (std::uint64_t(1) << 32)) content_ = content_ids(dag);
  if (opts.warmup > 0 && !content_.ids.empty()) {  // a tensor a task writes changes between repeats
    const std::vector<char> written = written_data(dag);
    varies_.assign(content_.ids.size(), 0);
    for (const auto& t : dag.tasks)
      for (size_t p = 0; p < t.bindings.size(); ++p) {
        const std::int32_t d = t.bindings[p].ref.data;  // -1: an optional port left unbound
        if (d >= 0 && written[size_t(d)]) varies_[content_.first[size_t(t.id)] + p] = 1;
      }
    const std::uint64_t top = *std::max_element(content_.ids.begin(), content_.ids.end());
    if ((top + 1) * (std::uint64_t(opts.warmup) + 1) < (std::uint64_t(1) << 32)) id_span_ = top + 1;
  }
  // The runtime provides the parallelism; BLAS inside a task is single-threaded,
  // which also makes every backend compute bit-identical results.
  openblas_set_num_threads(1);
  progress_.total = dag.dynamic() ? 0 : std::int64_t(dag.tasks.size());  // loops: runs not known ahead
}

double TaskRunner::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

void TaskRunner::start_clock() {
  const auto now = std::chrono::steady_clock::now();
  setup_us_ += std::chrono::duration<double, std::micro>(now - t0_).count();
  t0_ = now;
}

void TaskRunner::next_repeat() {
  warmup_us_.push_back(now_us());
  ++repeat_;
  for (size_t i = 0; i < records_.size(); ++i) {
    records_[i] = TaskRecord{};
    records_[i].task = std::int32_t(i);
  }
  repeats_.clear();
  progress_.started = 0;
  progress_.done = 0;
  t0_ = std::chrono::steady_clock::now();
}

double TaskRunner::busy_us(std::int32_t task) const {
  const TaskRecord& r = records_[size_t(task)];
  return r.end_us > r.start_us ? r.end_us - r.start_us : 0.0;
}

double TaskRunner::result(std::int32_t task, std::string_view key) const {
  for (const auto& [k, v] : records_[size_t(task)].results)
    if (k == key) return v;
  return std::nan("");
}

void TaskRunner::port_templates(const TaskNode& t, TensorView* out) const {
  for (size_t k = 0; k < t.bindings.size(); ++k) {
    const auto& b = t.bindings[k];
    TensorView& v = out[k];
    v = TensorView{};
    if (b.ref.data < 0) continue;
    v = dag_.ref_view(b.ref);
    v.ld = dag_.data[size_t(b.ref.data)].ld;  // a tile's rows stride over the whole tensor
    v.content_id = content_id(t.id, k);
  }
}

std::uint64_t TaskRunner::content_id(std::int32_t task, std::size_t port) const {
  if (content_.ids.empty()) return 0;
  const std::size_t at = content_.first[size_t(task)] + port;
  std::uint64_t id = content_.ids[at];
  if (id && !varies_.empty() && varies_[at]) id = id_span_ ? id + repeat_ * id_span_ : 0;
  return id ? epoch_ << 32 | id : 0;
}

bool TaskRunner::run(const TaskNode& t, std::span<const TensorView> views, std::int32_t worker, const DeviceCall& dev) {
  TaskRecord& rec = records_[size_t(t.id)];
  if (rec.ran) {  // a runtime loop runs it again: keep the earlier run
    std::lock_guard<std::mutex> lock(mu_);
    repeats_.push_back(std::move(rec));
    rec = TaskRecord{};
    rec.task = t.id;
    rec.iteration = repeats_.back().iteration + 1;
  }
  rec.worker = worker;
  progress_.started.fetch_add(1, std::memory_order_relaxed);
  if (cancelled() || (t.comethod >= 0 && comethod_failed(t.comethod))) {
    progress_.done.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  rec.start_us = now_us();
  Context ctx(views, t.args, rec, opts_.run_dir, remote_peers_, t.comethod, dev);
  Checkpoint* ck = opts_.checkpoint;
  const bool restore = ck && ck->restorable(t.id);
  std::string err;
  try {
    if (restore) ck->restore(t, views, rec);
    else run_kernel(*t.comp, ctx, dev);
    if (ck && !restore) ck->persist(t, views, rec);
  } catch (const std::exception& e) {
    err = e.what();
  } catch (...) {
    err = "unknown exception";
  }
  rec.end_us = now_us();
  rec.ran = err.empty();
  rec.restored = restore && rec.ran;
  progress_.done.fetch_add(1, std::memory_order_relaxed);
  if (err.empty()) return true;
  const std::string message = dag_.task_error(t) + " (component " + t.comp->name + ") failed" +
                              (dev.kind == Where::opencl ? " on an OpenCL worker" : dev.kind == Where::cuda ? " on a CUDA worker" : "") +
                              ": " + err;
  if (t.comethod >= 0) {  // the co-method fails; the others go on
    fail_comethod(t.comethod, message);
    return false;
  }
  std::int32_t expected = -1;
  if (failed_.compare_exchange_strong(expected, t.id)) error_ = message;
  cancelled_.store(true, std::memory_order_relaxed);
  return false;
}

bool TaskRunner::comethod_failed(std::int32_t region) const {
  return region_failed_[size_t(region)].load(std::memory_order_relaxed);
}

void TaskRunner::fail_comethod(std::int32_t region, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!region_failed_[size_t(region)].exchange(true)) region_error_[size_t(region)] = std::move(message);
}

std::string TaskRunner::comethod_error(std::int32_t region) const {
  std::lock_guard<std::mutex> lock(mu_);
  return region_error_[size_t(region)];
}

void TaskRunner::finish(ExecResult& r) {
  r.records = std::move(records_);
  r.repeats = std::move(repeats_);
  r.failed_task = failed_.load();
  r.ok = r.failed_task < 0;
  r.error = error_;
  r.setup_us = setup_us_;
  r.warmup_us = std::move(warmup_us_);
}

}  // namespace ymlopt
