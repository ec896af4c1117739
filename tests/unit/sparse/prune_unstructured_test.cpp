// sparse.pack_nm24 / sparse.unpack_nm24 and prune.magnitude,
// prune.magnitude_threshold, prune.nm: exact counts and kept sets against
// independent references (full sorts), and check() messages on bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../components/test_context.hpp"
#include "prune/prune.hpp"
#include "sparse/sparse.hpp"
#include "sparse/sparse_linear.hpp"

namespace ymlopt {
namespace {

using std::int64_t;
using test::Mat;

class PruneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_sparse(reg);
    register_prune_unstructured(reg);
  }
  test::TestRegistry reg;
};

/// Random weights with a few exact ties (values drawn from a coarse grid) when `ties`.
template <class T> Mat<T> weights(int64_t r, int64_t c, int64_t pad, std::uint32_t seed, bool ties = false) {
  Mat<T> w(r, c, pad);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) w(i, j) = static_cast<T>(ties ? std::round(d(gen) * 8) / 8 : d(gen));
  return w;
}

/// The set of (|w|, flat position) pairs sorted ascending: the reference order of pruning.
template <class T> std::vector<int64_t> order_by_magnitude(const std::vector<std::pair<T, int64_t>>& v) {
  auto s = v;
  std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) {
    return std::abs(a.first) < std::abs(b.first) || (std::abs(a.first) == std::abs(b.first) && a.second < b.second);
  });
  std::vector<int64_t> out;
  for (const auto& p : s) out.push_back(p.second);
  return out;
}

// ---- prune.magnitude ----------------------------------------------------------

TEST_F(PruneTest, MagnitudeTensorScopeIsExactWithTies) {
  for (double s : {0.0, 0.3, 0.5, 0.9}) {
    auto w = weights<float>(13, 21, 3, 7, true);
    Mat<float> y(13, 21, 2);
    const auto rep = test::run(reg, "prune.magnitude", {w.view(), y.view(), {}},
                               {{"sparsity", std::to_string(s)}, {"scope", "tensor"}});
    const int64_t total = 13 * 21, cnt = std::llround(s * total);
    std::vector<std::pair<float, int64_t>> all;
    for (int64_t i = 0; i < 13; ++i)
      for (int64_t j = 0; j < 21; ++j) all.push_back({w(i, j), i * 21 + j});
    const auto ord = order_by_magnitude(all);
    std::vector<char> pruned(total, 0);
    for (int64_t q = 0; q < cnt; ++q) pruned[ord[q]] = 1;
    int64_t zeros = 0;
    for (int64_t i = 0; i < 13; ++i)
      for (int64_t j = 0; j < 21; ++j) {
        const float expect = pruned[i * 21 + j] ? 0.0f : w(i, j);
        ASSERT_EQ(y(i, j), expect) << "s " << s << " at " << i << "," << j;
        zeros += y(i, j) == 0.0f;
      }
    // Some grid values are exactly 0 already: they are pruned first, so zeros = max(cnt, existing).
    int64_t existing = 0;
    for (const auto& p : all) existing += p.first == 0.0f;
    EXPECT_EQ(zeros, std::max(cnt, existing));
    EXPECT_EQ(rep.at("zeros"), double(zeros));
    EXPECT_EQ(y.buf[21], 77.0f) << "padding of y written";
  }
}

TEST_F(PruneTest, MagnitudeRowScopeBothLayoutsInPlace) {
  for (const char* layout : {"nk", "kn"}) {
    auto w = weights<double>(10, 16, 0, 3);
    auto orig = w;
    const bool kn = std::string(layout) == "kn";
    // In place: y is w's own data.
    test::run(reg, "prune.magnitude", {w.view(), w.view(), {}},
              {{"sparsity", "0.25"}, {"scope", "row"}, {"layout", layout}});
    const int64_t n = kn ? 16 : 10, k = kn ? 10 : 16, cnt = std::llround(0.25 * k);
    for (int64_t j = 0; j < n; ++j) {
      std::vector<std::pair<double, int64_t>> row;
      for (int64_t c = 0; c < k; ++c) row.push_back({kn ? orig(c, j) : orig(j, c), c});
      const auto ord = order_by_magnitude(row);
      for (int64_t q = 0; q < k; ++q) {
        const int64_t c = ord[q];
        const double got = kn ? w(c, j) : w(j, c), was = kn ? orig(c, j) : orig(j, c);
        ASSERT_EQ(got, q < cnt ? 0.0 : was) << layout << " row " << j << " col " << c;
      }
    }
  }
}

