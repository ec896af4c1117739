// Quantized linear kernels (see qlinear.hpp for the arithmetic). Three code paths
// share every floating-point step: the AVX-512 VNNI one (vpdpbusd on 64-byte
// chunks of k, int4 nibbles unpacked in registers), an AVX2 one (vpmaddubsw on
// the two halves of each chunk) and a portable scalar one that emulates the 16
// int32 lanes. The family is built with -ffp-contract=off
// so that no compiler-made FMA makes the two paths differ.
#include "quant/qlinear.hpp"

#include "gemm/gemm.hpp"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source of
// unmasked operations, which -W(maybe-)uninitialized reports as a use of an
// uninitialized value (GCC bug 105593). Nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ymlopt::quant {

using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::uint8_t;

QWeight QWeight::of(int bits, const TensorView& q, const TensorView& scale, const TensorView& zero, int64_t n,
                    int64_t k, int64_t group) {
  QWeight w;
  w.bits = bits;
  w.q = static_cast<const std::int8_t*>(q.data);
  w.q_ld = q.rows > 1 ? q.ld : q.cols;
  w.n = n;
  w.k = k;
  w.group = group;
  w.scale = scale.data;
  w.scale_dtype = scale.dtype;
  // per row the scales may be an [n] vector (a 1 x n view: stride 1 between rows) or [n, 1]
  w.scale_ld = group == 0 && scale.rows == 1 ? 1 : scale.ld;
  if (zero.bound()) {
    w.zero = zero.data;
    w.zero_dtype = zero.dtype;
    w.zero_ld = group == 0 && zero.rows == 1 ? 1 : zero.ld;
  }
  return w;
}

QWeight QWeight::rows(int64_t n0, int64_t n1) const {
  if (n0 < 0 || n1 < n0 || n1 > n)
    throw KernelError("QWeight::rows: [" + std::to_string(n0) + ", " + std::to_string(n1) + ") outside [0, " +
                      std::to_string(n) + ")");
  QWeight r = *this;
  r.n = n1 - n0;
  r.q = q ? q + n0 * q_ld : nullptr;
  if (scale) r.scale = static_cast<const char*>(scale) + n0 * scale_ld * static_cast<int64_t>(dtype_size(scale_dtype));
  if (zero) r.zero = static_cast<const char*>(zero) + n0 * zero_ld * static_cast<int64_t>(dtype_size(zero_dtype));
  if (code_sum) r.code_sum = code_sum + n0 * code_sum_ld;
  return r;
}

bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

const char* best_isa_name() {
  return cpu_has_avx512_vnni() ? "AVX-512 VNNI" : cpu_has_avx2() ? "AVX2" : "scalar";
}

std::string validate(const QWeight& w) {
  const std::string wd = "quantized weight " + std::to_string(w.n) + "x" + std::to_string(w.k);
  if (w.bits != 8 && w.bits != 4) return wd + ": bits is " + std::to_string(w.bits) + ", expected 4 or 8";
  if (w.n < 0 || w.k < 0) return wd + ": negative dimension";
  if (w.bits == 4 && w.k % 2) return wd + ": int4 needs an even k (two codes per byte)";
  if (w.k > 65536) return wd + ": k above 65536 would overflow the int32 accumulators";
  if (w.group < 0 || (w.group > 0 && w.group != 32 && w.group % 64))
    return wd + ": group is " + std::to_string(w.group) + ", expected 0 (per channel), 32 or a multiple of 64";
  if (w.group > 0 && w.k % w.group) return wd + ": k is not a multiple of group " + std::to_string(w.group);
  if (w.n == 0 || w.k == 0) return "";
  const int64_t row_bytes = w.bits == 8 ? w.k : w.k / 2;
  if (!w.q) return wd + ": no codes";
  if (w.n > 1 && w.q_ld < row_bytes)
    return wd + ": q_ld " + std::to_string(w.q_ld) + " < " + std::to_string(row_bytes) + " bytes per row";
  if (!w.scale) return wd + ": no scales";
  if (w.scale_dtype != DType::f32 && w.scale_dtype != DType::f16)
    return wd + ": scale dtype " + dtype_name(w.scale_dtype) + ", expected f32 or f16";
  if (w.n > 1 && w.scale_ld < w.groups())
    return wd + ": scale_ld " + std::to_string(w.scale_ld) + " < " + std::to_string(w.groups()) + " groups";
  if (w.zero && w.zero_dtype != DType::f32 && w.zero_dtype != DType::f16)
    return wd + ": zero dtype " + dtype_name(w.zero_dtype) + ", expected f32 or f16";
  if (w.zero && w.n > 1 && w.zero_ld < w.groups())
    return wd + ": zero_ld " + std::to_string(w.zero_ld) + " < " + std::to_string(w.groups()) + " groups";
  if (w.code_sum && w.bits != 8) return wd + ": code_sum is only used with 8-bit codes";
  if (w.code_sum && w.n > 1 && w.code_sum_ld < w.groups())
    return wd + ": code_sum_ld " + std::to_string(w.code_sum_ld) + " < " + std::to_string(w.groups()) + " groups";
  return "";
}

