// nn.attention: scaled dot-product attention per head and sequence, blocks of
// 128 queries, two GEMMs per block (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include "tensor/simd.hpp"

namespace ymlopt::transformer {

// ============================================================ nn.attention

const std::vector<PortSpec>& attention_ports() {
  static const std::vector<PortSpec> p = {
      {"q", Access::read, kFloat, false, 2, "queries [tokens, heads*dh] (may be a column slice of a fused qkv)"},
      {"k", Access::read, kFloat, false, 2, "keys [tokens, kv_heads*dh]"},
      {"v", Access::read, kFloat, false, 2, "values [tokens, kv_heads*dh]"},
      {"y", Access::write, kFloat, false, 2,
       "output [tokens, heads*dh]; only the columns of heads [head_begin, head_end) are written"},
  };
  return p;
}

AttnDims attn_dims(const TaskShape& t) {
  AttnDims d{};
  const Args& a = t.args;
  d.t = t.ports[0].rows;
  d.heads = std::max<int64_t>(a.get_int("heads"), 1);
  d.kv = a.get_int("kv_heads") > 0 ? a.get_int("kv_heads") : d.heads;
  d.dh = t.ports[0].cols / d.heads;
  d.seq = seq_len(a, d.t);
  d.batch = d.seq > 0 ? d.t / d.seq : 0;
  d.hb = a.get_int("head_begin");
  d.he = a.get_int("head_end");
  if (d.hb == 0 && d.he == 0) d.he = d.heads;
  return d;
}

std::string attention_check(const TaskShape& t) {
  const auto& s = attention_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                            kutil::same_dtype(s, p, 3, 0), positive_param(a, "heads"), nonneg_param(a, "kv_heads")});
      !m.empty())
    return m;
  const int64_t heads = a.get_int("heads");
  const int64_t kv = a.get_int("kv_heads") > 0 ? a.get_int("kv_heads") : heads;
  if (heads % kv != 0)
    return "param 'kv_heads' is " + to_string(kv) + ": heads=" + to_string(heads) +
           " must be a multiple of kv_heads";
  if (p[0].cols % heads != 0 || p[0].cols == 0)
    return "port 'q' is " + dims(p[0]) + ": " + to_string(p[0].cols) +
           " columns are not a positive multiple of heads=" + to_string(heads);
  const AttnDims d = attn_dims(t);
  const std::string kvw = "kv_heads=" + to_string(kv) + " x head dim " + to_string(d.dh);
  if (auto m = first_error({expect_shape(s, p, 1, d.t, kv * d.dh, kvw), expect_shape(s, p, 2, d.t, kv * d.dh, kvw),
                            kutil::same_shape(s, p, 3, 0), whole_sequences(s, p, 0, a)});
      !m.empty())
    return m;
  if (d.hb < 0 || d.hb >= d.he || d.he > heads)
    return "head range [" + to_string(a.get_int("head_begin")) + ", " + to_string(a.get_int("head_end")) +
           ") (params head_begin, head_end) is not a non-empty range within [0, " + to_string(heads) + ")";
  if (a.get_float("scale") < 0 || !std::isfinite(a.get_float("scale")))
    return "param 'scale' is " + a.get("scale").text + ": must be finite and >= 0 (0: 1/sqrt(head dim))";
  if (auto m = nonneg_param(a, "window"); !m.empty()) return m;
  if (a.get_int("window") > 0 && !a.get_bool("causal")) return "param 'window' is a causal mask's: set causal=true";
  return "";
}

constexpr int64_t kQueryBlock = 128;

Cost attention_cost(const TaskShape& t) {
  if (t.ports.size() != attention_ports().size() || t.args.get_int("heads") < 1) return {};
  const AttnDims d = attn_dims(t);
  if (d.seq <= 0 || d.he <= d.hb) return {};
  const double nh = double(d.he - d.hb), S = double(d.seq), B = double(d.batch);
  const double w = double(t.args.get_int("window"));
  const double pairs = !t.args.get_bool("causal") ? S * S
                       : w > 0 && w < S ? w * (w + 1) / 2 + (S - w) * w  // a window's band
                                        : S * (S + 1) / 2;
  Cost c;
  c.flops = B * nh * pairs * (4 * double(d.dh) + 5);
  const double es = double(dtype_size(t.ports[0].dtype));
  const int64_t group = d.heads / d.kv;
  const double kv_used = double((d.he - 1) / group - d.hb / group + 1);
  c.bytes = es * double(d.t) * double(d.dh) * (2 * nh + 2 * kv_used);
  c.extra_bytes = es * double(std::min<int64_t>(d.seq, kQueryBlock)) * S;
  return c;
}

