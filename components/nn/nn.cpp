// nn.* components: activations and softmax on 2-D strided views.
#include "nn/nn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ymlopt/kernel_util.hpp>

#if YMLOPT_HAVE_CUDA
#include "nn/nn_cuda.hpp"
#endif
#if YMLOPT_HAVE_OPENCL
#include "nn/transformer_opencl.hpp"
#endif

namespace ymlopt {
namespace {

using kutil::kFloat;

const std::vector<PortSpec>& unary_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input"},
      {"y", Access::write, kFloat, false, 8, "output, same shape and dtype as x (may be the same data)"},
  };
  return p;
}

std::string unary_check(const TaskShape& t) {
  const auto& s = unary_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  for (const std::string& m : {kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_shape(s, p, 1, 0)})
    if (!m.empty()) return m;
  return "";
}

std::string gelu_check(const TaskShape& t) {
  if (auto m = unary_check(t); !m.empty()) return m;
  return kutil::one_of(t.args, "approximate", {"tanh", "none"});
}

/// Cost with `per_elem` flops per element.
template <int per_elem>
Cost unary_cost(const TaskShape& t) {
  if (t.ports.size() != unary_ports().size()) return {};
  return kutil::io_cost(unary_ports(), t, per_elem * double(t.ports[0].rows) * double(t.ports[0].cols));
}

/// Applies `f(x_row, y_row, cols)` to each row, for T = float or double.
template <class RowFn>
void for_rows(KernelContext& ctx, std::string (*check)(const TaskShape&), RowFn&& f) {
  kutil::validate(ctx, unary_ports(), check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (std::int64_t r = 0; r < x.rows; ++r)
      f(static_cast<const T*>(x.data) + r * x.ld, static_cast<T*>(y.data) + r * y.ld, x.cols);
  });
}

void relu_cpu(KernelContext& ctx) {
  for_rows(ctx, unary_check, [](const auto* x, auto* y, std::int64_t n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
    for (std::int64_t j = 0; j < n; ++j) y[j] = x[j] > T(0) ? x[j] : T(0);
  });
}

void gelu_cpu(KernelContext& ctx) {
  const bool tanh_form = ctx.arg_string("approximate") == "tanh";
  for_rows(ctx, gelu_check, [tanh_form](const auto* x, auto* y, std::int64_t n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
    if (tanh_form) {
      const T k0 = T(0.7978845608028654);  // sqrt(2/pi)
      const T k1 = T(0.044715);
      for (std::int64_t j = 0; j < n; ++j) {
        const T v = x[j];
        y[j] = T(0.5) * v * (T(1) + std::tanh(k0 * (v + k1 * v * v * v)));
      }
    } else {
      const T inv_sqrt2 = T(0.7071067811865476);
      for (std::int64_t j = 0; j < n; ++j) {
        const T v = x[j];
        y[j] = T(0.5) * v * (T(1) + std::erf(v * inv_sqrt2));
      }
    }
  });
}

void silu_cpu(KernelContext& ctx) {
  for_rows(ctx, unary_check, [](const auto* x, auto* y, std::int64_t n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
    for (std::int64_t j = 0; j < n; ++j) {
      const T v = x[j];
      y[j] = v / (T(1) + std::exp(-v));  // exp overflow gives inf and v/inf = -0: well defined
    }
  });
}

void softmax_cpu(KernelContext& ctx) {
  for_rows(ctx, unary_check, [](const auto* x, auto* y, std::int64_t n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
    if (n == 0) return;
    T m = x[0];
    for (std::int64_t j = 1; j < n; ++j) m = std::max(m, x[j]);
    // a row of -inf only (or holding NaN/+inf) gives NaN, as in the usual frameworks
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const T e = std::exp(x[j] - m);
      y[j] = e;
      sum += double(e);
    }
    const T inv = T(1.0 / sum);
    for (std::int64_t j = 0; j < n; ++j) y[j] *= inv;
  });
}

#if YMLOPT_HAVE_CUDA
// CUDA kernels (nn_cuda.cu): port data are device pointers, launched on
// ctx.cuda_stream(). f32 with contiguous rows only (unary_cuda_check); f64 or
// column tiles run on a CPU.

std::string unary_cuda_check(const TaskShape& t) {
  const auto& p = t.ports;
  if (p.size() != unary_ports().size()) return "wrong number of ports";
  if (p[0].dtype != DType::f32) return std::string("CUDA kernel is f32 only, x is ") + dtype_name(p[0].dtype);
  if (!p[0].contiguous() || !p[1].contiguous()) return "CUDA kernel needs contiguous rows (ld == cols)";
  return "";
}

