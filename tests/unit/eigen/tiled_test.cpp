// The tiled IRAM components (tiled_components.hpp): a CSR matrix cut into row
// blocks times a vector against the whole CSR product, and a cycle of tasks
// (eigen.iram_begin, eigen.block_matvec per block and column, eigen.arnoldi_step,
// eigen.iram_end) against eigen.iram_cycle cycle for cycle and against LAPACK;
// an adopted set restarts explicitly; lying blocks and misordered steps are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <string>
#include <vector>

#include "eigen/eigen.hpp"
#include "eigen/generators.hpp"
#include "eigen_reference.hpp"
#include "eigen_registry.hpp"

namespace {

using namespace ymlopt;
using namespace ymlopt::eigen;
using eigtest::CsrPorts;
using eigtest::registry;
using eigtest::run_error;
using eigtest::vec_view;
using std::int64_t;
using test::Mat;

/// Row r of a [rows, cols] matrix as a [1, cols] tile.
template <class T> TensorView tile(Mat<T>& m, int64_t r, int64_t cols = -1) {
  TensorView v = m.view();
  v.data = &m(r, 0);
  v.rows = 1;
  v.cols = cols < 0 ? m.cols : cols;
  v.shape = {1, v.cols};
  return v;
}

/// A CSR matrix cut by eigen.csr_block into blocks of `rows`, room for bcap values each.
struct Blocked {
  int64_t n, rows, blocks;
  Mat<double> val;
  Mat<std::int32_t> col, ptr;
  Blocked(CsrPorts<double>& csr, int64_t n_, int64_t rows_, int64_t bcap)
      : n(n_), rows(rows_), blocks((n_ + rows_ - 1) / rows_), val(blocks, bcap), col(blocks, bcap, 0, DType::i32),
        ptr(blocks, rows_ + 1, 0, DType::i32) {
    for (int64_t b = 0; b < blocks; ++b)
      test::run(registry(), "eigen.csr_block",
                {csr.a(), csr.index(), csr.rows(), tile(val, b), tile(col, b), tile(ptr, b)},
                {{"row_block", std::to_string(b)}});
  }
  int64_t block_rows(int64_t b) const { return std::min(rows, n - b * rows); }
  /// y = A x by eigen.block_matvec per block (y a [1, n] row cut into tiles).
  void product(Mat<double>& x, Mat<double>& y, std::map<std::string, std::string> args = {},
               TensorView cursor = {}) {
    for (int64_t b = 0; b < blocks; ++b) {
      TensorView yb = y.view();
      yb.data = &y(0, b * rows);
      yb.cols = block_rows(b);
      yb.shape = {1, yb.cols};
      test::run(registry(), "eigen.block_matvec", {tile(val, b), tile(col, b), tile(ptr, b), x.view(), yb, cursor},
                args);
    }
  }
};

/// n = 1001, {3, 2.6 ± 0.5i, 2.2} above a bulk in |z| <= 1.5.
CsrMatrix test_matrix() {
  return matrix_with_spectrum(random_spectrum({{3.0, 0}, {2.6, 0.5}, {2.2, 0}}, 997, 1.5, 0.3, 21), {.seed = 22});
}

TEST(EigenTiled, BlockedProductEqualsTheCsrProduct) {
  const CsrMatrix s = test_matrix();
  const int64_t n = s.rows;
  CsrPorts<double> csr(s, s.nnz() + 7);
  Blocked blk(csr, n, 128, 2 * s.nnz() / 7);  // 8 blocks, the last of 105 rows
  Mat<double> x(1, n), y(1, n, 0, DType::f64, 0.0);
  x.random(5);
  blk.product(x, y);
  std::vector<double> ref(static_cast<size_t>(n));
  csr_operator(s).apply(x.buf.data(), ref.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_DOUBLE_EQ(y(0, i), ref[static_cast<size_t>(i)]) << i;
  // The last block's rows past n are empty.
  for (int64_t r = blk.block_rows(blk.blocks - 1); r <= blk.rows; ++r)
    EXPECT_EQ(blk.ptr(blk.blocks - 1, r), blk.ptr(blk.blocks - 1, blk.block_rows(blk.blocks - 1)));
}

TEST(EigenTiled, LyingBlocksAndTooSmallRoomAreRefused) {
  const CsrMatrix s = test_matrix();
  const int64_t n = s.rows;
  CsrPorts<double> csr(s, s.nnz());
  Mat<double> val(1, 10);
  Mat<std::int32_t> col(1, 10, 0, DType::i32), ptr(1, 129, 0, DType::i32);
  const std::string e = run_error("eigen.csr_block", {csr.a(), csr.index(), csr.rows(), val.view(), col.view(), ptr.view()},
                                  {{"row_block", "1"}});
  EXPECT_NE(e.find("row block 1 (rows 128..255) holds " + std::to_string(s.row_ptr[256] - s.row_ptr[128]) +
                   " nonzeros but 'block' has room for 10"),
            std::string::npos)
      << e;
  EXPECT_EQ(test::check(registry(), "eigen.csr_block",
                        {csr.a(), csr.index(), csr.rows(), val.view(), col.view(), ptr.view()}, {{"row_block", "8"}}),
            "param 'row_block' is 8: blocks of 128 rows cut n = 1001 into 8");

  // A lying pointer of the whole CSR: the block whose rows read it names it; its first row out of range too.
  Mat<double> bv(1, s.nnz());
  Mat<std::int32_t> bc(1, s.nnz(), 0, DType::i32), bp(1, 129, 0, DType::i32);
  const std::vector<TensorView> block2 = {csr.a(), csr.index(), csr.rows(), bv.view(), bc.view(), bp.view()};
  const std::int32_t keep = csr.ptr(0, 300);
  csr.ptr(0, 300) = -4;
  EXPECT_EQ(run_error("eigen.csr_block", block2, {{"row_block", "2"}}), "port 'a_ptr' decreases at row 299 (" +
                                                                            std::to_string(csr.ptr(0, 299)) + " -> -4)");
  EXPECT_EQ(run_error("eigen.csr_block", block2, {{"row_block", "0"}}), "");  // rows 0..127 do not read it
  csr.ptr(0, 256) = -1;
  EXPECT_EQ(run_error("eigen.csr_block", block2, {{"row_block", "2"}}), "port 'a_ptr' entry 256 is -1, outside [0, " +
                                                                            std::to_string(s.nnz()) + "]");
  csr.ptr(0, 256) = static_cast<std::int32_t>(s.row_ptr[256]);
  csr.ptr(0, 300) = keep;

  Blocked blk(csr, n, 128, s.nnz());
  Mat<double> x(1, n, 0, DType::f64, 1.0), y(1, n);
  blk.col(2, 3) = static_cast<std::int32_t>(n);
  std::string m = run_error("eigen.block_matvec", {tile(blk.val, 2), tile(blk.col, 2), tile(blk.ptr, 2), x.view(),
                                                   tile(y, 0, 128)},
                            {});
  EXPECT_EQ(m, "port 'a_index' entry 3 is 1001: columns are in [0, 1001)");
  blk.ptr(3, 5) = -1;
  m = run_error("eigen.block_matvec", {tile(blk.val, 3), tile(blk.col, 3), tile(blk.ptr, 3), x.view(), tile(y, 0, 128)},
                {});
  EXPECT_EQ(m, "port 'a_ptr' entry 5 is -1: row pointers must not decrease and stay <= " +
                   std::to_string(s.nnz()));
  EXPECT_EQ(test::check(registry(), "eigen.block_matvec",
                        {tile(blk.val, 0), tile(blk.col, 0), tile(blk.ptr, 0), x.view(), tile(y, 0, 129)}, {}),
            "port 'y' is 1x129: a row of at most the block's 128 rows");
  EXPECT_EQ(test::check(registry(), "eigen.block_matvec",
                        {tile(blk.val, 0), tile(blk.col, 0), tile(blk.ptr, 0), x.view(), tile(y, 0, 128)},
                        {{"step", "2"}}),
            "param 'step' needs port 'cursor'");
}

/// One tiled IRAM co-method's tensors.
struct TiledIram {
  int64_t n, k, m;
  Mat<double> v, vals, res, basis, hess, state, cursor, x, w;
  std::map<std::string, std::string> args;
  TiledIram(int64_t n_, int64_t k_, int64_t m_, std::map<std::string, std::string> a)
      : n(n_), k(k_), m(m_), v(n_, k_, 0, DType::f64, 0.0), vals(k_, 3, 0, DType::f64, 0.0), res(1, 1),
        basis(m_ + 1, n_, 0, DType::f64, 0.0), hess(m_ + 1, m_, 0, DType::f64, 0.0),
        state(k_ + 1, 3, 0, DType::f64, 0.0), cursor(1, 1, 0, DType::f64, 0.0), x(1, n_, 0, DType::f64, 0.0),
        w(1, n_, 0, DType::f64, 0.0), args(std::move(a)) {}
  std::map<std::string, std::string> with(std::map<std::string, std::string> extra) const {
    std::map<std::string, std::string> out;
    for (const char* name : {"k", "subspace"}) out[name] = args.at(name);
    for (auto& [key, value] : extra) out[key] = value;
    return out;
  }
  /// One cycle; returns (explicit restart, products computed, iram_end's reports).
  std::map<std::string, double> cycle(Blocked& blk, CsrPorts<double>& csr) {
    std::map<std::string, double> out;
    const auto begin = test::run(registry(), "eigen.iram_begin",
                                 {v.view(), vals.view(), basis.view(), hess.view(), state.view(), cursor.view(),
                                  x.view()},
                                 with({{"seed", args.at("seed")}}));
    out["explicit"] = begin.count("explicit") ? begin.at("explicit") : 0.0;
    double products = 0;
    for (int64_t j = 0; j < m; ++j) {
      const auto step = std::to_string(j);
      if (double(j) >= cursor(0, 0)) ++products;
      blk.product(x, w, {{"step", step}}, cursor.view());
      test::run(registry(), "eigen.arnoldi_step",
                {w.view(), basis.view(), hess.view(), state.view(), cursor.view(), x.view()}, with({{"step", step}}));
    }
    TensorView r = res.view();
    r.shape = {1};
    auto end = test::run(registry(), "eigen.iram_end",
                         {v.view(), vals.view(), r, basis.view(), hess.view(), state.view(), cursor.view(), x.view(),
                          csr.a(), csr.index(), csr.rows()},
                         args);
    end["products"] = products;
    end["explicit"] = out["explicit"];
    return end;
  }
};

TEST(EigenTiled, CycleOfTasksIsIramCycleCycleForCycle) {
  const CsrMatrix s = test_matrix();
  const int64_t n = s.rows, k = 3, m = 12;
  CsrPorts<double> csr(s, s.nnz());
  Blocked blk(csr, n, 300, s.nnz());  // 4 blocks, the last of 101 rows
  const std::map<std::string, std::string> args = {{"k", "3"}, {"subspace", "12"}, {"tol", "1e-10"}, {"seed", "5"},
                                                   {"format", "csr"}};
  TiledIram t(n, k, m, args);
  // eigen.iram_cycle on the same CSR ports.
  Mat<double> v(n, k, 0, DType::f64, 0.0), vals(k, 3, 0, DType::f64, 0.0), res(1, 1),
      basis(m + 1, n, 0, DType::f64, 0.0), hess(m + 1, m, 0, DType::f64, 0.0), state(k + 1, 3, 0, DType::f64, 0.0);
  TensorView r = res.view();
  r.shape = {1};
  int cycles = 0;
  for (; cycles < 500; ++cycles) {
    const auto ref = test::run(registry(), "eigen.iram_cycle",
                               {csr.a(), v.view(), vals.view(), r, basis.view(), hess.view(), state.view(),
                                csr.index(), csr.rows()},
                               args);
    const auto got = t.cycle(blk, csr);
    ASSERT_EQ(got.at("products"), ref.at("matvecs")) << "cycle " << cycles;
    EXPECT_EQ(got.at("explicit"), 0.0);
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < 3; ++c)
        ASSERT_NEAR(t.vals(j, c), vals(j, c), 1e-9 * std::max(1.0, std::abs(vals(j, c))))
            << "cycle " << cycles << " pair " << j << " column " << c;
    if (res(0, 0) <= 1e-10) break;
  }
  ASSERT_LE(res(0, 0), 1e-10);
  ASSERT_LE(t.res(0, 0), 1e-10);
  EXPECT_GT(cycles, 3);
  const auto want = eigref::lapack_geev(to_dense(s), n);
  std::vector<std::complex<double>> top(want.begin(), want.end());
  std::sort(top.begin(), top.end(), [](auto a, auto b) {
    return std::abs(std::abs(a) - std::abs(b)) > 1e-12 ? std::abs(a) > std::abs(b) : a.imag() > b.imag();
  });
  for (int64_t j = 0; j < k; ++j)
    EXPECT_LE(std::abs(std::complex<double>(t.vals(j, 0), t.vals(j, 1)) - top[static_cast<size_t>(j)]), 1e-8) << j;
}

TEST(EigenTiled, AnAdoptedSetRestartsExplicitly) {
  const CsrMatrix s = test_matrix();
  const int64_t n = s.rows;
  CsrPorts<double> csr(s, s.nnz());
  Blocked blk(csr, n, 256, s.nnz());
  const std::map<std::string, std::string> args = {{"k", "2"}, {"subspace", "12"}, {"tol", "1e-10"}, {"seed", "1"},
                                                   {"format", "csr"}};
  TiledIram big(n, 2, 12, args), small(n, 2, 12, args);
  for (int i = 0; i < 400 && !(big.res(0, 0) <= 1e-10); ++i) big.cycle(blk, csr);
  ASSERT_LE(big.res(0, 0), 1e-10);
  auto first = small.cycle(blk, csr);
  EXPECT_EQ(first.at("products"), 12.0);
  EXPECT_LT(small.cycle(blk, csr).at("products"), 12.0);  // implicit
  small.v.buf = big.v.buf;  // what eigen.ritz_select does on adoption
  small.vals.buf = big.vals.buf;
  const auto adopted = small.cycle(blk, csr);
  EXPECT_EQ(adopted.at("explicit"), 1.0);
  EXPECT_EQ(adopted.at("products"), 12.0);
  EXPECT_LE(small.res(0, 0), 1e-9);
}

TEST(EigenTiled, StepsOutOfOrderAndChecksAreRefused) {
  const int64_t n = 100;
  TiledIram t(n, 2, 8, {{"k", "2"}, {"subspace", "8"}, {"seed", "1"}});
  const auto step = [&](int j) {
    return run_error("eigen.arnoldi_step", {t.w.view(), t.basis.view(), t.hess.view(), t.state.view(),
                                            t.cursor.view(), t.x.view()},
                     t.with({{"step", std::to_string(j)}}));
  };
  EXPECT_EQ(step(0), "the factorisation is not started (state row 0) or port 'cursor' holds 0.000000: run "
                     "eigen.iram_begin before the steps");
  test::run(registry(), "eigen.iram_begin",
            {t.v.view(), t.vals.view(), t.basis.view(), t.hess.view(), t.state.view(), t.cursor.view(), t.x.view()},
            t.with({{"seed", "1"}}));
  EXPECT_EQ(step(1), "step 1 but the factorisation's next column is 0.000000: the steps of a cycle run in order");
  TensorView r = t.res.view();
  r.shape = {1};
  const std::vector<TensorView> end = {t.v.view(), t.vals.view(), r, t.basis.view(), t.hess.view(),
                                       t.state.view(), t.cursor.view(), t.x.view()};
  EXPECT_EQ(run_error("eigen.iram_end", end, {{"k", "2"}, {"subspace", "8"}, {"verify", "false"}}),
            "the factorisation has 0.000000 of its 8 columns: eigen.iram_end runs after the cycle's last "
            "eigen.arnoldi_step");
  EXPECT_EQ(test::check(registry(), "eigen.iram_end", end, {{"k", "2"}, {"subspace", "8"}}),
            "verify needs the operator: bind port 'a' (with a_index and a_ptr for format=csr), or set verify=false");
  EXPECT_EQ(test::check(registry(), "eigen.iram_end", end, {{"k", "2"}, {"subspace", "100"}, {"verify", "false"}}),
            "param 'subspace' is 100: the tiled IRAM needs 3 <= subspace < n = 100");
  EXPECT_EQ(test::check(registry(), "eigen.iram_end", end, {{"k", "7"}, {"subspace", "8"}, {"verify", "false"}}),
            "param 'k' is 7: an implicit restart needs 1 <= k < subspace - 1 = 7");
}

}  // namespace