namespace {

constexpr int64_t kChunk = 64;  // k elements per vpdpbusd step (16 lanes x 4)

inline int code_at(const QWeight& w, int64_t r, int64_t c) {
  const int8_t* row = w.q + r * w.q_ld;
  if (w.bits == 8) return row[c];
  const auto b = static_cast<uint8_t>(row[c / 2]);
  return (c & 1) ? (b >> 4) : (b & 15);
}

inline float scale_at(const QWeight& w, int64_t r, int64_t g) {
  const int64_t i = r * w.scale_ld + g;
  if (w.scale_dtype == DType::f16)
    return static_cast<float>(half::f16_bits_to_double(static_cast<const std::uint16_t*>(w.scale)[i]));
  return static_cast<const float*>(w.scale)[i];
}

/// The stored zero point of row r, group g (w.zero non-null).
inline float stored_zero_at(const QWeight& w, int64_t r, int64_t g) {
  const int64_t i = r * w.zero_ld + g;
  if (w.zero_dtype == DType::f16)
    return static_cast<float>(half::f16_bits_to_double(static_cast<const std::uint16_t*>(w.zero)[i]));
  return static_cast<const float*>(w.zero)[i];
}

/// k offset (inside a 64-chunk) of activation byte p. int8: p. int4: the order in
/// which the unpacked nibbles of 32 code bytes land in the 4 128-bit lanes:
/// [low nibbles of bytes 0-15, high nibbles of bytes 0-15, low 16-31, high 16-31].
inline int64_t k_of(bool w4, int64_t p) { return w4 ? (p / 32) * 32 + 2 * (p % 16) + ((p / 16) % 2) : p; }

/// Per-call data on the activation side, shared by both code paths.
struct Acts {
  int64_t m = 0, k = 0, kp = 0, nch = 0, groups = 1;
  bool w4 = false;
  std::vector<uint8_t> q;     // [m, kp]: int8 weights: xq + 128 (u8); int4: xq (s8) in k_of order; padding = 0 code
  std::vector<float> a;       // [m] activation scales
  std::vector<int32_t> xsum;  // [m, groups] Σ xq per group
  std::vector<int32_t> zl;    // [m, blocks, 16] grouped int4 symmetric: -8 · Σ xq per block and lane
};

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

/// Per-call data on the weight side: scales in f32, code sums (int8), the
/// 128·Σc term of grouped int8, s·zero for asymmetric weights (transposed [G, n]).
struct WPrep {
  int64_t n = 0, groups = 1;
  std::vector<float> s;       // [n, G]
  std::vector<int32_t> csum;  // [n, G] (int8)
  std::vector<float> bterm;   // [n] (int8, grouped)
  std::vector<float> sz_t;    // [G, n] (asymmetric)
};

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

/// Sum of the 16 int32 lanes (exact; order irrelevant).
__attribute__((target("avx512f"))) inline int32_t reduce_epi32(__m512i v) {
  alignas(64) int32_t e[16];
  _mm512_store_si512(e, v);
  int32_t s = 0;
  for (int l = 0; l < 16; ++l) s += e[l];
  return s;
}

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

/// What turns a tile's raw result into y, shared by both paths (same float operations):
///   per channel: F = float(t - ci[i] - cj[j]) * s[j]     (t the exact int32 dot product)
///   grouped:     F = F_lanes - b[j]
///   then y = a[i] * F, unless the weight has zero points (the epilogue finishes those rows).
struct Fin {
  const float* a = nullptr;     // [m] activation scales
  const int32_t* ci = nullptr;  // [m] per-row integer correction (per-channel int4 symmetric: 8 Σxq)
  const int32_t* cj = nullptr;  // [n] per-column integer correction (per-channel int8: 128 Σc)
  const float* s = nullptr;     // [n] per-channel scales
  const float* b = nullptr;     // [n] grouped int8: Σ_g s · 128 Σc
  bool fold_a = true;
};
inline float finish_pc(const Fin& f, int64_t i, int64_t j, int32_t t) {
  if (f.ci) t -= f.ci[i];
  if (f.cj) t -= f.cj[j];
  const float v = static_cast<float>(t) * f.s[j];
  return f.fold_a ? f.a[i] * v : v;
}
inline float finish_grp(const Fin& f, int64_t i, int64_t j, float v) {
  if (f.b) v = v - f.b[j];
  return f.fold_a ? f.a[i] * v : v;
}

/// Sum of 16 lane partials in the order the vector path uses:
/// per 128-bit lane (e0 + e2) + (e1 + e3), then (L0 + L1) + (L2 + L3).
inline float tree16(const float* e) {
  float l[4];
  for (int q = 0; q < 4; ++q) l[q] = (e[4 * q] + e[4 * q + 2]) + (e[4 * q + 1] + e[4 * q + 3]);
  return (l[0] + l[1]) + (l[2] + l[3]);
}

/// Geometry of the accumulation blocks of a grouped weight: a block is the span of
/// chunks whose int32 lane sums are converted together (g >= 64: one group of g/64
/// chunks; g == 32: one chunk, lanes 0-7 in group 2c and 8-15 in group 2c+1).
struct Blocks {
  int64_t count = 0, chunks = 1;
  bool g32 = false;
};
inline Blocks blocks_of(const QWeight& w, int64_t nch) {
  Blocks b;
  b.g32 = w.group == 32;
  b.chunks = b.g32 ? 1 : w.group / kChunk;
  b.count = b.g32 ? nch : w.k / w.group;
  return b;
}
inline float lane_scale(const Blocks& B, const float* s_row, int64_t G, int64_t b, int lane) {
  if (!B.g32) return s_row[b];
  const int64_t g = 2 * b + (lane >= 8 ? 1 : 0);
  return g < G ? s_row[g] : 0.0f;
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

// ---- scalar path ---------------------------------------------------------------

/// The codes of weight row j laid out like the activations (k_of order for int4),
/// 0 beyond k, as int16, and the activations of row i as int16 (u8 or s8).
void decode_row(const QWeight& w, int64_t j, int64_t kp, bool w4, int16_t* out) {
  for (int64_t c0 = 0; c0 < kp; c0 += kChunk)
    for (int64_t p = 0; p < kChunk; ++p) {
      const int64_t kk = c0 + k_of(w4, p);
      out[c0 + p] = static_cast<int16_t>(kk < w.k ? code_at(w, j, kk) : 0);
    }
}
std::vector<int16_t> widen_acts(const Acts& A) {
  std::vector<int16_t> v(A.q.size());
  for (std::size_t q = 0; q < v.size(); ++q)
    v[q] = A.w4 ? static_cast<int16_t>(static_cast<int8_t>(A.q[q])) : static_cast<int16_t>(A.q[q]);
  return v;
}

/// Per channel: exact integer dot products T[i, j] = Σ act · code.
void pc_scalar(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy) {
  const std::vector<int16_t> act = widen_acts(A);
  std::vector<int16_t> wc(static_cast<std::size_t>(A.kp));
  for (int64_t j = 0; j < w.n; ++j) {
    decode_row(w, j, A.kp, A.w4, wc.data());
    for (int64_t i = 0; i < A.m; ++i) {
      const int16_t* a = act.data() + i * A.kp;
      int32_t s = 0;
      for (int64_t q = 0; q < A.kp; ++q) s += int32_t(a[q]) * int32_t(wc[static_cast<std::size_t>(q)]);
      y[i * ldy + j] = finish_pc(fin, i, j, s);
    }
  }
}

/// Grouped: F[i, j] = Σ_blocks lane-wise fma(float(int lanes), scale, f), then tree16
/// (the 16 lanes of vpdpbusd: lane l of a chunk holds activation bytes 4l..4l+3).
void grp_scalar(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy) {
  const Blocks B = blocks_of(w, A.nch);
  const int64_t G = P.groups;
  const bool zinit = A.w4 && !w.zero;  // int4 symmetric: lanes start at -8 Σ xq
  const std::vector<int16_t> act = widen_acts(A);
  std::vector<int16_t> wc(static_cast<std::size_t>(A.kp));
  for (int64_t j = 0; j < w.n; ++j) {
    decode_row(w, j, A.kp, A.w4, wc.data());
    const float* s_row = P.s.data() + j * G;
    for (int64_t i = 0; i < A.m; ++i) {
      const int16_t* a = act.data() + i * A.kp;
      float f[16] = {};
      for (int64_t b = 0; b < B.count; ++b) {
        int32_t lanes[16] = {};
        for (int64_t c = b * B.chunks; c < (b + 1) * B.chunks && c < A.nch; ++c)
          for (int64_t p = 0; p < kChunk; ++p) {
            const int32_t xv = a[c * kChunk + p];
            lanes[p / 4] += xv * (int32_t(wc[static_cast<std::size_t>(c * kChunk + p)]) - (zinit ? 8 : 0));
          }
        for (int l = 0; l < 16; ++l)
          f[l] = std::fmaf(static_cast<float>(lanes[l]), lane_scale(B, s_row, G, b, l), f[l]);
      }
      y[i * ldy + j] = finish_grp(fin, i, j, tree16(f));
    }
  }
}

// ---- AVX-512 VNNI path -----------------------------------------------------------

#define YMLOPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/// 32 bytes of int4 codes -> 64 unsigned bytes in k_of order (see k_of).
YMLOPT_AVX512 inline __m512i unpack4(__m256i v) {
  const __m512i vz = _mm512_zextsi256_si512(v);
  const __m512i t = _mm512_shuffle_i64x2(vz, vz, 0x50);  // 128-bit lanes [0, 0, 1, 1]
  // lanes 1 and 3 (16-bit elements 8-15 and 24-31) take the high nibbles
  return _mm512_and_si512(_mm512_mask_srli_epi16(t, 0xff00ff00u, t, 4), _mm512_set1_epi8(0x0f));
}

/// Loads chunk c of a weight row (masked at the tail: missing codes read as 0).
/// Tail = false: k is a multiple of 64, every load is a plain full-width load.
template <bool W4, bool Tail>
YMLOPT_AVX512 inline __m512i load_w(const int8_t* row, int64_t c, int64_t nch, __mmask64 tail) {
  if constexpr (!Tail) {
    if constexpr (W4)
      return unpack4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * (kChunk / 2))));
    else
      return _mm512_loadu_si512(row + c * kChunk);
  } else if constexpr (W4) {
    const __m256i v =
        _mm256_maskz_loadu_epi8(c + 1 == nch ? static_cast<__mmask32>(tail) : ~__mmask32{0}, row + c * (kChunk / 2));
    return unpack4(v);
  } else {
    return _mm512_maskz_loadu_epi8(c + 1 == nch ? tail : ~__mmask64{0}, row + c * kChunk);
  }
}

