// gemm::sgemm_panels on AVX2 + FMA: each 32-column panel as two halves of 16,
// tiles of up to 6 rows x 16 columns (12 accumulators of 8 lanes).
#include <immintrin.h>

#include <utility>

#include "gemm/sgemm_panels_internal.hpp"

#define YMLOPT_AVX2 __attribute__((target("avx2,fma")))

namespace ymlopt::gemm::panels_impl {
namespace {

using std::int64_t;

/// C[MR, cols] (+)= A[MR, kc] · P[kc, 16 of the panel's 32] (cols <= 16 stored).
template <int MR>
YMLOPT_AVX2 void tile(const float* a, const float* p, int64_t kc, float* c, int64_t ldc, int64_t cols, bool add) {
  __m256 acc[MR][2];
  alignas(32) float edge[MR][16];  // the columns past `cols` go through here
  for (int r = 0; r < MR; ++r)
    if (cols == 16) {
      acc[r][0] = add ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
      acc[r][1] = add ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
    } else {
      for (int64_t j = 0; j < 16; ++j) edge[r][j] = add && j < cols ? c[r * ldc + j] : 0.0f;
      acc[r][0] = _mm256_load_ps(edge[r]);
      acc[r][1] = _mm256_load_ps(edge[r] + 8);
    }
  for (int64_t q = 0; q < kc; ++q) {
    const __m256 w0 = _mm256_loadu_ps(p + q * 32), w1 = _mm256_loadu_ps(p + q * 32 + 8);
    const float* aq = a + q * MR;
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(aq + r);
      acc[r][0] = _mm256_fmadd_ps(x, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r)
    if (cols == 16) {
      _mm256_storeu_ps(c + r * ldc, acc[r][0]);
      _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    } else {
      _mm256_store_ps(edge[r], acc[r][0]);
      _mm256_store_ps(edge[r] + 8, acc[r][1]);
      for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = edge[r][j];
    }
}

using TileFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool);

template <int... R> constexpr TileFn pick(int mr, std::integer_sequence<int, R...>) {
  TileFn fns[] = {tile<R + 1>...};
  return fns[mr - 1];
}

}  // namespace

YMLOPT_AVX2 void block_avx2(const Block& blk) {
  for (int64_t j = 0; j < blk.n; j += 16) {
    const float* p = blk.b + (j / 32) * blk.ldp + j % 32;
    const int64_t cols = blk.n - j < 16 ? blk.n - j : 16;
    for (int64_t i = 0; i < blk.m; i += kMrAvx2) {
      const int64_t rows = blk.m - i < kMrAvx2 ? blk.m - i : kMrAvx2;
      pick(int(rows), std::make_integer_sequence<int, kMrAvx2>{})(blk.a + i * blk.kc, p, blk.kc,
                                                                  blk.c + i * blk.ldc + j, blk.ldc, cols, blk.add);
    }
  }
}

}  // namespace ymlopt::gemm::panels_impl
