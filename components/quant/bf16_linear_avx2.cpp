// quant::linear_bf16 on AVX2 + FMA: bf16 widened to f32 in registers (a 16-bit
// shift), tiles of 2 activation rows x 4 weight rows, 8-lane FMAs along k.
#include <immintrin.h>

#include <cstring>

#include "quant/bf16_linear_internal.hpp"

#define YMLOPT_AVX2 __attribute__((target("avx2,fma")))

namespace ymlopt::quant::bf16_impl {
namespace {

using std::int64_t;
using std::uint16_t;

YMLOPT_AVX2 inline __m256 widen(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/// [Σ a0, Σ a1, Σ a2, Σ a3] of four 8-lane accumulators.
YMLOPT_AVX2 inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/// y[MR, NR] (+)= x[MR, k] · w[NR, k]ᵀ (add: onto y).
template <int MR, int NR>
YMLOPT_AVX2 void tile(const uint16_t* x, int64_t kp, int64_t k, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
          bool add) {
  __m256 acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
  auto step = [&](int64_t c, const __m256 (&wv)[NR]) YMLOPT_AVX2 {
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = widen(x + i * kp + c);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  };
  const int64_t full = k / 8 * 8;
  for (int64_t c = 0; c < full; c += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = widen(w + j * ldw + c);
    step(c, wv);
  }
  if (full < k) {  // the k tail of each weight row, zero-padded (x is zero past k)
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) {
      uint16_t t[8] = {};
      std::memcpy(t, w + j * ldw + full, static_cast<std::size_t>(k - full) * sizeof(uint16_t));
      wv[j] = widen(t);
    }
    step(full, wv);
  }
  for (int i = 0; i < MR; ++i) {
    alignas(16) float r[4];
    _mm_store_ps(r, reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = add ? y[i * ldy + j] + r[j] : r[j];
  }
}

using TileFn = void (*)(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, float*, int64_t, bool);
template <int MR> constexpr TileFn row_of[4] = {tile<MR, 1>, tile<MR, 2>, tile<MR, 3>, tile<MR, 4>};
constexpr const TileFn* tiles[2] = {row_of<1>, row_of<2>};

}  // namespace

// half::bf16_bits_from_float on 8 lanes (as the AVX-512 path); the tail in scalar code
YMLOPT_AVX2 void to_bf16_avx2(const float* x, int64_t n, uint16_t* out) {
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
    // |u| > inf as signed compare: both sides are below 2^31
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i v = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
    // 8 x 32-bit values below 2^16 -> 8 x 16-bit: pack within lanes, then gather the two halves
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(p));
  }
  to_bf16_scalar(x + i, n - i, out + i);
}

void run_avx2(const Acts& a, const uint16_t* w, int64_t n, int64_t ldw, float* y, int64_t ldy) {
  drive<2, 4>(a.m, n, a.k, [&](int64_t i, int64_t j, int64_t mr, int64_t nr, int64_t c0, int64_t kc) {
    tiles[mr - 1][nr - 1](a.q + i * a.kp + c0, a.kp, kc, w + j * ldw + c0, ldw, y + i * ldy + j, ldy, c0 > 0);
  });
}

}  // namespace ymlopt::quant::bf16_impl