/// Validates like the CPU kernel, then checks unary_cuda_check.
void unary_cuda_validate(KernelContext& ctx, std::string (*check)(const TaskShape&)) {
  kutil::validate(ctx, unary_ports(), check);
  if (auto m = unary_cuda_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
}

void gelu_cuda(KernelContext& ctx) {
  unary_cuda_validate(ctx, gelu_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  nn::cuda::gelu(static_cast<const float*>(x.data), static_cast<float*>(y.data), x.size(),
                 ctx.arg_string("approximate") == "tanh", ctx.cuda_stream());
}

void silu_cuda(KernelContext& ctx) {
  unary_cuda_validate(ctx, unary_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  nn::cuda::silu(static_cast<const float*>(x.data), static_cast<float*>(y.data), x.size(), ctx.cuda_stream());
}

void softmax_cuda(KernelContext& ctx) {
  unary_cuda_validate(ctx, unary_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  if (x.cols == 0) return;
  nn::cuda::softmax_rows(static_cast<const float*>(x.data), static_cast<float*>(y.data), x.rows, x.cols,
                         ctx.cuda_stream());
}
#endif

#if YMLOPT_HAVE_OPENCL
// OpenCL kernels (transformer_opencl.cpp): validated like the CPU kernel, then
// enqueued; f32 only (nn::opencl::unary_check).
void gelu_opencl(KernelContext& ctx) {
  kutil::validate(ctx, unary_ports(), gelu_check);
  nn::opencl::gelu(ctx);
}
void silu_opencl(KernelContext& ctx) {
  kutil::validate(ctx, unary_ports(), unary_check);
  nn::opencl::silu(ctx);
}
void softmax_opencl(KernelContext& ctx) {
  kutil::validate(ctx, unary_ports(), unary_check);
  nn::opencl::softmax(ctx);
}
#endif

}  // namespace

void register_nn(Registry& reg) {
  auto add = [&](const char* name, const char* doc, std::vector<ParamSpec> params, KernelFn cpu,
                 std::string (*check)(const TaskShape&), Cost (*cost)(const TaskShape&), KernelFn cuda = nullptr,
                 KernelFn opencl = nullptr) {
#if YMLOPT_HAVE_CUDA
    std::string (*const cuda_check)(const TaskShape&) = cuda ? unary_cuda_check : nullptr;
#else
    std::string (*const cuda_check)(const TaskShape&) = nullptr;
#endif
    ComponentSpec s = kutil::make_component(name, doc, unary_ports(), std::move(params), cpu, check, cost, cuda,
                                            cuda_check);
#if YMLOPT_HAVE_OPENCL
    if (opencl) {
      s.opencl = opencl;
      s.opencl_check = nn::opencl::unary_check;
    }
#else
    (void)opencl;
#endif
    reg.add(std::move(s));
  };
#if YMLOPT_HAVE_CUDA
  const KernelFn gelu_gpu = gelu_cuda, silu_gpu = silu_cuda, softmax_gpu = softmax_cuda;
#else
  const KernelFn gelu_gpu = nullptr, silu_gpu = nullptr, softmax_gpu = nullptr;
#endif
#if YMLOPT_HAVE_OPENCL
  const KernelFn gelu_ocl = gelu_opencl, silu_ocl = silu_opencl, softmax_ocl = softmax_opencl;
#else
  const KernelFn gelu_ocl = nullptr, silu_ocl = nullptr, softmax_ocl = nullptr;
#endif
  add("nn.relu", "y = max(x, 0)", {}, relu_cpu, unary_check, unary_cost<1>);
  add("nn.gelu", "y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))), or 0.5*x*(1 + erf(x/sqrt(2)))",
      {{"approximate", ParamType::string_, "tanh", false, "'tanh' (approximation) or 'none' (exact erf form)"}},
      gelu_cpu, gelu_check, unary_cost<8>, gelu_gpu, gelu_ocl);
  add("nn.silu", "y = x * sigmoid(x)", {}, silu_cpu, unary_check, unary_cost<4>, silu_gpu, silu_ocl);
  add("nn.softmax", "row-wise softmax, numerically stable (subtracts the row max)", {}, softmax_cpu, unary_check,
      unary_cost<5>, softmax_gpu, softmax_ocl);
  register_transformer(reg);
}

}  // namespace ymlopt
