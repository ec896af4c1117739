#include "starpu_backend.hpp"

#include <starpu.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <thread>


namespace ymlopt {
namespace {

// What a StarPU task carries (cl_arg): its node and its port views, which live
// in flat per-run arrays (no allocation per task).
struct TaskExec {
  const TaskNode* node = nullptr;
  TensorView* views = nullptr;  // node->bindings.size() views
  std::int8_t* slot = nullptr;  // buffer index of each port, -1 when unbound
  TaskRunner* runner = nullptr;
};

void cpu_trampoline(void* buffers[], void* cl_arg) {
  auto* ex = static_cast<TaskExec*>(cl_arg);
  const size_t n = ex->node->bindings.size();
  for (size_t k = 0; k < n; ++k) {
    if (ex->slot[k] < 0) continue;
    auto* m = static_cast<starpu_matrix_interface*>(buffers[ex->slot[k]]);
    TensorView& v = ex->views[k];
    v.data = reinterpret_cast<void*>(m->ptr);
    v.rows = m->ny;
    v.cols = m->nx;
    v.ld = m->ld;
  }
  ex->runner->run(*ex->node, std::span<const TensorView>(ex->views, n), starpu_worker_get_id());
}

starpu_data_access_mode starpu_mode(Access a) {
  return a == Access::read ? STARPU_R : a == Access::write ? STARPU_W : STARPU_RW;
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

struct Codelet {
  starpu_codelet cl;
  starpu_perfmodel model;
  std::string symbol;
};

class StarpuExecutor final : public Executor {
 public:
  std::string name() const override { return "starpu"; }

  ExecResult execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) override {
    ExecResult r;
    r.scheduler = opts.sched;
    r.runtime = std::string("StarPU ") + std::to_string(STARPU_MAJOR_VERSION) + "." +
                std::to_string(STARPU_MINOR_VERSION) + "." + std::to_string(STARPU_RELEASE_VERSION);
    // per-run perf-model directory (two processes must not share one)
    std::string home = opts.starpu_home.empty() ? opts.run_dir + "/starpu" : opts.starpu_home;
    if (!std::getenv("STARPU_HOME")) {
      std::filesystem::create_directories(home);
      setenv("STARPU_HOME", home.c_str(), 1);
    }
    if (!opts.verbose && !std::getenv("STARPU_SILENT")) setenv("STARPU_SILENT", "1", 1);

    starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy_name = opts.sched.c_str();
    if (opts.ncpu > 0) {
      int n = opts.ncpu;
      if (n > STARPU_MAXCPUS) {
        r.warnings.push_back("--ncpu " + std::to_string(n) + " exceeds this StarPU build's limit of " +
                             std::to_string(STARPU_MAXCPUS) + " CPU workers; using " + std::to_string(STARPU_MAXCPUS));
        n = STARPU_MAXCPUS;
      }
      conf.ncpus = n;
    }
    if (const unsigned hw = std::thread::hardware_concurrency(); hw > STARPU_MAXCPUS && opts.ncpu <= 0)
      r.warnings.push_back("this StarPU build caps CPU workers at " + std::to_string(STARPU_MAXCPUS) + " but " +
                           std::to_string(hw) + " cores are available (rebuild StarPU with --enable-maxcpus)");
    conf.nopencl = 0;
#ifndef STARPU_USE_CUDA
    conf.ncuda = 0;
#endif
    if (int ret = starpu_init(&conf); ret != 0) {
      r.error = "starpu_init failed: " + std::string(std::strerror(-ret));
      return r;
    }
    for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
      char buf[128];
      starpu_worker_get_name(int(w), buf, sizeof buf);
      r.workers.emplace_back(buf);
    }

    TaskRunner runner(dag, opts, progress);
    // codelets, one per component used
    const bool model_based = opts.sched == "dmda" || opts.sched == "dmdas" || opts.sched == "heteroprio";
    std::deque<Codelet> codelets;
    std::map<const ComponentSpec*, Codelet*> by_comp;
    for (const auto& t : dag.tasks) {
      if (by_comp.count(t.comp)) continue;
      Codelet& c = codelets.emplace_back();
      starpu_codelet_init(&c.cl);
      std::memset(&c.model, 0, sizeof c.model);
      c.symbol = "ymlopt." + t.comp->name;
      c.model.type = STARPU_HISTORY_BASED;
      c.model.symbol = c.symbol.c_str();
      c.cl.where = STARPU_CPU;
      c.cl.cpu_funcs[0] = cpu_trampoline;
      // fixed buffer count and modes when every port is always bound (the common
      // case: StarPU's fast path); a variable count only for optional ports
      const auto& ports = t.comp->ports;
      const bool fixed = ports.size() <= STARPU_NMAXBUFS &&
                         std::none_of(ports.begin(), ports.end(), [](const PortSpec& p) { return p.optional; });
      c.cl.nbuffers = fixed ? int(ports.size()) : STARPU_VARIABLE_NBUFFERS;
      for (size_t k = 0; fixed && k < ports.size(); ++k) c.cl.modes[k] = starpu_mode(ports[k].access);
      c.cl.name = t.comp->name.c_str();
      // only the model-based policies read perf models; elsewhere recording them is pure overhead
      if (model_based) c.cl.model = &c.model;
      by_comp[t.comp] = &c;
    }
    // data handles and tile partition plans
    const size_t nd = dag.data.size();
    std::vector<starpu_data_handle_t> handles(nd);
    std::vector<std::vector<starpu_data_handle_t>> children(nd);
    std::vector<TileGeom> geoms(nd);
    std::vector<std::uint8_t> partitioned(nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      const DataDecl& d = dag.data[i];
      if (!d.format.empty()) continue;  // stored compressed: tasks read its companions, it has no storage
      starpu_matrix_data_register(&handles[i], STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(store.base(std::int32_t(i))),
                                  std::uint32_t(d.ld), std::uint32_t(d.cols), std::uint32_t(d.rows), dtype_size(d.dtype));
      starpu_data_set_name(handles[i], d.name.c_str());
      if (!d.tiled()) continue;
      geoms[i] = TileGeom{&d};
      starpu_data_filter f;
      std::memset(&f, 0, sizeof f);
      f.filter_func = tile_filter;
      f.nchildren = unsigned(d.ntiles());
      f.filter_arg_ptr = &geoms[i];
      children[i].resize(size_t(d.ntiles()));
      starpu_data_partition_plan(handles[i], &f, children[i].data());
    }
    // tasks: views and buffer slots of every task in two flat arrays
    std::vector<TaskExec> execs(dag.tasks.size());
    std::vector<size_t> first_port(dag.tasks.size() + 1, 0);
    for (size_t i = 0; i < dag.tasks.size(); ++i) first_port[i + 1] = first_port[i] + dag.tasks[i].bindings.size();
    std::vector<TensorView> views(first_port.back());
    std::vector<std::int8_t> slots(first_port.back(), -1);
    const ComponentSpec* last_comp = nullptr;
    starpu_codelet* cl = nullptr;
    std::vector<starpu_task*> tasks(dag.tasks.size(), nullptr);
    std::vector<std::uint8_t> keep(dag.tasks.size(), 0);
    for (const auto& t : dag.tasks)
      for (auto p : t.event_preds) keep[size_t(p)] = 1;
    for (auto id : dag.topo_order) {
      const TaskNode& t = dag.tasks[size_t(id)];
      TaskExec& ex = execs[size_t(id)];
      ex.node = &t;
      ex.runner = &runner;
      ex.views = views.data() + first_port[size_t(id)];
      ex.slot = slots.data() + first_port[size_t(id)];
      runner.port_templates(t, ex.views);
      if (t.comp != last_comp) last_comp = t.comp, cl = &by_comp[t.comp]->cl;
      starpu_task* task = starpu_task_create();
      task->cl = cl;
      task->cl_arg = &ex;
      task->cl_arg_free = 0;
      int nb = 0;
      for (size_t k = 0; k < t.bindings.size(); ++k) {
        const Binding& b = t.bindings[k];
        if (b.ref.data < 0) continue;
        const size_t di = size_t(b.ref.data);
        starpu_data_handle_t h;
        if (b.ref.tile >= 0) {
          if (!partitioned[di]) {
            starpu_data_partition_submit(handles[di], unsigned(children[di].size()), children[di].data());
            partitioned[di] = 1;
          }
          h = children[di][size_t(b.ref.tile)];
        } else {
          if (partitioned[di]) {
            starpu_data_unpartition_submit(handles[di], unsigned(children[di].size()), children[di].data(), STARPU_MAIN_RAM);
            partitioned[di] = 0;
          }
          h = handles[di];
        }
        if (nb >= STARPU_NMAXBUFS) {
          r.error = "task uses more than " + std::to_string(STARPU_NMAXBUFS) + " buffers";
          break;
        }
        task->handles[nb] = h;
        task->modes[nb] = starpu_mode(b.mode);
        ex.slot[k] = std::int8_t(nb++);
      }
      task->nbuffers = nb;
      if (!t.event_preds.empty()) {
        std::vector<starpu_task*> deps;
        for (auto p : t.event_preds) deps.push_back(tasks[size_t(p)]);
        starpu_task_declare_deps_array(task, unsigned(deps.size()), deps.data());
      }
      if (keep[size_t(id)]) task->destroy = 0;
      tasks[size_t(id)] = task;
      if (int ret = starpu_task_submit(task); ret != 0) {
        r.error = "starpu_task_submit failed for component " + t.comp->name +
                  (ret == -ENODEV ? ": no worker can run it" : ": " + std::string(std::strerror(-ret)));
        break;
      }
    }
    for (size_t i = 0; i < nd; ++i)
      if (partitioned[i])
        starpu_data_unpartition_submit(handles[i], unsigned(children[i].size()), children[i].data(), STARPU_MAIN_RAM);
    starpu_task_wait_for_all();
    r.makespan_us = runner.now_us();
    for (size_t i = 0; i < tasks.size(); ++i)
      if (keep[i] && tasks[i]) starpu_task_destroy(tasks[i]);
    for (size_t i = 0; i < nd; ++i) {
      if (!handles[i]) continue;
      if (!children[i].empty()) starpu_data_partition_clean(handles[i], unsigned(children[i].size()), children[i].data());
      starpu_data_unregister(handles[i]);
    }
    starpu_shutdown();
    const std::string submit_error = r.error;
    runner.finish(r);
    if (!submit_error.empty()) {
      r.ok = false;
      r.error = submit_error;
    }
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
