// gemm::sgemm_panels on AVX-512F: tiles of up to 12 rows x 32 columns (24
// accumulators); per k, two loads of the panel row and one broadcast FMA pair
// per row.
#include <immintrin.h>

#include <utility>

#include "gemm/sgemm_panels_internal.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source of
// unmasked operations, which -W(maybe-)uninitialized reports (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define YMLOPT_AVX512 __attribute__((target("avx512f")))

namespace ymlopt::gemm::panels_impl {
namespace {

using std::int64_t;

/// C[MR, cols] (+)= A[MR, kc] · P[kc, 32] (cols <= 32 of it stored).
template <int MR>
YMLOPT_AVX512 void tile(const float* a, const float* p, int64_t kc, float* c, int64_t ldc, int64_t cols, bool add) {
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xffff) : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : 0;
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = add ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = add ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t q = 0; q < kc; ++q) {
    const __m512 w0 = _mm512_loadu_ps(p + q * 32), w1 = _mm512_loadu_ps(p + q * 32 + 16);
    const float* aq = a + q * MR;
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(aq[r]);
      acc[r][0] = _mm512_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
  }
}

using TileFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool);

template <int... R> constexpr TileFn pick(int mr, std::integer_sequence<int, R...>) {
  TileFn fns[] = {tile<R + 1>...};
  return fns[mr - 1];
}

}  // namespace

YMLOPT_AVX512 void block_avx512(const Block& blk) {
  constexpr int64_t mc = kRowsPerPass / kMrAvx512 * kMrAvx512;
  for (int64_t i0 = 0; i0 < blk.m; i0 += mc) {
    const int64_t i1 = blk.m - i0 < mc ? blk.m : i0 + mc;
    for (int64_t j = 0; j < blk.n; j += 32) {  // one panel's block, then every row block of the pass over it
      const float* p = blk.b + (j / 32) * blk.ldp;
      const int64_t cols = blk.n - j < 32 ? blk.n - j : 32;
      for (int64_t i = i0; i < i1; i += kMrAvx512) {
        const int64_t rows = i1 - i < kMrAvx512 ? i1 - i : kMrAvx512;
        pick(int(rows), std::make_integer_sequence<int, kMrAvx512>{})(blk.a + i * blk.kc, p, blk.kc,
                                                                      blk.c + i * blk.ldc + j, blk.ldc, cols, blk.add);
      }
    }
  }
}

}  // namespace ymlopt::gemm::panels_impl

#pragma GCC diagnostic pop
