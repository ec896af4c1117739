// Semiring products (components/op/semiring.hpp) against long-double
// references on odd shapes, every (⊗, ⊕) pair on every ISA this CPU has (max
// and min equal to the scalar path's values exactly), transposes, accumulate,
// the NaN/inf semantics and the empty reduction, the semiring laws, and
// op.matmul's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "op/op.hpp"
#include "op/semiring.hpp"

namespace {

using namespace ymlopt;
using op::Combine;
using op::Isa;
using op::Reduce;
using op::Semiring;
using std::int64_t;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_matrix(int64_t rows, int64_t cols, std::uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (float& x : m) x = d(gen);
  return m;
}

/// ⊕_k op(A)[i,k] ⊗ op(B)[k,j] in long double, with the header's semantics.
long double reference(Semiring s, const std::vector<float>& a, int64_t lda, bool ta, const std::vector<float>& b,
                      int64_t ldb, bool tb, int64_t i, int64_t j, int64_t k) {
  std::vector<long double> t;
  for (int64_t kk = 0; kk < k; ++kk) {
    const long double x = ta ? a[size_t(kk * lda + i)] : a[size_t(i * lda + kk)];
    const long double y = tb ? b[size_t(j * ldb + kk)] : b[size_t(kk * ldb + j)];
    t.push_back(s.mul == Combine::mul ? x * y : x + y);
  }
  long double acc = s.add == Reduce::sum    ? 0.0L
                    : s.add == Reduce::prod ? 1.0L
                    : s.add == Reduce::min  ? INFINITY
                                            : -INFINITY;
  for (long double x : t) {
    if (std::isnan(x)) return NAN;
    if (s.add == Reduce::sum) acc += x;
    else if (s.add == Reduce::prod) acc *= x;
    else if (s.add == Reduce::min) acc = std::min(acc, x);
    else acc = std::max(acc, x);
  }
  if (s.add != Reduce::logsumexp || std::isinf(acc)) return acc;
  long double sum = 0;
  for (long double x : t) sum += std::exp(x - acc);
  return acc + std::log(sum);
}

std::vector<Isa> isas() {
  std::vector<Isa> v = {Isa::scalar};
  if (op::cpu_has_avx2()) v.push_back(Isa::avx2);
  if (op::cpu_has_avx512()) v.push_back(Isa::avx512);
  return v;
}

const char* name(Isa i) { return i == Isa::scalar ? "scalar" : i == Isa::avx2 ? "avx2" : "avx512"; }

std::vector<Semiring> all_pairs() {
  std::vector<Semiring> v;
  for (Combine c : {Combine::mul, Combine::add})
    for (Reduce r : {Reduce::sum, Reduce::max, Reduce::min, Reduce::logsumexp, Reduce::prod}) v.push_back({c, r});
  return v;
}

TEST(Semiring, EveryPairOnEveryIsaMatchesLongDoubleOnOddShapes) {
  struct Shape {
    int64_t m, n, k;
  };
  // 130 x 1 and 70 x 3: products with a vector or two, run transposed (lanes along m)
  for (Shape sh : {Shape{1, 1, 1}, Shape{7, 19, 33}, Shape{5, 40, 3}, Shape{13, 33, 64}, Shape{4, 16, 1}, Shape{130, 1, 40},
                   Shape{70, 3, 17}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t lda = (ta ? sh.m : sh.k) + 3, ldb = (tb ? sh.k : sh.n) + 1, ldc = sh.n + 2;
        const auto a = random_matrix(ta ? sh.k : sh.m, lda, 1 + std::uint32_t(sh.k));
        const auto b = random_matrix(tb ? sh.n : sh.k, ldb, 7 + std::uint32_t(sh.n));
        for (Semiring s : all_pairs()) {
          std::vector<float> scalar_c;
          for (Isa isa : isas()) {
            SCOPED_TRACE(std::string(name(isa)) + " m" + std::to_string(sh.m) + " n" + std::to_string(sh.n) + " k" +
                         std::to_string(sh.k) + (ta ? " ta" : "") + (tb ? " tb" : "") + " pair " +
                         std::to_string(int(s.mul)) + "," + std::to_string(int(s.add)));
            std::vector<float> c(size_t(sh.m * ldc), 99.0f);
            op::matmul(s, ta, tb, sh.m, sh.n, sh.k, a.data(), lda, b.data(), ldb, c.data(), ldc, false, isa);
            for (int64_t i = 0; i < sh.m; ++i) {
              for (int64_t j = 0; j < sh.n; ++j) {
                const long double want = reference(s, a, lda, ta, b, ldb, tb, i, j, sh.k);
                const float got = c[size_t(i * ldc + j)];
                // max and min: the rounding of the one term in float; sum and logsumexp: of the reduction too.
                const double tol = s.add == Reduce::sum         ? 4e-6 * double(sh.k)
                                   : s.add == Reduce::prod      ? 2e-7 * double(sh.k + 1)
                                   : s.add == Reduce::logsumexp ? 2e-6
                                                                : 1.2e-7;
                ASSERT_LE(std::abs(double(got) - double(want)), tol * std::max(1.0L, std::abs(want)))
                    << i << "," << j << " got " << got << " want " << double(want);
              }
              for (int64_t j = sh.n; j < ldc; ++j) ASSERT_EQ(c[size_t(i * ldc + j)], 99.0f) << "padding written";
            }
            if (isa == Isa::scalar) {
              scalar_c = c;
            } else if (s.add == Reduce::max || s.add == Reduce::min || s.add == Reduce::prod) {
              EXPECT_EQ(c, scalar_c) << "not the scalar values";
            }
          }
        }
      }
  }
}

TEST(Semiring, UnaryFunctionsOnEveryIsaMatchTheLibrary) {
  // exp, tanh, erf of the vector paths against long double, over a sweep and the special values
  std::vector<float> x;
  for (float v = -110.0f; v <= 110.0f; v += 0.0173f) x.push_back(v);
  for (float v = -3.0f; v <= 3.0f; v += 0.000731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-8f, 0.624999f, 0.625f, 0.999999f, 1.0f, 88.7f, 88.73f, -87.3f, 9.3f})
    x.push_back(v);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float v : {inf, -inf, nan}) x.push_back(v);
  for (Isa isa : isas())
    for (op::Unary f : {op::Unary::exp, op::Unary::tanh, op::Unary::erf}) {
      std::vector<float> y = x;
      op::unary(f, y.data(), int64_t(y.size()), isa);
      for (size_t i = 0; i < x.size(); ++i) {
        const long double v = x[i];
        const long double want = f == op::Unary::exp ? std::exp(v) : f == op::Unary::tanh ? std::tanh(v) : std::erf(v);
        SCOPED_TRACE(std::string(name(isa)) + " f" + std::to_string(int(f)) + " x " + std::to_string(x[i]));
        if (std::isnan(x[i])) {
          ASSERT_TRUE(std::isnan(y[i]));
        } else if (std::isinf(want) || want > std::numeric_limits<float>::max()) {
          ASSERT_EQ(y[i], inf);
        } else {
          // relative 4e-7; results below the normal range may flush to 0
          ASSERT_LE(std::abs(y[i] - want), 4e-7L * std::abs(want) + 1.2e-38L) << y[i] << " want " << double(want);
        }
      }
    }
}