template <class T>
void attend_block(const T* Q, int64_t ldq, const T* K, int64_t ldk, const T* V, int64_t ldv, T* Y, int64_t ldy,
                  int64_t nq, int64_t nk, int64_t dh, const int64_t* lo, const int64_t* lim, double scale, T* sc,
                  double* inv) {
  // scores = scale * Q K^T: [nq, nk], leading dimension nk
  gemm::gemm(false, true, nq, nk, dh, T(scale), Q, ldq, K, ldk, T(0), sc, nk, kModelGemm);
  kutil::run_widest([=] {  // the softmax rows: vexp on 16 lanes with AVX-512
    for (int64_t r = 0; r < nq; ++r) {
      T* srow = sc + r * nk;
      const int64_t f = lo ? lo[r] : 0, l = lim[r];
      const T mx = max8(srow + f, l - f);
      std::fill(srow, srow + f, T(0));
      for (int64_t j = f; j < l; ++j) srow[j] = vexp(srow[j] - mx);
      std::fill(srow + l, srow + nk, T(0));
      inv[r] = 1.0 / sum8(l - f, [srow, f](int64_t j) { return double(srow[f + j]); });
    }
  });
  // Y = P V (unnormalized), then each row times 1/sum
  gemm::gemm(false, false, nq, dh, nk, T(1), sc, nk, V, ldv, T(0), Y, ldy, kModelGemm);
  for (int64_t r = 0; r < nq; ++r) {
    T* yr = Y + r * ldy;
    const T f = T(inv[r]);
    for (int64_t c = 0; c < dh; ++c) yr[c] *= f;
  }
}
template void attend_block<float>(const float*, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                                  int64_t, int64_t, int64_t, const int64_t*, const int64_t*, double, float*, double*);
template void attend_block<double>(const double*, int64_t, const double*, int64_t, const double*, int64_t, double*,
                                   int64_t, int64_t, int64_t, int64_t, const int64_t*, const int64_t*, double, double*,
                                   double*);

namespace {

template <class T>
void attention_kernel(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& y,
                      const AttnDims& d, bool causal, int64_t window, double scale) {
  const int64_t S = d.seq, dh = d.dh, group = d.heads / d.kv;
  const int64_t bq = std::min(S, kQueryBlock);
  std::vector<T> sc(static_cast<std::size_t>(bq * S));  // one [query block, seq] score block
  std::vector<double> inv(static_cast<std::size_t>(bq));
  std::vector<int64_t> lo(static_cast<std::size_t>(bq)), lim(static_cast<std::size_t>(bq));
  const int64_t ldq = ld_of(q), ldk = ld_of(k), ldv = ld_of(v), ldy = ld_of(y);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = d.hb; h < d.he; ++h) {
      const int64_t g = h / group;
      const T* Q = static_cast<const T*>(q.data) + b * S * ldq + h * dh;
      const T* K = static_cast<const T*>(k.data) + b * S * ldk + g * dh;
      const T* V = static_cast<const T*>(v.data) + b * S * ldv + g * dh;
      T* Y = static_cast<T*>(y.data) + b * S * ldy + h * dh;
      for (int64_t i0 = 0; i0 < S; i0 += bq) {
        // keys [k0, k0 + nk); a window: query i sees i - window < j <= i
        const int64_t k0 = window_first(i0, window);
        const int64_t nq = std::min(bq, S - i0), nk = (causal ? i0 + nq : S) - k0;
        for (int64_t r = 0; r < nq; ++r) {
          const int64_t i = i0 + r;
          lim[static_cast<std::size_t>(r)] = causal ? i + 1 - k0 : nk;
          lo[static_cast<std::size_t>(r)] = window_first(i, window) - k0;
        }
        attend_block(Q + i0 * ldq, ldq, K + k0 * ldk, ldk, V + k0 * ldv, ldv, Y + i0 * ldy, ldy, nq, nk, dh, lo.data(),
                     lim.data(), scale, sc.data(), inv.data());
      }
    }
  }
}

}  // namespace

void attention_cpu(KernelContext& ctx) {
  kutil::validate(ctx, attention_ports(), attention_check);
  const TensorView &q = ctx.port(0), &k = ctx.port(1), &v = ctx.port(2), &y = ctx.port(3);
  const AttnDims d = attn_dims(TaskShape{ctx.ports(), ctx.args()});
  if (d.t == 0) return;
  const double sp = ctx.arg_float("scale");
  const double scale = sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh));
  const bool causal = ctx.arg_bool("causal");
  const int64_t window = ctx.arg_int("window");
  kutil::dispatch_float(q.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    attention_kernel<T>(q, k, v, y, d, causal, window, scale);
  });
}

}  // namespace ymlopt::transformer
