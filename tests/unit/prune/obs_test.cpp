// prune.hessian and prune.obs: the Hessian against a naive long-double XᵀX,
// the OBS compensation against a naive sequential OBS (explicit inverse-Hessian
// elimination in long double, no Cholesky, no lazy batches) on the same mask,
// and the SparseGPT claim: at 50% on correlated activations the output error
// is well below magnitude pruning's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "prune/prune_api.hpp"
#include "prune_test_util.hpp"

namespace ymlopt::test {
namespace {

/// 2/m XᵀX in long double.
Mat<double> naive_hessian(const Mat<double>& x) {
  Mat<double> h(x.cols, x.cols);
  for (std::int64_t a = 0; a < x.cols; ++a)
    for (std::int64_t b = 0; b < x.cols; ++b) {
      long double s = 0;
      for (std::int64_t i = 0; i < x.rows; ++i) s += static_cast<long double>(x(i, a)) * x(i, b);
      h(a, b) = static_cast<double>(2 * s / x.rows);
    }
  return h;
}

/// Inverse by Gauss-Jordan with partial pivoting, long double.
std::vector<long double> naive_inverse(std::vector<long double> a, std::int64_t k) {
  std::vector<long double> inv(static_cast<std::size_t>(k * k), 0);
  for (std::int64_t i = 0; i < k; ++i) inv[static_cast<std::size_t>(i * k + i)] = 1;
  for (std::int64_t c = 0; c < k; ++c) {
    std::int64_t p = c;
    for (std::int64_t r = c + 1; r < k; ++r)
      if (std::fabs(a[r * k + c]) > std::fabs(a[p * k + c])) p = r;
    for (std::int64_t j = 0; j < k; ++j) {
      std::swap(a[c * k + j], a[p * k + j]);
      std::swap(inv[c * k + j], inv[p * k + j]);
    }
    const long double d = a[c * k + c];
    for (std::int64_t j = 0; j < k; ++j) {
      a[c * k + j] /= d;
      inv[c * k + j] /= d;
    }
    for (std::int64_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const long double f = a[r * k + c];
      for (std::int64_t j = 0; j < k; ++j) {
        a[r * k + j] -= f * a[c * k + j];
        inv[r * k + j] -= f * inv[c * k + j];
      }
    }
  }
  return inv;
}

/// Sequential OBS with a given mask (true = prune): columns in order; a pruned
/// weight w_j is removed with the optimal update of the remaining (later)
/// columns, -w_j / Hinv_jj · Hinv[j, :], then column j is eliminated from Hinv.
Mat<double> naive_obs(const Mat<double>& w, const Mat<double>& h, double damp, const std::vector<char>& mask) {
  const std::int64_t n = w.rows, k = w.cols;
  std::vector<long double> hd(static_cast<std::size_t>(k * k));
  long double md = 0;
  for (std::int64_t i = 0; i < k; ++i) md += h(i, i);
  md /= k;
  for (std::int64_t a = 0; a < k; ++a)
    for (std::int64_t b = 0; b < k; ++b) hd[a * k + b] = h(a, b) + (a == b ? damp * md : 0);
  std::vector<long double> hi = naive_inverse(hd, k);
  // rows[j][l] = Hinv_j[j, l] / Hinv_j[j, j] for l > j, Hinv_j = Hinv with columns < j eliminated.
  std::vector<long double> rows(static_cast<std::size_t>(k * k), 0);
  for (std::int64_t j = 0; j < k; ++j) {
    const long double d = hi[j * k + j];
    for (std::int64_t l = j + 1; l < k; ++l) rows[j * k + l] = hi[j * k + l] / d;
    for (std::int64_t a = j + 1; a < k; ++a)
      for (std::int64_t b = j + 1; b < k; ++b) hi[a * k + b] -= hi[a * k + j] * hi[j * k + b] / d;
  }
  Mat<double> out(n, k);
  for (std::int64_t r = 0; r < n; ++r) {
    std::vector<long double> v(static_cast<std::size_t>(k));
    for (std::int64_t c = 0; c < k; ++c) v[c] = w(r, c);
    for (std::int64_t j = 0; j < k; ++j) {
      if (!mask[r * k + j]) continue;
      const long double wj = v[j];
      v[j] = 0;
      for (std::int64_t l = j + 1; l < k; ++l) v[l] -= wj * rows[j * k + l];
    }
    for (std::int64_t c = 0; c < k; ++c) out(r, c) = static_cast<double>(v[c]);
  }
  return out;
}

struct ObsCase {
  std::int64_t n = 48, k = 64, m = 512;
  Mat<double> x, w, h;
  ObsCase() : x(correlated<double>(m, k, 11)), w(normal<double>(n, k, 12)), h(k, k) {
    run(prune_registry(), "prune.hessian", {x.view(), h.view()});
  }
  Mat<double> obs(const std::map<std::string, std::string>& args) {
    Mat<double> out(n, k, 3);
    reports = run(prune_registry(), "prune.obs", {w.view(), h.view(), out.view()}, args);
    return out;
  }
  std::map<std::string, double> reports;
};

TEST(PruneHessian, MatchesNaiveAndAccumulates) {
  Mat<double> x = correlated<double>(96, 20, 3);
  Mat<double> h(20, 20);
  run(prune_registry(), "prune.hessian", {x.view(), h.view()});
  const Mat<double> ref = naive_hessian(x);
  for (std::int64_t a = 0; a < 20; ++a)
    for (std::int64_t b = 0; b < 20; ++b) EXPECT_NEAR(h(a, b), ref(a, b), 1e-12 * (1 + std::abs(ref(a, b))));

  // Two batches of 40 and 56 rows, accumulated with count = 96, give the full Hessian.
  Mat<double> x1(40, 20), x2(56, 20, 2);
  for (std::int64_t i = 0; i < 96; ++i)
    for (std::int64_t c = 0; c < 20; ++c) (i < 40 ? x1(i, c) : x2(i - 40, c)) = x(i, c);
  Mat<float> hf(20, 20);
  for (auto& v : hf.buf) v = 123.0f;  // ignored without accumulate
  Mat<float> x1f(40, 20), x2f(56, 20);
  for (std::int64_t i = 0; i < 40; ++i)
    for (std::int64_t c = 0; c < 20; ++c) x1f(i, c) = float(x1(i, c));
  for (std::int64_t i = 0; i < 56; ++i)
    for (std::int64_t c = 0; c < 20; ++c) x2f(i, c) = float(x2(i, c));
  run(prune_registry(), "prune.hessian", {x1f.view(), hf.view()}, {{"count", "96"}});
  run(prune_registry(), "prune.hessian", {x2f.view(), hf.view()}, {{"count", "96"}, {"accumulate", "true"}});
  for (std::int64_t a = 0; a < 20; ++a)
    for (std::int64_t b = 0; b < 20; ++b) EXPECT_NEAR(hf(a, b), ref(a, b), 1e-4 * (1 + std::abs(ref(a, b))));
}

TEST(PruneObs, MatchesNaiveSequentialObsOnItsMask) {
  ObsCase c;
  for (const char* block : {"128", "16", "5"}) {
    const Mat<double> wp = c.obs({{"sparsity", "0.5"}, {"block", block}});
    std::vector<char> mask(static_cast<std::size_t>(c.n * c.k));
    for (std::int64_t r = 0; r < c.n; ++r)
      for (std::int64_t j = 0; j < c.k; ++j) mask[r * c.k + j] = wp(r, j) == 0;
    const Mat<double> ref = naive_obs(c.w, c.h, 0.01, mask);
    double maxdiff = 0;
    for (std::int64_t r = 0; r < c.n; ++r)
      for (std::int64_t j = 0; j < c.k; ++j) maxdiff = std::max(maxdiff, std::abs(wp(r, j) - ref(r, j)));
    EXPECT_LT(maxdiff, 1e-9) << "block " << block;
    EXPECT_EQ(wp(0, c.k), 77.0) << "padding left alone";
  }
}

TEST(PruneObs, HalfSparsityBeatsMagnitudeByFortyPercent) {
  ObsCase c;
  const Mat<double> wp = c.obs({{"sparsity", "0.5"}});
  for (std::int64_t r = 0; r < c.n; ++r) {
    int zeros = 0;
    for (std::int64_t j = 0; j < c.k; ++j) zeros += wp(r, j) == 0;
    EXPECT_EQ(zeros, c.k / 2) << "row " << r;
  }
  EXPECT_DOUBLE_EQ(c.reports.at("sparsity"), 0.5);
  const Mat<double> mag = magnitude_prune_rows(c.w, c.k / 2);
  const double e_obs = output_error(c.x, c.w, wp), e_mag = output_error(c.x, c.w, mag);
  std::printf("output error at 50%%: OBS %.4g, magnitude %.4g (ratio %.3f)\n", e_obs, e_mag, e_obs / e_mag);
  EXPECT_LE(e_obs, 0.6 * e_mag);
}

TEST(PruneObs, TwoFourPatternAndBeatsMagnitudeTwoFour) {
  ObsCase c;
  for (const char* pat : {"2:4", "nm"}) {
    const Mat<double> wp = c.obs({{"pattern", pat}, {"block", "16"}});
    for (std::int64_t r = 0; r < c.n; ++r)
      for (std::int64_t g = 0; g < c.k; g += 4) {
        int zeros = 0;
        for (std::int64_t j = g; j < g + 4; ++j) zeros += wp(r, j) == 0;
        ASSERT_EQ(zeros, 2) << "row " << r << " group " << g;
      }
    // Magnitude 2:4: the two smallest |w| of each group of four.
    Mat<double> mag = c.w;
    for (std::int64_t r = 0; r < c.n; ++r)
      for (std::int64_t g = 0; g < c.k; g += 4) {
        std::vector<std::int64_t> idx = {g, g + 1, g + 2, g + 3};
        std::sort(idx.begin(), idx.end(), [&](auto a, auto b) { return std::abs(c.w(r, a)) < std::abs(c.w(r, b)); });
        mag(r, idx[0]) = mag(r, idx[1]) = 0;
      }
    const double e_obs = output_error(c.x, c.w, wp), e_mag = output_error(c.x, c.w, mag);
    std::printf("output error 2:4: OBS %.4g, magnitude %.4g (ratio %.3f)\n", e_obs, e_mag, e_obs / e_mag);
    EXPECT_LE(e_obs, 0.8 * e_mag);
  }
}

TEST(PruneObs, KnLayoutAndFloatAndStridedViews) {
  ObsCase c;
  const Mat<double> wp = c.obs({{"sparsity", "0.5"}});
  // kn: the transposed weight gives the transposed result.
  Mat<double> wt = transposed(c.w), outt(c.k, c.n);
  run(prune_registry(), "prune.obs", {wt.view(), c.h.view(), outt.view()}, {{"layout", "kn"}});
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t j = 0; j < c.k; ++j) ASSERT_NEAR(outt(j, r), wp(r, j), 1e-12);
  // f32 ports with padding: same sparsity, close values.
  Mat<float> wf(c.n, c.k, 5), hf(c.k, c.k, 1), of(c.n, c.k, 2);
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t j = 0; j < c.k; ++j) wf(r, j) = float(c.w(r, j));
  for (std::int64_t a = 0; a < c.k; ++a)
    for (std::int64_t b = 0; b < c.k; ++b) hf(a, b) = float(c.h(a, b));
  run(prune_registry(), "prune.obs", {wf.view(), hf.view(), of.view()}, {{"sparsity", "0.25"}});
  for (std::int64_t r = 0; r < c.n; ++r) {
    int zeros = 0;
    for (std::int64_t j = 0; j < c.k; ++j) zeros += of(r, j) == 0.0f;
    EXPECT_EQ(zeros, 16);
  }
}

