// The KV cache of generation (transformer_internal.hpp): nn.positions turns a
// position counter into the positions of a step's rows, nn.kv_append writes the
// step's keys or values at those rows of a cache, and nn.kv_attention attends
// each query to the cache rows up to its own position. Prefill (the prompt's
// rows) and each decode step (one row) are the same tasks with different row
// counts; the positions are read at run time, so one compiled loop body serves
// every step.
#include "nn/transformer_internal.hpp"

#include <immintrin.h>

#include <cstring>

#include <ymlopt/half.hpp>

namespace ymlopt::transformer {

namespace {

const std::int32_t* ints(const TensorView& v) { return static_cast<const std::int32_t*>(v.data); }

/// "" when port i holds one i32 position per row of port `rows_of`.
std::string one_position_per_row(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                 std::size_t rows_of) {
  if (num_ids(p[i]) == p[rows_of].rows) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but '" + s[rows_of].name + "' has " +
         to_string(p[rows_of].rows) + " rows (one position each)";
}

/// Throws unless every position is a row of a cache of `ctx` rows.
void check_positions(const TensorView& pos, int64_t n, int64_t ctx, const char* what) {
  const std::int32_t* p = ints(pos);
  for (int64_t r = 0; r < n; ++r)
    if (p[r] < 0 || p[r] >= ctx)
      throw KernelError("position " + to_string(p[r]) + " (row " + to_string(r) + ") is outside the " + what +
                        "'s " + to_string(ctx) + " rows: the context is full (give the cache more rows)");
}

}  // namespace

// ============================================================ nn.positions

const std::vector<PortSpec>& positions_ports() {
  static const std::vector<PortSpec> p = {
      {"pos", Access::read_write, {DType::i32}, false, 1, "tokens already in the cache [1]; advanced by the rows"},
      {"positions", Access::write, {DType::i32}, false, 2, "the positions of this step's rows [rows]: pos, pos + 1, ..."},
  };
  return p;
}

std::string positions_check(const TaskShape& t) {
  const auto& s = positions_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (p[0].rows * p[0].cols != 1) return "port 'pos' is " + dims(p[0]) + ": a counter of one element";
  if (num_ids(p[1]) < 0) return "port 'positions' is " + dims(p[1]) + ": expected shape [rows] or [rows, 1]";
  return "";
}

Cost positions_cost(const TaskShape& t) { return kutil::io_cost(positions_ports(), t, 0); }

void positions_cpu(KernelContext& ctx) {
  kutil::validate(ctx, positions_ports(), positions_check);
  auto* pos = static_cast<std::int32_t*>(ctx.port(0).data);
  auto* out = static_cast<std::int32_t*>(ctx.port(1).data);
  const int64_t n = num_ids(ctx.port(1));
  if (*pos < 0) throw KernelError("port 'pos' holds " + to_string(*pos) + ": a count of tokens is >= 0");
  if (int64_t(*pos) + n > INT32_MAX) throw KernelError("port 'pos' would pass 2^31 - 1");
  for (int64_t r = 0; r < n; ++r) out[r] = std::int32_t(*pos + r);
  *pos += std::int32_t(n);
}

// ============================================================ cache storage
// A cache holds its rows in the activations' dtype, in f16 (f32 activations),
// or in int8 with one f32 scale per row and head: code = round(x / s),
// s = max|x| / 127 over the head's dh values (symmetric, per token and head).

namespace {

bool cache_dtype_ok(DType cache, DType act) { return cache == act || cache == DType::i8 || (cache == DType::f16 && act == DType::f32); }

/// "" when `cache` (port c) can store rows of dtype `act` with the scale port sc
/// bound exactly when it is int8, one scale per row and head.
std::string check_cache(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t c, std::size_t sc,
                        DType act, int64_t heads) {
  if (!cache_dtype_ok(p[c].dtype, act))
    return "port '" + s[c].name + "' has dtype " + dtype_name(p[c].dtype) + ": a cache of " + dtype_name(act) +
           " rows is " + dtype_name(act) + ", f16 (f32 rows) or i8 (with scales)";
  const bool i8 = p[c].dtype == DType::i8;
  if (i8 && !p[sc].bound()) return "port '" + s[c].name + "' is i8: bind '" + s[sc].name + "' (a scale per row and head)";
  if (!i8 && p[sc].bound())
    return "port '" + s[sc].name + "' is bound but '" + s[c].name + "' is " + dtype_name(p[c].dtype) + ", not i8";
  if (i8 && (p[sc].rows != p[c].rows || p[sc].cols != heads))
    return "port '" + s[sc].name + "' is " + dims(p[sc]) + " but expected " + rc(p[c].rows, heads) + " (a scale per row of '" +
           s[c].name + "' and head)";
  if (i8 && p[c].cols % heads != 0)
    return "port '" + s[c].name + "' is " + dims(p[c]) + ": " + to_string(p[c].cols) + " columns are not a multiple of " +
           to_string(heads) + " heads";
  return "";
}

/// Stores row `x` (n values, `heads` heads) as cache row `dst` (its scales at `scale`).
template <class T> void store_row(const T* x, int64_t n, int64_t heads, const TensorView& cache, int64_t row, float* scale) {
  char* dst = static_cast<char*>(cache.data) + std::size_t(row) * std::size_t(cache.ld) * dtype_size(cache.dtype);
  switch (cache.dtype) {
    case DType::f16: {
      auto* d = reinterpret_cast<std::uint16_t*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = half::f16_bits_from_double(double(x[j]));
      break;
    }
    case DType::i8: {
      auto* d = reinterpret_cast<std::int8_t*>(dst);
      const int64_t dh = n / heads;
      for (int64_t h = 0; h < heads; ++h) {
        double amax = 0;
        for (int64_t j = h * dh; j < (h + 1) * dh; ++j) amax = std::max(amax, std::fabs(double(x[j])));
        const double sc = amax / 127.0;
        scale[h] = float(sc);
        for (int64_t j = h * dh; j < (h + 1) * dh; ++j)
          d[j] = sc > 0 ? std::int8_t(std::clamp(std::nearbyint(double(x[j]) / double(float(sc))), -127.0, 127.0)) : 0;
      }
      break;
    }
    default: std::memcpy(dst, x, std::size_t(n) * sizeof(T));
  }
}

/// Rows [0, rows) of a cache in T: as stored, or widened (f16), or codes times
/// their scales (i8) into `out` [rows, cols] (leading dimension cols).
template <class T>
const T* cache_rows(const TensorView& cache, const TensorView& scale, int64_t rows, int64_t heads, std::vector<T>& out,
                    int64_t* ld) {
  if (cache.dtype == dtype_of<T>()) {
    *ld = ld_of(cache);
    return static_cast<const T*>(cache.data);
  }
  const int64_t n = cache.cols, dh = n / heads;
  out.resize(std::size_t(rows * n));
  *ld = n;
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out.data() + r * n;
    if (cache.dtype == DType::f16) {
      const auto* c = static_cast<const std::uint16_t*>(cache.data) + r * cache.ld;
      widen_f16(c, n, o);
    } else {
      const auto* c = static_cast<const std::int8_t*>(cache.data) + r * cache.ld;
      const float* sc = static_cast<const float*>(scale.data) + r * scale.ld;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = h * dh; j < (h + 1) * dh; ++j) o[j] = T(c[j]) * T(sc[h]);
    }
  }
  return out.data();
}

}  // namespace

