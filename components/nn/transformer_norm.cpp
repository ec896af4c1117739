// nn.layernorm and nn.rmsnorm, row-wise, reductions in double (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include <cmath>

namespace ymlopt::transformer {

// ============================================================ nn.layernorm / nn.rmsnorm

const std::vector<PortSpec>& layernorm_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [tokens, d] (leading dims are flattened)"},
      {"gamma", Access::read, kFloat, true, 1, "scale [d] (optional: 1)"},
      {"beta", Access::read, kFloat, true, 1, "shift [d] (optional: 0)"},
      {"y", Access::write, kFloat, false, 8, "output, shape of x (may be the same data)"},
  };
  return p;
}

const std::vector<PortSpec>& rmsnorm_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [tokens, d] (leading dims are flattened)"},
      {"weight", Access::read, kFloat, true, 1, "scale [d] (optional: 1)"},
      {"y", Access::write, kFloat, false, 8, "output, shape of x (may be the same data)"},
  };
  return p;
}

std::string layernorm_check(const TaskShape& t) {
  const auto& s = layernorm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  const std::string feat = "x has " + to_string(p[0].cols) + " features";
  return first_error({kutil::float_dtype(s, p, 0), same_dtype_opt(s, p, 1, 0), same_dtype_opt(s, p, 2, 0),
                      kutil::same_dtype(s, p, 3, 0), kutil::same_shape(s, p, 3, 0),
                      expect_vector(s, p, 1, p[0].cols, feat), expect_vector(s, p, 2, p[0].cols, feat),
                      eps_check(t.args)});
}

std::string rmsnorm_check(const TaskShape& t) {
  const auto& s = rmsnorm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), same_dtype_opt(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                      kutil::same_shape(s, p, 2, 0),
                      expect_vector(s, p, 1, p[0].cols, "x has " + to_string(p[0].cols) + " features"),
                      eps_check(t.args)});
}

Cost layernorm_cost(const TaskShape& t) {
  if (t.ports.size() != layernorm_ports().size()) return {};
  return kutil::io_cost(layernorm_ports(), t, 8 * rows_cols(t.ports[0]));
}

Cost rmsnorm_cost(const TaskShape& t) {
  if (t.ports.size() != rmsnorm_ports().size()) return {};
  return kutil::io_cost(rmsnorm_ports(), t, 4 * rows_cols(t.ports[0]));
}

void layernorm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, layernorm_ports(), layernorm_check);
  const TensorView &x = ctx.port(0), &g = ctx.port(1), &b = ctx.port(2), &y = ctx.port(3);
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const int64_t d = x.cols;
    if (d == 0) return;
    const T* gp = g.bound() ? static_cast<const T*>(g.data) : nullptr;
    const T* bp = b.bound() ? static_cast<const T*>(b.data) : nullptr;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      const double mean = sum8(d, [xr](int64_t j) { return double(xr[j]); }) / double(d);
      const double sq = sum8(d, [xr, mean](int64_t j) {
        const double c = double(xr[j]) - mean;
        return c * c;
      });
      const T m = T(mean), rs = T(1.0 / std::sqrt(sq / double(d) + eps));
      if (gp && bp)
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs * gp[j] + bp[j];
      else if (gp)
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs * gp[j];
      else if (bp)
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs + bp[j];
      else
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs;
    }
  });
}

void rmsnorm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, rmsnorm_ports(), rmsnorm_check);
  const TensorView &x = ctx.port(0), &w = ctx.port(1), &y = ctx.port(2);
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const int64_t d = x.cols;
    if (d == 0) return;
    const T* wp = w.bound() ? static_cast<const T*>(w.data) : nullptr;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      const double sq = sum8(d, [xr](int64_t j) { return double(xr[j]) * double(xr[j]); });
      const T rs = T(1.0 / std::sqrt(sq / double(d) + eps));
      if (wp)
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * rs * wp[j];
      else
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * rs;
    }
  });
}

}  // namespace ymlopt::transformer
