// OpenCL kernels of tensor.fill/copy/scale/add: one program, built per element
// type with -DT=<type>, over 2-D strided tiles (a work-item per element).
#include "tensor/tensor_opencl.hpp"

#include <cstdint>
#include <cstring>

#include <ymlopt/kernel_util.hpp>

#include "opencl/opencl.hpp"

namespace ymlopt::tensor::opencl {
namespace {

namespace cl = ymlopt::opencl;

// Offsets and leading dimensions in elements of T. FP_CONTRACT off: alpha*a +
// beta*b rounds each product like the CPU kernel.
const char* const kSource = R"CLC(
#ifdef YMLOPT_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#pragma OPENCL FP_CONTRACT OFF

__kernel void fill_rows(__global T* x, ulong xo, ulong ldx, T v) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  x[xo + r * ldx + c] = v;
}

__kernel void copy_rows(__global const T* x, ulong xo, ulong ldx, __global T* y, ulong yo, ulong ldy) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  y[yo + r * ldy + c] = x[xo + r * ldx + c];
}

__kernel void scale_rows(__global T* x, ulong xo, ulong ldx, T alpha) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  x[xo + r * ldx + c] *= alpha;
}

// ldb = 0: b is one row broadcast over the rows of a. c may alias a.
__kernel void add_rows(__global const T* a, ulong ao, ulong lda, __global const T* b, ulong bo, ulong ldb,
                       __global T* c, ulong co, ulong ldc, T alpha, T beta) {
  const size_t j = get_global_id(0), r = get_global_id(1);
  c[co + r * ldc + j] = alpha * a[ao + r * lda + j] + beta * b[bo + r * ldb + j];
}
)CLC";

const cl::Program& program() {
  static const cl::Program p{"tensor", kSource};
  return p;
}

/// Build options of a program over elements of `dtype`; f64 needs a device with cl_khr_fp64.
std::string float_options(cl_command_queue q, DType dtype) {
  cl::require_dtype(q, dtype);
  return dtype == DType::f32 ? "-DT=float" : "-DT=double -DYMLOPT_FP64";
}

/// -DT=<an unsigned type of the element size>: fill and copy move bits.
std::string bits_options(DType dtype) {
  switch (dtype_size(dtype)) {
    case 1: return "-DT=uchar";
    case 2: return "-DT=ushort";
    case 4: return "-DT=uint";
    case 8: return "-DT=ulong";
    default: throw KernelError(std::string("no OpenCL element type for dtype ") + dtype_name(dtype));
  }
}

template <class F> void with_bits(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: f(std::uint8_t{}); break;
    case 2: f(std::uint16_t{}); break;
    case 4: f(std::uint32_t{}); break;
    case 8: f(std::uint64_t{}); break;
    default: throw KernelError(std::string("no OpenCL element type for dtype ") + dtype_name(dtype));
  }
}

}  // namespace

void fill(KernelContext& ctx) {
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = cl::task_queue(ctx);
  const cl::Operand xo = cl::operand(ctx, 0);
  const double value = ctx.arg_float("value");
  // the host converts the value once (rounding and saturation of the CPU kernel)
  std::uint64_t pattern = 0;
  kutil::dispatch_any(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T v = kutil::from_double<T>(value);
    std::memcpy(&pattern, &v, sizeof v);
  });
  with_bits(x.dtype, [&](auto bits) {
    decltype(bits) v;
    std::memcpy(&v, &pattern, sizeof v);
    cl::Kernel k = program().kernel(q, bits_options(x.dtype), "fill_rows");
    k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, v);
    k.enqueue_2d(q, x.cols, x.rows);
  });
}

std::string copy_check(const TaskShape& t) {
  if (t.ports.size() != 2 || t.ports[0].dtype == t.ports[1].dtype) return "";
  return std::string("OpenCL tensor.copy does not convert dtypes (") + dtype_name(t.ports[0].dtype) + " -> " +
         dtype_name(t.ports[1].dtype) + ")";
}

void copy(KernelContext& ctx) {
  if (auto m = copy_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = cl::task_queue(ctx);
  const cl::Operand xo = cl::operand(ctx, 0), yo = cl::operand(ctx, 1);
  if (xo.mem == yo.mem && xo.offset == yo.offset && (xo.ld == yo.ld || x.rows == 1)) return;  // y is x
  if (cl::overlap(xo, yo, std::size_t(x.rows), std::size_t(x.cols)))
    throw KernelError("OpenCL tensor.copy: 'x' and 'y' overlap in one buffer");
  cl::Kernel k = program().kernel(q, bits_options(x.dtype), "copy_rows");
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, yo.mem).arg(4, yo.offset).arg(5, yo.ld);
  k.enqueue_2d(q, x.cols, x.rows);
}

void scale(KernelContext& ctx) {
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = cl::task_queue(ctx);
  const cl::Operand xo = cl::operand(ctx, 0);
  cl::Kernel k = program().kernel(q, float_options(q, x.dtype), "scale_rows");
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld);
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    k.arg(3, T(ctx.arg_float("alpha")));
  });
  k.enqueue_2d(q, x.cols, x.rows);
}

void add(KernelContext& ctx) {
  const TensorView &a = ctx.port(0), &b = ctx.port(1);
  if (a.size() == 0) return;
  const cl_command_queue q = cl::task_queue(ctx);
  const cl::Operand ao = cl::operand(ctx, 0), bo = cl::operand(ctx, 1), co = cl::operand(ctx, 2);
  const cl_ulong ldb = b.rows != a.rows ? 0 : bo.ld;  // validated: b is then a single row
  cl::Kernel k = program().kernel(q, float_options(q, a.dtype), "add_rows");
  k.arg(0, ao.mem).arg(1, ao.offset).arg(2, ao.ld).arg(3, bo.mem).arg(4, bo.offset).arg(5, ldb);
  k.arg(6, co.mem).arg(7, co.offset).arg(8, co.ld);
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    k.arg(9, T(ctx.arg_float("alpha"))).arg(10, T(ctx.arg_float("beta")));
  });
  k.enqueue_2d(q, a.cols, a.rows);
}

}  // namespace ymlopt::tensor::opencl
