#include "opencl/opencl.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include <ymlopt/sdk.hpp>

namespace ymlopt::opencl {
namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  std::size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  s.resize(n - 1);  // the terminating NUL
  return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
  std::size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  s.resize(n - 1);
  return s;
}

template <class T> T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

std::string type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "gpu";
  if (t & CL_DEVICE_TYPE_CPU) return "cpu";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  if (t & CL_DEVICE_TYPE_CUSTOM) return "custom";
  return "default";
}

std::string build_log(cl_program p, cl_device_id d) {
  std::size_t n = 0;
  if (clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS || n <= 1) return "(no build log)";
  std::string s(n, '\0');
  clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, s.data(), nullptr);
  s.resize(n - 1);
  return s;
}

/// Built programs, per (context, device, source, options). A program retains
/// its context, so a context in the key stays alive (and its address unique).
struct ProgramCache {
  using Key = std::tuple<cl_context, cl_device_id, const char*, std::string>;
  std::mutex mu;
  std::map<Key, cl_program> programs;
};

ProgramCache& cache() {
  static ProgramCache* c = new ProgramCache;  // never destroyed: kernels may run at exit
  return *c;
}

cl_program build(cl_context ctx, cl_device_id dev, const char* name, const char* source, const std::string& options) {
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(ctx, 1, &source, nullptr, &err);
  check(err, "clCreateProgramWithSource");
  err = clBuildProgram(p, 1, &dev, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    const std::string log = build_log(p, dev);
    clReleaseProgram(p);
    throw KernelError("OpenCL program '" + std::string(name) + "' failed to build for device '" +
                      device_string(dev, CL_DEVICE_NAME) + "' (options '" + options + "'): " + error_name(err) +
                      "\n" + log);
  }
  return p;
}

}  // namespace

std::string error_name(cl_int err) {
  switch (err) {
#define YMLOPT_CL_ERROR(e) \
  case e: return #e;
    YMLOPT_CL_ERROR(CL_SUCCESS)
    YMLOPT_CL_ERROR(CL_DEVICE_NOT_FOUND)
    YMLOPT_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    YMLOPT_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    YMLOPT_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    YMLOPT_CL_ERROR(CL_OUT_OF_RESOURCES)
    YMLOPT_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    YMLOPT_CL_ERROR(CL_MEM_COPY_OVERLAP)
    YMLOPT_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    YMLOPT_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    YMLOPT_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    YMLOPT_CL_ERROR(CL_INVALID_VALUE)
    YMLOPT_CL_ERROR(CL_INVALID_DEVICE_TYPE)
    YMLOPT_CL_ERROR(CL_INVALID_PLATFORM)
    YMLOPT_CL_ERROR(CL_INVALID_DEVICE)
    YMLOPT_CL_ERROR(CL_INVALID_CONTEXT)
    YMLOPT_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    YMLOPT_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    YMLOPT_CL_ERROR(CL_INVALID_MEM_OBJECT)
    YMLOPT_CL_ERROR(CL_INVALID_BINARY)
    YMLOPT_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    YMLOPT_CL_ERROR(CL_INVALID_PROGRAM)
    YMLOPT_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    YMLOPT_CL_ERROR(CL_INVALID_KERNEL_NAME)
    YMLOPT_CL_ERROR(CL_INVALID_KERNEL)
    YMLOPT_CL_ERROR(CL_INVALID_ARG_INDEX)
    YMLOPT_CL_ERROR(CL_INVALID_ARG_VALUE)
    YMLOPT_CL_ERROR(CL_INVALID_ARG_SIZE)
    YMLOPT_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    YMLOPT_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    YMLOPT_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    YMLOPT_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    YMLOPT_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    YMLOPT_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    YMLOPT_CL_ERROR(CL_INVALID_OPERATION)
    YMLOPT_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    YMLOPT_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
#undef YMLOPT_CL_ERROR
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "OpenCL error " + std::to_string(err);
  }
}

void check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) throw KernelError(std::string(what) + ": " + error_name(err));
}

DeviceInfo device_info(cl_device_id d) {
  DeviceInfo i;
  i.name = device_string(d, CL_DEVICE_NAME);
  i.vendor = device_string(d, CL_DEVICE_VENDOR);
  i.version = device_string(d, CL_DEVICE_VERSION);
  i.type = type_name(device_value<cl_device_type>(d, CL_DEVICE_TYPE));
  i.global_mem = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
  i.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
  i.fp64 = device_value<cl_device_fp_config>(d, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
  return i;
}

std::vector<PlatformInfo> platforms(std::string* why) {
  std::vector<PlatformInfo> out;
  cl_uint n = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &n);
  if (err != CL_SUCCESS || n == 0) {
    if (why) *why = "no OpenCL platform (" + error_name(err == CL_SUCCESS ? -1001 : err) + ")";
    return out;
  }
  std::vector<cl_platform_id> ids(n);
  clGetPlatformIDs(n, ids.data(), nullptr);
  for (cl_platform_id p : ids) {
    PlatformInfo pi;
    pi.name = platform_string(p, CL_PLATFORM_NAME);
    pi.vendor = platform_string(p, CL_PLATFORM_VENDOR);
    pi.version = platform_string(p, CL_PLATFORM_VERSION);
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) == CL_SUCCESS && nd > 0) {
      std::vector<cl_device_id> devs(nd);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr);
      for (cl_device_id d : devs) pi.devices.push_back(device_info(d));
    }
    out.push_back(std::move(pi));
  }
  return out;
}

