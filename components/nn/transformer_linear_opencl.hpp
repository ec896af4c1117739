// The OpenCL kernel of nn.linear (transformer_linear_opencl.cpp; built with
// CLBlast only, YMLOPT_HAVE_CLBLAST): CLBlast's SGEMM, then one epilogue
// kernel for bias, activation and residual, enqueued on ctx.opencl_queue().
// linear_opencl_check says which tasks it handles: dense f32 weights, [k, n]
// or [n, k]; compressed formats and f64 run on a CPU.
//
//   linear.opencl = transformer::linear_opencl;
//   linear.opencl_check = transformer::linear_opencl_check;
#pragma once
#include <ymlopt/sdk.hpp>

#include <string>

namespace ymlopt::transformer {

/// "" when the OpenCL kernel handles the task, else why it runs on a CPU.
std::string linear_opencl_check(const TaskShape& t);
/// Validates like the CPU kernel, then enqueues the GEMM and the epilogue.
void linear_opencl(KernelContext& ctx);

}  // namespace ymlopt::transformer
