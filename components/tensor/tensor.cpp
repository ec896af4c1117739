// tensor.* components: element-wise and layout kernels on 2-D strided views.
#include "tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ymlopt/kernel_util.hpp>

#if YMLOPT_HAVE_OPENCL
#include "tensor/tensor_opencl.hpp"
#endif

namespace ymlopt {
namespace {

using kutil::dims;
using kutil::tag;

using kutil::kFloat;
const std::vector<DType> kAny = {};  // every dtype

using kutil::first_error;
template <class T> T* row(const TensorView& v, std::int64_t r) { return static_cast<T*>(v.data) + r * v.ld; }

// ---------------------------------------------------------------- tensor.fill

const std::vector<PortSpec>& fill_ports() {
  static const std::vector<PortSpec> p = {{"x", Access::write, kAny, false, 8, "tensor to fill"}};
  return p;
}

std::string fill_check(const TaskShape& t) { return kutil::ports_present(fill_ports(), t.ports); }

Cost fill_cost(const TaskShape& t) { return kutil::io_cost(fill_ports(), t, 0); }

void fill_cpu(KernelContext& ctx) {
  kutil::validate(ctx, fill_ports(), fill_check);
  const TensorView& x = ctx.port(0);
  const double value = ctx.arg_float("value");
  kutil::dispatch_any(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T v = kutil::from_double<T>(value);
    for (std::int64_t r = 0; r < x.rows; ++r) std::fill_n(row<T>(x, r), x.cols, v);
  });
}

// ---------------------------------------------------------------- tensor.copy

const std::vector<PortSpec>& copy_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kAny, false, 8, "source"},
      {"y", Access::write, kAny, false, 8, "destination, same shape; converted to its own dtype"},
  };
  return p;
}

std::string copy_check(const TaskShape& t) {
  const auto& s = copy_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  return kutil::same_shape(s, t.ports, 1, 0);
}

Cost copy_cost(const TaskShape& t) { return kutil::io_cost(copy_ports(), t, 0); }

template <class D, class S>
void convert_rows(const TensorView& x, const TensorView& y) {
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const S* src = row<const S>(x, r);
    D* dst = row<D>(y, r);
    if constexpr (std::is_same_v<D, S>) {
      if (src != dst) std::memmove(dst, src, static_cast<std::size_t>(x.cols) * sizeof(S));
    } else {
      for (std::int64_t c = 0; c < x.cols; ++c) dst[c] = kutil::convert<D>(src[c]);
    }
  }
}

void copy_cpu(KernelContext& ctx) {
  kutil::validate(ctx, copy_ports(), copy_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  if (x.size() == 0) return;
  if (x.dtype == y.dtype && x.contiguous() && y.contiguous()) {
    if (x.data != y.data) std::memmove(y.data, x.data, static_cast<std::size_t>(x.size()) * dtype_size(x.dtype));
    return;
  }
  kutil::dispatch_any(x.dtype, [&](auto ts) {
    using S = typename decltype(ts)::type;
    kutil::dispatch_any(y.dtype, [&](auto td) {
      using D = typename decltype(td)::type;
      convert_rows<D, S>(x, y);
    });
  });
}

// ---------------------------------------------------------------- tensor.add

const std::vector<PortSpec>& add_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kFloat, false, 8, "a"},
      {"b", Access::read, kFloat, false, 8, "b: the shape of a, or a single row (bias broadcast over rows)"},
      {"c", Access::write, kFloat, false, 8, "c = alpha*a + beta*b, the shape of a (may alias a)"},
  };
  return p;
}

std::string add_check(const TaskShape& t) {
  const auto& s = add_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0)});
      !m.empty())
    return m;
  const bool same = p[1].rows == p[0].rows && p[1].cols == p[0].cols;
  const bool bias = p[1].rows == 1 && p[1].cols == p[0].cols;
  if (!same && !bias)
    return "port 'b' is " + dims(p[1]) + " but port 'a' is " + dims(p[0]) + ": 'b' must be " +
           std::to_string(p[0].rows) + "x" + std::to_string(p[0].cols) + " or a single row 1x" +
           std::to_string(p[0].cols) + " (bias broadcast over rows)";
  return kutil::same_shape(s, p, 2, 0);
}

