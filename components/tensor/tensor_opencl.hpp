// OpenCL kernels of tensor.fill, tensor.copy, tensor.scale and tensor.add
// (tensor_opencl.cpp; built with OpenCL only, YMLOPT_HAVE_OPENCL). Ports are
// cl_mem buffers at ctx.opencl_offset(i); kernels are enqueued on
// ctx.opencl_queue() and not waited for. The caller validates the task like
// the CPU kernel first; copy_check says which tasks the OpenCL copy handles
// (fill, scale and add handle every valid task; f64 needs a device with fp64).
//
//   kutil::validate(ctx, scale_ports(), scale_check);
//   tensor::opencl::scale(ctx);
#pragma once
#include <ymlopt/sdk.hpp>

#include <string>

namespace ymlopt::tensor::opencl {

void fill(KernelContext& ctx);
void copy(KernelContext& ctx);
/// "" when x and y have the same dtype (conversions run on a CPU).
std::string copy_check(const TaskShape& t);
void scale(KernelContext& ctx);
void add(KernelContext& ctx);

}  // namespace ymlopt::tensor::opencl
