// OpenCL kernels of blas.gemm, blas.syrk and blas.trsm through CLBlast's C API
// (blas_opencl.cpp; built with CLBlast only, YMLOPT_HAVE_CLBLAST). Ports are
// cl_mem buffers at ctx.opencl_offset(i) with their leading dimensions; the
// calls are enqueued on ctx.opencl_queue(), f32 and f64 (f64 needs a device
// with cl_khr_fp64, else the kernel throws saying so). The caller validates the
// task like the CPU kernel first; each *_check says which tasks the OpenCL
// kernel handles (CLBlast needs every dimension > 0).
//
//   kutil::validate(ctx, gemm_ports(), gemm_check);
//   blas::opencl::gemm(ctx);
#pragma once
#include <ymlopt/sdk.hpp>

#include <string>

namespace ymlopt::blas::opencl {

/// "" unless k = 0 (C = beta*C then runs on a CPU).
std::string gemm_check(const TaskShape& t);
void gemm(KernelContext& ctx);
/// "" unless k = 0.
std::string syrk_check(const TaskShape& t);
void syrk(KernelContext& ctx);
/// Solves on a packed copy of b (blas_opencl.cpp says why).
void trsm(KernelContext& ctx);

}  // namespace ymlopt::blas::opencl
