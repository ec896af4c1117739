// What the StarPU and StarPU-MPI backends share per task: the cl_arg a task
// carries (and the table holding every task's), the binding of StarPU's buffers to the task's port views, and the
// access-mode mapping.
//
//   void cpu_trampoline(void* buffers[], void* cl_arg) {
//     auto* ex = static_cast<TaskExec*>(cl_arg);
//     ex->runner->run(*ex->node, bind_buffers(buffers, *ex), starpu_worker_get_id());
//   }
#pragma once
#include <starpu.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {

/// A task's node and its port views, which live in flat per-run arrays (no
/// allocation per task).
struct TaskExec {
  const TaskNode* node = nullptr;
  TensorView* views = nullptr;     // node->bindings.size() views
  std::int8_t* slot = nullptr;     // buffer index of each port, -1 when unbound
  std::size_t* offsets = nullptr;  // on an OpenCL worker: each port's byte offset in its cl_mem
  TaskRunner* runner = nullptr;
  std::uint32_t where = STARPU_CPU;  // starpu_task::where (task_where)
};

/// Every task's TaskExec, with the port views and buffer slots of all tasks in
/// two flat arrays (views carry shapes and dtypes; data pointers come at run time).
///
///   TaskTable table;
///   table.build(dag, runner);
///   task->cl_arg = &table.execs[id];
struct TaskTable {
  std::vector<TaskExec> execs;
  std::vector<TensorView> views;
  std::vector<std::int8_t> slots;
  std::vector<std::size_t> offsets;

  void build(const Dag& dag, TaskRunner& runner) {
    const size_t nt = dag.tasks.size();
    execs.assign(nt, TaskExec{});
    std::vector<size_t> first_port(nt + 1, 0);
    for (size_t i = 0; i < nt; ++i) first_port[i + 1] = first_port[i] + dag.tasks[i].bindings.size();
    views.assign(first_port.back(), TensorView{});
    slots.assign(first_port.back(), -1);
    offsets.assign(first_port.back(), 0);
    for (size_t i = 0; i < nt; ++i) {
      TaskExec& ex = execs[i];
      ex.node = &dag.tasks[i];
      ex.runner = &runner;
      ex.views = views.data() + first_port[i];
      ex.slot = slots.data() + first_port[i];
      ex.offsets = offsets.data() + first_port[i];
      runner.port_templates(dag.tasks[i], ex.views);
    }
  }
};

/// The schedulers that read perf models (elsewhere recording them is pure overhead).
inline bool model_based_scheduler(const std::string& sched) {
  return sched == "dmda" || sched == "dmdas" || sched == "heteroprio";
}

/// The device trampolines a session gives its codelets (null: no such workers
/// in this run, or a StarPU without them).
struct DeviceFuncs {
  starpu_opencl_func_t opencl = nullptr;
  starpu_cuda_func_t cuda = nullptr;
};

/// One component's codelet: CPU function, and the OpenCL (CUDA) one when the
/// component has an OpenCL (CUDA) kernel and the run has such workers; a
/// history-based perf model named "ymlopt.<component>" (one history per
/// worker architecture; attached for model-based schedulers only), a variable
/// buffer count. Keep it where it does not move (a std::deque): the model
/// points at `symbol`.
///
///   Codelet& c = codelets.emplace_back();
///   c.init(*t.comp, cpu_trampoline, model_based_scheduler(opts.sched), device_funcs(opts));
struct Codelet {
  starpu_codelet cl;
  starpu_perfmodel model;
  std::string symbol;

  void init(const ComponentSpec& comp, starpu_cpu_func_t cpu, bool model_based, const DeviceFuncs& dev = {}) {
    starpu_codelet_init(&cl);
    std::memset(&model, 0, sizeof model);
    symbol = "ymlopt." + comp.name;
    model.type = STARPU_HISTORY_BASED;
    model.symbol = symbol.c_str();
    cl.where = STARPU_CPU;
    cl.cpu_funcs[0] = cpu;
    if (dev.opencl && comp.opencl && !comp.host_only) {
      cl.where |= STARPU_OPENCL;
      cl.opencl_funcs[0] = dev.opencl;
    }
    if (dev.cuda && comp.cuda && !comp.host_only) {
      cl.where |= STARPU_CUDA;
      cl.cuda_funcs[0] = dev.cuda;
      cl.cuda_flags[0] = STARPU_CUDA_ASYNC;  // the function waits for its stream itself (DeviceCall::sync)
    }
    cl.nbuffers = STARPU_VARIABLE_NBUFFERS;
    cl.name = comp.name.c_str();
    if (model_based) cl.model = &model;
  }
};

/// The bytes of a task's buffers (its port views).
inline std::int64_t buffer_bytes(std::span<const TensorView> views) {
  std::int64_t bytes = 0;
  for (const TensorView& v : views) bytes += v.rows * v.cols * std::int64_t(dtype_size(v.dtype));
  return bytes;
}

/// The smallest memory of each kind of accelerator the run started, in bytes
/// (-1: none of that kind, or unknown).
struct DeviceBytes {
  std::int64_t opencl = -1;
  std::int64_t cuda = -1;
};