template <bool W4>
YMLOPT_AVX512 inline __m512i dp(__m512i acc, __m512i x, __m512i w) {
  if constexpr (W4)
    return _mm512_dpbusd_epi32(acc, w, x);  // u8 codes x s8 activations
  else
    return _mm512_dpbusd_epi32(acc, x, w);  // u8 activations x s8 codes
}

/// 16 int32 vectors -> one vector whose element e is the sum of the lanes of v[e].
YMLOPT_AVX512 inline __m512i hsum16_epi32(const __m512i* v) {
  __m512i a[8], b[4], c[2];
  for (int p = 0; p < 8; ++p)
    a[p] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
  for (int p = 0; p < 4; ++p)
    b[p] =
        _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * p], a[2 * p + 1]), _mm512_unpackhi_epi64(a[2 * p], a[2 * p + 1]));
  for (int p = 0; p < 2; ++p)
    c[p] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2 * p], b[2 * p + 1], 0x88),
                            _mm512_shuffle_i32x4(b[2 * p], b[2 * p + 1], 0xdd));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], 0x88), _mm512_shuffle_i32x4(c[0], c[1], 0xdd));
}

/// 8 float vectors -> 8 floats (element e = tree16(lanes of v[e])), the tree of hsum16_epi32 on floats.
YMLOPT_AVX512 inline __m256 hsum8_ps(const __m512* v) {
  __m512 a[4], b[2];
  for (int p = 0; p < 4; ++p)
    a[p] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]));
  for (int p = 0; p < 2; ++p) {
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(a[2 * p]), _mm512_castps_pd(a[2 * p + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(a[2 * p]), _mm512_castps_pd(a[2 * p + 1]));
    b[p] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  const __m512 c = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xdd));
  const __m512 d = _mm512_add_ps(_mm512_shuffle_f32x4(c, c, 0x88), _mm512_shuffle_f32x4(c, c, 0xdd));
  return _mm512_castps512_ps256(d);
}

/// Per-channel micro-kernel: MR activation rows x NR weight rows, int32 over all of k.
/// Accumulators are fully unrolled locals of a non-inlined function (kept in registers).
template <int MR, int NR, bool W4, bool Tail>
YMLOPT_AVX512 __attribute__((noinline)) void pc_tile(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                     int64_t q_ld, __mmask64 tail, const Fin& fin, int64_t i0,
                                                     int64_t j0, float* y, int64_t ldy) {
  __m512i acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_si512();
  for (int64_t c = 0; c < nch; ++c) {
    __m512i wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = load_w<W4, Tail>(wq + j * q_ld, c, nch, tail);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512i xv = _mm512_loadu_si512(act + i * kp + c * kChunk);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = dp<W4>(acc[i][j], xv, wv[j]);
    }
  }
  if constexpr (MR == 4 && NR == 4) {
    const __m512i v[16] = {acc[0][0], acc[0][1], acc[0][2], acc[0][3], acc[1][0], acc[1][1], acc[1][2], acc[1][3],
                           acc[2][0], acc[2][1], acc[2][2], acc[2][3], acc[3][0], acc[3][1], acc[3][2], acc[3][3]};
    // finish_pc on 16 lanes (element 4i + j): the same integer and f32 operations
    __m512i t = hsum16_epi32(v);
    const __m512i rows = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    if (fin.ci)
      t = _mm512_sub_epi32(
          t, _mm512_permutexvar_epi32(
                 rows, _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fin.ci + i0)))));
    if (fin.cj)
      t = _mm512_sub_epi32(t, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fin.cj + j0))));
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(t), _mm512_broadcast_f32x4(_mm_loadu_ps(fin.s + j0)));
    if (fin.fold_a) f = _mm512_mul_ps(_mm512_permutexvar_ps(rows, _mm512_zextps128_ps512(_mm_loadu_ps(fin.a + i0))), f);
    _mm_storeu_ps(y, _mm512_extractf32x4_ps(f, 0));
    _mm_storeu_ps(y + ldy, _mm512_extractf32x4_ps(f, 1));
    _mm_storeu_ps(y + 2 * ldy, _mm512_extractf32x4_ps(f, 2));
    _mm_storeu_ps(y + 3 * ldy, _mm512_extractf32x4_ps(f, 3));
  } else {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_pc(fin, i0 + i, j0 + j, reduce_epi32(acc[i][j]));
  }
}

