#include "starpu_backend.hpp"
#include "starpu_bind.hpp"
#include "starpu_task.hpp"
#include "ymlopt/scheduler/task_order.hpp"

#include <starpu.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <thread>


namespace ymlopt {
namespace {

void cpu_trampoline(void* buffers[], void* cl_arg) {
  auto* ex = static_cast<TaskExec*>(cl_arg);
  ex->runner->run(*ex->node, bind_buffers(buffers, *ex), starpu_worker_get_id());
  record_prediction(*ex);
}

struct TileGeom {
  const DataDecl* d;
};

// Children of a row-major matrix: tile (id / ntile_c, id % ntile_c), edge tiles
// smaller, or the column splits of split= data (DataDecl's tile geometry).
void tile_filter(void* father, void* child, starpu_data_filter* f, unsigned id, unsigned /*nparts*/) {
  auto* F = static_cast<starpu_matrix_interface*>(father);
  auto* C = static_cast<starpu_matrix_interface*>(child);
  const DataDecl& d = *static_cast<const TileGeom*>(f->filter_arg_ptr)->d;
  const std::int64_t tr = id / d.ntile_c, tc = id % d.ntile_c;
  const std::int64_t r0 = d.tile_row0(tr), c0 = d.tile_col0(tc);
  C->id = F->id;
  C->ny = std::uint32_t(d.tile_nrows(tr));
  C->nx = std::uint32_t(d.tile_ncols(tc));
  C->ld = F->ld;
  C->elemsize = F->elemsize;
  C->allocsize = size_t(C->nx) * C->ny * C->elemsize;
  const size_t offset = (size_t(r0) * F->ld + c0) * F->elemsize;
  if (F->dev_handle) {
    if (F->ptr) C->ptr = F->ptr + offset;
    C->dev_handle = F->dev_handle;
    C->offset = F->offset + offset;
  }
}


// Counts a segment's tasks down (StarPU callback) so that the co-method that
// submitted them waits for its own tasks only.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t pending = 0;
  static void done(void* arg) {
    auto* w = static_cast<Waiter*>(arg);
    std::lock_guard<std::mutex> lock(w->mu);
    if (--w->pending == 0) w->cv.notify_all();
  }
};

class StarpuSession final : public Session {
 public:
  StarpuSession(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress)
      : dag_(dag), store_(store), opts_(opts), progress_(progress), order_(dag) {}

