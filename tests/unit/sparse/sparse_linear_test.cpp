// sparse::to_csr / to_bsr / to_nm24 round trips, and the three linear kernels
// (AVX-512 and portable paths) against a naive long-double dense product.
#include "sparse/sparse_linear.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ymlopt::sparse {
namespace {

using std::int64_t;

/// Dense W [n, k] (ld ldw) with unstructured zeros: each entry is zero with
/// probability `zero_frac`; rows listed in `empty_rows` are all zero.
std::vector<float> random_sparse(int64_t n, int64_t k, int64_t ldw, double zero_frac, std::uint32_t seed,
                                 std::vector<int64_t> empty_rows = {}) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> val(-1, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> w(static_cast<std::size_t>(std::max<int64_t>(n * ldw, 1)), 55.0f);  // sentinel in padding
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w[r * ldw + c] = u(gen) < zero_frac ? 0.0f : val(gen);
  for (int64_t r : empty_rows)
    for (int64_t c = 0; c < k; ++c) w[r * ldw + c] = 0.0f;
  return w;
}

/// W [n, k] with a 2:4 pattern: in each group of 4, `keep` (0..2) random nonzeros.
std::vector<float> random_24(int64_t n, int64_t k, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> val(-1, 1);
  std::vector<float> w(static_cast<std::size_t>(n * k), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / 4; ++g) {
      const int keep = static_cast<int>(gen() % 5 == 0 ? gen() % 2 : 2);  // some groups with 0 or 1 nonzero
      int a = static_cast<int>(gen() % 4), b = static_cast<int>(gen() % 3);
      if (b >= a) ++b;
      if (keep >= 1) w[r * k + 4 * g + a] = val(gen);
      if (keep >= 2) w[r * k + 4 * g + b] = val(gen);
    }
  return w;
}

/// W [n, k] with bs x bs blocks, a fraction `zero_frac` of them all zero.
std::vector<float> random_blocks(int64_t n, int64_t k, int64_t bs, double zero_frac, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> val(-1, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> w(static_cast<std::size_t>(n * k), 0.0f);
  for (int64_t br = 0; br < n / bs; ++br)
    for (int64_t bc = 0; bc < k / bs; ++bc) {
      if (u(gen) < zero_frac) continue;
      for (int64_t r = 0; r < bs; ++r)
        for (int64_t c = 0; c < bs; ++c) w[(br * bs + r) * k + bc * bs + c] = val(gen);
    }
  return w;
}

std::vector<float> random_x(int64_t m, int64_t k, int64_t ldx, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> val(-1, 1);
  std::vector<float> x(static_cast<std::size_t>(std::max<int64_t>(m * ldx, 1)), 99.0f);
  for (int64_t t = 0; t < m; ++t)
    for (int64_t c = 0; c < k; ++c) x[t * ldx + c] = val(gen);
  return x;
}

/// Compares y [m, n] (ld ldy) with the long-double x · Wᵀ; tolerance relative to
/// sum |x||w| per output. Checks that the padding of y (columns n..ldy) is untouched.
void expect_product(const std::vector<float>& x, int64_t m, int64_t ldx, const std::vector<float>& w, int64_t n,
                    int64_t k, int64_t ldw, const std::vector<float>& y, int64_t ldy, const std::string& what) {
  for (int64_t t = 0; t < m; ++t)
    for (int64_t j = 0; j < n; ++j) {
      long double s = 0, a = 0;
      for (int64_t c = 0; c < k; ++c) {
        const long double p = static_cast<long double>(x[t * ldx + c]) * w[j * ldw + c];
        s += p;
        a += std::fabs(p);
      }
      const double tol = 1e-6 * static_cast<double>(a) + 1e-30;
      ASSERT_NEAR(y[t * ldy + j], static_cast<double>(s), tol) << what << " at (" << t << ", " << j << ")";
    }
  for (int64_t t = 0; t + 1 < m; ++t)
    for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(y[t * ldy + j], -7.0f) << what << ": padding of y written";
}

/// Runs `f` on the AVX-512 path (if the CPU has it) and on the portable path.
template <class F> void both_paths(F&& f) {
  if (avx512_available()) {
    force_portable(false);
    f("avx512");
  }
  force_portable(true);
  f("portable");
  force_portable(false);
}

// ---- round trips --------------------------------------------------------------

TEST(SparseFormats, CsrRoundTripAndRowSlices) {
  const int64_t n = 37, k = 53, ldw = 60;
  const auto w = random_sparse(n, k, ldw, 0.8, 1, {0, 5, 36});
  const Csr c = to_csr(w.data(), n, k, ldw);
  int64_t nnz = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) nnz += w[r * ldw + j] != 0.0f;
  EXPECT_EQ(static_cast<int64_t>(c.values.size()), nnz);
  EXPECT_EQ(c.row_ptr[1] - c.row_ptr[0], 0);  // empty row 0
  std::vector<float> back(static_cast<std::size_t>(n * k), -1.0f);
  to_dense(c.view(), back.data(), k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(back[r * k + j], w[r * ldw + j]) << r << "," << j;
  const CsrWeight s = c.view().rows(10, 20);
  EXPECT_EQ(s.n, 10);
  std::vector<float> part(static_cast<std::size_t>(10 * k));
  to_dense(s, part.data(), k);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(part[r * k + j], w[(r + 10) * ldw + j]);
  EXPECT_THROW(c.view().rows(5, 38), std::out_of_range);
}

TEST(SparseFormats, BsrRoundTripAndBlockRowSlices) {
  for (int64_t bs : {1, 4, 8, 16, 32}) {
    const int64_t n = 2 * 32, k = 3 * 32;
    const auto w = random_blocks(n, k, bs, 0.6, static_cast<std::uint32_t>(bs));
    const Bsr b = to_bsr(w.data(), n, k, k, bs);
    std::vector<float> back(static_cast<std::size_t>(n * k), -1.0f);
    to_dense(b.view(), back.data(), k);
    EXPECT_EQ(back, w) << "bs " << bs;
    const BsrWeight s = b.view().block_rows(1, n / bs);
    EXPECT_EQ(s.n, n - bs);
    std::vector<float> part(static_cast<std::size_t>(s.n * k));
    to_dense(s, part.data(), k);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), w.begin() + bs * k)) << "bs " << bs;
  }
  std::vector<float> w(12 * 16, 1.0f);
  EXPECT_THROW(to_bsr(w.data(), 12, 16, 16, 8), std::invalid_argument);  // 12 rows: not a multiple of 8
  EXPECT_THROW(to_bsr(w.data(), 16, 12, 12, 0), std::invalid_argument);
}

