// quant::linear_bf16 on AVX-512 BF16: tiles of 6 activation rows x 4 weight
// rows, 24 accumulators of vdpbf16ps along k (32 products each), reduced to
// 24 outputs at the end of k (the 4 weight rows stay in L1 while the
// activation rows pass). Weights are read in place (rows of W are the
// vectors: no repacking); the k tail of a weight row is a masked load.
#include <immintrin.h>


#include "quant/bf16_linear_internal.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source of
// unmasked operations, which -W(maybe-)uninitialized reports (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define YMLOPT_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace ymlopt::quant::bf16_impl {
namespace {

using std::int64_t;
using std::uint16_t;

/// [Σ a0, Σ a1, Σ a2, Σ a3] of four 16-lane accumulators.
YMLOPT_BF16 inline __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
  const __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
  const __m512d d0 = _mm512_castps_pd(t0), d1 = _mm512_castps_pd(t1);
  const __m512 u = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(u), _mm512_extractf32x8_ps(u, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

YMLOPT_BF16 inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh>(v); }

/// y[MR, NR] (+)= x[MR, k] · w[NR, k]ᵀ (add: onto y).
template <int MR, int NR>
YMLOPT_BF16 void tile(const uint16_t* x, int64_t kp, int64_t k, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
          bool add) {
  __m512 acc[MR][4];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  auto step = [&](int64_t c, const __m512bh (&wv)[NR]) YMLOPT_BF16 {
    for (int i = 0; i < MR; ++i) {
      const __m512bh xv = as_bh(_mm512_loadu_si512(x + i * kp + c));
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  };
  const int64_t full = k / 32 * 32;
  for (int64_t c = 0; c < full; c += 32) {
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = as_bh(_mm512_loadu_si512(w + j * ldw + c));
    step(c, wv);
  }
  if (full < k) {  // x is zero past k; w must be too (its bytes past the row may be anything)
    const __mmask32 mask = (__mmask32(1) << (k - full)) - 1;
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = as_bh(_mm512_maskz_loadu_epi16(mask, w + j * ldw + full));
    step(full, wv);
  }
  const __mmask8 out = static_cast<__mmask8>((1u << NR) - 1);
  for (int i = 0; i < MR; ++i) {
    __m128 r = reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    if (add) r = _mm_add_ps(r, _mm_maskz_loadu_ps(out, y + i * ldy));
    _mm_mask_storeu_ps(y + i * ldy, out, r);
  }
}

using TileFn = void (*)(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, float*, int64_t, bool);
template <int MR> constexpr TileFn row_of[4] = {tile<MR, 1>, tile<MR, 2>, tile<MR, 3>, tile<MR, 4>};
constexpr const TileFn* tiles[6] = {row_of<1>, row_of<2>, row_of<3>, row_of<4>, row_of<5>, row_of<6>};

}  // namespace

// half::bf16_bits_from_float on 16 lanes: (u + 0x7fff + lsb) >> 16, NaN -> (u >> 16) | 0x40
YMLOPT_BF16 void to_bf16_avx512(const float* x, int64_t n, uint16_t* out) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512i u = _mm512_maskz_loadu_epi32(live, x + i);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i v = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
    _mm256_mask_storeu_epi16(out + i, live, _mm512_cvtepi32_epi16(v));
  }
}

void run_avx512(const Acts& a, const uint16_t* w, int64_t n, int64_t ldw, float* y, int64_t ldy) {
  drive<6, 4>(a.m, n, a.k, [&](int64_t i, int64_t j, int64_t mr, int64_t nr, int64_t c0, int64_t kc) {
    tiles[mr - 1][nr - 1](a.q + i * a.kp + c0, a.kp, kc, w + j * ldw + c0, ldw, y + i * ldy + j, ldy, c0 > 0);
  });
}

}  // namespace ymlopt::quant::bf16_impl

#pragma GCC diagnostic pop
