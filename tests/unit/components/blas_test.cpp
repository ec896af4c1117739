// blas.* components against naive long-double references.
#include "blas/blas.hpp"

#include <lapacke.h>

#include <cmath>
#include <type_traits>
#include <limits>

#include "test_context.hpp"

namespace ymlopt::test {
namespace {

class Blas : public ::testing::Test {
 protected:
  void SetUp() override { register_blas(reg); }
  TestRegistry reg;
};

template <class T> class BlasTyped : public Blas {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BlasTyped, FloatTypes);

/// The sentinel padding (columns >= cols of each row) is untouched.
template <class T> bool padding_intact(const Mat<T>& x, T sentinel = T(77)) {
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t j = x.cols; j < x.ld; ++j)
      if (x(i, j) != sentinel) return false;
  return true;
}

TYPED_TEST(BlasTyped, GemmMatchesNaiveWithTransposesAndStrides) {
  using T = TypeParam;
  struct Case {
    std::int64_t m, n, k;
  };
  std::uint32_t seed = 1;
  for (Case cs : {Case{1, 1, 1}, Case{7, 5, 3}, Case{33, 17, 9}, Case{4, 64, 65}, Case{2, 1, 31}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (std::int64_t pad : {0, 3}) {
          Mat<T> a(ta ? cs.k : cs.m, ta ? cs.m : cs.k, pad), b(tb ? cs.n : cs.k, tb ? cs.k : cs.n, pad + 1),
              c(cs.m, cs.n, pad);
          a.random(seed++);
          b.random(seed++);
          c.random(seed++);
          const auto ref = naive_gemm(a, b, c, ta, tb, 1.5L, 0.5L);
          run(this->reg, "blas.gemm", {a.view(), b.view(), c.view()},
              {{"alpha", "1.5"}, {"beta", "0.5"}, {"transa", ta ? "true" : "false"}, {"transb", tb ? "true" : "false"}});
          SCOPED_TRACE(::testing::Message() << cs.m << "x" << cs.n << "x" << cs.k << " ta=" << ta << " tb=" << tb
                                            << " pad=" << pad);
          EXPECT_LT(max_rel_err(c, ref), 20 * eps<T>());
          EXPECT_TRUE(padding_intact(c));
        }
}

TYPED_TEST(BlasTyped, GemmDefaultBetaOverwrites) {
  using T = TypeParam;
  Mat<T> a(3, 4), b(4, 2), c(3, 2);
  a.random(1);
  b.random(2);
  c.random(3);
  Mat<T> zero = c;
  for (auto& v : zero.buf) v = 0;
  const auto ref = naive_gemm(a, b, zero, false, false, 1, 0);
  run(this->reg, "blas.gemm", {a.view(), b.view(), c.view()});
  EXPECT_LT(max_rel_err(c, ref), 10 * eps<T>());
}

TYPED_TEST(BlasTyped, AxpyStridedAndContiguous) {
  using T = TypeParam;
  for (std::int64_t pad : {0, 2}) {
    Mat<T> x(5, 7, pad), y(5, 7, pad + 1);
    x.random(11);
    y.random(12);
    std::vector<long double> ref;
    for (std::int64_t i = 0; i < 5; ++i)
      for (std::int64_t j = 0; j < 7; ++j) ref.push_back(static_cast<long double>(y(i, j)) - 2.5L * x(i, j));
    run(this->reg, "blas.axpy", {x.view(), y.view()}, {{"alpha", "-2.5"}});
    EXPECT_LT(max_rel_err(y, ref), 4 * eps<T>());
    EXPECT_TRUE(padding_intact(y));
  }
}

/// A random symmetric positive definite n x n matrix (M*M^T + n*I).
template <class T> Mat<T> spd(std::int64_t n, std::int64_t pad, std::uint32_t seed) {
  Mat<T> m(n, n), a(n, n, pad);
  m.random(seed);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double s = i == j ? n : 0;
      for (std::int64_t p = 0; p < n; ++p) s += static_cast<long double>(m(i, p)) * m(j, p);
      a(i, j) = static_cast<T>(s);
    }
  return a;
}

TYPED_TEST(BlasTyped, PotrfReproducesAAndZeroesUpper) {
  using T = TypeParam;
  for (std::int64_t n : {1, 2, 5, 31, 64}) {
    for (std::int64_t pad : {0, 5}) {
      Mat<T> a = spd<T>(n, pad, std::uint32_t(n));
      const Mat<T> a0 = a;
      run(this->reg, "blas.potrf", {a.view()});
      SCOPED_TRACE(::testing::Message() << "n=" << n << " pad=" << pad);
      std::vector<long double> llt;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          if (j > i) {
            EXPECT_EQ(a(i, j), T(0)) << i << "," << j;
          }
          long double s = 0;
          for (std::int64_t p = 0; p <= std::min(i, j); ++p) s += static_cast<long double>(a(i, p)) * a(j, p);
          llt.push_back(s);
        }
      EXPECT_LT(max_rel_err(a0, llt), 10 * n * eps<T>());
      EXPECT_TRUE(padding_intact(a));
    }
  }
}

TYPED_TEST(BlasTyped, PotrfNotPositiveDefiniteThrows) {
  using T = TypeParam;
  Mat<T> a(3, 3);
  const T v[9] = {4, 0, 0, 2, 1, 0, 1, 0, 1};  // lower triangle; the leading 2x2 minor is 4*1 - 2*2 = 0
  for (int i = 0; i < 9; ++i) a.buf[std::size_t(i)] = v[i];
  try {
    run(this->reg, "blas.potrf", {a.view()});
    FAIL() << "expected KernelError";
  } catch (const KernelError& e) {
    EXPECT_STREQ(e.what(), "matrix is not positive definite (leading minor 2)");
  }
}

/// A random n x n matrix with n added to its diagonal: dominant by rows and
/// columns, so LU needs no pivot and LAPACK's partial pivoting takes none.
template <class T> Mat<T> dominant(std::int64_t n, std::int64_t pad, std::uint32_t seed) {
  Mat<T> a(n, n, pad);
  a.random(seed);
  for (std::int64_t i = 0; i < n; ++i) a(i, i) += T(n);
  return a;
}

TYPED_TEST(BlasTyped, GetrfReproducesAAndMatchesLapack) {
  using T = TypeParam;
  // 64 and 150 take more than one panel of the blocked factorisation
  for (std::int64_t n : {1, 2, 7, 64, 150}) {
    for (std::int64_t pad : {0, 5}) {
      Mat<T> a = dominant<T>(n, pad, std::uint32_t(n + pad));
      const Mat<T> a0 = a;
      run(this->reg, "blas.getrf", {a.view()});
      SCOPED_TRACE(::testing::Message() << "n=" << n << " pad=" << pad);
      // L U (L unit lower) against the input, in long double
      std::vector<long double> lu;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          long double s = 0;
          for (std::int64_t p = 0; p <= std::min(i, j); ++p)
            s += (p == i ? 1.0L : static_cast<long double>(a(i, p))) * a(p, j);
          lu.push_back(s);
        }
      EXPECT_LT(max_rel_err(a0, lu), 10 * n * eps<T>());
      EXPECT_TRUE(padding_intact(a));
      // LAPACK's getrf (column-major on the transpose: A^T = U^T L^T, so its unit
      // diagonal is on the other factor) takes no pivot on this matrix and gives the same factors
      Mat<T> t(n, n);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) t(i, j) = a0(i, j);
      std::vector<lapack_int> ipiv(static_cast<std::size_t>(n));
      lapack_int info;
      if constexpr (std::is_same_v<T, float>) info = LAPACKE_sgetrf(LAPACK_ROW_MAJOR, n, n, t.buf.data(), n, ipiv.data());
      else info = LAPACKE_dgetrf(LAPACK_ROW_MAJOR, n, n, t.buf.data(), n, ipiv.data());
      ASSERT_EQ(info, 0);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(ipiv[std::size_t(i)], i + 1) << "LAPACK pivoted";
      std::vector<long double> ref(t.buf.begin(), t.buf.begin() + n * n);
      EXPECT_LT(max_rel_err(a, ref), 20 * n * eps<T>());
    }
  }
}

