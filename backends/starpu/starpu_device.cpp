// Accelerator workers for the StarPU and StarPU-MPI sessions: how many StarPU
// starts, the OpenCL and CUDA codelet functions, each worker's kind, and the
// bytes StarPU moved between memory nodes.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120  // before starpu.h (which asks for 1.0): the rectangular copies are 1.1
#endif
#include "starpu_task.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#if defined(STARPU_USE_OPENCL) && YMLOPT_HAVE_OPENCL
#include "opencl/opencl.hpp"
#define YMLOPT_STARPU_OPENCL 1
#endif
// CUDA workers need a StarPU built with CUDA and our CUDA kernels (nvcc at configure time)
#if defined(STARPU_USE_CUDA) && YMLOPT_HAVE_CUDA
#include <stdexcept>
#define YMLOPT_STARPU_CUDA 1
#endif

namespace ymlopt {
namespace {

// --opencl N, else STARPU_NOPENCL, else none (-1 in either: all devices).
int asked_opencl(const ExecOptions& opts) {
  if (opts.nopencl != 0) return opts.nopencl;
  const char* env = std::getenv("STARPU_NOPENCL");
  return env ? std::atoi(env) : 0;
}

// --ncuda N, else STARPU_NCUDA, else every device (-1).
int asked_cuda(const ExecOptions& opts) {
  if (opts.ncuda >= 0) return opts.ncuda;
  const char* env = std::getenv("STARPU_NCUDA");
  return env ? std::atoi(env) : -1;
}

#if YMLOPT_STARPU_CUDA
// Waits for the task's kernels on StarPU's stream, as opencl_sync does.
void cuda_sync(void* stream) {
  if (const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
    throw std::runtime_error(std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
}

// The CUDA codelet function: the views get StarPU's device pointers (a tile
// StarPU copied in is packed, ld = its width), the component's CUDA kernel runs
// on the worker's stream.
void cuda_trampoline(void* buffers[], void* cl_arg) {
  auto* ex = static_cast<TaskExec*>(cl_arg);
  ex->runner->run(*ex->node, bind_buffers(buffers, *ex), starpu_worker_get_id(),
                  DeviceCall{Where::cuda, starpu_cuda_get_local_stream(), nullptr, cuda_sync});
  record_prediction(*ex);
}
#endif

starpu_cuda_func_t cuda_func(const ExecOptions& opts) {
#if YMLOPT_STARPU_CUDA
  if (asked_cuda(opts) != 0 && !opts.checkpoint) return cuda_trampoline;
#else
  (void)opts;
#endif
  return nullptr;
}

}  // namespace

#if YMLOPT_STARPU_OPENCL
namespace {

// RAM <-> OpenCL copies of a matrix tile as one rectangular transfer on the
// OpenCL worker's queue. StarPU 1.3 copies a strided tile (a column tile of a
// row-major tensor, ld > nx) one row per transfer; a GPT-2 forward on PoCL
// spent most of its time in those. `event` null: synchronous. A failing
// enqueue aborts, as StarPU's own copies do (its copy methods have no error path).
int rect_copy(bool to_device, void* src_i, unsigned src_node, void* dst_i, unsigned dst_node, cl_event* event) {
  const auto* s = static_cast<const starpu_matrix_interface*>(src_i);
  const auto* d = static_cast<const starpu_matrix_interface*>(dst_i);
  const auto* dev = to_device ? d : s;
  const auto* host = to_device ? s : d;
  if (d->nx == 0 || d->ny == 0) return 0;
  const size_t es = dev->elemsize, dev_pitch = size_t(dev->ld) * es, host_pitch = size_t(host->ld) * es;
  const size_t dev_origin[3] = {dev->offset % dev_pitch, dev->offset / dev_pitch, 0};
  const size_t host_origin[3] = {0, 0, 0};
  const size_t region[3] = {size_t(d->nx) * es, d->ny, 1};
  cl_command_queue q = nullptr;
  starpu_opencl_get_current_queue(&q);
  double start = 0;
  if (event) starpu_interface_start_driver_copy_async(src_node, dst_node, &start);
  auto* mem = reinterpret_cast<cl_mem>(dev->dev_handle);
  auto* ptr = reinterpret_cast<void*>(host->ptr);
  cl_event ev = nullptr;
  const cl_bool blocking = event ? CL_FALSE : CL_TRUE;
  const cl_int err = to_device ? clEnqueueWriteBufferRect(q, mem, blocking, dev_origin, host_origin, region, dev_pitch, 0,
                                                          host_pitch, 0, ptr, 0, nullptr, event ? &ev : nullptr)
                               : clEnqueueReadBufferRect(q, mem, blocking, dev_origin, host_origin, region, dev_pitch, 0,
                                                         host_pitch, 0, ptr, 0, nullptr, event ? &ev : nullptr);
  if (event) starpu_interface_end_driver_copy_async(src_node, dst_node, start);
  if (err != CL_SUCCESS) STARPU_OPENCL_REPORT_ERROR(err);
  starpu_interface_data_copy(src_node, dst_node, size_t(d->nx) * d->ny * es);
  if (!event) return 0;
  clFlush(q);
  *event = ev;
  return -EAGAIN;
}

int ram_to_opencl(void* s, unsigned sn, void* d, unsigned dn) { return rect_copy(true, s, sn, d, dn, nullptr); }
int opencl_to_ram(void* s, unsigned sn, void* d, unsigned dn) { return rect_copy(false, s, sn, d, dn, nullptr); }
int ram_to_opencl_async(void* s, unsigned sn, void* d, unsigned dn, cl_event* e) { return rect_copy(true, s, sn, d, dn, e); }
int opencl_to_ram_async(void* s, unsigned sn, void* d, unsigned dn, cl_event* e) { return rect_copy(false, s, sn, d, dn, e); }

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

void register_matrix(starpu_data_handle_t* handle, void* ptr, std::uint32_t ld, std::uint32_t nx, std::uint32_t ny,
                     std::size_t elemsize) {
  static const auto ops = [] {
    static starpu_data_copy_methods copy = *starpu_interface_matrix_ops.copy_methods;
    copy.ram_to_opencl = ram_to_opencl;
    copy.opencl_to_ram = opencl_to_ram;
    copy.ram_to_opencl_async = ram_to_opencl_async;
    copy.opencl_to_ram_async = opencl_to_ram_async;
    starpu_data_interface_ops o = starpu_interface_matrix_ops;
    o.copy_methods = &copy;
    return o;
  }();
  starpu_matrix_interface m;
  std::memset(&m, 0, sizeof m);
  m.id = STARPU_MATRIX_INTERFACE_ID;
  m.ptr = m.dev_handle = reinterpret_cast<uintptr_t>(ptr);
  m.ld = ld;
  m.nx = nx;
  m.ny = ny;
  m.elemsize = elemsize;
  m.allocsize = size_t(nx) * ny * elemsize;
  starpu_data_register(handle, STARPU_MAIN_RAM, &m, const_cast<starpu_data_interface_ops*>(&ops));
}

DeviceFuncs device_funcs(const ExecOptions& opts) {
  DeviceFuncs f;
  if (asked_opencl(opts) != 0 && !opts.checkpoint) f.opencl = opencl_trampoline;
  f.cuda = cuda_func(opts);
  return f;
}
#else
void register_matrix(starpu_data_handle_t* handle, void* ptr, std::uint32_t ld, std::uint32_t nx, std::uint32_t ny,
                     std::size_t elemsize) {
  starpu_matrix_data_register(handle, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(ptr), ld, nx, ny, elemsize);
}

DeviceFuncs device_funcs(const ExecOptions& opts) { return DeviceFuncs{nullptr, cuda_func(opts)}; }
#endif

DeviceConf::DeviceConf(starpu_conf& conf, const ExecOptions& opts) {
  // --opencl N, else StarPU's STARPU_NOPENCL, else none; --ncuda N, else
  // STARPU_NCUDA, else every device, none where no codelet could use them
  conf.nopencl = asked_opencl(opts);
  conf.ncuda = cuda_func(opts) ? asked_cuda(opts) : 0;
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
  int nopencl = 0, ncuda = 0;
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
    const starpu_worker_archtype type = starpu_worker_get_type(int(w));
    const Where kind = type == STARPU_OPENCL_WORKER ? Where::opencl : type == STARPU_CUDA_WORKER ? Where::cuda : Where::cpu;
    nopencl += kind == Where::opencl;
    ncuda += kind == Where::cuda;
    r.worker_kinds.push_back(kind);
  }
  const DeviceFuncs funcs = device_funcs(opts);
  auto missing = [&](Where w) {
    if (w != Where::opencl && w != Where::cuda) return std::string();
    if (opts.checkpoint) return std::string("a checkpointed run keeps every task on CPU workers");
    if (w == Where::opencl && !(funcs.opencl && nopencl > 0))
      return std::string(!funcs.opencl ? "no OpenCL workers were asked for (--opencl N) or this build has none"
                                       : "StarPU started no OpenCL worker (no OpenCL device of type GPU or "
                                         "accelerator: --opencl-on-cpus for one of type CPU, such as PoCL's)");
    if (w == Where::cuda && !(funcs.cuda && ncuda > 0)) {
#if YMLOPT_STARPU_CUDA
      return std::string(!funcs.cuda ? "no CUDA workers were asked for (--ncuda 0)"
                                     : "StarPU started no CUDA worker (no CUDA device: `ymlopt info` says why)");
#elif !defined(STARPU_USE_CUDA)
      return std::string("this build runs no CUDA tasks: its StarPU has no CUDA (build with one: `ymlopt info`)");
#else
      return std::string("this build runs no CUDA tasks: ymlopt's CUDA kernels were not built (no nvcc when it was "
                         "configured)");
#endif
    }
    return std::string();
  };
  if (std::string why = missing(opts.where); !why.empty()) {
    r.error = std::string("--where ") + where_name(opts.where) + ": " + why;
    return false;
  }
  for (const TaskNode& t : dag.tasks) {
    if (std::string why = missing(t.where); !why.empty()) {
      r.error = dag.task_error(t) + " has where=\"" + where_name(t.where) + "\": " + why;
      return false;
    }
  }
  return true;
}

bool place_tasks(const Dag& dag, TaskTable& table, const std::function<const starpu_codelet&(const ComponentSpec*)>& cl,
                 const ExecOptions& opts, ExecResult& r) {
  DeviceBytes device;
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
    const starpu_worker_archtype type = starpu_worker_get_type(int(w));
    if (type != STARPU_OPENCL_WORKER && type != STARPU_CUDA_WORKER) continue;
    std::int64_t& bytes = type == STARPU_OPENCL_WORKER ? device.opencl : device.cuda;
    const std::int64_t total = starpu_memory_get_total(starpu_worker_get_memory_node(w));
    if (total >= 0 && (bytes < 0 || total < bytes)) bytes = total;
  }
  for (const TaskNode& t : dag.tasks) {
    TaskExec& ex = table.execs[size_t(t.id)];
    const std::span<const TensorView> views{ex.views, t.bindings.size()};
    ex.where = task_where(t, cl(t.comp), opts.where, views, device);
    const bool cuda = t.where == Where::cuda;
    if ((t.where != Where::opencl && !cuda) || (ex.where & (cuda ? STARPU_CUDA : STARPU_OPENCL))) continue;
    r.error = dag.task_error(t) + " has where=\"" + where_name(t.where) + "\" but its buffers (" +
              std::to_string(buffer_bytes(views) >> 20) + " MiB) do not fit in its " + (cuda ? "CUDA" : "OpenCL") +
              " device's memory (" + std::to_string((cuda ? device.cuda : device.opencl) >> 20) + " MiB)";
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
