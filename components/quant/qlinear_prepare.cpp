// Preparation of a quant::linear call (see qlinear_internal.hpp): the activations
// quantized per token into the kernels' byte layout (Acts), the weight scales,
// code sums and zero-point terms in f32 (WPrep), and the int4 lane corrections.
// Each step has a scalar, an AVX2 and an AVX-512 version giving the same values.
#include "quant/qlinear_internal.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ymlopt::quant::linear_impl {

namespace {

/// Quantizes one row: returns a = max|x| / 127 and writes xq (natural k order).
/// (prepare_row_avx512 applies the same IEEE steps on 16 lanes.)
__attribute__((always_inline)) inline float quantize_row_body(const float* x, int64_t k, int8_t* out) {
  float amax = 0;
  for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[c]));
  if (!(amax > 0) || !std::isfinite(amax)) {
    for (int64_t c = 0; c < k; ++c) out[c] = 0;
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  for (int64_t c = 0; c < k; ++c) {
    float v = std::nearbyint(x[c] * inv);
    v = std::min(127.0f, std::max(-127.0f, v));
    out[c] = static_cast<int8_t>(v);
  }
  return amax / 127.0f;
}
float quantize_row_generic(const float* x, int64_t k, int8_t* out) { return quantize_row_body(x, k, out); }
// The same loops compiled for AVX2 (the compiler vectorizes them 8 wide; same values).
__attribute__((target("avx2,fma"))) float quantize_row_avx2(const float* x, int64_t k, int8_t* out) {
  return quantize_row_body(x, k, out);
}

/// 16 floats -> 16 int8 codes: the rule of quantize_row_generic on 16 lanes.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m128i codes16(__m512 v, __m512 inv) {
  __m512 t = _mm512_roundscale_ps(_mm512_mul_ps(v, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  t = _mm512_min_ps(_mm512_set1_ps(127.0f), _mm512_max_ps(_mm512_set1_ps(-127.0f), t));
  return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(t));
}

/// A span of the panel kernels' activations: codes (the rule of
/// quantize_row_generic through codes16), their sum in *sum; returns the scale.
__attribute__((target("avx512f,avx512bw,avx512vl"))) float quantize_span_avx512(const float* x, int64_t len,
                                                                                int8_t* out, int32_t* sum) {
  auto mask = [len](int64_t c) { return static_cast<__mmask16>(len - c >= 16 ? 0xffff : (1u << (len - c)) - 1); };
  __m512 mx = _mm512_setzero_ps();
  for (int64_t c = 0; c < len; c += 16) mx = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(mask(c), x + c)), mx);
  const float amax = _mm512_reduce_max_ps(mx);
  if (!(amax > 0) || !std::isfinite(amax)) {
    std::memset(out, 0, static_cast<std::size_t>(len));
    *sum = 0;
    return 0.0f;
  }
  const __m512 inv = _mm512_set1_ps(127.0f / amax);
  __m512i acc = _mm512_setzero_si512();
  for (int64_t c = 0; c < len; c += 16) {
    const __m128i q = codes16(_mm512_maskz_loadu_ps(mask(c), x + c), inv);  // 0 past len
    _mm_mask_storeu_epi8(out + c, mask(c), q);
    acc = _mm512_add_epi32(acc, _mm512_cvtepi8_epi32(q));
  }
  *sum = _mm512_reduce_add_epi32(acc);
  return amax / 127.0f;
}

/// Sum of 16 int8 codes (exact).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline int32_t sum16(__m128i c) {
  alignas(16) int8_t e[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(e), c);
  int32_t s = 0;
  for (int l = 0; l < 16; ++l) s += e[l];
  return s;
}