TEST_F(PruneTest, MagnitudeThresholdArgAndPort) {
  auto w = weights<float>(6, 8, 0, 5);
  Mat<float> y(6, 8), y2(6, 8);
  test::run(reg, "prune.magnitude", {w.view(), y.view(), {}}, {{"threshold", "0.5"}, {"sparsity", "0.9"}});
  Mat<float> t(1, 1);
  t(0, 0) = 0.5f;
  test::run(reg, "prune.magnitude", {w.view(), y2.view(), t.view()});
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 8; ++j) {
      const float expect = std::abs(w(i, j)) <= 0.5f ? 0.0f : w(i, j);
      EXPECT_EQ(y(i, j), expect);
      EXPECT_EQ(y2(i, j), expect);
    }
}

TEST_F(PruneTest, GlobalThresholdMatchesSortingEverything) {
  // Three tensors of different sizes and dtypes: threshold = cnt-th smallest |w| over all.
  auto a = weights<float>(7, 9, 1, 1);
  auto b = weights<float>(4, 30, 0, 2);
  auto c = weights<double>(11, 5, 2, 3);
  for (double s : {0.0, 0.2, 0.7, 0.95}) {
    Mat<double> t(1, 1);
    std::vector<TensorView> ports = {a.view(), b.view(), c.view()};
    ports.resize(8);
    ports.push_back(t.view());
    const auto rep = test::run(reg, "prune.magnitude_threshold", ports, {{"sparsity", std::to_string(s)}});
    std::vector<double> all;
    for (int64_t i = 0; i < 7; ++i)
      for (int64_t j = 0; j < 9; ++j) all.push_back(std::abs(double(a(i, j))));
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 30; ++j) all.push_back(std::abs(double(b(i, j))));
    for (int64_t i = 0; i < 11; ++i)
      for (int64_t j = 0; j < 5; ++j) all.push_back(std::abs(c(i, j)));
    std::sort(all.begin(), all.end());
    const int64_t cnt = std::llround(s * double(all.size()));
    const double expect = cnt > 0 ? all[cnt - 1] : 0.0;
    EXPECT_EQ(t(0, 0), expect) << "s " << s;
    EXPECT_EQ(rep.at("weights"), double(all.size()));
    // Applying it to every tensor prunes exactly cnt weights in all (no ties in random data).
    int64_t zeros = 0;
    for (auto* m : {&a, &b}) {
      Mat<float> y(m->rows, m->cols);
      zeros += int64_t(test::run(reg, "prune.magnitude", {m->view(), y.view(), t.view()}).at("zeros"));
    }
    Mat<double> yc(11, 5);
    zeros += int64_t(test::run(reg, "prune.magnitude", {c.view(), yc.view(), t.view()}).at("zeros"));
    EXPECT_EQ(zeros, cnt) << "s " << s;
  }
}

TEST_F(PruneTest, ThresholdRoundsUpWhenStoredInF32) {
  // An f64 weight whose magnitude is not representable in f32: the f32 threshold
  // must not be below it, or that weight would survive.
  Mat<double> w(1, 4);
  w(0, 0) = 0.1;
  w(0, 1) = 0.7;
  w(0, 2) = -0.3;
  w(0, 3) = 0.9;
  Mat<float> t(1, 1);
  std::vector<TensorView> ports = {w.view()};
  ports.resize(8);
  ports.push_back(t.view());
  test::run(reg, "prune.magnitude_threshold", ports, {{"sparsity", "0.5"}});
  EXPECT_GE(double(t(0, 0)), 0.3);
  EXPECT_LT(double(t(0, 0)), 0.3 + 1e-7);
  Mat<double> y(1, 4);
  test::run(reg, "prune.magnitude", {w.view(), y.view(), t.view()});
  EXPECT_EQ(y(0, 0), 0.0);
  EXPECT_EQ(y(0, 2), 0.0);
  EXPECT_EQ(y(0, 1), 0.7);
}