Cost add_cost(const TaskShape& t) {
  if (t.ports.size() != add_ports().size()) return {};
  return kutil::io_cost(add_ports(), t, 3.0 * double(t.ports[0].rows) * double(t.ports[0].cols));
}

void add_cpu(KernelContext& ctx) {
  kutil::validate(ctx, add_ports(), add_check);
  const TensorView &a = ctx.port(0), &b = ctx.port(1), &c = ctx.port(2);
  const bool bcast = b.rows != a.rows;  // validated: b is then a single row
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T alpha = T(ctx.arg_float("alpha")), beta = T(ctx.arg_float("beta"));
    for (std::int64_t r = 0; r < a.rows; ++r) {
      const T* ap = row<const T>(a, r);
      const T* bp = row<const T>(b, bcast ? 0 : r);
      T* cp = row<T>(c, r);
      for (std::int64_t j = 0; j < a.cols; ++j) cp[j] = alpha * ap[j] + beta * bp[j];
    }
  });
}

// ---------------------------------------------------------------- tensor.scale

const std::vector<PortSpec>& scale_ports() {
  static const std::vector<PortSpec> p = {{"x", Access::read_write, kFloat, false, 8, "x *= alpha"}};
  return p;
}

std::string scale_check(const TaskShape& t) {
  const auto& s = scale_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  return kutil::float_dtype(s, t.ports, 0);
}

Cost scale_cost(const TaskShape& t) {
  if (t.ports.size() != scale_ports().size()) return {};
  return kutil::io_cost(scale_ports(), t, double(t.ports[0].rows) * double(t.ports[0].cols));
}

void scale_cpu(KernelContext& ctx) {
  kutil::validate(ctx, scale_ports(), scale_check);
  const TensorView& x = ctx.port(0);
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T alpha = T(ctx.arg_float("alpha"));
    for (std::int64_t r = 0; r < x.rows; ++r) {
      T* xp = row<T>(x, r);
      for (std::int64_t j = 0; j < x.cols; ++j) xp[j] *= alpha;
    }
  });
}

// ---------------------------------------------------------------- tensor.transpose

const std::vector<PortSpec>& transpose_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kAny, false, 2, "x (m x n)"},
      {"y", Access::write, kAny, false, 2, "y = x^T (n x m), same dtype; must not overlap x"},
  };
  return p;
}

std::string transpose_check(const TaskShape& t) {
  const auto& s = transpose_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::same_dtype(s, p, 1, 0); !m.empty()) return m;
  if (p[1].rows != p[0].cols || p[1].cols != p[0].rows)
    return "port 'y' is " + dims(p[1]) + " but port 'x' is " + dims(p[0]) + ": 'y' must be " +
           std::to_string(p[0].cols) + "x" + std::to_string(p[0].rows);
  return "";
}

Cost transpose_cost(const TaskShape& t) { return kutil::io_cost(transpose_ports(), t, 0); }

template <class T>
void transpose_blocked(const TensorView& x, const TensorView& y) {
  constexpr std::int64_t B = 32;
  const T* xs = static_cast<const T*>(x.data);
  T* ys = static_cast<T*>(y.data);
  for (std::int64_t i0 = 0; i0 < x.rows; i0 += B) {
    const std::int64_t i1 = std::min(i0 + B, x.rows);
    for (std::int64_t j0 = 0; j0 < x.cols; j0 += B) {
      const std::int64_t j1 = std::min(j0 + B, x.cols);
      for (std::int64_t j = j0; j < j1; ++j)
        for (std::int64_t i = i0; i < i1; ++i) ys[j * y.ld + i] = xs[i * x.ld + j];
    }
  }
}