TEST(SparseFormats, Nm24RoundTripIndexFormatAndErrors) {
  const int64_t n = 9, k = 40;
  const auto w = random_24(n, k, 3);
  const Nm24 z = to_nm24(w.data(), n, k, k);
  ASSERT_EQ(z.values.size(), static_cast<std::size_t>(n * k / 2));
  ASSERT_EQ(z.index.size(), static_cast<std::size_t>(n * k / 8));
  std::vector<float> back(static_cast<std::size_t>(n * k), -1.0f);
  to_dense(z.view(), back.data(), k);
  EXPECT_EQ(back, w);
  // The documented bit layout, by hand: group 0 keeps columns 1 and 3, group 1 keeps 2 only.
  std::vector<float> one(8, 0.0f);
  one[1] = 5;
  one[3] = 6;
  one[4 + 2] = 7;
  const Nm24 h = to_nm24(one.data(), 1, 8, 8);
  EXPECT_EQ(h.values, (std::vector<float>{5, 6, 0, 7}));  // group 1: padding position 0 first
  EXPECT_EQ(h.index[0], static_cast<std::uint8_t>((1 | 3 << 2) | ((0 | 2 << 2) << 4)));
  // Row slice.
  const Nm24Weight s = z.view().rows(4, 9);
  std::vector<float> part(static_cast<std::size_t>(5 * k));
  to_dense(s, part.data(), k);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), w.begin() + 4 * k));
  // Three nonzeros in row 0, group 1: an error naming both.
  std::vector<float> bad(16, 0.0f);
  bad[4] = bad[5] = bad[7] = 1;
  try {
    to_nm24(bad.data(), 1, 16, 16);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 0, group 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(to_nm24(bad.data(), 1, 12, 12), std::invalid_argument);  // k not a multiple of 8
}