TEST(Semiring, AccumulateCombinesByTheReduction) {
  const int64_t m = 6, n = 21, k = 9;
  const auto a = random_matrix(m, k, 3), b = random_matrix(k, n, 4), c0 = random_matrix(m, n, 5);
  for (Semiring s : all_pairs())
    for (Isa isa : isas()) {
      std::vector<float> fresh(size_t(m * n)), acc = c0;
      op::matmul(s, false, false, m, n, k, a.data(), k, b.data(), n, fresh.data(), n, false, isa);
      op::matmul(s, false, false, m, n, k, a.data(), k, b.data(), n, acc.data(), n, true, isa);
      for (size_t e = 0; e < acc.size(); ++e) {
        double want = 0;
        const double o = c0[e], v = fresh[e];
        switch (s.add) {
          case Reduce::sum: want = o + v; break;
          case Reduce::max: want = std::max(o, v); break;
          case Reduce::min: want = std::min(o, v); break;
          case Reduce::logsumexp: want = std::max(o, v) + std::log1p(std::exp(-std::abs(o - v))); break;
          case Reduce::prod: want = o * v; break;
        }
        ASSERT_NEAR(acc[e], want, 2e-6 * std::max(1.0, std::abs(want))) << name(isa) << " " << e;
      }
    }
}

