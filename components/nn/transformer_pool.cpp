// nn.pool: one row per sequence (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"


namespace ymlopt::transformer {

// ============================================================ nn.pool

const std::vector<PortSpec>& pool_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 2, "input [batch*seq, d]"},
      {"y", Access::write, kFloat, false, 2, "pooled [batch, d]"},
  };
  return p;
}

std::string pool_check(const TaskShape& t) {
  const auto& s = pool_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0),
                            kutil::one_of(a, "mode", {"mean", "sum", "max", "first", "last"}),
                            kutil::one_of(a, "scale", {"none", "sqrt_len"}), whole_sequences(s, p, 0, a),
                            nonneg_param(a, "length")});
      !m.empty())
    return m;
  if (a.get_string("scale") == "sqrt_len" && a.get_string("mode") != "sum")
    return "param 'scale' is 'sqrt_len' but param 'mode' is '" + a.get_string("mode") + "': sqrt_len needs mode 'sum'";
  const int64_t t_ = p[0].rows, sq = seq_len(a, t_), len = a.get_int("length");
  if (len > sq)
    return "param 'length' is " + to_string(len) + ": more than the sequence length " + to_string(sq);
  const int64_t batch = sq > 0 ? t_ / sq : 0;
  return expect_shape(s, p, 1, batch, p[0].cols,
                      to_string(batch) + " sequences of " + to_string(sq) + " rows, " + to_string(p[0].cols) +
                          " features");
}

Cost pool_cost(const TaskShape& t) {
  if (t.ports.size() != pool_ports().size()) return {};
  return kutil::io_cost(pool_ports(), t, rows_cols(t.ports[0]));
}

void pool_cpu(KernelContext& ctx) {
  kutil::validate(ctx, pool_ports(), pool_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  const int64_t t = x.rows, d = x.cols;
  if (t == 0 || d == 0) return;
  const int64_t S = seq_len(ctx.args(), t), batch = t / S;
  const int64_t L = ctx.arg_int("length") > 0 ? ctx.arg_int("length") : S;
  const std::string& mode = ctx.arg_string("mode");
  const bool sqrt_len = ctx.arg_string("scale") == "sqrt_len";
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    std::vector<double> acc(static_cast<std::size_t>(d));
    for (int64_t b = 0; b < batch; ++b) {
      T* yr = row<T>(y, b);
      const int64_t r0 = b * S;
      if (mode == "first" || mode == "last") {
        const T* xr = row<const T>(x, mode == "first" ? r0 : r0 + L - 1);
        std::copy(xr, xr + d, yr);
      } else if (mode == "max") {
        const T* x0 = row<const T>(x, r0);
        std::copy(x0, x0 + d, yr);
        for (int64_t r = 1; r < L; ++r) {
          const T* xr = row<const T>(x, r0 + r);
          for (int64_t j = 0; j < d; ++j) yr[j] = std::max(yr[j], xr[j]);
        }
      } else {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t r = 0; r < L; ++r) {
          const T* xr = row<const T>(x, r0 + r);
          for (int64_t j = 0; j < d; ++j) acc[static_cast<std::size_t>(j)] += double(xr[j]);
        }
        const double div = mode == "mean" ? double(L) : sqrt_len ? std::sqrt(double(L)) : 1.0;
        for (int64_t j = 0; j < d; ++j) yr[j] = T(acc[static_cast<std::size_t>(j)] / div);
      }
    }
  });
}

}  // namespace ymlopt::transformer