TEST(PruneObs, DeadColumnsAreZeroedAndFinite) {
  ObsCase c;
  for (std::int64_t i = 0; i < c.m; ++i) c.x(i, 7) = 0;
  run(prune_registry(), "prune.hessian", {c.x.view(), c.h.view()});
  const Mat<double> wp = c.obs({{"sparsity", "0.5"}});
  EXPECT_EQ(c.reports.at("dead_columns"), 1.0);
  for (std::int64_t r = 0; r < c.n; ++r) {
    EXPECT_EQ(wp(r, 7), 0.0);
    for (std::int64_t j = 0; j < c.k; ++j) ASSERT_TRUE(std::isfinite(wp(r, j)));
  }
}

TEST(PruneObs, CheckMessages) {
  const auto& reg = prune_registry();
  auto v = [](std::int64_t r, std::int64_t c) { return shape_view(DType::f32, r, c); };
  EXPECT_EQ(check(reg, "prune.obs", {v(8, 16), v(16, 16), v(8, 16)}), "");
  EXPECT_NE(check(reg, "prune.obs", {v(8, 16), v(8, 8), v(8, 16)}).find("port 'h' is 8x8 but expected 16x16"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.obs", {v(8, 16), v(16, 16), v(8, 16)}, {{"sparsity", "1.5"}}).find("sparsity"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.obs", {v(8, 18), v(18, 18), v(8, 18)}, {{"pattern", "2:4"}}).find("not a multiple of M"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.obs", {v(8, 16), v(16, 16), v(8, 16)}, {{"pattern", "3:2"}}).find("1 <= N <= M"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.obs", {v(8, 16), v(16, 16), v(8, 16)}, {{"pattern", "dense"}}).find("'pattern'"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.obs", {v(8, 16), v(16, 16), v(8, 16)}, {{"layout", "xy"}}).find("'layout'"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.hessian", {v(8, 16), v(8, 8)}).find("port 'h' is 8x8"), std::string::npos);
  // A non-positive-definite Hessian (negative diagonal, no damping) is a KernelError naming the cause.
  Mat<double> w = normal<double>(4, 4, 1), h(4, 4), out(4, 4);
  for (std::int64_t a = 0; a < 4; ++a)
    for (std::int64_t b = 0; b < 4; ++b) h(a, b) = a == b ? -1.0 : 0.0;
  try {
    run(reg, "prune.obs", {w.view(), h.view(), out.view()}, {{"damp", "0"}});
    FAIL() << "expected a KernelError";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("not positive definite"), std::string::npos) << e.what();
  }
  // A NaN weight is reported with its position.
  Mat<double> wn = normal<double>(4, 4, 2), hs(4, 4);
  for (std::int64_t a = 0; a < 4; ++a)
    for (std::int64_t b = 0; b < 4; ++b) hs(a, b) = a == b ? 1.0 : 0.0;
  wn(2, 1) = std::nan("");
  try {
    run(reg, "prune.obs", {wn.view(), hs.view(), out.view()});
    FAIL() << "expected a KernelError";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite value at (2, 1)"), std::string::npos) << e.what();
  }
  const Cost cost = TestContext(reg.get("prune.obs"), {v(8, 16), v(16, 16), v(8, 16)}).cost();
  EXPECT_GT(cost.flops, 0);
}

}  // namespace
}  // namespace ymlopt::test