// ---- kernels ------------------------------------------------------------------

struct Case {
  int64_t m, n, k;
};
// m = 1 and m < 4 (GEMV), 4..64+ (blocked, lane tails), k not a multiple of 16, n not a multiple of 4.
const Case kCases[] = {{1, 37, 53}, {3, 19, 200}, {4, 33, 77}, {16, 64, 96}, {17, 5, 130},
                       {40, 70, 264}, {64, 9, 1000}, {129, 261, 88}, {200, 31, 2100}};

TEST(SparseLinear, CsrMatchesDenseReference) {
  for (double zf : {0.0, 0.5, 0.9, 0.97, 1.0})
    for (const Case& cs : kCases) {
      const int64_t ldw = cs.k + 3, ldx = cs.k + 5, ldy = cs.n + 2;
      const auto w = random_sparse(cs.n, cs.k, ldw, zf, static_cast<std::uint32_t>(cs.m * 7 + cs.k),
                                   {0, cs.n - 1});
      const auto x = random_x(cs.m, cs.k, ldx, static_cast<std::uint32_t>(cs.n));
      const Csr c = to_csr(w.data(), cs.n, cs.k, ldw);
      both_paths([&](const char* path) {
        std::vector<float> y(static_cast<std::size_t>(cs.m * ldy), -7.0f);
        linear(x.data(), cs.m, ldx, c.view(), y.data(), ldy);
        expect_product(x, cs.m, ldx, w, cs.n, cs.k, ldw, y, ldy,
                       std::string("csr ") + path + " zf " + std::to_string(zf) + " m " + std::to_string(cs.m) +
                           " n " + std::to_string(cs.n) + " k " + std::to_string(cs.k));
      });
    }
}

TEST(SparseLinear, CsrRowSliceWritesItsColumns) {
  const int64_t m = 20, n = 50, k = 70;
  const auto w = random_sparse(n, k, k, 0.7, 11);
  const auto x = random_x(m, k, k, 12);
  const Csr c = to_csr(w.data(), n, k, k);
  both_paths([&](const char* path) {
    std::vector<float> y(static_cast<std::size_t>(m * n), -7.0f);
    // Two slices, as two threads would run them, into column ranges of one y.
    linear(x.data(), m, k, c.view().rows(0, 23), y.data(), n);
    linear(x.data(), m, k, c.view().rows(23, n), y.data() + 23, n);
    expect_product(x, m, k, w, n, k, k, y, n, std::string("csr slices ") + path);
  });
}

// The GEMV plan: k across window edges (31, 32, 33, 53, 200, 2100), n across
// group edges, empty rows, every density; whole weights and row slices.
TEST(SparseLinear, CsrPlanMatchesDenseReference) {
  const Case cases[] = {{1, 1, 1},    {1, 37, 53},   {2, 16, 32}, {3, 19, 200}, {1, 33, 31},  {1, 17, 33},
                        {2, 70, 264}, {1, 31, 2100}, {4, 40, 90}, {5, 40, 90},  {7, 23, 130}, {9, 20, 64}};
  for (double zf : {0.0, 0.5, 0.9, 0.97, 1.0})
    for (const Case& cs : cases) {
      const int64_t ldw = cs.k + 3, ldx = cs.k + 5, ldy = cs.n + 2;
      const auto w = random_sparse(cs.n, cs.k, ldw, zf, static_cast<std::uint32_t>(cs.n * 3 + cs.k), {0, cs.n / 2});
      const auto x = random_x(cs.m, cs.k, ldx, static_cast<std::uint32_t>(cs.k));
      const Csr c = to_csr(w.data(), cs.n, cs.k, ldw);
      const CsrPlan plan = plan_gemv(c.view());
      // Every entry sits in exactly one slot, marked by bit 7.
      int64_t marked = 0;
      for (std::uint8_t b : plan.index) marked += b >> 7;
      EXPECT_EQ(marked, plan.nnz);
      EXPECT_EQ(plan.nnz, static_cast<int64_t>(c.values.size()));
      EXPECT_EQ(plan.bytes(), plan_gemv_bytes(c.view()));
      const std::string what = "plan zf " + std::to_string(zf) + " m " + std::to_string(cs.m) + " n " +
                               std::to_string(cs.n) + " k " + std::to_string(cs.k);
      both_paths([&](const char* path) {
        std::vector<float> y(static_cast<std::size_t>(cs.m * ldy), -7.0f);
        linear(x.data(), cs.m, ldx, c.view(), y.data(), ldy, &plan);
        expect_product(x, cs.m, ldx, w, cs.n, cs.k, ldw, y, ldy, what + " " + path);
        // Two row slices, each with its own plan, into column ranges of one y.
        const int64_t h = cs.n / 3;
        const CsrPlan p0 = plan_gemv(c.view().rows(0, h)), p1 = plan_gemv(c.view().rows(h, cs.n));
        std::fill(y.begin(), y.end(), -7.0f);
        linear(x.data(), cs.m, ldx, c.view().rows(0, h), y.data(), ldy, &p0);
        linear(x.data(), cs.m, ldx, c.view().rows(h, cs.n), y.data() + h, ldy, &p1);
        expect_product(x, cs.m, ldx, w, cs.n, cs.k, ldw, y, ldy, what + " slices " + path);
      });
    }
}