TEST(Semiring, NanInfAndTheEmptyReduction) {
  // One row of A against columns of B chosen to hit each case; every ISA (NaN and inf go to the scalar path).
  for (Isa isa : isas()) {
    SCOPED_TRACE(name(isa));
    auto one = [&](Semiring s, std::vector<float> a, std::vector<float> b) {
      float c = 5;
      op::matmul(s, false, false, 1, 1, int64_t(a.size()), a.data(), int64_t(a.size()), b.data(), 1, &c, 1, false,
                 isa);
      return c;
    };
    const Semiring tmax{Combine::add, Reduce::max}, tmin{Combine::add, Reduce::min},
        lse{Combine::add, Reduce::logsumexp}, sum{Combine::mul, Reduce::sum}, prod{Combine::mul, Reduce::prod};
    for (Semiring s : {tmax, tmin, lse, sum, prod}) EXPECT_TRUE(std::isnan(one(s, {1, kNaN, 2}, {1, 1, 1})));
    EXPECT_TRUE(std::isnan(one(prod, {kInf, 2}, {0, 1})));      // inf x 0, as IEEE
    EXPECT_EQ(one(prod, {1e30f, 1e30f}, {1, 1}), kInf);          // overflow, as IEEE
    EXPECT_EQ(one(prod, {-2, 3, 0.5f}, {1, 1, 1}), -3.0f);
    EXPECT_EQ(one(tmax, {1, -kInf, 2}, {3, 100, -1}), 4.0f);   // -inf is the (max, +) zero
    EXPECT_EQ(one(tmin, {1, kInf, 2}, {3, -100, 5}), 4.0f);    // +inf is the (min, +) zero
    EXPECT_EQ(one(lse, {-kInf, -kInf}, {0, 1}), -kInf);        // log Σ of nothing
    EXPECT_EQ(one(lse, {kInf, 0}, {0, 1}), kInf);
    EXPECT_NEAR(one(lse, {-kInf, 0}, {0, 0}), 0.0f, 1e-7);     // exp(-inf) = 0 contributes nothing
    EXPECT_TRUE(std::isnan(one(tmax, {kInf, 0}, {-kInf, 0})));  // inf + -inf is NaN, as IEEE
    EXPECT_EQ(one(lse, {1e30f, 1e30f}, {0, 0}), 1e30f + float(std::log(2.0)));
    // k = 0: the identity, or c unchanged when accumulating.
    float c = 5;
    for (Semiring s : {tmax, tmin, lse, Semiring{Combine::add, Reduce::sum}, prod}) {
      op::matmul(s, false, false, 1, 1, 0, nullptr, 1, nullptr, 1, &c, 1, false, isa);
      EXPECT_EQ(c, float(op::identity(s.add)));
      c = 5;
      op::matmul(s, false, false, 1, 1, 0, nullptr, 1, nullptr, 1, &c, 1, true, isa);
      EXPECT_EQ(c, 5.0f);
    }
  }
}