/// AVX-512 version of one row of prepare_acts: the same codes, written straight into
/// the kernel layout (u8 = code + 128 for int8 weights; s8 in k_of order for int4),
/// padding included; returns a. xsum (if not null) gets Σ codes per group of gsize.
__attribute__((target("avx512f,avx512bw,avx512vl"))) float prepare_row_avx512(const float* x, int64_t k, int64_t kp,
                                                                              bool w4, uint8_t* dst, int32_t* xsum,
                                                                              int64_t gsize) {
  auto load = [ x, k ](int64_t c) __attribute__((target("avx512f"))) {
    const int64_t r = k - c;
    if (r >= 16) return _mm512_loadu_ps(x + c);
    if (r <= 0) return _mm512_setzero_ps();
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << r) - 1), x + c);
  };
  __m512 mx = _mm512_setzero_ps();
  for (int64_t c = 0; c < k; c += 16) mx = _mm512_max_ps(_mm512_abs_ps(load(c)), mx);
  alignas(64) float e[16];
  _mm512_store_ps(e, mx);
  float amax = 0;
  for (int l = 0; l < 16; ++l) amax = std::max(amax, e[l]);
  if (!(amax > 0) || !std::isfinite(amax)) {
    std::memset(dst, w4 ? 0 : 128, static_cast<std::size_t>(kp));
    return 0.0f;
  }
  const __m512 inv = _mm512_set1_ps(127.0f / amax);
  if (!w4) {
    for (int64_t c = 0; c < kp; c += 16) {
      const __m128i q = codes16(load(c), inv);
      if (xsum && c < k) xsum[c / gsize] += sum16(q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), _mm_xor_si128(q, _mm_set1_epi8(-128)));
    }
  } else {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t c = 0; c < kp; c += 32) {
      const __m512 v0 = load(c), v1 = load(c + 16);
      const __m128i qe = codes16(_mm512_permutex2var_ps(v0, even, v1), inv);
      const __m128i qo = codes16(_mm512_permutex2var_ps(v0, odd, v1), inv);
      if (xsum && c < k) xsum[c / gsize] += sum16(qe) + sum16(qo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), qe);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c + 16), qo);
    }
  }
  return amax / 127.0f;
}

}  // namespace

/// `path`: the kernel path that runs (Isa::best resolved).
Acts prepare_acts(const float* x, int64_t m, int64_t ldx, const QWeight& w, bool need_xsum, Isa path) {
  const bool fast = path == Isa::avx512_vnni;
  Acts A;
  A.m = m;
  A.k = w.k;
  A.kp = (w.k + kChunk - 1) / kChunk * kChunk;
  A.nch = A.kp / kChunk;
  A.w4 = w.bits == 4;
  A.groups = w.groups();
  const uint8_t pad = A.w4 ? 0 : 128;
  if (fast)
    A.q.resize(static_cast<std::size_t>(m * A.kp));  // every byte is written
  else
    A.q.assign(static_cast<std::size_t>(m * A.kp), pad);
  A.a.resize(static_cast<std::size_t>(m));
  if (need_xsum) A.xsum.assign(static_cast<std::size_t>(m * A.groups), 0);
  std::vector<int8_t> row(static_cast<std::size_t>(A.kp), 0);
  const int64_t gsize = w.group > 0 ? w.group : std::max<int64_t>(w.k, 1);
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * ldx;
    if (fast) {
      A.a[static_cast<std::size_t>(i)] = prepare_row_avx512(xr, w.k, A.kp, A.w4, A.q.data() + i * A.kp,
                                                            need_xsum ? A.xsum.data() + i * A.groups : nullptr, gsize);
      continue;
    }
    A.a[static_cast<std::size_t>(i)] =
        path == Isa::avx2 ? quantize_row_avx2(xr, w.k, row.data()) : quantize_row_generic(xr, w.k, row.data());
    uint8_t* dst = A.q.data() + i * A.kp;
    if (A.w4) {
      for (int64_t c0 = 0; c0 < A.kp; c0 += kChunk)
        for (int64_t p = 0; p < kChunk; ++p) {
          const int64_t kk = c0 + k_of(true, p);
          if (kk < w.k) dst[c0 + p] = static_cast<uint8_t>(row[static_cast<std::size_t>(kk)]);
        }
    } else {
      for (int64_t c = 0; c < w.k; ++c) dst[c] = static_cast<uint8_t>(row[static_cast<std::size_t>(c)] + 128);
    }
    if (need_xsum)
      for (int64_t c = 0; c < w.k; ++c)
        A.xsum[static_cast<std::size_t>(i * A.groups + c / gsize)] += row[static_cast<std::size_t>(c)];
  }
  return A;
}

