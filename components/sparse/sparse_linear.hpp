// Sparse weight formats and their linear kernels: y = x · Wᵀ with W [n, k]
// (rows are output features) in CSR, BSR or 2:4-compressed form.
//
//   sparse::Csr c = sparse::to_csr(w, n, k, k);
//   sparse::linear(x, m, k, c.view(), y, n);
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace ymlopt::sparse {

/// CSR view; row_ptr[i] indexes `values`/`col` absolutely (row_ptr[0] may be > 0 in a row slice).
struct CsrWeight {
  const float* values = nullptr;
  const std::int32_t* col = nullptr;
  const std::int32_t* row_ptr = nullptr;  // n + 1 entries
  std::int64_t n = 0, k = 0;
  CsrWeight rows(std::int64_t n0, std::int64_t n1) const;
};

/// Block-sparse rows: bs x bs dense blocks, row-major within a block.
struct BsrWeight {
  const float* values = nullptr;  // [nblocks, bs*bs]
  const std::int32_t* block_col = nullptr;  // [nblocks]
  const std::int32_t* block_row_ptr = nullptr;  // n/bs + 1 entries, absolute
  std::int64_t n = 0, k = 0, bs = 0;
  BsrWeight block_rows(std::int64_t b0, std::int64_t b1) const;
};

/// 2:4 compressed: the two kept values of each group of 4 along k, and their positions.
struct Nm24Weight {
  const float* values = nullptr;  // [n, k/2]
  std::int64_t values_ld = 0;
  const std::uint8_t* index = nullptr;  // [n, k/8]: one nibble per group (group 2g low nibble),
  std::int64_t index_ld = 0;           // bits 0-1 first kept position, bits 2-3 second
  std::int64_t n = 0, k = 0;
  Nm24Weight rows(std::int64_t n0, std::int64_t n1) const;
  /// Column of a row's kept value p (the p-th of its k/2), from the row's index bytes.
  static std::int64_t column(const std::uint8_t* row_index, std::int64_t p) {
    return 4 * (p >> 1) + ((row_index[p >> 2] >> (2 * (p & 3))) & 3);
  }
};

/// std::vector storage on 64-byte boundaries (whole cache lines under every AVX-512 load).
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(std::size_t n) {
    void* p = std::aligned_alloc(64, (std::max<std::size_t>(n, 1) * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};

/// A CSR weight laid out once for products with few tokens (m < 8) without gathers, an
/// inspector-executor plan as MKL's mkl_sparse_optimize makes. Rows are sorted
/// by length and taken 16 at a time, one per AVX-512 lane; a group's entries go
/// by windows of 32 columns, the 16 rows' entries of a window interleaved step
/// by step (a row with fewer entries there pads its lane), so one vpermt2ps on
/// the window's 32 x values feeds 16 rows at once where the CSR GEMV gathers.
/// At 90% random zeros about half the slots are padding: ~10 bytes per nonzero
/// (CSR: 8). Built in O(nnz + n k / 512); the CSR it came from stays the stored
/// format, and the plan must be rebuilt if that CSR changes.
///
///   sparse::CsrPlan plan = sparse::plan_gemv(c.view());
///   sparse::linear(x, 1, k, c.view(), y, n, &plan);  // m < kCsrPlanMaxM runs on the plan
struct CsrPlan {
  struct Window {
    std::uint32_t window, steps;  // columns [32 window, 32 window + 32); steps of 16 slots
  };
  std::vector<float, Aligned64<float>> values;  // [slots][16 lanes]; padding 0
  std::vector<std::uint8_t> index;              // [slots][16]: bit 7 set on entries, bits 0-4 column in window
  std::vector<Window> windows;                  // each group's windows with entries, in column order
  std::vector<std::int64_t> group_windows;      // groups + 1 offsets into `windows`
  std::vector<std::int64_t> group_slots;        // groups + 1 offsets into the slots
  std::vector<std::int32_t> lane_row;           // [groups][16]: output row of each lane, -1 unused
  std::int64_t n = 0, k = 0, nnz = 0;
  std::int64_t groups() const { return static_cast<std::int64_t>(group_slots.size()) - 1; }
  std::int64_t bytes() const;  // bytes of the plan's arrays
};
/// Plans `w` (a whole CSR or a row slice); throws std::invalid_argument for a
/// column index outside [0, k).
CsrPlan plan_gemv(const CsrWeight& w);
/// plan_gemv(w).bytes() without building it (one counting pass over w's columns).
std::int64_t plan_gemv_bytes(const CsrWeight& w);

/// m below this runs one GEMV per token (CSR without a plan, BSR, 2:4).
constexpr std::int64_t kGemvMaxM = 4;
/// m below this runs on a CsrPlan when one is given, up to 4 tokens per pass
/// (measured: the plan beats the blocked CSR kernel up to m = 7 at 90% zeros,
/// m = 5 at 95%, m = 32 and more at 50%; docs/BENCHMARKS.md).
constexpr std::int64_t kCsrPlanMaxM = 8;

/// y[m, n] = x[m, k] · Wᵀ, overwriting y. Single-threaded.
/// CSR column (BSR block column) indices must lie in [0, k) ([0, k/bs)); for m >= 4 a row
/// breaking this is reported with std::invalid_argument (the GEMV path trusts them). Their
/// order within a row is free (to_csr's are ascending, which is fastest). ldx >= k and
/// ldy >= n when m > 1. m == 1 (and m < 4, token by token) takes a GEMV path; larger m
/// transposes blocks of up to 64 tokens so that AVX-512 runs over tokens (see sparse_linear.cpp).
/// With a plan (plan_gemv of this same w), m < kCsrPlanMaxM runs on it; larger m ignores it.
void linear(const float* x, std::int64_t m, std::int64_t ldx, const CsrWeight& w, float* y, std::int64_t ldy,
            const CsrPlan* plan = nullptr);
void linear(const float* x, std::int64_t m, std::int64_t ldx, const BsrWeight& w, float* y, std::int64_t ldy);
void linear(const float* x, std::int64_t m, std::int64_t ldx, const Nm24Weight& w, float* y, std::int64_t ldy);

/// Owning forms, built from a dense row-major W [n, k] (ldw elements).
struct Csr {
  std::vector<float> values;
  std::vector<std::int32_t> col, row_ptr;
  std::int64_t n = 0, k = 0;
  CsrWeight view() const { return {values.data(), col.data(), row_ptr.data(), n, k}; }
};
struct Bsr {
  std::vector<float> values;
  std::vector<std::int32_t> block_col, block_row_ptr;
  std::int64_t n = 0, k = 0, bs = 0;
  BsrWeight view() const { return {values.data(), block_col.data(), block_row_ptr.data(), n, k, bs}; }
};
struct Nm24 {
  std::vector<float> values;
  std::vector<std::uint8_t> index;
  std::int64_t n = 0, k = 0;
  Nm24Weight view() const { return {values.data(), k / 2, index.data(), k / 8, n, k}; }
};
Csr to_csr(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw);
/// Keeps every bs x bs block holding a nonzero (n and k multiples of bs).
Bsr to_bsr(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw, std::int64_t bs);
/// Throws std::invalid_argument if a group of 4 holds more than 2 nonzeros (k a multiple of 8).
Nm24 to_nm24(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw);
/// Back to dense [n, k] (ldw elements), zeros elsewhere.
void to_dense(const CsrWeight& w, float* out, std::int64_t ldw);
void to_dense(const BsrWeight& w, float* out, std::int64_t ldw);
void to_dense(const Nm24Weight& w, float* out, std::int64_t ldw);

/// Instruction-set selection of the kernels: the AVX-512 path when the CPU has it
/// (AVX-512 F/BW/DQ/VL, checked at run time), else portable C++ loops. The two paths
/// sum the same products; they differ only in rounding (the AVX-512 path fuses
/// multiply-adds and uses 2-16 partial sums). Tests force the portable path to compare.
///
///   sparse::force_portable(true);  sparse::linear(...);  sparse::force_portable(false);
bool avx512_available();
void force_portable(bool on);  // process-wide; do not flip while kernels run in other threads

}  // namespace ymlopt::sparse
