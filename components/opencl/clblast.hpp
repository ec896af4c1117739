// CLBlast's status codes as KernelErrors, for the families' CLBlast-based
// OpenCL kernels (blas.gemm/syrk/trsm, nn.linear; built with CLBlast only,
// YMLOPT_HAVE_CLBLAST); queues, operands and scratch buffers: opencl.hpp.
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

}  // namespace ymlopt::opencl
