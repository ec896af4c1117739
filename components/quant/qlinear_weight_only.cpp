// The weight-only kernels of quant (f32 activations): dequantize, and
// linear_weight_only, which multiplies blocks of dequantized rows that stay in
// cache with one sgemm, or for one token runs a GEMV that converts the codes in
// registers (one loop, instantiated 16 lanes wide for AVX-512 and 8 for AVX2).
#include "quant/qlinear_internal.hpp"

#include "gemm/gemm.hpp"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <string>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Vec16/Vec8 pass vectors between functions that all carry the vectors' target,
// so the ABI change -Wpsabi warns about never meets a caller without it.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ymlopt::quant {

using namespace linear_impl;

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

#define YMLOPT_AVX512_BW __attribute__((target("avx512f,avx512bw,avx512vl")))

/// The vector steps of the one-token GEMVs, 16 f32 lanes (AVX-512).
struct Vec16 {
  using F = __m512;
  using I = __m512i;
  static constexpr int64_t kLanes = 16;
  YMLOPT_AVX512_BW static F zero() { return _mm512_setzero_ps(); }
  YMLOPT_AVX512_BW static F load(const float* p) { return _mm512_loadu_ps(p); }
  YMLOPT_AVX512_BW static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  YMLOPT_AVX512_BW static F add(F a, F b) { return _mm512_add_ps(a, b); }
  YMLOPT_AVX512_BW static float sum(F v) { return _mm512_reduce_add_ps(v); }
  /// 16 int8 codes as floats.
  YMLOPT_AVX512_BW static F codes(const int8_t* c) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
  }
  /// 16 code bytes widened to int32.
  YMLOPT_AVX512_BW static I bytes(const uint8_t* b) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  }
  YMLOPT_AVX512_BW static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  /// The low nibbles of bytes() (`low` = set1(15)), and the high ones, as floats.
  YMLOPT_AVX512_BW static F low_ps(I v, I low) { return _mm512_cvtepi32_ps(_mm512_and_si512(v, low)); }
  YMLOPT_AVX512_BW static F high_ps(I v) { return _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)); }
};

/// The same steps, 8 f32 lanes (AVX2).
struct Vec8 {
  using F = __m256;
  using I = __m256i;
  static constexpr int64_t kLanes = 8;
  YMLOPT_AVX2 static F zero() { return _mm256_setzero_ps(); }
  YMLOPT_AVX2 static F load(const float* p) { return _mm256_loadu_ps(p); }
  YMLOPT_AVX2 static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  YMLOPT_AVX2 static F add(F a, F b) { return _mm256_add_ps(a, b); }
  YMLOPT_AVX2 static float sum(F v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
  }
  YMLOPT_AVX2 static F codes(const int8_t* c) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c))));
  }
  YMLOPT_AVX2 static I bytes(const uint8_t* b) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
  }
  YMLOPT_AVX2 static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  YMLOPT_AVX2 static F low_ps(I v, I low) { return _mm256_cvtepi32_ps(_mm256_and_si256(v, low)); }
  YMLOPT_AVX2 static F high_ps(I v) { return _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)); }
};

namespace avx512 {
using V = Vec16;
#define YMLOPT_GEMV_TARGET YMLOPT_AVX512_BW
#include "quant/qlinear_gemv.inc"
#undef YMLOPT_GEMV_TARGET
}  // namespace avx512
namespace avx2 {
using V = Vec8;
#define YMLOPT_GEMV_TARGET YMLOPT_AVX2
#include "quant/qlinear_gemv.inc"
#undef YMLOPT_GEMV_TARGET
}  // namespace avx2

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
  if (m == 1 && cpu_has_avx512_vnni()) return w.bits == 8 ? avx512::gemv_int8(x, w, y) : avx512::gemv_int4(x, w, y);
  if (m == 1 && cpu_has_avx2()) return w.bits == 8 ? avx2::gemv_int8(x, w, y) : avx2::gemv_int4(x, w, y);
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