TYPED_TEST(BlasTyped, GetrfZeroPivotThrows) {
  using T = TypeParam;
  Mat<T> a(3, 3);
  const T v[9] = {2, 1, 0, 4, 2, 1, 1, 1, 1};  // the leading 2x2 minor is 2*2 - 1*4 = 0
  for (int i = 0; i < 9; ++i) a.buf[std::size_t(i)] = v[i];
  try {
    run(this->reg, "blas.getrf", {a.view()});
    FAIL() << "expected KernelError";
  } catch (const KernelError& e) {
    EXPECT_STREQ(e.what(),
                 "pivot U(1,1) is 0.000000: blas.getrf does not pivot (the leading minors must be nonzero, as for a "
                 "diagonally dominant matrix: init=\"dominant\")");
  }
}

TYPED_TEST(BlasTyped, GetriGivesTheInverse) {
  using T = TypeParam;
  for (std::int64_t n : {1, 3, 40}) {
    for (std::int64_t pad : {0, 3}) {
      // a matrix that needs row exchanges: partial pivoting inside the tile
      Mat<T> a(n, n, pad);
      a.random(std::uint32_t(7 * n + pad));
      for (std::int64_t i = 0; i < n; ++i) a(i, (i + 1) % n) += T(n);
      const Mat<T> a0 = a;
      run(this->reg, "blas.getri", {a.view()});
      SCOPED_TRACE(::testing::Message() << "n=" << n << " pad=" << pad);
      std::vector<long double> eye;
      Mat<T> prod(n, n);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          long double s = 0;
          for (std::int64_t p = 0; p < n; ++p) s += static_cast<long double>(a0(i, p)) * a(p, j);
          prod(i, j) = static_cast<T>(s);
          eye.push_back(i == j ? 1.0L : 0.0L);
        }
      EXPECT_LT(max_rel_err(prod, eye), 50 * n * eps<T>());
      EXPECT_TRUE(padding_intact(a));
    }
  }
}