/// Grouped micro-kernel: per block, int32 lanes -> fma with the lane scales into f32 lanes.
template <int MR, int NR, bool W4, bool Tail, int CPB>
YMLOPT_AVX512 __attribute__((noinline)) void grp_tile(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                      int64_t q_ld, __mmask64 tail, const float* s, int64_t G, Blocks B,
                                                      const int32_t* zl, const Fin& fin, int64_t i0, int64_t j0,
                                                      float* y, int64_t ldy) {
  __m512 facc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) facc[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < B.count; ++b) {
    __m512 sv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const float* sr = s + j * G;
      if (B.g32) {
        const float hi = 2 * b + 1 < G ? sr[2 * b + 1] : 0.0f;
        sv[j] = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(sr[2 * b]), _mm512_set1_ps(hi));
      } else {
        sv[j] = _mm512_set1_ps(sr[b]);
      }
    }
    __m512i acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      // int4 symmetric: lanes start at -8 · Σ xq of the block (precomputed per row)
      const __m512i init = zl ? _mm512_loadu_si512(zl + (i * B.count + b) * 16) : _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = init;
    }
    // CPB > 0: chunks per block known at compile time (fully unrolled: the int32
    // accumulators then stay in place instead of being copied every chunk)
    const int64_t cpb = CPB > 0 ? CPB : B.chunks;
#pragma GCC unroll 4
    for (int64_t cc = 0; cc < cpb; ++cc) {
      const int64_t c = b * cpb + cc;
      if constexpr (CPB == 0) {  // with CPB > 0 every block is whole (k is a multiple of the group)
        if (c >= nch) break;
      }
      __m512i wv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) wv[j] = load_w<W4, Tail>(wq + j * q_ld, c, nch, tail);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512i xv = _mm512_loadu_si512(act + i * kp + c * kChunk);
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j] = dp<W4>(acc[i][j], xv, wv[j]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) facc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][j]), sv[j], facc[i][j]);
  }
  if constexpr (MR == 4 && NR == 2) {
    const __m512 v[8] = {facc[0][0], facc[0][1], facc[1][0], facc[1][1],
                         facc[2][0], facc[2][1], facc[3][0], facc[3][1]};
    // finish_grp on 8 lanes (element 2i + j)
    __m256 f = hsum8_ps(v);
    if (fin.b) {
      const __m256 b2 = _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(fin.b + j0))));
      f = _mm256_sub_ps(f, _mm256_permutexvar_ps(_mm256_set_epi32(1, 0, 1, 0, 1, 0, 1, 0), b2));
    }
    if (fin.fold_a)
      f = _mm256_mul_ps(_mm256_permutexvar_ps(_mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0),
                                              _mm256_castps128_ps256(_mm_loadu_ps(fin.a + i0))),
                        f);
    const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
    _mm_storel_pi(reinterpret_cast<__m64*>(y), lo);
    _mm_storeh_pi(reinterpret_cast<__m64*>(y + ldy), lo);
    _mm_storel_pi(reinterpret_cast<__m64*>(y + 2 * ldy), hi);
    _mm_storeh_pi(reinterpret_cast<__m64*>(y + 3 * ldy), hi);
  } else {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) {
        alignas(64) float e[16];
        _mm512_store_ps(e, facc[i][j]);
        y[i * ldy + j] = finish_grp(fin, i0 + i, j0 + j, tree16(e));
      }
  }
}

/// The stored bytes of the last chunk of a weight row (k need not be a multiple of 64).
int64_t rem_bytes_of(const QWeight& w, int64_t nch) {
  const int64_t rem = w.k - (nch - 1) * kChunk;
  return w.bits == 4 ? rem / 2 : rem;
}

/// Runs tile function `tile(i0, j0, mr_tag, nr_tag)` over [m, n] in cache blocks of
/// weight rows; edges use 1-row / 1-column tiles.
template <int MR, int NR, class F4, class F1N, class FM1, class F11>
void drive(int64_t m, int64_t n, int64_t act_bytes, F4&& full, FM1&& rows_x1, F1N&& one_x_n, F11&& one_one) {
  // A panel of about 24 KiB of quantized activations (at least 2 row tiles) stays in L1
  // while the weight tiles stream past it in order; each weight tile is reused by every
  // row tile of the panel, and y is written row-panel by row-panel (few pages at a time).
  const int64_t ib = std::max<int64_t>(2 * MR, (24 * 1024 / std::max<int64_t>(act_bytes, 1)) / MR * MR);
  for (int64_t i0 = 0; i0 < m; i0 += ib) {
    const int64_t i1 = std::min(m, i0 + ib);
    const int64_t im = i0 + (i1 - i0) / MR * MR;  // rows [im, i1) use 1-row tiles
    int64_t j = 0;
    for (; j + NR <= n; j += NR) {
      for (int64_t i = i0; i < im; i += MR) full(i, j);
      for (int64_t i = im; i < i1; ++i) one_x_n(i, j);
    }
    for (; j < n; ++j) {
      for (int64_t i = i0; i < im; i += MR) rows_x1(i, j);
      for (int64_t i = im; i < i1; ++i) one_one(i, j);
    }
  }
}

template <bool W4, bool Tail>
void pc_avx512(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rem_bytes = rem_bytes_of(w, A.nch);
  const __mmask64 tail = rem_bytes == 64 ? ~__mmask64{0} : ((__mmask64{1} << rem_bytes) - 1);
  const int64_t n = w.n;
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  constexpr int MR = 4, NR = 4;
  drive<MR, NR>(
      A.m, n, A.kp,
      [&](int64_t i, int64_t j) {
        pc_tile<MR, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile<MR, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile<1, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile<1, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      });
}

template <bool W4, bool Tail, int CPB>
void grp_avx512(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rem_bytes = rem_bytes_of(w, A.nch);
  const __mmask64 tail = rem_bytes == 64 ? ~__mmask64{0} : ((__mmask64{1} << rem_bytes) - 1);
  const Blocks B = blocks_of(w, A.nch);
  const int64_t G = P.groups;
  auto zr = [&](int64_t i) { return A.zl.empty() ? nullptr : A.zl.data() + i * B.count * 16; };
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  auto sr = [&](int64_t j) { return P.s.data() + j * G; };
  constexpr int MR = 4, NR = 2;  // 8 f32 + 8 int32 accumulators stay in registers
  drive<MR, NR>(
      A.m, w.n, A.kp,
      [&](int64_t i, int64_t j) {
        grp_tile<MR, NR, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                        y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile<MR, 1, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile<1, NR, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile<1, 1, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                      y + i * ldy + j, ldy);
      });
}

