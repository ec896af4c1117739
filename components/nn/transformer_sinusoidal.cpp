// nn.sinusoidal_positions: the sinusoidal position table (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include <cmath>

namespace ymlopt::transformer {

// ============================================================ nn.sinusoidal_positions

const std::vector<PortSpec>& sinus_ports() {
  static const std::vector<PortSpec> p = {
      {"y", Access::write, kFloat, false, 2, "position table [seq, d] (row p: position p + offset)"},
  };
  return p;
}

std::string sinus_check(const TaskShape& t) {
  const auto& s = sinus_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), nonneg_param(a, "offset"),
                            kutil::one_of(a, "layout", {"interleaved", "concat"})});
      !m.empty())
    return m;
  if (!(a.get_float("base") > 0)) return "param 'base' is " + a.get("base").text + ": must be > 0";
  return "";
}

Cost sinus_cost(const TaskShape& t) {
  if (t.ports.size() != sinus_ports().size()) return {};
  return kutil::io_cost(sinus_ports(), t, 2 * rows_cols(t.ports[0]));
}

void sinus_cpu(KernelContext& ctx) {
  kutil::validate(ctx, sinus_ports(), sinus_check);
  const TensorView& y = ctx.port(0);
  const double base = ctx.arg_float("base");
  const int64_t offset = ctx.arg_int("offset"), d = y.cols;
  const bool concat = ctx.arg_string("layout") == "concat";
  kutil::dispatch_float(y.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const int64_t nf = concat ? d / 2 : (d + 1) / 2;  // frequencies
    std::vector<double> inv(static_cast<std::size_t>(nf));
    for (int64_t i = 0; i < nf; ++i)
      inv[static_cast<std::size_t>(i)] =
          concat ? std::exp(-double(i) * std::log(base) / double(std::max<int64_t>(nf - 1, 1)))
                 : std::pow(base, -2.0 * double(i) / double(d));
    for (int64_t r = 0; r < y.rows; ++r) {
      T* yr = row<T>(y, r);
      const double pos = double(r + offset);
      if (concat) {
        for (int64_t i = 0; i < nf; ++i) {
          const double ang = pos * inv[static_cast<std::size_t>(i)];
          yr[i] = T(std::sin(ang));
          yr[nf + i] = T(std::cos(ang));
        }
        if (d % 2) yr[d - 1] = T(0);
      } else {
        for (int64_t j = 0; j < d; ++j) {
          const double ang = pos * inv[static_cast<std::size_t>(j / 2)];
          yr[j] = T(j % 2 ? std::cos(ang) : std::sin(ang));
        }
      }
    }
  });
}

}  // namespace ymlopt::transformer