TYPED_TEST(BlasTyped, GetriSingularThrows) {
  using T = TypeParam;
  Mat<T> a(2, 2);
  const T v[4] = {1, 2, 2, 4};
  for (int i = 0; i < 4; ++i) a.buf[std::size_t(i)] = v[i];
  try {
    run(this->reg, "blas.getri", {a.view()});
    FAIL() << "expected KernelError";
  } catch (const KernelError& e) {
    EXPECT_STREQ(e.what(), "matrix is singular (U(1,1) is 0 after partial pivoting)");
  }
}

TYPED_TEST(BlasTyped, TrsmRightLowerTransSolvesXLt) {
  using T = TypeParam;
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {6, 4}, {13, 29}}) {
    Mat<T> l = spd<T>(n, 1, 7);
    run(this->reg, "blas.potrf", {l.view()});  // a well conditioned lower L
    Mat<T> b(m, n, 2);
    b.random(8);
    const Mat<T> b0 = b;
    run(this->reg, "blas.trsm", {l.view(), b.view()});
    // X * L^T must give back B
    std::vector<long double> xlt;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (std::int64_t p = 0; p <= j; ++p) s += static_cast<long double>(b(i, p)) * l(j, p);
        xlt.push_back(s);
      }
    EXPECT_LT(max_rel_err(b0, xlt), 10 * n * eps<T>());
    EXPECT_TRUE(padding_intact(b));
  }
}

TYPED_TEST(BlasTyped, TrsmLeftLowerNoTransSolvesLX) {
  using T = TypeParam;
  const std::int64_t m = 9, n = 5;
  Mat<T> l = spd<T>(m, 0, 3);
  run(this->reg, "blas.potrf", {l.view()});
  Mat<T> b(m, n);
  b.random(4);
  const Mat<T> b0 = b;
  run(this->reg, "blas.trsm", {l.view(), b.view()}, {{"side", "left"}, {"trans", "notrans"}, {"alpha", "2"}});
  std::vector<long double> lx;  // L * X = 2 B
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double s = 0;
      for (std::int64_t p = 0; p <= i; ++p) s += static_cast<long double>(l(i, p)) * b(p, j);
      lx.push_back(s / 2);
    }
  EXPECT_LT(max_rel_err(b0, lx), 10 * m * eps<T>());
}