template <bool W4>
void grp_dispatch(bool tail, int64_t chunks, const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y,
                  int64_t ldy) {
  if (tail)
    grp_avx512<W4, true, 1>(A, w, P, fin, y, ldy);  // only group 32 leaves a half chunk
  else if (chunks == 1)
    grp_avx512<W4, false, 1>(A, w, P, fin, y, ldy);
  else if (chunks == 2)
    grp_avx512<W4, false, 2>(A, w, P, fin, y, ldy);
  else
    grp_avx512<W4, false, 0>(A, w, P, fin, y, ldy);
}

// ---- AVX2 path (CPUs without AVX-512 VNNI: Zen 2/3, Haswell to Alder Lake) ------
//
// The integers and f32 steps of the other paths on the two 256-bit halves of each
// 64-byte chunk (half h holds lanes 8h..8h+7). vpmaddubsw multiplies u8 by s8 and
// adds pairs in saturating int16, so int8 weights meet the activation codes
// xq = act - 128 as |c| x sign(xq, c) (a pair is at most 2 * 128 * 127 < 2^15) and
// int4 codes (u8 <= 15) meet xq directly; vpmaddwd then adds pairs into int32 lanes.
// Per channel the exact dot product Σ xq·c is what the VNNI path has after
// subtracting 128·Σc, so that correction is left out; grouped, the 128·Σc of each
// lane is added back before the lanes are converted, as VNNI's u8 operand has it.

#define YMLOPT_AVX2 __attribute__((target("avx2,fma")))

YMLOPT_AVX2 inline __m256i ones16_avx2() { return _mm256_set1_epi16(1); }

/// 16 code bytes -> 32 unsigned bytes [low nibbles, high nibbles] (k_of order of a half).
YMLOPT_AVX2 inline __m256i unpack4_avx2(__m128i b) {
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
}

/// Half h of chunk c of a weight row as 32 bytes (int8 codes, or int4 nibbles
/// unpacked); in the last chunk of a row whose k is not a multiple of 64 the
/// missing codes read as 0 (`rem_bytes`: the stored bytes of that chunk).
template <bool W4, bool Tail>
YMLOPT_AVX2 inline __m256i load_w_avx2(const int8_t* row, int64_t c, int h, int64_t nch, int64_t rem_bytes) {
  constexpr int64_t half = W4 ? 16 : 32;
  const int8_t* p = row + c * 2 * half + h * half;
  if constexpr (Tail) {
    if (c + 1 == nch) {
      alignas(32) int8_t buf[32] = {};
      const int64_t have = std::min(half, rem_bytes - h * half);
      if (have > 0) std::memcpy(buf, p, static_cast<std::size_t>(have));
      if constexpr (W4) return unpack4_avx2(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
      return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
    }
  }
  if constexpr (W4) return unpack4_avx2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// The activation codes of half h of chunk c as s8 xq (int8 weights store xq + 128).
template <bool W4>
YMLOPT_AVX2 inline __m256i load_x_avx2(const uint8_t* act, int64_t c, int h) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + c * kChunk + h * 32));
  if constexpr (W4) return v;
  return _mm256_xor_si256(v, _mm256_set1_epi8(-128));
}

/// acc + the int32 lane sums of xq · code over 4 bytes each (exact).
template <bool W4>
YMLOPT_AVX2 inline __m256i dp_avx2(__m256i acc, __m256i xq, __m256i w, __m256i w_abs) {
  __m256i p;
  if constexpr (W4)
    p = _mm256_maddubs_epi16(w, xq);
  else
    p = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xq, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones16_avx2()));
}

YMLOPT_AVX2 inline int32_t reduce8_epi32(__m256i v) {
  alignas(32) int32_t e[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(e), v);
  int32_t s = 0;
  for (int l = 0; l < 8; ++l) s += e[l];
  return s;
}

/// Per channel: MR activation rows x NR weight rows, the exact Σ xq · c over all of k.
template <int MR, int NR, bool W4, bool Tail>
YMLOPT_AVX2 __attribute__((noinline)) void pc_tile_avx2(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                          int64_t q_ld, int64_t rem_bytes, const Fin& fin, int64_t i0,
                                                          int64_t j0, float* y, int64_t ldy) {
  __m256i acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_si256();
  for (int64_t c = 0; c < nch; ++c)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i wv[NR], wa[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        wv[j] = load_w_avx2<W4, Tail>(wq + j * q_ld, c, h, nch, rem_bytes);
        wa[j] = W4 ? wv[j] : _mm256_abs_epi8(wv[j]);
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m256i xv = load_x_avx2<W4>(act + i * kp, c, h);
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j] = dp_avx2<W4>(acc[i][j], xv, wv[j], wa[j]);
      }
    }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_pc(fin, i0 + i, j0 + j, reduce8_epi32(acc[i][j]));
}

/// Grouped: the 16 f32 lane partials of each output, half by half (lanes 8h..8h+7
/// see only half h of every chunk), then tree16 as on the other paths.
template <int MR, int NR, bool W4, bool Tail>
YMLOPT_AVX2 __attribute__((noinline)) void grp_tile_avx2(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                           int64_t q_ld, int64_t rem_bytes, const float* s, int64_t G,
                                                           Blocks B, const int32_t* zl, const Fin& fin, int64_t i0,
                                                           int64_t j0, float* y, int64_t ldy) {
  alignas(32) float lanes[MR][NR][16];
  for (int h = 0; h < 2; ++h) {
    __m256 facc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) facc[i][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < B.count; ++b) {
      __m256 sv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) sv[j] = _mm256_set1_ps(lane_scale(B, s + j * G, G, b, 8 * h));
      __m256i acc[MR][NR], cs[NR];
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        // int4 symmetric: lanes start at -8 · Σ xq of the block (precomputed per row)
        const __m256i init = zl ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zl + (i * B.count + b) * 16 + 8 * h))
                                : _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j] = init;
      }
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) cs[j] = _mm256_setzero_si256();
      for (int64_t c = b * B.chunks; c < (b + 1) * B.chunks && c < nch; ++c) {
        __m256i wv[NR], wa[NR];
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) {
          wv[j] = load_w_avx2<W4, Tail>(wq + j * q_ld, c, h, nch, rem_bytes);
          if constexpr (W4) {
            wa[j] = wv[j];
          } else {
            wa[j] = _mm256_abs_epi8(wv[j]);
            cs[j] = _mm256_add_epi32(
                cs[j], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), wv[j]), ones16_avx2()));
          }
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const __m256i xv = load_x_avx2<W4>(act + i * kp, c, h);
#pragma GCC unroll 16
          for (int j = 0; j < NR; ++j) acc[i][j] = dp_avx2<W4>(acc[i][j], xv, wv[j], wa[j]);
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) {
          const __m256i lane = W4 ? acc[i][j] : _mm256_add_epi32(acc[i][j], _mm256_slli_epi32(cs[j], 7));
          facc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane), sv[j], facc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) _mm256_store_ps(lanes[i][j] + 8 * h, facc[i][j]);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_grp(fin, i0 + i, j0 + j, tree16(lanes[i][j]));
}