// ---- prune.nm ------------------------------------------------------------------

TEST_F(PruneTest, NmKeepsLargestPerGroupBothLayouts) {
  for (auto [n, m] : {std::pair<int64_t, int64_t>{2, 4}, {1, 4}, {4, 8}, {0, 2}, {3, 3}})
    for (const char* layout : {"nk", "kn"}) {
      const bool kn = std::string(layout) == "kn";
      const int64_t rows = kn ? 3 * m : 5, cols = kn ? 5 : 3 * m;
      auto w = weights<float>(rows, cols, 2, static_cast<std::uint32_t>(n * 10 + m), true);
      Mat<float> y(rows, cols, 1);
      test::run(reg, "prune.nm", {w.view(), y.view()},
                {{"n", std::to_string(n)}, {"m", std::to_string(m)}, {"layout", layout}});
      const int64_t nout = kn ? cols : rows, k = kn ? rows : cols;
      for (int64_t j = 0; j < nout; ++j)
        for (int64_t g = 0; g < k / m; ++g) {
          std::vector<std::pair<float, int64_t>> grp;
          for (int64_t i = 0; i < m; ++i) grp.push_back({kn ? w(g * m + i, j) : w(j, g * m + i), i});
          // Reference keep set: n largest |w|, ties keep the earlier position.
          std::vector<std::pair<float, int64_t>> sorted = grp;
          std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
            return std::abs(a.first) > std::abs(b.first) ||
                   (std::abs(a.first) == std::abs(b.first) && a.second < b.second);
          });
          std::vector<char> keep(m, 0);
          for (int64_t q = 0; q < n; ++q) keep[sorted[q].second] = 1;
          int64_t nonzero = 0;
          for (int64_t i = 0; i < m; ++i) {
            const float got = kn ? y(g * m + i, j) : y(j, g * m + i);
            ASSERT_EQ(got, keep[i] ? grp[i].first : 0.0f) << layout << " n " << n << " m " << m;
            nonzero += got != 0.0f;
          }
          ASSERT_LE(nonzero, n);
        }
    }
}

TEST_F(PruneTest, NmOutputPacksAndRunsThroughTheKernel) {
  // prune.nm -> sparse.pack_nm24 -> sparse.unpack_nm24 gives back the pruned W,
  // and the packed form multiplies like it.
  auto w = weights<float>(12, 48, 0, 9);
  test::run(reg, "prune.nm", {w.view(), w.view()});
  Mat<float> v(12, 24, 1);
  Mat<std::int8_t> ix(12, 6, 2);
  const auto rep = test::run(reg, "sparse.pack_nm24", {w.view(), v.view(), ix.view()});
  EXPECT_EQ(rep.at("nonzeros"), 12.0 * 24);
  Mat<float> back(12, 48, 3);
  test::run(reg, "sparse.unpack_nm24", {v.view(), ix.view(), back.view()});
  for (int64_t i = 0; i < 12; ++i)
    for (int64_t j = 0; j < 48; ++j) ASSERT_EQ(back(i, j), w(i, j));
  const sparse::Nm24Weight z{v.buf.data(), v.ld, reinterpret_cast<const std::uint8_t*>(ix.buf.data()), ix.ld, 12, 48};
  auto x = weights<float>(5, 48, 0, 4);
  std::vector<float> y(5 * 12);
  sparse::linear(x.buf.data(), 5, 48, z, y.data(), 12);
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t j = 0; j < 12; ++j) {
      long double s = 0;
      for (int64_t c = 0; c < 48; ++c) s += static_cast<long double>(x(t, c)) * w(j, c);
      EXPECT_NEAR(y[t * 12 + j], double(s), 1e-5);
    }
}

// ---- bad inputs ----------------------------------------------------------------