  // starpu_init, codelets, data handles and partition plans; false with r.error set.
  bool start(ExecResult& r) {
    r.scheduler = opts_.sched;
    r.runtime = std::string("StarPU ") + std::to_string(STARPU_MAJOR_VERSION) + "." +
                std::to_string(STARPU_MINOR_VERSION) + "." + std::to_string(STARPU_RELEASE_VERSION);
    // per-run perf-model directory (two processes must not share one)
    std::string home = opts_.starpu_home.empty() ? opts_.run_dir + "/starpu" : opts_.starpu_home;
    if (!std::getenv("STARPU_HOME")) {
      std::filesystem::create_directories(home);
      setenv("STARPU_HOME", home.c_str(), 1);
    }
    if (!opts_.verbose && !std::getenv("STARPU_SILENT")) setenv("STARPU_SILENT", "1", 1);

    starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy_name = opts_.sched.c_str();
    {
      // The workers need CPUs and caches only: without hwloc's I/O discovery
      // (reading every PCI device's config space) the topology probe and
      // starpu_init take ~5 ms instead of ~30-70 ms each (docs/BENCHMARKS.md 2).
      const ScopedCpuOnlyHwloc cpu_only;
      if (!binding_.configure(conf, opts_, r)) return false;  // --ncpu, --bind, StarPU's CPU cap
      const DeviceConf devices(conf, opts_);                  // --opencl, --opencl-on-cpus
      if (int ret = starpu_init(&conf); ret != 0) {
        r.error = "starpu_init failed: " + std::string(std::strerror(-ret));
        return false;
      }
    }
    binding_.record();
    for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
      char buf[128];
      starpu_worker_get_name(int(w), buf, sizeof buf);
      r.workers.emplace_back(buf);
    }
    if (!record_worker_kinds(dag_, opts_, r)) {
      starpu_shutdown();
      return false;
    }
    runner_ = std::make_unique<TaskRunner>(dag_, opts_, progress_);
    const DeviceFuncs device = device_funcs(opts_);
    // codelets, one per component used
    for (const auto& t : dag_.tasks) {
      if (by_comp_.count(t.comp)) continue;
      Codelet& c = codelets_.emplace_back();
      c.init(*t.comp, cpu_trampoline, model_based_scheduler(opts_.sched), device);
      // fixed buffer count and modes when every port is always bound (the common
      // case: StarPU's fast path); a variable count only for optional ports
      const auto& ports = t.comp->ports;
      const bool fixed = ports.size() <= STARPU_NMAXBUFS &&
                         std::none_of(ports.begin(), ports.end(), [](const PortSpec& p) { return p.optional; });
      c.cl.nbuffers = fixed ? int(ports.size()) : STARPU_VARIABLE_NBUFFERS;
      for (size_t k = 0; fixed && k < ports.size(); ++k) c.cl.modes[k] = starpu_mode(ports[k].access);
      by_comp_[t.comp] = &c.cl;
    }
    // data handles and tile partition plans
    const size_t nd = dag_.data.size();
    handles_.assign(nd, nullptr);
    children_.resize(nd);
    geoms_.resize(nd);
    partitioned_.assign(nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      const DataDecl& d = dag_.data[i];
      if (!d.format.empty()) continue;  // stored compressed: tasks read its companions, it has no storage
      register_matrix(&handles_[i], store_.base(std::int32_t(i)), std::uint32_t(d.ld), std::uint32_t(d.cols),
                      std::uint32_t(d.rows), dtype_size(d.dtype));
      starpu_data_set_name(handles_[i], d.name.c_str());
      if (!d.tiled()) continue;
      geoms_[i] = TileGeom{&d};
      starpu_data_filter f;
      std::memset(&f, 0, sizeof f);
      f.filter_func = tile_filter;
      f.nchildren = unsigned(d.ntiles());
      f.filter_arg_ptr = &geoms_[i];
      children_[i].resize(size_t(d.ntiles()));
      starpu_data_partition_plan(handles_[i], &f, children_[i].data());
    }
    const size_t nt = dag_.tasks.size();
    table_.build(dag_, *runner_);
    tasks_.assign(nt, nullptr);
    keep_.assign(nt, 0);
    for (const auto& t : dag_.tasks)
      for (auto p : t.event_preds) keep_[size_t(p)] = 1;
    started_ = true;
    if (!place_tasks(dag_, table_, [&](const ComponentSpec* c) -> const starpu_codelet& { return *by_comp_[c]; }, opts_,
                     r)) {
      ExecResult closed;
      close(closed);
      return false;
    }
    runner_->start_clock();
    return true;
  }

  bool run(std::int32_t first, std::int32_t end, int context, int priority) override {
    const bool all = order_.whole(first, end);
    std::vector<std::int32_t> ids;
    const auto& order = order_.range(first, end, ids);
    Waiter waiter;
    waiter.pending = std::int64_t(order.size());
    std::int64_t unsubmitted = 0;
    {
      std::lock_guard<std::mutex> lock(submit_mu_);  // partition state, tasks_, and submission order
      for (size_t k = 0; k < order.size(); ++k) {
        if (!submit(order[k], all ? nullptr : &waiter, first, end, context, priority)) {
          unsubmitted = std::int64_t(order.size() - k);
          break;
        }
      }
      if (all)
        for (size_t i = 0; i < partitioned_.size(); ++i) unpartition(i);
    }
    if (all) {
      starpu_task_wait_for_all();
    } else {
      std::unique_lock<std::mutex> lock(waiter.mu);
      waiter.pending -= unsubmitted;
      waiter.cv.wait(lock, [&] { return waiter.pending == 0; });
    }
    return unsubmitted == 0 && !runner_->cancelled();
  }