// f16 -> float, 8 at a time with F16C where the CPU has it (exact either way).
__attribute__((target("avx,f16c"))) static void widen_f16_f16c(const std::uint16_t* c, int64_t n, float* o) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(o + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + j))));
  for (; j < n; ++j) o[j] = float(half::f16_bits_to_double(c[j]));
}

void widen_f16_scalar(const std::uint16_t* c, int64_t n, float* o) {
  for (int64_t j = 0; j < n; ++j) o[j] = float(half::f16_bits_to_double(c[j]));
}

void widen_f16(const std::uint16_t* c, int64_t n, float* o) {
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (f16c) widen_f16_f16c(c, n, o);
  else widen_f16_scalar(c, n, o);
}

void widen_f16(const std::uint16_t* c, int64_t n, double* o) {
  for (int64_t j = 0; j < n; ++j) o[j] = half::f16_bits_to_double(c[j]);
}

// ============================================================ nn.kv_append

const std::vector<PortSpec>& kv_append_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 2, "this step's keys or values [rows, width]"},
      {"positions", Access::read, {DType::i32}, false, 2, "the cache row of each row of x [rows]"},
      {"cache", Access::read_write, {DType::f32, DType::f64, DType::f16, DType::i8}, false, 2,
       "the cache [context, width] in x's dtype, f16 or i8; only the rows named are written"},
      {"scale", Access::read_write, {DType::f32}, true, 2, "i8 cache: one scale per row and head [context, heads]"},
  };
  return p;
}