// Entries in any order within a row; an infinite x reaches only the rows that
// store its column (padding slots are masked, not multiplied by 0).
TEST(SparseLinear, CsrPlanUnorderedColumnsAndNonFiniteX) {
  const int64_t n = 40, k = 100;
  auto w = random_sparse(n, k, k, 0.9, 5);
  for (int64_t r = 0; r < n; ++r) w[r * k + 7] = r % 3 == 0 ? 0.5f : 0.0f;
  Csr c = to_csr(w.data(), n, k, k);
  for (int64_t r = 0; r < n; ++r) {  // reverse each row's entries
    std::reverse(c.col.begin() + c.row_ptr[r], c.col.begin() + c.row_ptr[r + 1]);
    std::reverse(c.values.begin() + c.row_ptr[r], c.values.begin() + c.row_ptr[r + 1]);
  }
  const CsrPlan plan = plan_gemv(c.view());
  auto x = random_x(1, k, k, 6);
  both_paths([&](const char* path) {
    std::vector<float> y(static_cast<std::size_t>(n), -7.0f);
    linear(x.data(), 1, k, c.view(), y.data(), n, &plan);
    expect_product(x, 1, k, w, n, k, k, y, n, std::string("unordered ") + path);
  });
  x[7] = std::numeric_limits<float>::infinity();
  both_paths([&](const char* path) {
    std::vector<float> y(static_cast<std::size_t>(n), -7.0f);
    linear(x.data(), 1, k, c.view(), y.data(), n, &plan);
    for (int64_t r = 0; r < n; ++r)
      EXPECT_EQ(std::isinf(y[static_cast<std::size_t>(r)]), r % 3 == 0) << path << " row " << r;
  });
}

TEST(SparseLinear, CsrPlanBadInputsThrow) {
  const auto w = random_sparse(8, 40, 40, 0.5, 1);
  Csr c = to_csr(w.data(), 8, 40, 40);
  const CsrPlan plan = plan_gemv(c.view());
  std::vector<float> x(40, 1.0f), y(8);
  EXPECT_THROW(linear(x.data(), 1, 40, c.view().rows(0, 4), y.data(), 8, &plan), std::invalid_argument);
  const Csr other = to_csr(random_sparse(8, 40, 40, 0.9, 2).data(), 8, 40, 40);  // same shape, other entries
  EXPECT_THROW(linear(x.data(), 1, 40, other.view(), y.data(), 8, &plan), std::invalid_argument);
  c.col[3] = 40;
  EXPECT_THROW(plan_gemv(c.view()), std::invalid_argument);
  EXPECT_THROW(plan_gemv_bytes(c.view()), std::invalid_argument);
  c.col[3] = -2;
  EXPECT_THROW(plan_gemv(c.view()), std::invalid_argument);
}