TEST(Semiring, TheTropicalZeroRunsOnTheVectorPathsWithTheScalarValues) {
  // (min, +) with +inf entries and (max, +) with -inf entries (no edge): vector kernels, the scalar values exactly.
  const int64_t m = 9, n = 37, k = 21;
  for (Reduce r : {Reduce::min, Reduce::max}) {
    auto a = random_matrix(m, k, 11), b = random_matrix(k, n, 12);
    const float zero = r == Reduce::min ? kInf : -kInf;
    for (size_t e = 0; e < a.size(); e += 3) a[e] = zero;
    for (size_t e = 1; e < b.size(); e += 4) b[e] = zero;
    for (int64_t kk = 0; kk < k; ++kk) a[size_t(2 * k + kk)] = zero;  // a row with no edge at all
    std::vector<float> ref(size_t(m * n));
    op::matmul({Combine::add, r}, false, false, m, n, k, a.data(), k, b.data(), n, ref.data(), n, false, Isa::scalar);
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(ref[size_t(2 * n + j)], zero);
    for (Isa isa : isas()) {
      std::vector<float> c(size_t(m * n));
      op::matmul({Combine::add, r}, false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n, false, isa);
      EXPECT_EQ(c, ref) << name(isa);
    }
  }
  // (logsumexp, +) with -inf, its zero (a causal softmax's masked scores): the vector kernels, the scalar values
  // within rounding, -inf for a row of zeros; as a matrix (n = 37) and a column (n = 1, run transposed)
  for (int64_t cols : {n, int64_t(1)}) {
    const int64_t rows = cols == 1 ? 100 : m;
    auto a = random_matrix(rows, k, 13), b = random_matrix(k, cols, 14);
    for (size_t e = 0; e < a.size(); e += 3) a[e] = -kInf;
    for (int64_t kk = 0; kk < k; ++kk) a[size_t(2 * k + kk)] = -kInf;
    std::vector<float> ref(size_t(rows * cols));
    const Semiring lse{Combine::add, Reduce::logsumexp};
    op::matmul(lse, false, false, rows, cols, k, a.data(), k, b.data(), cols, ref.data(), cols, false, Isa::scalar);
    for (Isa isa : isas()) {
      std::vector<float> c(size_t(rows * cols));
      op::matmul(lse, false, false, rows, cols, k, a.data(), k, b.data(), cols, c.data(), cols, false, isa);
      for (size_t e = 0; e < c.size(); ++e) {
        if (std::isinf(ref[e])) EXPECT_EQ(c[e], ref[e]) << name(isa) << " " << e;
        else EXPECT_NEAR(c[e], ref[e], 2e-6 * std::max(1.0f, std::abs(ref[e]))) << name(isa) << " " << e;
      }
      EXPECT_EQ(c[size_t(2 * cols)], -kInf);
    }
  }
}

TEST(Semiring, ArgKeepsTheFirstKAttainingEachEntry) {
  const int64_t m = 5, n = 6, k = 8;
  auto a = random_matrix(m, k, 21), b = random_matrix(k, n, 22);
  a[size_t(1 * k + 3)] = 100;  // row 1: k = 3 wins every column of (max, +)
  for (Reduce r : {Reduce::max, Reduce::min}) {
    std::vector<float> c(size_t(m * n)), plain(size_t(m * n));
    std::vector<std::int32_t> arg(size_t(m * n));
    op::matmul_arg({Combine::add, r}, false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n, arg.data(), n);
    op::matmul({Combine::add, r}, false, false, m, n, k, a.data(), k, b.data(), n, plain.data(), n, false);
    EXPECT_EQ(c, plain);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const std::int32_t at = arg[size_t(i * n + j)];
        ASSERT_GE(at, 0);
        EXPECT_EQ(a[size_t(i * k + at)] + b[size_t(at * n + j)], c[size_t(i * n + j)]);
        for (int64_t kk = 0; kk < at; ++kk) EXPECT_NE(a[size_t(i * k + kk)] + b[size_t(kk * n + j)], c[size_t(i * n + j)]);
      }
    if (r == Reduce::max) {
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(arg[size_t(1 * n + j)], 3);
    }
  }
  // No term beats the identity, and NaN: -1.
  float x[2] = {-kInf, kNaN}, y = 1, c = 0;
  std::int32_t at = 7;
  op::matmul_arg({Combine::add, Reduce::max}, false, false, 1, 1, 1, x, 1, &y, 1, &c, 1, &at, 1);
  EXPECT_EQ(at, -1);
  EXPECT_EQ(c, -kInf);
  op::matmul_arg({Combine::add, Reduce::max}, false, false, 1, 1, 2, x, 2, x, 1, &c, 1, &at, 1);
  EXPECT_EQ(at, -1);
  EXPECT_TRUE(std::isnan(c));
  EXPECT_THROW(op::matmul_arg({Combine::add, Reduce::sum}, false, false, 1, 1, 1, x, 1, &y, 1, &c, 1, &at, 1),
               KernelError);
}

