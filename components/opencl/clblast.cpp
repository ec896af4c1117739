#include "opencl/clblast.hpp"

#include <algorithm>
#include <cstdint>

namespace ymlopt::opencl {

std::string clblast_status_name(int status) {
  std::string name;
  switch (status) {
#define YMLOPT_CLBLAST_STATUS(s) \
  case s: name = #s; break;
    YMLOPT_CLBLAST_STATUS(CLBlastSuccess)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLCompilerNotAvailable)
    YMLOPT_CLBLAST_STATUS(CLBlastTempBufferAllocFailure)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLOutOfResources)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLOutOfHostMemory)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLBuildProgramFailure)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidValue)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidCommandQueue)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMemObject)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBinary)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBuildOptions)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidProgram)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidProgramExecutable)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernelName)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernelDefinition)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernel)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidArgIndex)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidArgValue)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidArgSize)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernelArgs)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalNumDimensions)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalThreadsTotal)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalThreadsDim)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidGlobalOffset)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidEventWaitList)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidEvent)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidOperation)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBufferSize)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidGlobalWorkSize)
    YMLOPT_CLBLAST_STATUS(CLBlastNotImplemented)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMatrixA)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMatrixB)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMatrixC)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidVectorX)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidVectorY)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidDimension)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLeadDimA)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLeadDimB)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLeadDimC)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidIncrementX)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidIncrementY)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryA)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryB)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryC)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryX)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryY)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryTemp)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBatchCount)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidOverrideKernel)
    YMLOPT_CLBLAST_STATUS(CLBlastMissingOverrideParameter)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalMemUsage)
    YMLOPT_CLBLAST_STATUS(CLBlastNoHalfPrecision)
    YMLOPT_CLBLAST_STATUS(CLBlastNoDoublePrecision)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidVectorScalar)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryScalar)
    YMLOPT_CLBLAST_STATUS(CLBlastDatabaseError)
    YMLOPT_CLBLAST_STATUS(CLBlastUnknownError)
    YMLOPT_CLBLAST_STATUS(CLBlastUnexpectedError)
#undef YMLOPT_CLBLAST_STATUS
    default: return "CLBlast status " + std::to_string(status);
  }
  return name + " (" + std::to_string(status) + ")";
}

void clblast_check(CLBlastStatusCode status, const char* call) {
  if (status != CLBlastSuccess) throw KernelError(std::string(call) + ": " + clblast_status_name(status));
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
  return std::string("the CLBlast kernels do not handle dtype ") + dtype_name(dtype);
}

void require_dtype(cl_command_queue q, DType dtype) {
  if (dtype == DType::f32) return;
  if (auto m = dtype_support(device_info(queue_device(q)), dtype); !m.empty()) throw KernelError(m);
}

Operand operand(const KernelContext& ctx, std::size_t i) {
  const TensorView& v = ctx.port(i);
  const std::size_t es = dtype_size(v.dtype), off = ctx.opencl_offset(i);
  if (off % es != 0)
    throw KernelError("port " + std::to_string(i) + ": offset " + std::to_string(off) +
                      " bytes is not a multiple of its element size " + std::to_string(es));
  const std::int64_t ld = std::max<std::int64_t>({v.rows > 1 ? v.ld : 0, v.cols, 1});
  return {static_cast<cl_mem>(v.data), off / es, std::size_t(ld)};
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
  const std::size_t so[3] = {src.offset % src.ld * elem_size, src.offset / src.ld, 0};
  const std::size_t dof[3] = {dst.offset % dst.ld * elem_size, dst.offset / dst.ld, 0};
  const std::size_t region[3] = {cols * elem_size, rows, 1};
  check(clEnqueueCopyBufferRect(q, src.mem, dst.mem, so, dof, region, src.ld * elem_size, 0, dst.ld * elem_size, 0, 0,
                                nullptr, nullptr),
        "clEnqueueCopyBufferRect");
}

}  // namespace ymlopt::opencl