  int create_context(const std::string& name, const std::vector<int>& workers, const char* policy) override {
    return create_sched_ctx(name, workers, policy);
  }
  void delete_context(int context) override { delete_sched_ctx(context); }
  int num_workers() const override { return int(starpu_worker_get_count()); }

  void acquire(std::int32_t data, bool write) override {
    {
      std::lock_guard<std::mutex> lock(submit_mu_);
      unpartition(size_t(data));
    }
    starpu_data_acquire(handles_[size_t(data)], write ? STARPU_RW : STARPU_R);
  }
  void release(std::int32_t data) override { starpu_data_release(handles_[size_t(data)]); }
  TaskRunner& runner() override { return *runner_; }

  void close(ExecResult& r) override {
    if (!started_) return;
    {
      std::lock_guard<std::mutex> lock(submit_mu_);
      for (size_t i = 0; i < partitioned_.size(); ++i) unpartition(i);
    }
    starpu_task_wait_for_all();
    r.makespan_us = runner_->now_us();
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (keep_[i] && tasks_[i]) starpu_task_destroy(tasks_[i]);
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (!handles_[i]) continue;
      if (!children_[i].empty())
        starpu_data_partition_clean(handles_[i], unsigned(children_[i].size()), children_[i].data());
      starpu_data_unregister(handles_[i]);
    }
    record_transfers(r);
    starpu_shutdown();
    started_ = false;
    runner_->finish(r);
    if (!submit_error_.empty()) {
      r.ok = false;
      r.error = submit_error_;
    }
  }

  ~StarpuSession() override {
    if (started_) {
      ExecResult ignored;
      close(ignored);
    }
  }

 private:
  void unpartition(size_t i) {
    if (!partitioned_[i]) return;
    starpu_data_unpartition_submit(handles_[i], unsigned(children_[i].size()), children_[i].data(), STARPU_MAIN_RAM);
    partitioned_[i] = 0;
  }

  // Submits task `id`; event dependencies on tasks outside [first, end) have
  // completed in an earlier part. Caller holds submit_mu_.
  bool submit(std::int32_t id, Waiter* waiter, std::int32_t first, std::int32_t end, int context, int priority) {
    const TaskNode& t = dag_.tasks[size_t(id)];
    TaskExec& ex = table_.execs[size_t(id)];
    if (keep_[size_t(id)] && tasks_[size_t(id)]) {  // a runtime loop runs it again: the earlier run has finished
      starpu_task_destroy(tasks_[size_t(id)]);
      tasks_[size_t(id)] = nullptr;
    }
    starpu_task* task = starpu_task_create();
    task->cl = by_comp_[t.comp];
    task->cl_arg = &ex;
    task->cl_arg_free = 0;
    task->where = std::int32_t(ex.where);
    // more buffers than StarPU's inline arrays hold: its dynamic arrays
    // (freed by StarPU with the task)
    int bound = 0;
    for (const Binding& b : t.bindings) bound += b.ref.data >= 0;
    starpu_data_handle_t* handles = task->handles;
    starpu_data_access_mode* modes = task->modes;
    if (bound > STARPU_NMAXBUFS) {
      task->dyn_handles = static_cast<starpu_data_handle_t*>(std::malloc(sizeof(starpu_data_handle_t) * size_t(bound)));
      task->dyn_modes = static_cast<starpu_data_access_mode*>(std::malloc(sizeof(starpu_data_access_mode) * size_t(bound)));
      handles = task->dyn_handles;
      modes = task->dyn_modes;
    }
    int nb = 0;
    for (size_t k = 0; k < t.bindings.size(); ++k) {
      const Binding& b = t.bindings[k];
      if (b.ref.data < 0) continue;
      const size_t di = size_t(b.ref.data);
      starpu_data_handle_t h;
      if (b.ref.tile >= 0) {
        if (!partitioned_[di]) {
          starpu_data_partition_submit(handles_[di], unsigned(children_[di].size()), children_[di].data());
          partitioned_[di] = 1;
        }
        h = children_[di][size_t(b.ref.tile)];
      } else {
        unpartition(di);
        h = handles_[di];
      }
      handles[nb] = h;
      modes[nb] = starpu_mode(b.mode);
      ex.slot[k] = std::int8_t(nb++);
    }
    task->nbuffers = nb;
    std::vector<starpu_task*> deps;
    for (auto p : t.event_preds)
      if (p >= first && p < end) deps.push_back(tasks_[size_t(p)]);
    if (!deps.empty()) starpu_task_declare_deps_array(task, unsigned(deps.size()), deps.data());
    if (keep_[size_t(id)]) task->destroy = 0;
    if (waiter) {
      task->callback_func = Waiter::done;
      task->callback_arg = waiter;
    }
    if (context > 0) task->sched_ctx = unsigned(context);
    task->priority = priority;
    tasks_[size_t(id)] = task;
    if (int ret = starpu_task_submit(task); ret != 0) {
      submit_error_ = "starpu_task_submit failed for component " + t.comp->name +
                      (ret == -ENODEV ? ": no worker can run it" : ": " + std::string(std::strerror(-ret)));
      tasks_[size_t(id)] = nullptr;
      starpu_task_destroy(task);
      return false;
    }
    return true;
  }

  StarpuBinding binding_;
  const Dag& dag_;
  DataStore& store_;
  const ExecOptions& opts_;
  Progress& progress_;
  bool started_ = false;
  std::unique_ptr<TaskRunner> runner_;
  std::deque<Codelet> codelets_;
  std::map<const ComponentSpec*, starpu_codelet*> by_comp_;
  std::vector<starpu_data_handle_t> handles_;
  std::vector<std::vector<starpu_data_handle_t>> children_;
  std::vector<TileGeom> geoms_;
  std::vector<std::uint8_t> partitioned_;
  TaskTable table_;
  std::vector<starpu_task*> tasks_;
  std::vector<std::uint8_t> keep_;
  TaskOrder order_;
  std::mutex submit_mu_;
  std::string submit_error_;
};

