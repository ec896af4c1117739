// Example out-of-tree ymlopt component plugin: two small row-wise kernels.
//
//   example.clip     x (inout, f32/f64)          x := min(max(x, lo), hi)
//   example.rownorm  x (in) -> y (out, f32/f64)  y[r,:] := x[r,:] / ||x[r,:]||_2
//
// Each component declares its ports and parameters, a `check` hook (run by
// `ymlopt check`/`run` at compile time, before any data exists) and a `cost`
// hook (flops and bytes, used in report.json and as a scheduling hint). The
// kernels only see strided 2-D views (a whole tensor or one tile of it), so
// they walk rows with `ld` and never assume contiguity.
//
// Only the SDK's headers are needed (<ymlopt/sdk.hpp> and its kernel helpers,
// <ymlopt/kernel_util.hpp>); they are header-only, and the library is loaded
// with `ymlopt run wf.xml --plugin libymlopt_example_ops.so`.
#include <ymlopt/kernel_util.hpp>
#include <ymlopt/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace {

using ymlopt::Access;
using ymlopt::Cost;
using ymlopt::DType;
using ymlopt::KernelContext;
using ymlopt::KernelError;
using ymlopt::TaskShape;
using ymlopt::TensorView;

namespace kutil = ymlopt::kutil;
using kutil::bytes_of;
using kutil::dims;

// ------------------------------------------------------------ example.clip

std::string clip_check(const TaskShape& t) {
  if (t.ports.size() != 1 || !t.ports[0].bound()) return "port 'x' is not bound";
  const double lo = t.args.get_float("lo"), hi = t.args.get_float("hi");
  if (std::isnan(lo) || std::isnan(hi)) return "params 'lo' and 'hi' must not be NaN";
  if (lo > hi) return "param 'lo' (" + std::to_string(lo) + ") is greater than 'hi' (" + std::to_string(hi) + ")";
  return "";
}

Cost clip_cost(const TaskShape& t) {
  Cost c;
  if (t.ports.size() != 1) return c;
  c.flops = 2.0 * double(t.ports[0].rows) * double(t.ports[0].cols);  // one min + one max per element
  c.bytes = 2.0 * bytes_of(t.ports[0]);                               // read and written
  return c;
}

void clip_cpu(KernelContext& ctx) {
  const TensorView& x = ctx.port(0);
  const double lo = ctx.arg_float("lo"), hi = ctx.arg_float("hi");
  if (!(lo <= hi)) throw KernelError("example.clip: need lo <= hi");
  kutil::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T l = static_cast<T>(lo), h = static_cast<T>(hi);
    T* base = x.ptr<T>();
    for (std::int64_t r = 0; r < x.rows; ++r) {
      T* p = base + r * x.ld;
      for (std::int64_t c = 0; c < x.cols; ++c) p[c] = std::clamp(p[c], l, h);  // NaN stays NaN
    }
  });
}

// --------------------------------------------------------- example.rownorm

std::string rownorm_check(const TaskShape& t) {
  if (t.ports.size() != 2 || !t.ports[0].bound() || !t.ports[1].bound()) return "ports 'x' and 'y' must be bound";
  const TensorView &x = t.ports[0], &y = t.ports[1];
  if (x.dtype != y.dtype)
    return std::string("port 'x' has dtype ") + ymlopt::dtype_name(x.dtype) + " but port 'y' has dtype " +
           ymlopt::dtype_name(y.dtype) + ": dtypes must match";
  if (x.rows != y.rows || x.cols != y.cols)
    return "port 'x' is " + dims(x) + " but port 'y' is " + dims(y) + ": shapes must match";
  if (!(t.args.get_float("eps") >= 0)) return "param 'eps' must be >= 0";
  return "";
}

Cost rownorm_cost(const TaskShape& t) {
  Cost c;
  if (t.ports.size() != 2) return c;
  const double n = double(t.ports[0].rows) * double(t.ports[0].cols);
  c.flops = 3.0 * n;  // square-accumulate (2) + scale (1) per element
  c.bytes = bytes_of(t.ports[0]) + bytes_of(t.ports[1]);
  return c;
}

void rownorm_cpu(KernelContext& ctx) {
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  if (x.dtype != y.dtype || x.rows != y.rows || x.cols != y.cols)
    throw KernelError("example.rownorm: x is " + dims(x) + " " + ymlopt::dtype_name(x.dtype) + ", y is " + dims(y) +
                      " " + ymlopt::dtype_name(y.dtype));
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xb = x.ptr<T>();
    T* yb = y.ptr<T>();
    for (std::int64_t r = 0; r < x.rows; ++r) {
      const T* xp = xb + r * x.ld;
      T* yp = yb + r * y.ld;
      double ss = 0;  // accumulate in double for f32 accuracy
      for (std::int64_t c = 0; c < x.cols; ++c) ss += double(xp[c]) * double(xp[c]);
      const double norm = std::sqrt(ss);
      // A row whose norm is <= eps (e.g. all zeros) is written as zeros.
      const double inv = norm > eps && norm > 0 ? 1.0 / norm : 0.0;
      for (std::int64_t c = 0; c < x.cols; ++c) yp[c] = static_cast<T>(double(xp[c]) * inv);
    }
  });
}

}  // namespace

YMLOPT_PLUGIN(reg) {
  using ymlopt::ParamType;
  kutil::add_component(reg, "example.clip",
                       "x := min(max(x, lo), hi), element-wise and in place (f32/f64; NaN is kept)",
                       {{"x", Access::read_write, kutil::kFloat, false, 8, "tensor clipped in place"}},
                       {{"lo", ParamType::float_, "-1", false, "lower bound"},
                        {"hi", ParamType::float_, "1", false, "upper bound (>= lo)"}},
                       clip_cpu, clip_check, clip_cost);
  kutil::add_component(reg, "example.rownorm",
                       "y[r,:] := x[r,:] / ||x[r,:]||_2 for each row of the (2-D view of the) tensor; rows with norm "
                       "<= eps become 0. On a tile, rows are the tile's rows.",
                       {{"x", Access::read, kutil::kFloat, false, 8, "input"},
                        {"y", Access::write, kutil::kFloat, false, 8, "output, same shape and dtype as x"}},
                       {{"eps", ParamType::float_, "0", false, "rows with an L2 norm <= eps are set to 0"}},
                       rownorm_cpu, rownorm_check, rownorm_cost);
}