std::string kv_append_check(const TaskShape& t) {
  const auto& s = kv_append_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), positive_param(t.args, "heads"), one_position_per_row(s, p, 1, 0)});
      !m.empty())
    return m;
  if (auto m = check_cache(s, p, 2, 3, p[0].dtype, t.args.get_int("heads")); !m.empty()) return m;
  if (p[2].cols != p[0].cols)
    return "port 'cache' is " + dims(p[2]) + " but 'x' is " + dims(p[0]) + ": the widths must match";
  if (p[0].rows > p[2].rows)
    return "port 'x' has " + to_string(p[0].rows) + " rows but the cache holds " + to_string(p[2].rows) +
           ": the prompt is longer than the context";
  return "";
}

Cost kv_append_cost(const TaskShape& t) {
  Cost c;
  if (t.ports.size() != kv_append_ports().size()) return c;
  // x read, its rows of the cache (and their scales) written
  c.bytes = kutil::bytes_of(t.ports[0]) + kutil::bytes_of(t.ports[1]) +
            double(t.ports[0].rows) * double(t.ports[0].cols) * double(dtype_size(t.ports[2].dtype)) +
            (t.ports[3].bound() ? double(t.ports[0].rows) * double(t.ports[3].cols) * 4 : 0);
  return c;
}

void kv_append_cpu(KernelContext& ctx) {
  kutil::validate(ctx, kv_append_ports(), kv_append_check);
  const TensorView &x = ctx.port(0), &pos = ctx.port(1), &cache = ctx.port(2), &scale = ctx.port(3);
  check_positions(pos, x.rows, cache.rows, "cache");
  const std::int32_t* p = ints(pos);
  const int64_t heads = ctx.arg_int("heads");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < x.rows; ++r)
      store_row(row<T>(x, r), x.cols, heads, cache, p[r],
                scale.bound() ? static_cast<float*>(scale.data) + std::size_t(p[r]) * std::size_t(scale.ld) : nullptr);
  });
}

// ============================================================ nn.kv_attention

const std::vector<PortSpec>& kv_attention_ports() {
  static const std::vector<PortSpec> p = {
      {"q", Access::read, kFloat, false, 2, "this step's queries [rows, heads*dh]"},
      {"k", Access::read, {DType::f32, DType::f64, DType::f16, DType::i8}, false, 2,
       "the key cache [context, kv_heads*dh]: q's dtype, f16 or i8 (nn.kv_append's storage)"},
      {"v", Access::read, {DType::f32, DType::f64, DType::f16, DType::i8}, false, 2,
       "the value cache [context, kv_heads*dh], stored like k or not"},
      {"positions", Access::read, {DType::i32}, false, 2,
       "the position of each query [rows]: it attends cache rows 0 .. its position"},
      {"y", Access::write, kFloat, false, 2, "output [rows, heads*dh]"},
      {"k_scale", Access::read, {DType::f32}, true, 2, "i8 key cache: its scales [context, kv_heads]"},
      {"v_scale", Access::read, {DType::f32}, true, 2, "i8 value cache: its scales [context, kv_heads]"},
  };
  return p;
}

namespace {

struct KvDims {
  int64_t rows, heads, kv, dh, ctx;
};

KvDims kv_dims(const TaskShape& t) {
  KvDims d{};
  d.rows = t.ports[0].rows;
  d.heads = std::max<int64_t>(t.args.get_int("heads"), 1);
  d.kv = t.args.get_int("kv_heads") > 0 ? t.args.get_int("kv_heads") : d.heads;
  d.dh = t.ports[0].cols / d.heads;
  d.ctx = t.ports[1].rows;
  return d;
}

}  // namespace

