// What the paths of quant::linear_bf16 share (private to components/quant).
//
//   bf16_linear.cpp         the driver (checks, x to bf16, path choice) and the scalar path
//   bf16_linear_avx512.cpp  AVX-512 BF16 (vdpbf16ps)
//   bf16_linear_avx2.cpp    AVX2 + FMA
#pragma once
#include <cstdint>

namespace ymlopt::quant::bf16_impl {

/// x as bf16, rows of kp elements (k rounded up to 32, zero past k).
struct Acts {
  const std::uint16_t* q = nullptr;
  std::int64_t m = 0, k = 0, kp = 0;
};

/// out[i] = half::bf16_bits_from_float(x[i]) for i < n, bit for bit on every path
/// (round to nearest even, NaN kept quiet, subnormals kept).
void to_bf16_scalar(const float* x, std::int64_t n, std::uint16_t* out);
void to_bf16_avx2(const float* x, std::int64_t n, std::uint16_t* out);
void to_bf16_avx512(const float* x, std::int64_t n, std::uint16_t* out);

/// y[m, n] = acts · Wᵀ on one path (W rows of k bf16, stride ldw).
void run_scalar(const Acts& a, const std::uint16_t* w, std::int64_t n, std::int64_t ldw, float* y, std::int64_t ldy);
void run_avx2(const Acts& a, const std::uint16_t* w, std::int64_t n, std::int64_t ldw, float* y, std::int64_t ldy);
void run_avx512(const Acts& a, const std::uint16_t* w, std::int64_t n, std::int64_t ldw, float* y, std::int64_t ldy);

/// k elements per block (a multiple of 32): a block of 256 weight rows (512 KiB)
/// and one of activation rows (below) share a 1 MiB L2.
constexpr std::int64_t kKBlock = 1024;

/// Rows of x per block, so that a block of activations (~256 KiB of `kc`
/// columns) stays in L2 while every weight row passes over it; a multiple of `mr`.
inline std::int64_t row_block(std::int64_t kc, std::int64_t mr) {
  const std::int64_t rows = (256 * 1024) / (kc * 2);
  return rows < mr ? mr : rows / mr * mr;
}

/// Calls tile(i, j, mr, nr, c0, kc) over y [m, n] in tiles of up to MR x NR
/// and k blocks [c0, c0 + kc) (the first block stores y, the others add to
/// it): per row block, the weight rows outer (NR of them stay in L1 while the
/// block's activation rows pass).
template <std::int64_t MR, std::int64_t NR, class Tile>
void drive(std::int64_t m, std::int64_t n, std::int64_t k, Tile&& tile) {
  for (std::int64_t c0 = 0; c0 < k; c0 += kKBlock) {
    const std::int64_t kc = k - c0 < kKBlock ? k - c0 : kKBlock;
    const std::int64_t ib = row_block(kc, MR);
    for (std::int64_t i0 = 0; i0 < m; i0 += ib) {
      const std::int64_t i1 = i0 + ib < m ? i0 + ib : m;
      for (std::int64_t j = 0; j < n; j += NR)
        for (std::int64_t i = i0; i < i1; i += MR)
          tile(i, j, i1 - i < MR ? i1 - i : MR, n - j < NR ? n - j : NR, c0, kc);
    }
  }
}

}  // namespace ymlopt::quant::bf16_impl