TEST_F(PruneTest, CheckMessages) {
  using test::shape_view;
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  const TensorView w = shape_view(DType::f32, 8, 16), w64 = shape_view(DType::f64, 8, 16);
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude", {w, w, {}}, {{"sparsity", "1"}}), "must be in [0, 1)"));
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude", {w, w, {}}, {{"scope", "col"}}), "param 'scope' is 'col'"));
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude", {w, w64, {}}), "dtypes must match"));
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude", {w, shape_view(DType::f32, 8, 15), {}}), "shapes must match"));
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude", {w, w, shape_view(DType::f32, 1, 2)}), "expected [1]"));
  EXPECT_EQ(test::check(reg, "prune.magnitude", {w, w, {}}, {{"sparsity", "0.5"}}), "");
  EXPECT_TRUE(has(test::check(reg, "prune.nm", {shape_view(DType::f32, 8, 10), shape_view(DType::f32, 8, 10)}),
                  "k = 10 (columns, layout nk) is not a multiple of m = 4"));
  EXPECT_TRUE(has(test::check(reg, "prune.nm", {w, w}, {{"n", "5"}}), "param 'n' is 5"));
  EXPECT_TRUE(has(test::check(reg, "prune.nm", {w, w}, {{"layout", "kk"}}), "param 'layout' is 'kk'"));
  EXPECT_TRUE(has(test::check(reg, "sparse.pack_nm24",
                              {shape_view(DType::f32, 4, 12), shape_view(DType::f32, 4, 6), shape_view(DType::i8, 4, 1)}),
                  "multiple of 8"));
  EXPECT_TRUE(has(test::check(reg, "sparse.pack_nm24", {w, shape_view(DType::f32, 8, 7), shape_view(DType::i8, 8, 2)}),
                  "port 'values' is 8x7 but expected 8x8"));
  EXPECT_TRUE(has(test::check(reg, "sparse.unpack_nm24", {shape_view(DType::f32, 8, 8), shape_view(DType::i8, 8, 3), w}),
                  "port 'index' is 8x3 but expected 8x2"));
  std::vector<TensorView> tp(9);
  tp[0] = w;
  tp[8] = shape_view(DType::f32, 2, 1);
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude_threshold", tp), "port 't' is 2x1"));
  tp[8] = shape_view(DType::f32, 1, 1);
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude_threshold", tp, {{"sparsity", "-0.1"}}), "param 'sparsity'"));
  tp[0] = {};
  EXPECT_TRUE(has(test::check(reg, "prune.magnitude_threshold", tp), "port 'w0' is not bound"));
}

TEST_F(PruneTest, KernelErrorsNameTheProblem) {
  // A group with 3 nonzeros: the error names row and group.
  Mat<float> w(2, 8, 0, DType::f32, 0.0f);
  w(1, 4) = w(1, 5) = w(1, 6) = 1.0f;
  Mat<float> v(2, 4);
  Mat<std::int8_t> ix(2, 1);
  try {
    test::run(reg, "sparse.pack_nm24", {w.view(), v.view(), ix.view()});
    FAIL() << "no throw";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("row 1, group 1"), std::string::npos) << e.what();
  }
  // NaN weights cannot be ranked.
  auto a = weights<float>(3, 4, 0, 1);
  a(2, 1) = NAN;
  Mat<float> y(3, 4);
  try {
    test::run(reg, "prune.magnitude", {a.view(), y.view(), {}}, {{"sparsity", "0.5"}});
    FAIL() << "no throw";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN at (2, 1)"), std::string::npos) << e.what();
  }
  // Wrong dtype of a port.
  Mat<double> w64(3, 4);
  EXPECT_THROW(test::run(reg, "prune.nm", {w64.view(), y.view()}), KernelError);
}

TEST_F(PruneTest, CostsAreReported) {
  test::TestContext ctx(reg.get("prune.magnitude"),
                        {test::shape_view(DType::f32, 64, 64), test::shape_view(DType::f32, 64, 64), {}});
  const Cost c = ctx.cost();
  EXPECT_GT(c.flops, 0);
  EXPECT_EQ(c.bytes, 2 * 64 * 64 * 4.0);
}

}  // namespace
}  // namespace ymlopt
