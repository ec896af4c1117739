// Accelerator workers for the StarPU and StarPU-MPI sessions: how many StarPU
// starts, the OpenCL codelet function, each worker's kind, and the bytes
// StarPU moved between memory nodes.
#include "starpu_task.hpp"

#include <cstdlib>

#if defined(STARPU_USE_OPENCL) && YMLOPT_HAVE_OPENCL
#include "opencl/opencl.hpp"
#define YMLOPT_STARPU_OPENCL 1
#endif

namespace ymlopt {
namespace {

// --opencl N, else STARPU_NOPENCL, else none (-1 in either: all devices).
int asked_opencl(const ExecOptions& opts) {
  if (opts.nopencl != 0) return opts.nopencl;
  const char* env = std::getenv("STARPU_NOPENCL");
  return env ? std::atoi(env) : 0;
}

}  // namespace

#if YMLOPT_STARPU_OPENCL
namespace {

// Waits for the task's kernels: the task's time is its device time, and a
// device error fails this task (its file:line), not a later one.
void opencl_sync(void* queue) { opencl::check(clFinish(static_cast<cl_command_queue>(queue)), "clFinish"); }

// The OpenCL codelet function: the views get each buffer's cl_mem and
// offset, the component's OpenCL kernel runs on the worker's queue.
void opencl_trampoline(void* buffers[], void* cl_arg) {
  auto* ex = static_cast<TaskExec*>(cl_arg);
  const size_t n = ex->node->bindings.size();
  for (size_t k = 0; k < n; ++k) {
    if (ex->slot[k] < 0) continue;
    auto* m = static_cast<starpu_matrix_interface*>(buffers[ex->slot[k]]);
    TensorView& v = ex->views[k];
    v.data = reinterpret_cast<void*>(m->dev_handle);  // the cl_mem
    v.rows = m->ny;
    v.cols = m->nx;
    v.ld = m->ld;
    ex->offsets[k] = m->offset;
  }
  cl_command_queue queue = nullptr;
  starpu_opencl_get_current_queue(&queue);
  ex->runner->run(*ex->node, {ex->views, n}, starpu_worker_get_id(),
                  DeviceCall{Where::opencl, queue, ex->offsets, opencl_sync});
  record_prediction(*ex);
}

}  // namespace

DeviceFuncs device_funcs(const ExecOptions& opts) {
  DeviceFuncs f;
  if (asked_opencl(opts) != 0 && !opts.checkpoint) f.opencl = opencl_trampoline;
  return f;
}
#else
DeviceFuncs device_funcs(const ExecOptions&) { return {}; }
#endif

DeviceConf::DeviceConf(starpu_conf& conf, const ExecOptions& opts) {
  // --opencl N, else StarPU's STARPU_NOPENCL, else none; no CUDA workers (the
  // CUDA kernels do not run through StarPU yet)
  conf.nopencl = asked_opencl(opts);
  conf.ncuda = 0;
  if (!opts.opencl_on_cpus) return;
  if (const char* v = std::getenv("STARPU_OPENCL_ON_CPUS")) {
    had_ = true;
    saved_ = v;
  }
  setenv("STARPU_OPENCL_ON_CPUS", "1", 1);
  set_ = true;
}

DeviceConf::~DeviceConf() {
  if (!set_) return;
  if (had_) setenv("STARPU_OPENCL_ON_CPUS", saved_.c_str(), 1);
  else unsetenv("STARPU_OPENCL_ON_CPUS");
}

bool record_worker_kinds(const Dag& dag, const ExecOptions& opts, ExecResult& r) {
  r.worker_kinds.clear();
  int nopencl = 0;
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
    const starpu_worker_archtype type = starpu_worker_get_type(int(w));
    const Where kind = type == STARPU_OPENCL_WORKER ? Where::opencl : type == STARPU_CUDA_WORKER ? Where::cuda : Where::cpu;
    nopencl += kind == Where::opencl;
    r.worker_kinds.push_back(kind);
  }
  const bool cl_runs = device_funcs(opts).opencl != nullptr;
  auto missing = [&](Where w) {
    if (w == Where::opencl && !(cl_runs && nopencl > 0))
      return std::string(opts.checkpoint ? "a checkpointed run keeps every task on CPU workers"
                         : !cl_runs      ? "no OpenCL workers were asked for (--opencl N) or this build has none"
                                         : "StarPU started no OpenCL worker (no OpenCL device of type GPU or "
                                           "accelerator: --opencl-on-cpus for one of type CPU, such as PoCL's)");
    if (w == Where::cuda) return std::string("CUDA tasks do not run through StarPU in this build");
    return std::string();
  };
  if (std::string why = missing(opts.where); !why.empty()) {
    r.error = std::string("--where ") + where_name(opts.where) + ": " + why;
    return false;
  }
  for (const TaskNode& t : dag.tasks) {
    if (t.where == Where::any || t.where == Where::cpu) continue;
    if (std::string why = missing(t.where); !why.empty()) {
      r.error = (t.loc.file ? *t.loc.file : dag.file) + ":" + std::to_string(t.loc.line) + ":" +
                std::to_string(t.loc.col) + ": error: task " +
                (t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : "'" + t.label + "'") + " has where=\"" +
                where_name(t.where) + "\": " + why;
      return false;
    }
  }
  return true;
}