template <bool W4, bool Tail>
void pc_avx2(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rb = rem_bytes_of(w, A.nch);
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  constexpr int MR = 4, NR = 2;  // 8 int32 accumulators, 2 + 2 weight registers
  drive<MR, NR>(
      A.m, w.n, A.kp,
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<MR, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<MR, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<1, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<1, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      });
}

template <bool W4, bool Tail>
void grp_avx2(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rb = rem_bytes_of(w, A.nch);
  const Blocks B = blocks_of(w, A.nch);
  const int64_t G = P.groups;
  auto zr = [&](int64_t i) { return A.zl.empty() ? nullptr : A.zl.data() + i * B.count * 16; };
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  auto sr = [&](int64_t j) { return P.s.data() + j * G; };
  constexpr int MR = 2, NR = 2;  // 4 int32 + 4 f32 accumulators
  drive<MR, NR>(
      A.m, w.n, A.kp,
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<MR, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                        y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<MR, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<1, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<1, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                      y + i * ldy + j, ldy);
      });
}

}  // namespace

void linear(const float* x, int64_t m, int64_t ldx, const QWeight& w, float* y, int64_t ldy) {
  linear(x, m, ldx, w, y, ldy, Isa::best);
}

namespace {

/// The arguments of a linear call (`who` names it in the errors); false when
/// there is nothing to compute (m or n is 0).
bool check_call(const char* who, const float* x, int64_t m, int64_t ldx, const QWeight& w, const float* y,
                int64_t ldy) {
  const std::string me = std::string("quant::") + who + ": ";
  if (const std::string e = validate(w); !e.empty()) throw KernelError(me + e);
  if (m < 0) throw KernelError(me + "negative m");
  if (m == 0 || w.n == 0) return false;
  if (!y || (w.k > 0 && !x)) throw KernelError(me + "null x or y");
  if (m > 1 && ldx < w.k) throw KernelError(me + "ldx " + std::to_string(ldx) + " < k " + std::to_string(w.k));
  if (m > 1 && ldy < w.n) throw KernelError(me + "ldy " + std::to_string(ldy) + " < n " + std::to_string(w.n));
  return true;
}

}  // namespace

void linear(const float* x, int64_t m, int64_t ldx, const QWeight& w, float* y, int64_t ldy, Isa isa) {
  if (!check_call("linear", x, m, ldx, w, y, ldy)) return;
  if (w.k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(y + i * ldy, y + i * ldy + w.n, 0.0f);
    return;
  }
  if (isa == Isa::avx512_vnni && !cpu_has_avx512_vnni())
    throw KernelError("quant::linear: this CPU has no AVX-512 VNNI");
  if (isa == Isa::avx2 && !cpu_has_avx2()) throw KernelError("quant::linear: this CPU has no AVX2 and FMA");
  const Isa path = isa != Isa::best      ? isa
                   : cpu_has_avx512_vnni() ? Isa::avx512_vnni
                   : cpu_has_avx2()        ? Isa::avx2
                                           : Isa::scalar;
  const bool w4 = w.bits == 4;
  const bool per_channel = w.group == 0;
  const int64_t G = w.groups(), n = w.n;
  const bool need_xsum = w.zero != nullptr || (w4 && per_channel);
  Acts A = prepare_acts(x, m, ldx, w, need_xsum, path);
  if (w4 && !w.zero && !per_channel) {
    if (path == Isa::avx512_vnni)
      lane_zero_init_avx512(A, blocks_of(w, A.nch));
    else
      lane_zero_init(A, blocks_of(w, A.nch));
  }
  const WPrep P = prepare_weights(w, path, !(path == Isa::avx2 && per_channel));

  const bool tail = w.k % kChunk != 0;
  Fin fin;
  fin.a = A.a.data();
  fin.fold_a = w.zero == nullptr;
  std::vector<int32_t> ci, cj;
  if (per_channel) {
    fin.s = P.s.data();
    if (w4 && !w.zero) {
      ci.resize(static_cast<std::size_t>(m));
      for (int64_t i = 0; i < m; ++i) ci[static_cast<std::size_t>(i)] = 8 * A.xsum[static_cast<std::size_t>(i)];
      fin.ci = ci.data();
    }
    if (!w4 && path != Isa::avx2) {  // the AVX2 path forms Σ xq · c directly: no 128 Σc to take off
      cj.resize(static_cast<std::size_t>(n));
      for (int64_t j = 0; j < n; ++j) cj[static_cast<std::size_t>(j)] = 128 * P.csum[static_cast<std::size_t>(j)];
      fin.cj = cj.data();
    }
    if (path == Isa::avx2) {
      if (w4)
        (tail ? pc_avx2<true, true> : pc_avx2<true, false>)(A, w, fin, y, ldy);
      else
        (tail ? pc_avx2<false, true> : pc_avx2<false, false>)(A, w, fin, y, ldy);
    } else if (path == Isa::scalar)
      pc_scalar(A, w, fin, y, ldy);
    else if (w4)
      (tail ? pc_avx512<true, true> : pc_avx512<true, false>)(A, w, fin, y, ldy);
    else
      (tail ? pc_avx512<false, true> : pc_avx512<false, false>)(A, w, fin, y, ldy);
  } else {
    fin.b = P.bterm.empty() ? nullptr : P.bterm.data();
    if (path == Isa::avx2) {
      if (w4)
        (tail ? grp_avx2<true, true> : grp_avx2<true, false>)(A, w, P, fin, y, ldy);
      else
        (tail ? grp_avx2<false, true> : grp_avx2<false, false>)(A, w, P, fin, y, ldy);
    } else if (path == Isa::scalar)
      grp_scalar(A, w, P, fin, y, ldy);
    else if (w4)
      grp_dispatch<true>(tail, blocks_of(w, A.nch).chunks, A, w, P, fin, y, ldy);
    else
      grp_dispatch<false>(tail, blocks_of(w, A.nch).chunks, A, w, P, fin, y, ldy);
  }
  if (!w.zero) return;

  // Zero points: y = a_i · (F - Σ_g s·zero · Σxq), a small [m, G] x [G, n] product.
  std::vector<float> corr(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    float* yr = y + i * ldy;
    {
      std::fill(corr.begin(), corr.end(), 0.0f);
      for (int64_t g = 0; g < G; ++g) {
        const float xs = static_cast<float>(A.xsum[static_cast<std::size_t>(i * G + g)]);
        const float* szr = P.sz_t.data() + g * n;
        for (int64_t j = 0; j < n; ++j)
          corr[static_cast<std::size_t>(j)] = corr[static_cast<std::size_t>(j)] + szr[j] * xs;
      }
      for (int64_t j = 0; j < n; ++j) yr[j] = yr[j] - corr[static_cast<std::size_t>(j)];
    }
    const float a = A.a[static_cast<std::size_t>(i)];
    for (int64_t j = 0; j < n; ++j) yr[j] = a * yr[j];
  }
}