TEST(Semiring, ArgOnEveryIsaIsTheScalarOne) {
  // small integers: many ties, which the first k must win; -inf entries (no edge) for (max, +)
  const int64_t m = 13, n = 37, k = 29;
  std::mt19937 gen(4);
  std::uniform_int_distribution<int> d(-3, 3);
  for (bool ta : {false, true})
    for (Semiring s : {Semiring{Combine::add, Reduce::max}, Semiring{Combine::add, Reduce::min},
                       Semiring{Combine::mul, Reduce::max}}) {
      std::vector<float> a(size_t(m * k)), b(size_t(k * n));
      for (float& x : a) x = float(d(gen));
      for (float& x : b) x = float(d(gen));
      if (s.add == Reduce::max && s.mul == Combine::add)
        for (size_t e = 0; e < a.size(); e += 5) a[e] = -kInf;
      std::vector<float> c0(size_t(m * n)), c(size_t(m * n));
      std::vector<std::int32_t> arg0(size_t(m * n)), arg(size_t(m * n));
      const int64_t lda = ta ? m : k;  // a holds op(A)ᵀ when ta: the same values, read transposed
      op::matmul_arg(s, ta, false, m, n, k, a.data(), lda, b.data(), n, c0.data(), n, arg0.data(), n, Isa::scalar);
      for (Isa isa : isas()) {
        op::matmul_arg(s, ta, false, m, n, k, a.data(), lda, b.data(), n, c.data(), n, arg.data(), n, isa);
        EXPECT_EQ(c, c0) << name(isa);
        EXPECT_EQ(arg, arg0) << name(isa);
      }
    }
}

TEST(Semiring, SkipZerosGivesTheDenseProduct) {
  const int64_t m = 13, n = 29, k = 70;
  auto a = random_matrix(m, k, 31), b = random_matrix(k, n, 32), c0 = random_matrix(m, n, 33);
  for (size_t e = 0; e < a.size(); ++e)
    if (e % 10 < 7) a[e] = 0;  // 70% zeros, as a ReLU leaves
  for (int64_t kk = 0; kk < k; ++kk) a[size_t(4 * k + kk)] = 0;  // a row of zeros
  b[size_t(0 * n + 3)] = kInf;  // meets only zeros of A (column 0 of A is zero): no 0 x inf
  for (bool acc : {false, true}) {
    std::vector<float> want = c0, got = c0;
    op::matmul({Combine::mul, Reduce::sum}, false, false, m, n, k, a.data(), k, b.data(), n, want.data(), n, acc,
               Isa::scalar);
    op::matmul_skip_zeros(m, n, k, a.data(), k, b.data(), n, got.data(), n, acc);
    for (size_t e = 0; e < got.size(); ++e) {
      if (e % size_t(n) == 3) {
        EXPECT_TRUE(std::isnan(want[e])) << "the dense product forms 0 x inf";
        EXPECT_FALSE(std::isnan(got[e])) << e;
        continue;
      }
      ASSERT_NEAR(got[e], want[e], 1e-5 * std::max(1.0f, std::abs(want[e]))) << e;
    }
  }
}

TEST(Semiring, MaskedEntriesAreTheIdentityOrTheOldValue) {
  // 300 x 260 (3 x 3 blocks of 128, edge blocks smaller): a causal mask (j <= i) and a random one.
  const int64_t m = 300, n = 260, k = 17;
  const auto a = random_matrix(m, k, 41), b = random_matrix(k, n, 42), c0 = random_matrix(m, n, 43);
  std::vector<std::int8_t> causal(size_t(m * n)), sparse(size_t(m * n));
  std::mt19937 gen(44);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      causal[size_t(i * n + j)] = j <= i;
      sparse[size_t(i * n + j)] = gen() % 7 == 0;
    }
  for (Semiring s : {Semiring{Combine::mul, Reduce::sum}, Semiring{Combine::add, Reduce::max},
                     Semiring{Combine::add, Reduce::logsumexp}})
    for (const auto* mk : {&causal, &sparse})
      for (bool acc : {false, true}) {
        std::vector<float> full = c0, got = c0;
        op::matmul(s, false, false, m, n, k, a.data(), k, b.data(), n, full.data(), n, acc);
        op::matmul_masked(s, false, false, m, n, k, a.data(), k, b.data(), n, got.data(), n, acc,
                          op::Mask{mk->data(), 0, n, {}});
        for (size_t e = 0; e < got.size(); ++e) {
          const float want = (*mk)[e] ? full[e] : acc ? c0[e] : float(op::identity(s.add));
          if (std::isinf(want)) {
            ASSERT_EQ(got[e], want) << e;
          } else {
            ASSERT_NEAR(got[e], want, 1e-5 * std::max(1.0f, std::abs(want))) << e;
          }
        }
      }
  // Transposed operands take the same blocks.
  std::vector<float> at(size_t(k * m)), bt(size_t(n * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) at[size_t(kk * m + i)] = a[size_t(i * k + kk)];
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j) bt[size_t(j * k + kk)] = b[size_t(kk * n + j)];
  std::vector<float> plain(size_t(m * n)), trans(size_t(m * n));
  const Semiring tmax{Combine::add, Reduce::max};
  op::matmul_masked(tmax, false, false, m, n, k, a.data(), k, b.data(), n, plain.data(), n, false,
                    op::Mask{causal.data(), 0, n, {}});
  op::matmul_masked(tmax, true, true, m, n, k, at.data(), m, bt.data(), k, trans.data(), n, false,
                    op::Mask{causal.data(), 0, n, {}});
  EXPECT_EQ(plain, trans);
}