TEST(SparseLinear, BsrMatchesDenseReference) {
  for (int64_t bs : {4, 8, 16, 32})
    for (double zf : {0.0, 0.5, 0.9, 1.0})
      for (int64_t m : {1, 2, 5, 16, 33, 64, 100}) {
        const int64_t n = 3 * 32, k = 5 * 32, ldx = k + 1, ldy = n + 3;
        const auto w = random_blocks(n, k, bs, zf, static_cast<std::uint32_t>(bs * 13 + m));
        const auto x = random_x(m, k, ldx, static_cast<std::uint32_t>(m));
        const Bsr b = to_bsr(w.data(), n, k, k, bs);
        both_paths([&](const char* path) {
          std::vector<float> y(static_cast<std::size_t>(m * ldy), -7.0f);
          linear(x.data(), m, ldx, b.view(), y.data(), ldy);
          expect_product(x, m, ldx, w, n, k, k, y, ldy,
                         std::string("bsr ") + path + " bs " + std::to_string(bs) + " zf " + std::to_string(zf) +
                             " m " + std::to_string(m));
          // The second block row onwards, into the matching columns.
          std::vector<float> y2(static_cast<std::size_t>(m * ldy), -7.0f);
          for (int64_t t = 0; t < m; ++t)
            for (int64_t j = 0; j < bs; ++j) y2[t * ldy + j] = y[t * ldy + j];
          linear(x.data(), m, ldx, b.view().block_rows(1, n / bs), y2.data() + bs, ldy);
          expect_product(x, m, ldx, w, n, k, k, y2, ldy, std::string("bsr block_rows ") + path);
        });
      }
}

TEST(SparseLinear, Nm24MatchesDenseReference) {
  const Case cases[] = {{1, 37, 8}, {1, 21, 40}, {1, 13, 72}, {2, 19, 200}, {4, 33, 96}, {16, 64, 776},
                        {17, 5, 136}, {64, 9, 1000}, {129, 261, 88}, {70, 31, 2104}};
  for (const Case& cs : cases) {
    const int64_t ldx = cs.k + 5, ldy = cs.n + 2;
    const auto w = random_24(cs.n, cs.k, static_cast<std::uint32_t>(cs.k + cs.m));
    const auto x = random_x(cs.m, cs.k, ldx, static_cast<std::uint32_t>(cs.n));
    const Nm24 z = to_nm24(w.data(), cs.n, cs.k, cs.k);
    both_paths([&](const char* path) {
      std::vector<float> y(static_cast<std::size_t>(cs.m * ldy), -7.0f);
      linear(x.data(), cs.m, ldx, z.view(), y.data(), ldy);
      expect_product(x, cs.m, ldx, w, cs.n, cs.k, cs.k, y, ldy,
                     std::string("2:4 ") + path + " m " + std::to_string(cs.m) + " k " + std::to_string(cs.k));
      // Rows [3, n) with a padded values/index layout (ld > cols) via the view.
      if (cs.n > 3) {
        std::vector<float> vpad(static_cast<std::size_t>(cs.n * (cs.k / 2 + 3)), 1e9f);
        std::vector<std::uint8_t> ipad(static_cast<std::size_t>(cs.n * (cs.k / 8 + 2)), 0xFF);
        for (int64_t r = 0; r < cs.n; ++r) {
          std::copy_n(z.values.begin() + r * (cs.k / 2), cs.k / 2, vpad.begin() + r * (cs.k / 2 + 3));
          std::copy_n(z.index.begin() + r * (cs.k / 8), cs.k / 8, ipad.begin() + r * (cs.k / 8 + 2));
        }
        const Nm24Weight pv{vpad.data(), cs.k / 2 + 3, ipad.data(), cs.k / 8 + 2, cs.n, cs.k};
        std::vector<float> y2(static_cast<std::size_t>(cs.m * ldy), -7.0f);
        for (int64_t t = 0; t < cs.m; ++t)
          for (int64_t j = 0; j < 3; ++j) y2[t * ldy + j] = y[t * ldy + j];
        linear(x.data(), cs.m, ldx, pv.rows(3, cs.n), y2.data() + 3, ldy);
        expect_product(x, cs.m, ldx, w, cs.n, cs.k, cs.k, y2, ldy, std::string("2:4 padded rows ") + path);
      }
    });
  }
}