namespace {

/// Rows [r0, r0 + rows) of W dequantized into out (row stride ldo), group by group.
__attribute__((always_inline)) inline void dequantize_rows_body(const QWeight& w, int64_t r0, int64_t rows,
                                                                 float* out, int64_t ldo) {
  const int64_t k = w.k, gs = w.group > 0 ? w.group : k, G = w.groups();
  for (int64_t r = 0; r < rows; ++r) {
    const auto* q = reinterpret_cast<const uint8_t*>(w.q) + (r0 + r) * w.q_ld;
    float* o = out + r * ldo;
    for (int64_t g = 0; g < G; ++g) {
      const float s = scale_at(w, r0 + r, g);
      const float z = zero_of(w, r0 + r, g);
      const int64_t c0 = g * gs;
      if (w.bits == 8) {
        const auto* c = reinterpret_cast<const int8_t*>(q) + c0;
        for (int64_t j = 0; j < gs; ++j) o[c0 + j] = (static_cast<float>(c[j]) - z) * s;
      } else {  // two codes per byte, element 2j in the low nibble (c0 and gs are even)
        const uint8_t* b = q + c0 / 2;
        for (int64_t j = 0; j < gs / 2; ++j) {
          o[c0 + 2 * j] = (static_cast<float>(b[j] & 15) - z) * s;
          o[c0 + 2 * j + 1] = (static_cast<float>(b[j] >> 4) - z) * s;
        }
      }
    }
  }
}

void dequantize_rows_generic(const QWeight& w, int64_t r0, int64_t rows, float* out, int64_t ldo) {
  dequantize_rows_body(w, r0, rows, out, ldo);
}
// The same loops vectorized 16 floats wide (the same operations, so the same values).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void dequantize_rows_avx512(const QWeight& w, int64_t r0,
                                                                                  int64_t rows, float* out,
                                                                                  int64_t ldo) {
  dequantize_rows_body(w, r0, rows, out, ldo);
}
// And 8 floats wide, for CPUs with AVX2 but not AVX-512.
__attribute__((target("avx2,fma"))) void dequantize_rows_avx2(const QWeight& w, int64_t r0, int64_t rows, float* out,
                                                             int64_t ldo) {
  dequantize_rows_body(w, r0, rows, out, ldo);
}
/// The sums of x over each of G groups of gs elements (the zero points' term).
std::vector<float> group_sums(const float* x, int64_t gs, int64_t G) {
  std::vector<float> v(static_cast<std::size_t>(G), 0.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < gs; ++j) v[static_cast<std::size_t>(g)] += x[g * gs + j];
  return v;
}

/// 16 int8 codes as floats.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 codes16_ps(const int8_t* c) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
}

/// One token, int8 codes: y[r] = Σ_g scale (Σ_j x_j c_j - zero Σ_j x_j) over each
/// group, the codes converted in registers (no buffer), four accumulators.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void gemv_int8_avx512(const float* x, const QWeight& w,
                                                                           float* y) {
  const int64_t k = w.k, gs = w.group > 0 ? w.group : k, G = w.groups();
  const std::vector<float> xsum = group_sums(x, gs, G);
  for (int64_t r = 0; r < w.n; ++r) {
    const auto* c = reinterpret_cast<const int8_t*>(w.q) + r * w.q_ld;
    float yr = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int8_t* cg = c + g * gs;
      const float* xg = x + g * gs;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      int64_t j = 0;
      for (; j + 64 <= gs; j += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(xg + j), codes16_ps(cg + j), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(xg + j + 16), codes16_ps(cg + j + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(xg + j + 32), codes16_ps(cg + j + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(xg + j + 48), codes16_ps(cg + j + 48), a3);
      }
      for (; j + 16 <= gs; j += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(xg + j), codes16_ps(cg + j), a0);
      float d = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
      for (; j < gs; ++j) d += xg[j] * static_cast<float>(cg[j]);
      yr += scale_at(w, r, g) * (d - zero_of(w, r, g) * xsum[static_cast<std::size_t>(g)]);
    }
    y[r] = yr;
  }
}

/// One token, int4 codes: as gemv_int8_avx512, with x split into its even and odd
/// elements so that the low and high nibbles of 16 code bytes meet 16 x values each.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void gemv_int4_avx512(const float* x, const QWeight& w,
                                                                           float* y) {
  const int64_t k = w.k, gs = w.group > 0 ? w.group : k, G = w.groups(), half = gs / 2;
  thread_local std::vector<float> xe, xo;
  xe.resize(static_cast<std::size_t>(k / 2));
  xo.resize(static_cast<std::size_t>(k / 2));
  for (int64_t j = 0; j < k / 2; ++j) xe[static_cast<std::size_t>(j)] = x[2 * j], xo[static_cast<std::size_t>(j)] = x[2 * j + 1];
  const std::vector<float> xsum = group_sums(x, gs, G);
  const __m512i low = _mm512_set1_epi32(15);
  for (int64_t r = 0; r < w.n; ++r) {
    const auto* b = reinterpret_cast<const uint8_t*>(w.q) + r * w.q_ld;
    float yr = 0;
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* bg = b + g * half;
      const float* e = xe.data() + g * half;
      const float* o = xo.data() + g * half;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0;
      int64_t j = 0;
      for (; j + 16 <= half; j += 16) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bg + j)));
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(e + j), _mm512_cvtepi32_ps(_mm512_and_si512(v, low)), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(o + j), _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), a1);
      }
      float d = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
      for (; j < half; ++j) d += e[j] * static_cast<float>(bg[j] & 15) + o[j] * static_cast<float>(bg[j] >> 4);
      yr += scale_at(w, r, g) * (d - zero_of(w, r, g) * xsum[static_cast<std::size_t>(g)]);
    }
    y[r] = yr;
  }
}