std::string kv_attention_check(const TaskShape& t) {
  const auto& s = kv_attention_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 4, 0), positive_param(a, "heads"),
                            nonneg_param(a, "kv_heads"), one_position_per_row(s, p, 3, 0)});
      !m.empty())
    return m;
  const int64_t heads = a.get_int("heads");
  const int64_t kv = a.get_int("kv_heads") > 0 ? a.get_int("kv_heads") : heads;
  if (auto m = first_error({check_cache(s, p, 1, 5, p[0].dtype, kv), check_cache(s, p, 2, 6, p[0].dtype, kv)}); !m.empty())
    return m;
  if (heads % kv != 0)
    return "param 'kv_heads' is " + to_string(kv) + ": heads=" + to_string(heads) + " must be a multiple of kv_heads";
  if (p[0].cols % heads != 0 || p[0].cols == 0)
    return "port 'q' is " + dims(p[0]) + ": " + to_string(p[0].cols) + " columns are not a positive multiple of heads=" +
           to_string(heads);
  const KvDims d = kv_dims(t);
  const std::string kvw = "kv_heads=" + to_string(kv) + " x head dim " + to_string(d.dh);
  if (auto m = first_error({expect_shape(s, p, 1, d.ctx, kv * d.dh, kvw), expect_shape(s, p, 2, d.ctx, kv * d.dh, kvw),
                            kutil::same_shape(s, p, 4, 0)});
      !m.empty())
    return m;
  if (a.get_float("scale") < 0 || !std::isfinite(a.get_float("scale")))
    return "param 'scale' is " + a.get("scale").text + ": must be finite and >= 0 (0: 1/sqrt(head dim))";
  return "";
}

constexpr int64_t kKvQueryBlock = 128;

Cost kv_attention_cost(const TaskShape& t) {
  if (t.ports.size() != kv_attention_ports().size() || t.args.get_int("heads") < 1) return {};
  const KvDims d = kv_dims(t);
  // the positions are known at run time only: priced as a full cache
  const double keys = double(d.ctx), es = double(dtype_size(t.ports[0].dtype));
  const double ks = double(dtype_size(t.ports[1].dtype)), vs = double(dtype_size(t.ports[2].dtype));
  Cost c;
  c.flops = double(d.rows) * double(d.heads) * keys * (4 * double(d.dh) + 5);
  c.bytes = es * 2 * double(d.rows) * double(d.heads * d.dh) + (ks + vs) * keys * double(d.kv * d.dh);
  c.extra_bytes = es * double(std::min(d.rows, kKvQueryBlock)) * keys;
  return c;
}

void kv_attention_cpu(KernelContext& ctx) {
  kutil::validate(ctx, kv_attention_ports(), kv_attention_check);
  const TensorView &q = ctx.port(0), &k = ctx.port(1), &v = ctx.port(2), &pos = ctx.port(3), &y = ctx.port(4),
                   &ks = ctx.port(5), &vs = ctx.port(6);
  const KvDims d = kv_dims(TaskShape{ctx.ports(), ctx.args()});
  if (d.rows == 0) return;
  check_positions(pos, d.rows, d.ctx, "key cache");
  const double sp = ctx.arg_float("scale");
  const double scale = sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh));
  const std::int32_t* p = ints(pos);
  const int64_t group = d.heads / d.kv, bq = std::min(d.rows, kKvQueryBlock);
  kutil::dispatch_float(q.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    int64_t most = 0;
    for (int64_t r = 0; r < d.rows; ++r) most = std::max<int64_t>(most, p[r] + 1);
    std::vector<T> sc(static_cast<std::size_t>(bq * most));
    std::vector<double> inv(static_cast<std::size_t>(bq));
    std::vector<int64_t> lim(static_cast<std::size_t>(bq));
    // the cache rows any query reads, in T (widened or dequantized when stored otherwise)
    std::vector<T> kw, vw;
    int64_t ldk = 0, ldv = 0;
    const T* K = cache_rows<T>(k, ks, most, d.kv, kw, &ldk);
    const T* V = cache_rows<T>(v, vs, most, d.kv, vw, &ldv);
    const int64_t ldq = ld_of(q), ldy = ld_of(y);
    for (int64_t i0 = 0; i0 < d.rows; i0 += bq) {
      const int64_t nq = std::min(bq, d.rows - i0);
      int64_t nk = 0;
      for (int64_t r = 0; r < nq; ++r) {
        lim[static_cast<std::size_t>(r)] = p[i0 + r] + 1;
        nk = std::max(nk, lim[static_cast<std::size_t>(r)]);
      }
      for (int64_t h = 0; h < d.heads; ++h) {
        const int64_t g = h / group;
        attend_block(static_cast<const T*>(q.data) + i0 * ldq + h * d.dh, ldq, K + g * d.dh, ldk, V + g * d.dh, ldv,
                     static_cast<T*>(y.data) + i0 * ldy + h * d.dh, ldy, nq, nk, d.dh, lim.data(), scale, sc.data(),
                     inv.data());
      }
    }
  });
}

}  // namespace ymlopt::transformer