PanelActs prepare_panel_acts(const float* x, int64_t m, int64_t ldx, int64_t k, int64_t span, int32_t offset,
                             Isa path) {
  PanelActs A;
  A.m = m;
  A.kq = (k + 3) / 4 * 4;
  A.blocks = k / span;
  A.q.assign(static_cast<std::size_t>(m * A.kq), 0);
  A.a.resize(static_cast<std::size_t>(m * A.blocks));
  A.zc.resize(static_cast<std::size_t>(m * A.blocks));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < A.blocks; ++b) {
      int8_t* q = A.q.data() + i * A.kq + b * span;
      const float* xb = x + i * ldx + b * span;
      const std::size_t at = static_cast<std::size_t>(i * A.blocks + b);
      int32_t sum = 0;
      if (path == Isa::avx512_vnni) {
        A.a[at] = quantize_span_avx512(xb, span, q, &sum);
      } else {
        A.a[at] = path == Isa::scalar ? quantize_row_generic(xb, span, q) : quantize_row_avx2(xb, span, q);
        for (int64_t c = 0; c < span; ++c) sum += q[c];
      }
      A.zc[at] = -offset * sum;
    }
  return A;
}

namespace {

/// Σ of codes per (row, group) for int8 weights; every path gives the same integers.
__attribute__((always_inline)) inline void code_sums_body(const QWeight& w, int32_t* out) {
  const int64_t G = w.groups(), gs = w.group > 0 ? w.group : w.k;
  for (int64_t r = 0; r < w.n; ++r) {
    const int8_t* row = w.q + r * w.q_ld;
    for (int64_t g = 0; g < G; ++g) {
      int32_t s = 0;
      for (int64_t c = g * gs; c < (g + 1) * gs && c < w.k; ++c) s += row[c];
      out[r * G + g] = s;
    }
  }
}
void code_sums_scalar(const QWeight& w, int32_t* out) { code_sums_body(w, out); }
__attribute__((target("avx2,fma"))) void code_sums_avx2(const QWeight& w, int32_t* out) { code_sums_body(w, out); }

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void code_sums_avx512(const QWeight& w, int32_t* out) {
  const int64_t G = w.groups();
  const int64_t nch = (w.k + kChunk - 1) / kChunk;
  const int64_t rem = w.k - (nch - 1) * kChunk;
  const __mmask64 tail = rem == 64 ? ~__mmask64{0} : ((__mmask64{1} << rem) - 1);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t r = 0; r < w.n; ++r) {
    const int8_t* row = w.q + r * w.q_ld;
    if (w.group == 32) {
      for (int64_t c = 0; c < nch; ++c) {
        const __m512i v = _mm512_maskz_loadu_epi8(c + 1 == nch ? tail : ~__mmask64{0}, row + c * kChunk);
        const __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, v);
        alignas(64) int32_t e[16];
        _mm512_store_si512(e, t);
        int32_t lo = 0, hi = 0;
        for (int l = 0; l < 8; ++l) {
          lo += e[l];
          hi += e[l + 8];
        }
        out[r * G + 2 * c] = lo;
        if (2 * c + 1 < G) out[r * G + 2 * c + 1] = hi;
      }
    } else {
      const int64_t cpb = w.group > 0 ? w.group / kChunk : nch;
      for (int64_t g = 0; g < G; ++g) {
        __m512i acc = _mm512_setzero_si512();
        for (int64_t c = g * cpb; c < (g + 1) * cpb && c < nch; ++c) {
          const __m512i v = _mm512_maskz_loadu_epi8(c + 1 == nch ? tail : ~__mmask64{0}, row + c * kChunk);
          acc = _mm512_dpbusd_epi32(acc, ones, v);
        }
        out[r * G + g] = reduce_epi32(acc);
      }
    }
  }
}

}  // namespace

