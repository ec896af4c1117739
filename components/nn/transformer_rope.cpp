// nn.rope: rotary position embedding in place (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include <cmath>

namespace ymlopt::transformer {

// ============================================================ nn.rope

const std::vector<PortSpec>& rope_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read_write, kFloat, false, 2, "queries or keys [tokens, heads*dh], rotated in place"},
      {"positions", Access::read, {DType::i32}, true, 2,
       "the position of each row [tokens] (nn.positions; generation at a runtime offset; < 0: an idle row, left "
       "as it is); unbound: row % seq + offset"},
  };
  return p;
}

RopeDims rope_dims(const TaskShape& t) {
  const Args& a = t.args;
  RopeDims d{};
  d.heads = std::max<int64_t>(a.get_int("heads"), 1);
  d.dh = t.ports[0].cols / d.heads;
  d.rd = a.get_int("rotary_dim") > 0 ? a.get_int("rotary_dim") : d.dh;
  d.seq = seq_len(a, t.ports[0].rows);
  return d;
}

std::string rope_check(const TaskShape& t) {
  const auto& s = rope_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), positive_param(a, "heads"), nonneg_param(a, "seq"),
                            nonneg_param(a, "offset"), nonneg_param(a, "rotary_dim"),
                            kutil::one_of(a, "style", {"half", "interleaved"})});
      !m.empty())
    return m;
  const int64_t heads = a.get_int("heads");
  if (p[0].cols % heads != 0)
    return "port 'x' is " + dims(p[0]) + ": " + to_string(p[0].cols) + " columns are not a multiple of heads=" +
           to_string(heads);
  const RopeDims d = rope_dims(t);
  if (d.rd > d.dh)
    return "param 'rotary_dim' is " + to_string(d.rd) + ": more than the head dim " + to_string(d.dh);
  if (d.rd % 2 != 0)
    return a.get_int("rotary_dim") > 0
               ? "param 'rotary_dim' is " + to_string(d.rd) + ": must be even"
               : "port 'x' is " + dims(p[0]) + ": head dim " + to_string(d.dh) + " (columns / heads=" +
                     to_string(heads) + ") must be even";
  if (!(a.get_float("base") > 0)) return "param 'base' is " + a.get("base").text + ": must be > 0";
  if (p[1].bound() && num_ids(p[1]) != p[0].rows)
    return "port 'positions' is " + dims(p[1]) + " but 'x' has " + to_string(p[0].rows) + " rows (one position each)";
  return "";
}

Cost rope_cost(const TaskShape& t) {
  if (t.ports.size() != rope_ports().size() || t.args.get_int("heads") < 1) return {};
  const RopeDims d = rope_dims(t);
  return kutil::io_cost(rope_ports(), t, 3 * double(t.ports[0].rows) * double(d.heads) * double(d.rd));
}

void rope_cpu(KernelContext& ctx) {
  kutil::validate(ctx, rope_ports(), rope_check);
  const TensorView &x = ctx.port(0), &pos = ctx.port(1);
  const RopeDims d = rope_dims(TaskShape{ctx.ports(), ctx.args()});
  const int64_t t = x.rows, half = d.rd / 2;
  if (t == 0 || half == 0) return;
  const double base = ctx.arg_float("base");
  const int64_t offset = ctx.arg_int("offset");
  const bool interleaved = ctx.arg_string("style") == "interleaved";
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    std::vector<double> inv_freq(static_cast<std::size_t>(half));
    for (int64_t i = 0; i < half; ++i)
      inv_freq[static_cast<std::size_t>(i)] = std::pow(base, -2.0 * double(i) / double(d.rd));
    // cos/sin per distinct position: [npos, half]; rows map to table rows
    const std::int32_t* given = pos.bound() ? static_cast<const std::int32_t*>(pos.data) : nullptr;
    const int64_t npos = given ? t : std::min(d.seq, t);
    std::vector<T> cs(static_cast<std::size_t>(npos * half)), sn(cs.size());
    for (int64_t p = 0; p < npos; ++p) {
      const double at = given ? double(given[p]) : double(p + offset);
      for (int64_t i = 0; i < half; ++i) {  // a negative position: an idle row (nn.positions), left as it is
        const double ang = at < 0 ? 0.0 : at * inv_freq[static_cast<std::size_t>(i)];
        cs[static_cast<std::size_t>(p * half + i)] = T(std::cos(ang));
        sn[static_cast<std::size_t>(p * half + i)] = T(std::sin(ang));
      }
    }
    for (int64_t r = 0; r < t; ++r) {
      const int64_t p = given ? r : r % d.seq;
      const T* c = cs.data() + p * half;
      const T* s = sn.data() + p * half;
      T* xr = row<T>(x, r);
      for (int64_t h = 0; h < d.heads; ++h) {
        T* xh = xr + h * d.dh;
        if (interleaved) {
          for (int64_t i = 0; i < half; ++i) {
            const T a = xh[2 * i], b = xh[2 * i + 1];
            xh[2 * i] = a * c[i] - b * s[i];
            xh[2 * i + 1] = b * c[i] + a * s[i];
          }
        } else {
          T* x2 = xh + half;
          for (int64_t i = 0; i < half; ++i) {
            const T a = xh[i], b = x2[i];
            xh[i] = a * c[i] - b * s[i];
            x2[i] = b * c[i] + a * s[i];
          }
        }
      }
    }
  });
}

}  // namespace ymlopt::transformer