cl_context queue_context(cl_command_queue q) {
  cl_context c = nullptr;
  check(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof c, &c, nullptr), "clGetCommandQueueInfo(CL_QUEUE_CONTEXT)");
  return c;
}

cl_device_id queue_device(cl_command_queue q) {
  cl_device_id d = nullptr;
  check(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof d, &d, nullptr), "clGetCommandQueueInfo(CL_QUEUE_DEVICE)");
  return d;
}

Kernel::~Kernel() {
  if (k_) clReleaseKernel(k_);
}

Kernel& Kernel::set(cl_uint i, std::size_t size, const void* v) {
  const cl_int err = clSetKernelArg(k_, i, size, v);
  if (err != CL_SUCCESS)
    throw KernelError("clSetKernelArg(" + name_ + ", " + std::to_string(i) + "): " + error_name(err));
  return *this;
}

void Kernel::enqueue_2d(cl_command_queue q, std::int64_t cols, std::int64_t rows) const {
  if (cols <= 0 || rows <= 0) return;
  const std::size_t global[2] = {std::size_t(cols), std::size_t(rows)};
  const cl_int err = clEnqueueNDRangeKernel(q, k_, 2, nullptr, global, nullptr, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) throw KernelError("clEnqueueNDRangeKernel(" + name_ + "): " + error_name(err));
}

std::size_t built_programs() {
  ProgramCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.programs.size();
}

Kernel Program::kernel(cl_command_queue q, const std::string& options, const char* kernel) const {
  const cl_context ctx = queue_context(q);
  const cl_device_id dev = queue_device(q);
  cl_program p = nullptr;
  {
    ProgramCache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    const ProgramCache::Key key{ctx, dev, source_, options};
    auto it = c.programs.find(key);
    if (it == c.programs.end()) it = c.programs.emplace(key, build(ctx, dev, name_, source_, options)).first;
    p = it->second;
  }
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, kernel, &err);
  if (err != CL_SUCCESS)
    throw KernelError("clCreateKernel(" + std::string(name_) + "." + kernel + "): " + error_name(err));
  return Kernel(k, std::string(name_) + "." + kernel);
}

cl_command_queue task_queue(const KernelContext& ctx) {
  auto q = static_cast<cl_command_queue>(ctx.opencl_queue());
  if (!q) throw KernelError("an OpenCL kernel ran without a command queue (KernelContext::opencl_queue)");
  return q;
}

std::string dtype_support(const DeviceInfo& d, DType dtype) {
  if (dtype == DType::f32) return "";
  if (dtype == DType::f64)
    return d.fp64 ? "" : "the OpenCL device '" + d.name + "' has no fp64 (cl_khr_fp64): f64 tasks run on a CPU";
  return std::string("the OpenCL kernels do not compute in dtype ") + dtype_name(dtype);
}

void require_dtype(cl_command_queue q, DType dtype) {
  if (dtype == DType::f32) return;
  if (auto m = dtype_support(device_info(queue_device(q)), dtype); !m.empty()) throw KernelError(m);
}

Operand operand(const KernelContext& ctx, std::size_t i) {
  const TensorView& v = ctx.port(i);
  if (!v.bound()) return {};
  const std::size_t es = dtype_size(v.dtype), off = ctx.opencl_offset(i);
  if (off % es != 0)
    throw KernelError("port " + std::to_string(i) + ": offset " + std::to_string(off) +
                      " bytes is not a multiple of its element size " + std::to_string(es));
  const std::int64_t ld = std::max<std::int64_t>({v.rows > 1 ? v.ld : 0, v.cols, 1});
  return {static_cast<cl_mem>(v.data), cl_ulong(off / es), cl_ulong(ld)};
}

bool overlap(const Operand& o, const Operand& p, std::size_t rows, std::size_t cols) {
  if (o.mem != p.mem || rows == 0 || cols == 0) return false;
  const auto end = [&](const Operand& t) { return t.offset + (rows - 1) * t.ld + cols; };
  return o.offset < end(p) && p.offset < end(o);
}

ScratchBuffer::ScratchBuffer(cl_command_queue q, std::size_t bytes) {
  cl_int err = CL_SUCCESS;
  mem_ = clCreateBuffer(queue_context(q), CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 1), nullptr, &err);
  check(err, "clCreateBuffer (scratch)");
}

ScratchBuffer::~ScratchBuffer() { clReleaseMemObject(mem_); }

void copy_tile(cl_command_queue q, std::size_t rows, std::size_t cols, std::size_t elem_size, const Operand& src,
               const Operand& dst) {
  // origins as (byte in the row, row): the tile's column and row in a buffer of ld-wide rows
  const std::size_t so[3] = {std::size_t(src.offset % src.ld * elem_size), std::size_t(src.offset / src.ld), 0};
  const std::size_t dof[3] = {std::size_t(dst.offset % dst.ld * elem_size), std::size_t(dst.offset / dst.ld), 0};
  const std::size_t region[3] = {cols * elem_size, rows, 1};
  check(clEnqueueCopyBufferRect(q, src.mem, dst.mem, so, dof, region, std::size_t(src.ld) * elem_size, 0, std::size_t(dst.ld) * elem_size, 0, 0,
                                nullptr, nullptr),
        "clEnqueueCopyBufferRect");
}

}  // namespace ymlopt::opencl