/// `code_sums`: whether int8 weights need their code sums (not on the AVX2 path per
/// channel, which forms Σ xq · c directly).
WPrep prepare_weights(const QWeight& w, Isa path, bool code_sums) {
  WPrep P;
  P.n = w.n;
  P.groups = w.groups();
  const int64_t G = P.groups;
  P.s.resize(static_cast<std::size_t>(w.n * G));
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t g = 0; g < G; ++g) P.s[static_cast<std::size_t>(r * G + g)] = scale_at(w, r, g);
  if (w.bits == 8 && code_sums) {
    P.csum.resize(static_cast<std::size_t>(w.n * G));
    if (w.code_sum) {
      for (int64_t r = 0; r < w.n; ++r)
        for (int64_t g = 0; g < G; ++g) P.csum[static_cast<std::size_t>(r * G + g)] = w.code_sum[r * w.code_sum_ld + g];
    } else if (path == Isa::avx512_vnni) {
      code_sums_avx512(w, P.csum.data());
    } else if (path == Isa::avx2) {
      code_sums_avx2(w, P.csum.data());
    } else {
      code_sums_scalar(w, P.csum.data());
    }
    if (w.group > 0) {
      P.bterm.assign(static_cast<std::size_t>(w.n), 0.0f);
      for (int64_t r = 0; r < w.n; ++r) {
        float b = 0;
        for (int64_t g = 0; g < G; ++g) {
          const std::size_t i = static_cast<std::size_t>(r * G + g);
          b = b + P.s[i] * (128.0f * static_cast<float>(P.csum[i]));
        }
        P.bterm[static_cast<std::size_t>(r)] = b;
      }
    }
  }
  if (w.zero) {
    P.sz_t.resize(static_cast<std::size_t>(w.n * G));
    for (int64_t r = 0; r < w.n; ++r)
      for (int64_t g = 0; g < G; ++g)
        P.sz_t[static_cast<std::size_t>(g * w.n + r)] =
            P.s[static_cast<std::size_t>(r * G + g)] * stored_zero_at(w, r, g);
  }
  return P;
}

/// -8 · Σ xq per (row, block, lane) for symmetric int4 (exact integers).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void lane_zero_init_avx512(Acts& A, const Blocks& B) {
  A.zl.resize(static_cast<std::size_t>(A.m * B.count * 16));
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t i = 0; i < A.m; ++i)
    for (int64_t b = 0; b < B.count; ++b) {
      __m512i acc = _mm512_setzero_si512();
      for (int64_t c = b * B.chunks; c < (b + 1) * B.chunks && c < A.nch; ++c)
        acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512(A.q.data() + i * A.kp + c * kChunk));
      _mm512_storeu_si512(A.zl.data() + (i * B.count + b) * 16, _mm512_mullo_epi32(acc, _mm512_set1_epi32(-8)));
    }
}

void lane_zero_init(Acts& A, const Blocks& B) {
  A.zl.assign(static_cast<std::size_t>(A.m * B.count * 16), 0);
  for (int64_t i = 0; i < A.m; ++i)
    for (int64_t b = 0; b < B.count; ++b)
      for (int64_t c = b * B.chunks; c < (b + 1) * B.chunks && c < A.nch; ++c)
        for (int64_t p = 0; p < kChunk; ++p)
          A.zl[static_cast<std::size_t>((i * B.count + b) * 16 + p / 4)] -=
              8 * static_cast<int8_t>(A.q[static_cast<std::size_t>(i * A.kp + c * kChunk + p)]);
}

namespace {
struct ActsKey {
  std::uint64_t x_id;
  int64_t m, ldx, k, span;
  int32_t offset;
  Isa path;
  bool operator==(const ActsKey&) const = default;
};
struct ActsKeyHash {
  std::size_t operator()(const ActsKey& k) const {
    return hash_fields(k.x_id, k.m, k.ldx, k.k, k.span, k.offset, static_cast<int>(k.path));
  }
};
// Activations live for one layer: a small LRU budget holds every version the
// tasks in flight read.
ContentCache<ActsKey, PanelActs, ActsKeyHash>& kept_acts() {
  static ContentCache<ActsKey, PanelActs, ActsKeyHash> c(cache_budget_from_env("YMLOPT_QLINEAR_ACTS_CACHE_MB", 16));
  return c;
}
}  // namespace

std::shared_ptr<const PanelActs> shared_panel_acts(const float* x, int64_t m, int64_t ldx, int64_t k, int64_t span,
                                                   int32_t offset, Isa path, std::uint64_t x_id) {
  if (x_id) {
    const int64_t kq = (k + 3) / 4 * 4, blocks = k / span;
    auto kept = kept_acts().get(
        ActsKey{x_id, m, ldx, k, span, offset, path}, x_id >> 32,
        [&] { return m * kq + m * blocks * int64_t(sizeof(float) + sizeof(int32_t)); },
        [&](PanelActs& A) { A = prepare_panel_acts(x, m, ldx, k, span, offset, path); });
    if (kept) return kept;
  }
  return std::make_shared<const PanelActs>(prepare_panel_acts(x, m, ldx, k, span, offset, path));
}

ContentCacheStats kept_acts_stats() { return kept_acts().stats(); }
void limit_kept_acts(std::int64_t bytes) { kept_acts().lower_budget(bytes); }

}  // namespace ymlopt::quant::linear_impl

#pragma GCC diagnostic pop