void transpose_cpu(KernelContext& ctx) {
  kutil::validate(ctx, transpose_ports(), transpose_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  if (x.size() == 0) return;
  if (x.data == y.data) throw KernelError("tensor.transpose cannot run in place: 'y' must not alias 'x'");
  switch (dtype_size(x.dtype)) {
    case 1: transpose_blocked<std::uint8_t>(x, y); break;
    case 2: transpose_blocked<std::uint16_t>(x, y); break;
    case 4: transpose_blocked<std::uint32_t>(x, y); break;
    case 8: transpose_blocked<std::uint64_t>(x, y); break;
    default: throw KernelError("tensor.transpose: unsupported element size");
  }
}

// ---------------------------------------------------------------- tensor.norm

const std::vector<PortSpec>& norm_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kAny, false, 8, "input"},
      {"out", Access::write, kFloat, true, 8, "optional 1-element result"},
  };
  return p;
}

std::string norm_check(const TaskShape& t) {
  const auto& s = norm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "kind", {"fro", "max"}); !m.empty()) return m;
  if (p[1].bound() && p[1].rows * p[1].cols != 1)
    return "port 'out' is " + dims(p[1]) + ": it must hold exactly 1 element";
  return "";
}

Cost norm_cost(const TaskShape& t) {
  if (t.ports.size() != norm_ports().size()) return {};
  return kutil::io_cost(norm_ports(), t, 2.0 * double(t.ports[0].rows) * double(t.ports[0].cols));
}

/// Max with NaN propagation: once NaN, stays NaN.
inline double nanmax(double m, double a) { return (a > m || std::isnan(a)) && !std::isnan(m) ? a : m; }

void norm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, norm_ports(), norm_check);
  const TensorView &x = ctx.port(0), &out = ctx.port(1);
  const bool fro = ctx.arg_string("kind") == "fro";
  double result = 0;
  kutil::dispatch_any(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if (fro) {
      double acc[4] = {0, 0, 0, 0};
      for (std::int64_t r = 0; r < x.rows; ++r) {
        const T* xp = row<const T>(x, r);
        std::int64_t j = 0;
        for (; j + 4 <= x.cols; j += 4)
          for (int u = 0; u < 4; ++u) {
            const double v = kutil::to_double(xp[j + u]);
            acc[u] += v * v;
          }
        for (; j < x.cols; ++j) {
          const double v = kutil::to_double(xp[j]);
          acc[0] += v * v;
        }
      }
      result = std::sqrt((acc[0] + acc[1]) + (acc[2] + acc[3]));
    } else {
      double m = 0;
      for (std::int64_t r = 0; r < x.rows; ++r) {
        const T* xp = row<const T>(x, r);
        for (std::int64_t j = 0; j < x.cols; ++j) m = nanmax(m, std::fabs(kutil::to_double(xp[j])));
      }
      result = m;
    }
  });
  ctx.report("norm", result);
  if (out.bound() && out.data) {
    if (out.dtype == DType::f32) *static_cast<float*>(out.data) = static_cast<float>(result);
    else *static_cast<double*>(out.data) = result;
  }
}

// ---------------------------------------------------------------- tensor.compare

const std::vector<PortSpec>& compare_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kAny, false, 8, "tensor under test"},
      {"b", Access::read, kAny, false, 8, "reference, same shape (its dtype may differ)"},
  };
  return p;
}

std::string compare_check(const TaskShape& t) {
  const auto& s = compare_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  return kutil::same_shape(s, t.ports, 1, 0);
}