YMLOPT_AVX2 inline float hsum8_ps_avx2(__m256 v) {
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

/// 8 int8 codes as floats.
YMLOPT_AVX2 inline __m256 codes8_ps(const int8_t* c) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c))));
}

/// One token, int8 codes, 8 lanes: gemv_int8_avx512's loop for AVX2 CPUs.
YMLOPT_AVX2 void gemv_int8_avx2(const float* x, const QWeight& w, float* y) {
  const int64_t k = w.k, gs = w.group > 0 ? w.group : k, G = w.groups();
  const std::vector<float> xsum = group_sums(x, gs, G);
  for (int64_t r = 0; r < w.n; ++r) {
    const auto* c = reinterpret_cast<const int8_t*>(w.q) + r * w.q_ld;
    float yr = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int8_t* cg = c + g * gs;
      const float* xg = x + g * gs;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      int64_t j = 0;
      for (; j + 32 <= gs; j += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xg + j), codes8_ps(cg + j), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(xg + j + 8), codes8_ps(cg + j + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(xg + j + 16), codes8_ps(cg + j + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(xg + j + 24), codes8_ps(cg + j + 24), a3);
      }
      for (; j + 8 <= gs; j += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xg + j), codes8_ps(cg + j), a0);
      float d = hsum8_ps_avx2(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
      for (; j < gs; ++j) d += xg[j] * static_cast<float>(cg[j]);
      yr += scale_at(w, r, g) * (d - zero_of(w, r, g) * xsum[static_cast<std::size_t>(g)]);
    }
    y[r] = yr;
  }
}

/// One token, int4 codes, 8 lanes: gemv_int4_avx512's loop (x split into even and odd elements).
YMLOPT_AVX2 void gemv_int4_avx2(const float* x, const QWeight& w, float* y) {
  const int64_t k = w.k, gs = w.group > 0 ? w.group : k, G = w.groups(), half = gs / 2;
  thread_local std::vector<float> xe, xo;
  xe.resize(static_cast<std::size_t>(k / 2));
  xo.resize(static_cast<std::size_t>(k / 2));
  for (int64_t j = 0; j < k / 2; ++j) xe[static_cast<std::size_t>(j)] = x[2 * j], xo[static_cast<std::size_t>(j)] = x[2 * j + 1];
  const std::vector<float> xsum = group_sums(x, gs, G);
  const __m256i low = _mm256_set1_epi32(15);
  for (int64_t r = 0; r < w.n; ++r) {
    const auto* b = reinterpret_cast<const uint8_t*>(w.q) + r * w.q_ld;
    float yr = 0;
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* bg = b + g * half;
      const float* e = xe.data() + g * half;
      const float* o = xo.data() + g * half;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0;
      int64_t j = 0;
      for (; j + 8 <= half; j += 8) {
        const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bg + j)));
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(e + j), _mm256_cvtepi32_ps(_mm256_and_si256(v, low)), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(o + j), _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), a1);
      }
      float d = hsum8_ps_avx2(_mm256_add_ps(a0, a1));
      for (; j < half; ++j) d += e[j] * static_cast<float>(bg[j] & 15) + o[j] * static_cast<float>(bg[j] >> 4);
      yr += scale_at(w, r, g) * (d - zero_of(w, r, g) * xsum[static_cast<std::size_t>(g)]);
    }
    y[r] = yr;
  }
}

void dequantize_rows(const QWeight& w, int64_t r0, int64_t rows, float* out, int64_t ldo) {
  static const bool wide = cpu_has_avx512_vnni(), avx2 = cpu_has_avx2();
  if (wide)
    dequantize_rows_avx512(w, r0, rows, out, ldo);
  else if (avx2)
    dequantize_rows_avx2(w, r0, rows, out, ldo);
  else
    dequantize_rows_generic(w, r0, rows, out, ldo);
}

}  // namespace

void dequantize(const QWeight& w, float* out, int64_t ldw) {
  if (const std::string e = validate(w); !e.empty()) throw KernelError("quant::dequantize: " + e);
  dequantize_rows(w, 0, w.n, out, ldw);
}

void linear_weight_only(const float* x, int64_t m, int64_t ldx, const QWeight& w, float* y, int64_t ldy) {
  if (!check_call("linear_weight_only", x, m, ldx, w, y, ldy)) return;
  if (m == 1 && cpu_has_avx512_vnni()) return w.bits == 8 ? gemv_int8_avx512(x, w, y) : gemv_int4_avx512(x, w, y);
  if (m == 1 && cpu_has_avx2()) return w.bits == 8 ? gemv_int8_avx2(x, w, y) : gemv_int4_avx2(x, w, y);
  // blocks of f32 rows: ~128 KiB (L2) for a few tokens, where the product streams
  // through them once; ~2 MiB for many, each block then one well-shaped GEMM that
  // reuses it m times (small blocks made OpenBLAS repack x for every one)
  const int64_t floats = m <= 16 ? int64_t(32) * 1024 : int64_t(512) * 1024;
  const int64_t nb = std::max<int64_t>(16, (floats / std::max<int64_t>(w.k, 1)) / 16 * 16);
  thread_local std::vector<float> buf;
  buf.resize(static_cast<std::size_t>(std::min(nb, w.n) * w.k));
  for (int64_t r0 = 0; r0 < w.n; r0 += nb) {
    const int64_t rows = std::min(nb, w.n - r0);
    dequantize_rows(w, r0, rows, buf.data(), w.k);
    if (m == 1)  // one token: a GEMV on the block (OpenBLAS's sgemm does not forward m = 1 to it)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(rows), static_cast<blasint>(w.k), 1.0f,
                  buf.data(), static_cast<blasint>(w.k), x, 1, 0.0f, y + r0, 1);
    else
      gemm::gemm(false, true, m, rows, w.k, 1.0f, x, ldx, buf.data(), w.k, 0.0f, y + r0, ldy, gemm::Library::openblas);
  }
}

float scale_of(const QWeight& w, int64_t r, int64_t g) { return scale_at(w, r, g); }
float zero_of(const QWeight& w, int64_t r, int64_t g) {
  return w.zero ? stored_zero_at(w, r, g) : (w.bits == 4 ? 8.0f : 0.0f);
}

}  // namespace ymlopt::quant

#pragma GCC diagnostic pop