TEST(Semiring, BlockMasksKeepOrSkipWholeBlocks) {
  // a block mask of 24 x 24 blocks equals the element mask it stands for, masked blocks set to `fill`
  const int64_t m = 100, n = 70, k = 30, bs = 24, mr = (m + bs - 1) / bs, mc = (n + bs - 1) / bs;
  const auto a = random_matrix(m, k, 21), b = random_matrix(k, n, 22);
  std::vector<std::int8_t> blocks(size_t(mr * mc)), elems(size_t(m * n));
  std::mt19937 gen(5);
  for (auto& x : blocks) x = gen() % 3 == 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) elems[size_t(i * n + j)] = blocks[size_t((i / bs) * mc + j / bs)];
  for (Semiring s : {Semiring{Combine::mul, Reduce::sum}, Semiring{Combine::add, Reduce::max}}) {
    std::vector<float> by_block(size_t(m * n)), by_elem(size_t(m * n));
    op::matmul_masked(s, false, false, m, n, k, a.data(), k, b.data(), n, by_block.data(), n, false,
                      op::Mask{blocks.data(), 0, mc, -1.5, bs});
    op::matmul_masked(s, false, false, m, n, k, a.data(), k, b.data(), n, by_elem.data(), n, false,
                      op::Mask{elems.data(), 0, n, -1.5, 0});
    EXPECT_EQ(by_block, by_elem);
    for (size_t e = 0; e < elems.size(); ++e) {
      if (!elems[e]) {
        ASSERT_EQ(by_block[e], -1.5f);
      }
    }
  }
}

TEST(Semiring, TheLawsHold) {
  // (A B) C = A (B C): exactly for (max, +) and (min, +) on integers (every sum exact), within rounding for the
  // log semiring and the ordinary product; distributivity of ⊗ over ⊕: A (B ⊕ C) = A B ⊕ A C.
  const int64_t n = 23;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> d(-50, 50);
  for (auto* m : {&a, &b, &c})
    for (float& x : *m) x = float(d(gen));
  for (Semiring s : {Semiring{Combine::add, Reduce::max}, Semiring{Combine::add, Reduce::min},
                     Semiring{Combine::add, Reduce::logsumexp}, Semiring{Combine::mul, Reduce::sum}}) {
    std::vector<float> ab(n * n), bc(n * n), left(n * n), right(n * n);
    op::matmul(s, false, false, n, n, n, a.data(), n, b.data(), n, ab.data(), n, false);
    op::matmul(s, false, false, n, n, n, ab.data(), n, c.data(), n, left.data(), n, false);
    op::matmul(s, false, false, n, n, n, b.data(), n, c.data(), n, bc.data(), n, false);
    op::matmul(s, false, false, n, n, n, a.data(), n, bc.data(), n, right.data(), n, false);
    const bool exact = s.add == Reduce::max || s.add == Reduce::min;
    for (size_t e = 0; e < left.size(); ++e) {
      if (exact) ASSERT_EQ(left[e], right[e]) << e;
      else ASSERT_NEAR(left[e], right[e], 1e-5 * std::max(1.0f, std::abs(left[e]))) << e;
    }
  }
}