Cost compare_cost(const TaskShape& t) {
  if (t.ports.size() != compare_ports().size()) return {};
  return kutil::io_cost(compare_ports(), t, 3.0 * double(t.ports[0].rows) * double(t.ports[0].cols));
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

void compare_cpu(KernelContext& ctx) {
  kutil::validate(ctx, compare_ports(), compare_check);
  const TensorView &a = ctx.port(0), &b = ctx.port(1);
  double max_abs = 0, max_b = 0;
  kutil::dispatch_any(a.dtype, [&](auto ta) {
    using A = typename decltype(ta)::type;
    kutil::dispatch_any(b.dtype, [&](auto tb) {
      using B = typename decltype(tb)::type;
      for (std::int64_t r = 0; r < a.rows; ++r) {
        const A* ap = row<const A>(a, r);
        const B* bp = row<const B>(b, r);
        for (std::int64_t j = 0; j < a.cols; ++j) {
          const double bv = kutil::to_double(bp[j]);
          max_abs = nanmax(max_abs, std::fabs(kutil::to_double(ap[j]) - bv));
          max_b = std::max(max_b, std::fabs(bv));  // NaNs in b already show in max_abs
        }
      }
    });
  });
  const double max_rel = max_abs / std::max(max_b, std::numeric_limits<double>::min());
  ctx.report("max_abs", max_abs);
  ctx.report("max_rel", max_rel);
  const double tol = ctx.arg_float("tol");
  if (tol >= 0 && !(max_rel <= tol))
    throw KernelError("tensors differ: max_rel " + num(max_rel) + " > tol " + num(tol) + " (max_abs " +
                      num(max_abs) + ", max|b| " + num(max_b) + ")");
}

// ---------------------------------------------------------------- OpenCL kernels

// Validated like the CPU kernels, then enqueued by tensor_opencl.cpp.
#if YMLOPT_HAVE_OPENCL
void fill_opencl(KernelContext& ctx) {
  kutil::validate(ctx, fill_ports(), fill_check);
  tensor::opencl::fill(ctx);
}
void copy_opencl(KernelContext& ctx) {
  kutil::validate(ctx, copy_ports(), copy_check);
  tensor::opencl::copy(ctx);
}
void add_opencl(KernelContext& ctx) {
  kutil::validate(ctx, add_ports(), add_check);
  tensor::opencl::add(ctx);
}
void scale_opencl(KernelContext& ctx) {
  kutil::validate(ctx, scale_ports(), scale_check);
  tensor::opencl::scale(ctx);
}
#endif

}  // namespace

void register_tensor(Registry& reg) {
  ComponentSpec fill = kutil::make_component("tensor.fill",
      "x := value (all dtypes; f16/bf16 rounded to nearest even, integers rounded to nearest and saturated)",
      fill_ports(), {{"value", ParamType::float_, "0", false, "the value"}}, fill_cpu, fill_check, fill_cost);
  ComponentSpec copy = kutil::make_component("tensor.copy",
      "y := x, converting to y's dtype (f16/bf16: round to nearest even; i8/i32: round to nearest even, "
      "saturate, NaN -> 0)",
      copy_ports(), {}, copy_cpu, copy_check, copy_cost);
  ComponentSpec add = kutil::make_component("tensor.add",
      "c = alpha*a + beta*b; b may be a single row broadcast over the rows of a", add_ports(),
      {{"alpha", ParamType::float_, "1", false, "scale of a"}, {"beta", ParamType::float_, "1", false, "scale of b"}},
      add_cpu, add_check, add_cost);
  ComponentSpec scale = kutil::make_component("tensor.scale", "x *= alpha", scale_ports(),
      {{"alpha", ParamType::float_, "1", false, "the factor"}}, scale_cpu, scale_check, scale_cost);
#if YMLOPT_HAVE_OPENCL
  fill.opencl = fill_opencl;
  copy.opencl = copy_opencl;
  copy.opencl_check = tensor::opencl::copy_check;
  add.opencl = add_opencl;
  scale.opencl = scale_opencl;
#endif
  for (ComponentSpec* s : {&fill, &copy, &add, &scale}) reg.add(std::move(*s));
  kutil::add_component(reg, "tensor.transpose", "y = x^T (cache-blocked, all dtypes)", transpose_ports(), {}, transpose_cpu,
      transpose_check, transpose_cost);
  kutil::add_component(reg, "tensor.norm", "norm of x computed in double, reported as 'norm' and written to 'out' if bound",
      norm_ports(), {{"kind", ParamType::string_, "fro", false, "'fro' (Frobenius) or 'max' (max |x|)"}}, norm_cpu,
      norm_check, norm_cost);
  kutil::add_component(reg, "tensor.compare",
      "reports max_abs = max|a-b| and max_rel = max_abs / max|b|; fails when tol >= 0 and max_rel > tol",
      compare_ports(), {{"tol", ParamType::float_, "-1", false, "relative tolerance; < 0: no check"}}, compare_cpu,
      compare_check, compare_cost);
}

}  // namespace ymlopt
