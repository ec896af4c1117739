// OpenCL for the families' kernels: the platforms and devices the ICD loader
// finds, and a per-device program cache. A family's OpenCL kernel (its
// ComponentSpec::opencl) gets its cl_kernel from a Program, sets the port
// buffers and enqueues on the task's queue:
//
//   static const opencl::Program kProgram{"tensor", kTensorSource};
//   opencl::Kernel k = kProgram.kernel(queue, "-DT=float", "scale_rows");
//   k.arg(0, buffer).arg(1, offset_elems).arg(2, ld).arg(3, alpha);
//   k.enqueue_2d(queue, cols, rows);
//
// A failing OpenCL call throws ymlopt::KernelError naming the call and its
// error code (CL_INVALID_VALUE ...); a build failure names the program, the
// device and the options, and carries the compiler's log.
#pragma once
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120  // the 1.2 API: PoCL, NVIDIA, AMD and Intel drivers all have it
#endif
#include <CL/cl.h>

#include <ymlopt/sdk.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ymlopt::opencl {

struct DeviceInfo {
  std::string name, vendor, version;  // version: "OpenCL 3.0 PoCL 3.1 ..."
  std::string type;                   // "cpu", "gpu", "accelerator", "custom" or "default"
  std::uint64_t global_mem = 0;       // bytes
  std::uint32_t compute_units = 0;
  bool fp64 = false;                  // cl_khr_fp64: double kernels build
};

struct PlatformInfo {
  std::string name, vendor, version;
  std::vector<DeviceInfo> devices;
};

/// The platforms and their devices; empty when the loader finds none (why then
/// says so, e.g. "no OpenCL platform (CL_PLATFORM_NOT_FOUND_KHR)").
std::vector<PlatformInfo> platforms(std::string* why = nullptr);

/// "CL_INVALID_VALUE" for -30, "OpenCL error -1234" for an unknown code.
std::string error_name(cl_int err);
/// Throws KernelError "<what>: <error_name(err)>" unless err is CL_SUCCESS.
void check(cl_int err, const char* what);

DeviceInfo device_info(cl_device_id dev);

/// A cl_kernel owned (released on destruction), with argument setters.
class Kernel {
 public:
  explicit Kernel(cl_kernel k, std::string name) : k_(k), name_(std::move(name)) {}
  Kernel(Kernel&& o) noexcept : k_(o.k_), name_(std::move(o.name_)) { o.k_ = nullptr; }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  Kernel& operator=(Kernel&&) = delete;
  ~Kernel();
  /// Sets argument i to a plain value (a cl_mem, an int, a float ...).
  template <class T> Kernel& arg(cl_uint i, const T& v) { return set(i, sizeof(T), &v); }
  /// Enqueues on a (cols, rows) grid, work-group size left to the driver.
  void enqueue_2d(cl_command_queue q, std::int64_t cols, std::int64_t rows) const;
  cl_kernel get() const { return k_; }

 private:
  Kernel& set(cl_uint i, std::size_t size, const void* v);
  cl_kernel k_;
  std::string name_;
};

/// OpenCL C source compiled at most once per (context, device, build options):
/// the first kernel() for a queue builds it for the queue's device, later
/// calls reuse the program. Thread-safe.
class Program {
 public:
  Program(const char* name, const char* source) : name_(name), source_(source) {}
  /// Kernel `kernel` of this program built for q's context and device with `options`.
  Kernel kernel(cl_command_queue q, const std::string& options, const char* kernel) const;

 private:
  const char* name_;
  const char* source_;
};

/// How many programs the cache has built in this process (each once per
/// context, device, source and options).
std::size_t built_programs();

/// The context and device behind a command queue.
cl_context queue_context(cl_command_queue q);
cl_device_id queue_device(cl_command_queue q);

/// ctx.opencl_queue(); throws KernelError when the context has none.
cl_command_queue task_queue(const KernelContext& ctx);

/// "" when a device runs f32/f64 math of dtype (f64 needs cl_khr_fp64), else why not.
std::string dtype_support(const DeviceInfo& d, DType dtype);
/// Throws KernelError dtype_support(...) unless the queue's device runs dtype.
void require_dtype(cl_command_queue q, DType dtype);

/// A port as kernels and CLBlast take it: its buffer, the offset of element
/// (0, 0) and the leading dimension (>= max(1, cols)), both in elements; all
/// zero for an unbound port.
struct Operand {
  cl_mem mem = nullptr;
  cl_ulong offset = 0, ld = 0;
};
/// Port i's operand; throws when its byte offset is not a multiple of the element size.
Operand operand(const KernelContext& ctx, std::size_t i);
/// Whether the rows x cols tiles o and p share an element (one buffer).
bool overlap(const Operand& o, const Operand& p, std::size_t rows, std::size_t cols);

/// A buffer of `bytes` in q's context, released on destruction: OpenCL deletes
/// it only once the commands enqueued on it have finished (clReleaseMemObject),
/// so it may go out of scope while they run.
class ScratchBuffer {
 public:
  ScratchBuffer(cl_command_queue q, std::size_t bytes);
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer();
  cl_mem get() const { return mem_; }

 private:
  cl_mem mem_;
};

/// Enqueues the copy of a rows x cols tile of elem_size-byte elements from
/// (src, offset and ld in elements) to dst; the tiles must not overlap.
void copy_tile(cl_command_queue q, std::size_t rows, std::size_t cols, std::size_t elem_size, const Operand& src,
               const Operand& dst);

}  // namespace ymlopt::opencl