TEST(Semiring, TropicalSquaringGivesShortestPaths) {
  // A ring of 9 nodes with unit edges (and 0 on the diagonal, +inf elsewhere):
  // after ceil(log2 8) = 3 (min, +) squarings, d[i][j] = the ring distance.
  const int64_t n = 9;
  std::vector<float> d(n * n, kInf);
  for (int64_t i = 0; i < n; ++i) {
    d[size_t(i * n + i)] = 0;
    d[size_t(i * n + (i + 1) % n)] = 1;
    d[size_t(((i + 1) % n) * n + i)] = 1;
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<float> next(n * n);
    op::matmul({Combine::add, Reduce::min}, false, false, n, n, n, d.data(), n, d.data(), n, next.data(), n, false);
    d = next;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t gap = std::abs(i - j);
      EXPECT_EQ(d[size_t(i * n + j)], float(std::min(gap, n - gap))) << i << "," << j;
    }
}

TEST(Semiring, ForcedIsaNotOnThisCpuIsRefused) {
  float x = 1, y = 1, z = 0;
  if (!op::cpu_has_avx512()) {
    EXPECT_THROW(op::matmul({Combine::add, Reduce::max}, false, false, 1, 1, 1, &x, 1, &y, 1, &z, 1, false, Isa::avx512),
                 KernelError);
  } else {
    GTEST_SKIP() << "this CPU has AVX-512: nothing to refuse (" << op::best_isa_name() << ")";
  }
}

TEST(OpMatmul, ComponentRunsAndChecks) {
  test::TestRegistry reg;
  register_op(reg);
  auto sv = [](int64_t r, int64_t c, DType dt = DType::f32) { return test::shape_view(dt, r, c); };
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6), sv(4, 6)}, {{"mul", "a + b"}, {"add", "max"}}), "");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(4, 6), sv(4, 6)}, {}),
            "port 'b' is 4x6 but port 'a' is 4x5: inner dimensions differ (5 != 4)");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6), sv(4, 5)}, {}),
            "port 'c' is 4x5 but the product is 4x6");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6), sv(4, 6)}, {{"add", "mean"}}),
            "param 'add' is 'mean': expected one of 'sum', 'max', 'min', 'logsumexp', 'prod'");
  EXPECT_NE(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6, DType::f64), sv(4, 6)}, {}), "");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6), sv(4, 6)}, {{"skip_zeros", "true"}, {"add", "max"}}),
            "param 'skip_zeros' is for mul=a*b add=sum without transposes, arg or mask");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6), sv(4, 6), TensorView{}, sv(4, 5, DType::i8)}, {}),
            "port 'mask' is 4x5 but the product is 4x6");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(4, 5), sv(5, 6), sv(4, 6), sv(4, 6, DType::i32)}, {{"add", "sum"}}),
            "port 'arg' needs add=max or add=min (add is 'sum')");
  // f64 and f32 runs against the reference, with transposes.
  for (DType dt : {DType::f32, DType::f64}) {
    test::Mat<double> a64(5, 4, 0, DType::f64), b64(6, 5, 0, DType::f64), c64(4, 6, 1, DType::f64, 0.0);
    a64.random(1);
    b64.random(2);
    test::Mat<float> a32(5, 4), b32(6, 5), c32(4, 6, 1, DType::f32, 0.0f);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 4; ++j) a32(i, j) = float(a64(i, j));
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 5; ++j) b32(i, j) = float(b64(i, j));
    const std::map<std::string, std::string> args = {
        {"mul", "a+b"}, {"add", "logsumexp"}, {"transa", "true"}, {"transb", "true"}};
    if (dt == DType::f64) test::run(reg, "op.matmul", {a64.view(), b64.view(), c64.view()}, args);
    else test::run(reg, "op.matmul", {a32.view(), b32.view(), c32.view()}, args);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        long double top = -INFINITY, sum = 0;
        for (int64_t kk = 0; kk < 5; ++kk) top = std::max<long double>(top, a64(kk, i) + b64(j, kk));
        for (int64_t kk = 0; kk < 5; ++kk) sum += std::exp(a64(kk, i) + b64(j, kk) - top);
        const double want = double(top + std::log(sum)), got = dt == DType::f64 ? c64(i, j) : c32(i, j);
        EXPECT_NEAR(got, want, dt == DType::f64 ? 1e-13 : 2e-6) << i << "," << j;
      }
  }
}

}  // namespace
