// What the families' CLBlast-based OpenCL kernels share (blas.gemm/syrk/trsm,
// nn.linear; built with CLBlast only, YMLOPT_HAVE_CLBLAST): CLBlast status
// names, the task's queue, port operands as CLBlast takes them (offset and
// leading dimension in elements), the dtypes a device runs, and a scratch
// buffer with the strided copies into and out of it.
//
//   const cl_command_queue q = opencl::task_queue(ctx);
//   opencl::require_dtype(q, DType::f64);  // throws without cl_khr_fp64
//   const opencl::Operand a = opencl::operand(ctx, 0);
//   opencl::clblast_check(CLBlastSgemm(..., a.mem, a.offset, a.ld, ..., &q, nullptr), "CLBlastSgemm");
#pragma once
#include "opencl/opencl.hpp"

#include <clblast_c.h>

#include <cstddef>
#include <string>

#include <ymlopt/sdk.hpp>

namespace ymlopt::opencl {

/// "CLBlastInvalidLeadDimA (-1016)"; "CLBlast status -7" for an unknown code.
std::string clblast_status_name(int status);
/// Throws KernelError "<call>: <clblast_status_name(status)>" unless status is CLBlastSuccess.
void clblast_check(CLBlastStatusCode status, const char* call);

/// ctx.opencl_queue(); throws KernelError when the context has none.
cl_command_queue task_queue(const KernelContext& ctx);

/// "" when a device runs tasks of dtype (f32; f64 with cl_khr_fp64), else why not.
std::string dtype_support(const DeviceInfo& d, DType dtype);
/// Throws KernelError dtype_support(...) unless the queue's device runs dtype.
void require_dtype(cl_command_queue q, DType dtype);

/// A port as CLBlast takes it: its buffer, the offset of element (0, 0) and the
/// leading dimension (>= max(1, cols)), both in elements.
struct Operand {
  cl_mem mem = nullptr;
  std::size_t offset = 0, ld = 0;
};
/// Port i's operand; throws when its byte offset is not a multiple of the element size.
Operand operand(const KernelContext& ctx, std::size_t i);

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