/// The workers a task may run on (starpu_task::where): the codelet's kinds,
/// each accelerator kind narrowed by its kernel's check on the task's shapes
/// (`views`: its port templates) and by the device's memory (a task whose
/// buffers do not fit stays off that kind), then by the task's `where` (else
/// the run's --where).
inline std::uint32_t task_where(const TaskNode& t, const starpu_codelet& cl, Where run_where,
                                std::span<const TensorView> views, const DeviceBytes& device) {
  std::uint32_t w = cl.where;
  auto narrow = [&](std::uint32_t bit, Where kind, std::int64_t bytes) {
    if (!(w & bit)) return;
    if ((bytes >= 0 && buffer_bytes(views) > bytes) || !where_refusal(*t.comp, kind, TaskShape{views, t.args}).empty())
      w &= ~bit;
  };
  narrow(STARPU_OPENCL, Where::opencl, device.opencl);
  narrow(STARPU_CUDA, Where::cuda, device.cuda);
  const Where pin = t.where != Where::any ? t.where : run_where;
  if (pin == Where::cpu) return STARPU_CPU;
  if (pin == Where::opencl && (w & STARPU_OPENCL)) return STARPU_OPENCL;
  if (pin == Where::cuda && (w & STARPU_CUDA)) return STARPU_CUDA;
  return w;
}

/// Sets every task's TaskExec::where (task_where with the smallest memory
/// node of each accelerator kind); false with r.error naming the task when one
/// pinned where="opencl" or "cuda" cannot run there (its buffers exceed the
/// device's memory).
///
///   if (!place_tasks(dag, table, [&](const ComponentSpec* c) -> auto& { return *by_comp[c]; }, opts, r)) ...
bool place_tasks(const Dag& dag, TaskTable& table, const std::function<const starpu_codelet&(const ComponentSpec*)>& cl,
                 const ExecOptions& opts, ExecResult& r);

/// Registers a row-major matrix in main memory (StarPU's matrix interface;
/// with OpenCL, its RAM <-> OpenCL copies of a strided tile are one
/// rectangular transfer, not one per row).
void register_matrix(starpu_data_handle_t* handle, void* ptr, std::uint32_t ld, std::uint32_t nx, std::uint32_t ny,
                     std::size_t elemsize);

/// The run's OpenCL and CUDA trampolines: none for a kind the run starts no
/// worker of (or this StarPU lacks), nor when it checkpoints (restore and
/// persist read the host copies).
DeviceFuncs device_funcs(const ExecOptions& opts);

/// Before starpu_init: the OpenCL worker count from opts (none unless
/// asked), the CUDA one (every device unless told), STARPU_OPENCL_ON_CPUS for --opencl-on-cpus (restored by
/// the returned guard's destructor after starpu_init).
class DeviceConf {
 public:
  DeviceConf(starpu_conf& conf, const ExecOptions& opts);
  ~DeviceConf();
  DeviceConf(const DeviceConf&) = delete;
  DeviceConf& operator=(const DeviceConf&) = delete;

 private:
  bool set_ = false;
  std::string saved_;
  bool had_ = false;
};

/// After starpu_init: each worker's kind (ExecResult::worker_kinds), and
/// r.error when the run's or a task's `where` asks for a kind of worker that
/// StarPU did not start; false then.
bool record_worker_kinds(const Dag& dag, const ExecOptions& opts, ExecResult& r);

/// Before starpu_shutdown, after the data are unregistered: the bytes StarPU
/// moved over each bus since starpu_init (ExecResult::transfers).
void record_transfers(ExecResult& r);

/// After a task ran: StarPU's predicted duration for it on this worker (set
/// by the model-based schedulers; NaN when the model is not calibrated).
inline void record_prediction(const TaskExec& ex) {
  const starpu_task* task = starpu_task_get_current();
  if (task && task->predicted > 0 && task->predicted < 1e300) ex.runner->set_predicted(ex.node->id, task->predicted);
}

/// Points the task's port views at StarPU's matrix buffers; returns the views.
inline std::span<const TensorView> bind_buffers(void* buffers[], const TaskExec& ex) {
  const size_t n = ex.node->bindings.size();
  for (size_t k = 0; k < n; ++k) {
    if (ex.slot[k] < 0) continue;
    auto* m = static_cast<starpu_matrix_interface*>(buffers[ex.slot[k]]);
    TensorView& v = ex.views[k];
    v.data = reinterpret_cast<void*>(m->ptr);
    v.rows = m->ny;
    v.cols = m->nx;
    v.ld = m->ld;
    v.content_id = ex.runner->content_id(ex.node->id, k);  // changes with each --warmup repeat
  }
  return {ex.views, n};
}

/// A scheduling context over `workers` with the named policy ("eager",
/// "prio"), for a unite's co-methods (Session::create_context); its id (> 0).
///
///   task->sched_ctx = unsigned(create_sched_ctx("m1", {0, 1}, "prio"));
inline int create_sched_ctx(const std::string& name, const std::vector<int>& workers, const char* policy) {
  std::vector<int> ids(workers);
  return int(starpu_sched_ctx_create(ids.data(), int(ids.size()), name.c_str(), STARPU_SCHED_CTX_POLICY_NAME, policy, 0));
}

/// Deletes a context made by create_sched_ctx (0, the global one, is kept).
inline void delete_sched_ctx(int context) {
  if (context > 0) starpu_sched_ctx_delete(unsigned(context));
}

inline starpu_data_access_mode starpu_mode(Access a) {
  return a == Access::read ? STARPU_R : a == Access::write ? STARPU_W : STARPU_RW;
}

}  // namespace ymlopt