bool place_tasks(const Dag& dag, TaskTable& table, const std::function<const starpu_codelet&(const ComponentSpec*)>& cl,
                 const ExecOptions& opts, ExecResult& r) {
  std::int64_t device_bytes = -1;
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w)
    if (starpu_worker_get_type(int(w)) == STARPU_OPENCL_WORKER) {
      const std::int64_t total = starpu_memory_get_total(starpu_worker_get_memory_node(w));
      if (total >= 0 && (device_bytes < 0 || total < device_bytes)) device_bytes = total;
    }
  for (const TaskNode& t : dag.tasks) {
    TaskExec& ex = table.execs[size_t(t.id)];
    const std::span<const TensorView> views{ex.views, t.bindings.size()};
    ex.where = task_where(t, cl(t.comp), opts.where, views, device_bytes);
    if (t.where != Where::opencl || (ex.where & STARPU_OPENCL)) continue;
    std::int64_t bytes = 0;
    for (const TensorView& v : views) bytes += v.rows * v.cols * std::int64_t(dtype_size(v.dtype));
    r.error = (t.loc.file ? *t.loc.file : dag.file) + ":" + std::to_string(t.loc.line) + ":" +
              std::to_string(t.loc.col) + ": error: task " +
              (t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : "'" + t.label + "'") +
              " has where=\"opencl\" but its buffers (" + std::to_string(bytes >> 20) +
              " MiB) do not fit in its OpenCL device's memory (" + std::to_string(device_bytes >> 20) + " MiB)";
    return false;
  }
  return true;
}

void record_transfers(ExecResult& r) {
  r.transfers.clear();
  auto node_name = [](int node) {
    switch (starpu_node_get_kind(unsigned(node))) {
      case STARPU_CPU_RAM: return std::string("RAM");
      case STARPU_OPENCL_RAM: return "OpenCL " + std::to_string(starpu_memory_node_get_devid(unsigned(node)));
      case STARPU_CUDA_RAM: return "CUDA " + std::to_string(starpu_memory_node_get_devid(unsigned(node)));
      default: break;
    }
    char buf[64];
    starpu_memory_node_get_name(unsigned(node), buf, sizeof buf);
    return std::string(buf);
  };
  for (int bus = 0; bus < starpu_bus_get_count(); ++bus) {
    starpu_profiling_bus_info info;
    starpu_bus_get_profiling_info(bus, &info);
    if (info.transferred_bytes <= 0) continue;
    r.transfers.push_back(ExecResult::Transfer{node_name(starpu_bus_get_src(bus)), node_name(starpu_bus_get_dst(bus)),
                                               std::int64_t(info.transferred_bytes), std::int64_t(info.transfer_count)});
  }
}

}  // namespace ymlopt