TYPED_TEST(BlasTyped, SyrkUpdatesOnlyLowerTriangle) {
  using T = TypeParam;
  for (bool tr : {false, true}) {
    const std::int64_t n = 11, k = 6;
    Mat<T> a(tr ? k : n, tr ? n : k, 3), c(n, n, 1);
    a.random(5);
    c.random(6);
    const Mat<T> c0 = c;
    run(this->reg, "blas.syrk", {a.view(), c.view()},
        {{"alpha", "-1"}, {"beta", "1"}, {"trans", tr ? "trans" : "notrans"}});
    std::vector<long double> ref;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (std::int64_t p = 0; p < k; ++p)
          s += tr ? static_cast<long double>(a(p, i)) * a(p, j) : static_cast<long double>(a(i, p)) * a(j, p);
        ref.push_back(j <= i ? -s + c0(i, j) : static_cast<long double>(c0(i, j)));
      }
    EXPECT_LT(max_rel_err(c, ref), 10 * eps<T>());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = i + 1; j < n; ++j) EXPECT_EQ(c(i, j), c0(i, j));
    EXPECT_TRUE(padding_intact(c));
  }
}

// The four components together: right-looking tiled Cholesky on tile views of one matrix.
TYPED_TEST(BlasTyped, TiledCholeskyComposes) {
  using T = TypeParam;
  const std::int64_t nb = 3, bs = 7, n = nb * bs;
  Mat<T> a = spd<T>(n, 2, 42);
  const Mat<T> a0 = a;
  auto tile = [&](std::int64_t i, std::int64_t j) {
    TensorView v = a.view();
    v.data = &a(i * bs, j * bs);
    v.rows = v.cols = bs;
    v.shape = {bs, bs};
    return v;
  };
  for (std::int64_t k = 0; k < nb; ++k) {
    run(this->reg, "blas.potrf", {tile(k, k)});
    for (std::int64_t i = k + 1; i < nb; ++i) run(this->reg, "blas.trsm", {tile(k, k), tile(i, k)});
    for (std::int64_t i = k + 1; i < nb; ++i) {
      run(this->reg, "blas.syrk", {tile(i, k), tile(i, i)}, {{"alpha", "-1"}});
      for (std::int64_t j = k + 1; j < i; ++j)
        run(this->reg, "blas.gemm", {tile(i, k), tile(j, k), tile(i, j)},
            {{"alpha", "-1"}, {"beta", "1"}, {"transb", "true"}});
    }
  }
  std::vector<long double> llt;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double s = 0;
      for (std::int64_t p = 0; p <= std::min(i, j); ++p) s += static_cast<long double>(a(i, p)) * a(j, p);
      llt.push_back(s);
    }
  Mat<T> sym = a0;  // spd() wrote both triangles
  EXPECT_LT(max_rel_err(sym, llt), 10 * n * eps<T>());
}

TEST_F(Blas, GemmCheckMessages) {
  const DType f = DType::f32;
  EXPECT_EQ(check(reg, "blas.gemm", {shape_view(f, 4, 3), shape_view(f, 3, 5), shape_view(f, 4, 5)}), "");
  EXPECT_EQ(check(reg, "blas.gemm", {shape_view(f, 4, 3), shape_view(f, 5, 2), shape_view(f, 4, 2)}),
            "port 'b' is 5x2 but port 'a' is 4x3: inner dimensions differ (3 != 5)");
  EXPECT_EQ(check(reg, "blas.gemm", {shape_view(f, 4, 3), shape_view(f, 5, 2), shape_view(f, 3, 5)},
                  {{"transa", "true"}, {"transb", "true"}}),
            "port 'b' is 5x2 but port 'a' is 4x3: inner dimensions differ (4 != 2) (transa=true, transb=true)");
  EXPECT_EQ(check(reg, "blas.gemm", {shape_view(f, 4, 3), shape_view(f, 3, 5), shape_view(f, 5, 4)}),
            "port 'c' is 5x4 but op(a)*op(b) is 4x5");
  EXPECT_EQ(check(reg, "blas.gemm", {shape_view(f, 4, 3), shape_view(DType::f64, 3, 5), shape_view(f, 4, 5)}),
            "port 'b' has dtype f64 but port 'a' has dtype f32: dtypes must match");
  EXPECT_EQ(check(reg, "blas.gemm", {shape_view(f, 4, 3), shape_view(f, 3, 5)}), "expected 3 ports, got 2");
}