class StarpuExecutor final : public Executor {
 public:
  std::string name() const override { return "starpu"; }

  std::unique_ptr<Session> open(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress,
                                ExecResult& r) override {
    auto s = std::make_unique<StarpuSession>(dag, store, opts, progress);
    if (!s->start(r)) return nullptr;
    return s;
  }

  ExecResult execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) override {
    ExecResult r;
    auto s = open(dag, store, opts, progress, r);
    if (!s) return r;
    s->run(0, std::int32_t(dag.tasks.size()), 0, 0);
    s->close(r);
    return r;
  }
};

}  // namespace

std::unique_ptr<Executor> make_starpu_executor() { return std::make_unique<StarpuExecutor>(); }

std::vector<std::string> starpu_worker_names() {
  if (!std::getenv("STARPU_SILENT")) setenv("STARPU_SILENT", "1", 1);
  std::vector<std::string> names;
  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.sched_policy_name = "eager";
  if (starpu_init(&conf) != 0) return names;
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
    char buf[128];
    starpu_worker_get_name(int(w), buf, sizeof buf);
    names.emplace_back(buf);
  }
  starpu_shutdown();
  return names;
}

const std::vector<std::string>& starpu_policies() {
  static const std::vector<std::string> v = {"lws", "eager", "ws", "dmda", "dmdas", "prio", "random", "heteroprio"};
  return v;
}

}  // namespace ymlopt
