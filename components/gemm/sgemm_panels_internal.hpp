// What the paths of gemm::sgemm_panels share (private to components/gemm).
//
//   sgemm_panels.cpp         the driver (checks, packing, k blocks, the cache) and the scalar path
//   sgemm_panels_avx512.cpp  AVX-512F: tiles of 12 rows x 32 columns
//   sgemm_panels_avx2.cpp    AVX2 + FMA: tiles of 6 rows x 16 columns (half a panel)
#pragma once
#include <cstdint>

namespace ymlopt::gemm::panels_impl {

/// k per block: one panel's block (512 x 32 floats, 64 KiB) stays in L1/L2
/// while the row blocks of A pass over it. 256 and 1024 were slower on Zen 5
/// (docs/BENCHMARKS.md).
constexpr std::int64_t kKBlock = 512;

/// One k block of the product: A's rows packed in row blocks of `mr` (block b
/// starts at a + b * mr * kc; element (r, c) at c * rows + r, rows = mr except
/// in the last block), the panels' rows k0..k0+kc (panel p at b + p * ldp),
/// C[m, n] stored or added to (`add`).
struct Block {
  const float* a = nullptr;
  std::int64_t m = 0, kc = 0, mr = 0;
  const float* b = nullptr;
  std::int64_t ldp = 0, n = 0;
  float* c = nullptr;
  std::int64_t ldc = 0;
  bool add = false;
};

void block_scalar(const Block& blk);
void block_avx2(const Block& blk);
void block_avx512(const Block& blk);

/// Rows of A per pass over the panels (its packed block stays in L2).
constexpr std::int64_t kRowsPerPass = 96;

/// Rows per tile: AVX-512 12 x 2 accumulators (14 was slower with 512-deep blocks).
constexpr std::int64_t kMrScalar = 4, kMrAvx2 = 6, kMrAvx512 = 12;

}  // namespace ymlopt::gemm::panels_impl