TEST_F(Blas, OtherCheckMessages) {
  const DType d = DType::f64;
  EXPECT_EQ(check(reg, "blas.potrf", {shape_view(d, 4, 3)}), "port 'a' is 4x3: a square matrix is required");
  EXPECT_EQ(check(reg, "blas.getrf", {shape_view(d, 4, 3)}), "port 'a' is 4x3: a square matrix is required");
  EXPECT_EQ(check(reg, "blas.getri", {shape_view(DType::i8, 4, 4)}), "port 'a' has dtype i8: only f32 and f64 are supported");
  EXPECT_EQ(check(reg, "blas.trsm", {shape_view(d, 4, 4), shape_view(d, 6, 4)}), "");
  EXPECT_EQ(check(reg, "blas.trsm", {shape_view(d, 4, 4), shape_view(d, 4, 6)}),
            "port 'a' is 4x4 but port 'b' is 4x6: with side='right' 'a' must be 6x6 (the number of columns of 'b')");
  EXPECT_EQ(check(reg, "blas.trsm", {shape_view(d, 4, 4), shape_view(d, 4, 6)}, {{"side", "left"}}), "");
  EXPECT_EQ(check(reg, "blas.trsm", {shape_view(d, 4, 4), shape_view(d, 6, 4)}, {{"side", "middle"}}),
            "param 'side' is 'middle': expected one of 'left', 'right'");
  EXPECT_EQ(check(reg, "blas.syrk", {shape_view(d, 5, 3), shape_view(d, 3, 3)}),
            "port 'c' is 3x3 but port 'a' is 5x3: a*a^T is 5x5");
  EXPECT_EQ(check(reg, "blas.axpy", {shape_view(d, 5, 3), shape_view(d, 3, 5)}),
            "port 'y' is 3x5 but port 'x' is 5x3: shapes must match");
  EXPECT_EQ(check(reg, "blas.axpy", {shape_view(DType::f16, 5, 3), shape_view(DType::f16, 5, 3)}),
            "port 'x' has dtype f16: only f32 and f64 are supported");
}

TEST_F(Blas, KernelRevalidatesShapes) {
  Mat<float> a(4, 3), b(5, 2), c(4, 2);
  EXPECT_THROW(run(reg, "blas.gemm", {a.view(), b.view(), c.view()}), KernelError);
  Mat<double> x(2, 2);
  EXPECT_THROW(run(reg, "blas.gemm", {x.view(), x.view(), c.view()}), KernelError);  // mixed dtypes
}

TEST_F(Blas, Costs) {
  const DType f = DType::f32;
  const ComponentSpec& g = reg.get("blas.gemm");
  std::vector<TensorView> p = {shape_view(f, 4, 3), shape_view(f, 3, 5), shape_view(f, 4, 5)};
  Args args = make_args(g, {});
  const Cost c = g.cost(TaskShape{p, args});
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 4 * 5 * 3);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (12 + 15 + 2 * 20));
  const ComponentSpec& po = reg.get("blas.potrf");
  std::vector<TensorView> q = {shape_view(DType::f64, 30, 30)};
  Args pa = make_args(po, {});
  EXPECT_DOUBLE_EQ(po.cost(TaskShape{q, pa}).flops, 30.0 * 30 * 30 / 3);
  const ComponentSpec& lu = reg.get("blas.getrf");
  EXPECT_DOUBLE_EQ(lu.cost(TaskShape{q, make_args(lu, {})}).flops, 2.0 * 30 * 30 * 30 / 3);
  const ComponentSpec& inv = reg.get("blas.getri");
  EXPECT_DOUBLE_EQ(inv.cost(TaskShape{q, make_args(inv, {})}).flops, 2.0 * 30 * 30 * 30);
}

}  // namespace
}  // namespace ymlopt::test
