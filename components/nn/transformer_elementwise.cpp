// nn.swiglu, nn.tanh and nn.l2normalize (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include <cmath>

#include "tensor/simd.hpp"

namespace ymlopt::transformer {

// ============================================================ nn.swiglu, nn.tanh, nn.l2normalize

const std::vector<PortSpec>& swiglu_ports() {
  static const std::vector<PortSpec> p = {
      {"gate", Access::read, kFloat, false, 8, "gate projection [tokens, f]"},
      {"up", Access::read, kFloat, false, 8, "up projection [tokens, f]"},
      {"y", Access::write, kFloat, false, 8, "silu(gate) * up [tokens, f] (may be the data of gate or up)"},
  };
  return p;
}

std::string swiglu_check(const TaskShape& t) {
  const auto& s = swiglu_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                      kutil::same_shape(s, p, 1, 0), kutil::same_shape(s, p, 2, 0)});
}

Cost swiglu_cost(const TaskShape& t) {
  if (t.ports.size() != swiglu_ports().size()) return {};
  return kutil::io_cost(swiglu_ports(), t, 5 * rows_cols(t.ports[0]));
}

void swiglu_cpu(KernelContext& ctx) {
  kutil::validate(ctx, swiglu_ports(), swiglu_check);
  const TensorView &g = ctx.port(0), &u = ctx.port(1), &y = ctx.port(2);
  kutil::dispatch_float(g.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    kutil::run_widest([&] {
      for (int64_t r = 0; r < g.rows; ++r) {
        const T* gr = row<const T>(g, r);
        const T* ur = row<const T>(u, r);
        T* yr = row<T>(y, r);
        for (int64_t j = 0; j < g.cols; ++j) {
          const T a = gr[j];
          yr[j] = a / (T(1) + vexp(-a)) * ur[j];
        }
      }
    });
  });
}

const std::vector<PortSpec>& tanh_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input"},
      {"y", Access::write, kFloat, false, 8, "tanh(x), shape of x (may be the same data)"},
  };
  return p;
}

std::string tanh_check(const TaskShape& t) {
  const auto& s = tanh_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_shape(s, p, 1, 0)});
}

Cost tanh_cost(const TaskShape& t) {
  if (t.ports.size() != tanh_ports().size()) return {};
  return kutil::io_cost(tanh_ports(), t, 6 * rows_cols(t.ports[0]));
}

void tanh_cpu(KernelContext& ctx) {
  kutil::validate(ctx, tanh_ports(), tanh_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      for (int64_t j = 0; j < x.cols; ++j) yr[j] = std::tanh(xr[j]);
    }
  });
}

const std::vector<PortSpec>& l2n_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [tokens, d]"},
      {"y", Access::write, kFloat, false, 8, "x / max(||x||, eps) row-wise, shape of x (may be the same data)"},
  };
  return p;
}

std::string l2n_check(const TaskShape& t) {
  const auto& s = l2n_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_shape(s, p, 1, 0),
                      eps_check(t.args)});
}

Cost l2n_cost(const TaskShape& t) {
  if (t.ports.size() != l2n_ports().size()) return {};
  return kutil::io_cost(l2n_ports(), t, 3 * rows_cols(t.ports[0]));
}

void l2n_cpu(KernelContext& ctx) {
  kutil::validate(ctx, l2n_ports(), l2n_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      const double sq = sum8(x.cols, [xr](int64_t j) { return double(xr[j]) * double(xr[j]); });
      const T f = T(1.0 / std::max(std::sqrt(sq), eps));
      for (int64_t j = 0; j < x.cols; ++j) yr[j] = xr[j] * f;
    }
  });
}

}  // namespace ymlopt::transformer