TEST(SparseLinear, RowSuperBlocksTimesTokenBlocks) {
  // k = 4096: ~1 MiB of weights is under 160 rows, so rows go by several
  // super-blocks, each over 2 token blocks (m = 70).
  const int64_t m = 70, n = 160, k = 4096;
  const auto x = random_x(m, k, k, 5);
  const auto wc = random_sparse(n, k, k, 0.0, 6);
  const auto wb = random_blocks(n, k, 32, 0.0, 7);
  const auto wz = random_24(n, k, 8);
  const Csr c = to_csr(wc.data(), n, k, k);
  const Bsr b = to_bsr(wb.data(), n, k, k, 32);
  const Nm24 z = to_nm24(wz.data(), n, k, k);
  both_paths([&](const char* path) {
    std::vector<float> y(static_cast<std::size_t>(m * n), -7.0f);
    linear(x.data(), m, k, c.view(), y.data(), n);
    expect_product(x, m, k, wc, n, k, k, y, n, std::string("csr ") + path);
    linear(x.data(), m, k, b.view(), y.data(), n);
    expect_product(x, m, k, wb, n, k, k, y, n, std::string("bsr ") + path);
    linear(x.data(), m, k, z.view(), y.data(), n);
    expect_product(x, m, k, wz, n, k, k, y, n, std::string("2:4 ") + path);
  });
}

TEST(SparseLinear, EmptyShapes) {
  const Csr c0 = to_csr(nullptr, 0, 0, 0);
  std::vector<float> y(8, -7.0f), x(8, 1.0f);
  linear(x.data(), 2, 4, c0.view(), y.data(), 4);  // n = 0: nothing written
  EXPECT_EQ(y[0], -7.0f);
  // k = 0: y = 0.
  const Csr ck = to_csr(nullptr, 3, 0, 0);
  linear(x.data(), 2, 0, ck.view(), y.data(), 3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], 0.0f);
  // m = 0: nothing.
  const auto w = random_sparse(4, 8, 8, 0.5, 1);
  const Nm24 z = to_nm24(random_24(4, 8, 2).data(), 4, 8, 8);
  std::fill(y.begin(), y.end(), -7.0f);
  linear(x.data(), 0, 8, to_csr(w.data(), 4, 8, 8).view(), y.data(), 4);
  linear(x.data(), 0, 8, z.view(), y.data(), 4);
  EXPECT_EQ(y[0], -7.0f);
}

TEST(SparseLinear, BadCallsThrow) {
  const auto w = random_sparse(8, 8, 8, 0.5, 1);
  const Csr c = to_csr(w.data(), 8, 8, 8);
  std::vector<float> x(64, 1.0f), y(64);
  EXPECT_THROW(linear(x.data(), 4, 7, c.view(), y.data(), 8), std::invalid_argument);  // ldx < k
  EXPECT_THROW(linear(x.data(), 4, 8, c.view(), y.data(), 7), std::invalid_argument);  // ldy < n
  // A column index >= k (blocked path, several k-chunks): reported, not read out of bounds.
  std::vector<float> wb(static_cast<std::size_t>(4 * 2000), 0.0f);
  wb[10] = 2;
  wb[1500] = 1;
  Csr big = to_csr(wb.data(), 4, 2000, 2000);
  std::vector<float> xl(static_cast<std::size_t>(8 * 2000), 1.0f), yb(32);
  // Unordered columns are fine: both entries still count.
  std::swap(big.col[0], big.col[1]);
  std::swap(big.values[0], big.values[1]);
  linear(xl.data(), 8, 2000, big.view(), yb.data(), 4);
  EXPECT_EQ(yb[0], 3.0f);
  big.col[1] = 2000;
  EXPECT_THROW(linear(xl.data(), 8, 2000, big.view(), yb.data(), 4), std::invalid_argument);
  big.col[1] = -1;
  EXPECT_THROW(linear(xl.data(), 8, 2000, big.view(), yb.data(), 4), std::invalid_argument);
  const Nm24 z = to_nm24(random_24(4, 8, 2).data(), 4, 8, 8);
  Nm24Weight zv = z.view();
  zv.k = 12;
  EXPECT_THROW(linear(x.data(), 1, 12, zv, y.data(), 4), std::invalid_argument);
}

}  // namespace
}  // namespace ymlopt::sparse
