// distill.layerwise against independent least squares (LAPACKE_dgels per row
// on that row's support, ridge as augmented rows), and the low-rank refit
// against the plain truncated SVD on correlated activations.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <cmath>
#include <string>
#include <vector>

#include "prune/prune_api.hpp"
#include "prune_test_util.hpp"

namespace ymlopt::test {
namespace {

/// Row r of the least-squares fit min ||y[:, r] - X[:, S] w_S||² + lam ||w_S||² by dgels.
std::vector<double> dgels_row(const Mat<double>& x, const Mat<double>& y, std::int64_t r, const std::vector<std::int64_t>& s,
                              double lam) {
  const std::int64_t m = x.rows, ns = static_cast<std::int64_t>(s.size()), rows = m + (lam > 0 ? ns : 0);
  std::vector<double> a(static_cast<std::size_t>(rows * ns), 0.0), b(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < ns; ++j) a[i * ns + j] = x(i, s[j]);
    b[i] = y(i, r);
  }
  if (lam > 0)
    for (std::int64_t j = 0; j < ns; ++j) a[(m + j) * ns + j] = std::sqrt(lam);
  const int info = LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', int(rows), int(ns), 1, a.data(), int(ns), b.data(), 1);
  EXPECT_EQ(info, 0);
  b.resize(static_cast<std::size_t>(ns));
  return b;
}

struct DistillCase {
  std::int64_t m = 256, k = 32, n = 24;
  Mat<double> x = correlated<double>(m, k, 5), w = normal<double>(n, k, 6), y = layer_output(x, w);
  Mat<double> wp = magnitude_prune_rows(w, k / 2);
  Mat<double> fit(const std::map<std::string, std::string>& args, Mat<double>* in = nullptr) {
    Mat<double> out(n, k, 1);
    Mat<double>& src = in ? *in : wp;
    reports = run(prune_registry(), "distill.layerwise",
                  {x.view(), y.view(), src.view(), TensorView{}, TensorView{}, out.view(), TensorView{}, TensorView{}},
                  args);
    return out;
  }
  std::map<std::string, double> reports;
};

TEST(DistillLayerwise, MaskRefitEqualsDgelsAndBeatsPruned) {
  DistillCase c;
  long double ydiag = 0;  // mean diag of XᵀX, for the ridge
  for (std::int64_t j = 0; j < c.k; ++j)
    for (std::int64_t i = 0; i < c.m; ++i) ydiag += static_cast<long double>(c.x(i, j)) * c.x(i, j);
  ydiag /= c.k;
  for (double ridge : {0.0, 1e-2}) {
    const Mat<double> wf = c.fit({{"ridge", std::to_string(ridge)}});
    double maxrel = 0;
    for (std::int64_t r = 0; r < c.n; ++r) {
      std::vector<std::int64_t> s;
      for (std::int64_t j = 0; j < c.k; ++j)
        if (c.wp(r, j) != 0) {
          s.push_back(j);
        } else {
          ASSERT_EQ(wf(r, j), 0.0) << "zero pattern kept";
        }
      const std::vector<double> ref = dgels_row(c.x, c.y, r, s, ridge * double(ydiag));
      for (std::size_t j = 0; j < s.size(); ++j)
        maxrel = std::max(maxrel, std::abs(wf(r, s[j]) - ref[j]) / (1 + std::abs(ref[j])));
    }
    EXPECT_LT(maxrel, 1e-8) << "ridge " << ridge;
    const double before = residual(c.x, c.y, c.wp), after = residual(c.x, c.y, wf);
    std::printf("ridge %g: output error pruned %.4g, refitted %.4g\n", ridge, before, after);
    EXPECT_LT(after, before);
    long double ny = 0;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) ny += static_cast<long double>(c.y(i, j)) * c.y(i, j);
    EXPECT_NEAR(c.reports.at("rel_error_before"), before / double(std::sqrt(ny)), 1e-10);
    EXPECT_NEAR(c.reports.at("rel_error_after"), after / double(std::sqrt(ny)), 1e-10);
  }
}

TEST(DistillLayerwise, DenseRecoversTheLayerAndKnLayoutMatches) {
  DistillCase c;
  const Mat<double> wf = c.fit({{"mode", "dense"}, {"ridge", "0"}});
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t j = 0; j < c.k; ++j) ASSERT_NEAR(wf(r, j), c.w(r, j), 1e-8 * (1 + std::abs(c.w(r, j))));
  // mask mode, layout kn, f32 ports: the transposed f64 result within f32 rounding.
  const Mat<double> ref = c.fit({{"ridge", "1e-4"}});
  Mat<float> xf(c.m, c.k), yf(c.m, c.n), wt(c.k, c.n), out(c.k, c.n, 2);
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < c.k; ++j) xf(i, j) = float(c.x(i, j));
    for (std::int64_t j = 0; j < c.n; ++j) yf(i, j) = float(c.y(i, j));
  }
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t j = 0; j < c.k; ++j) wt(j, r) = float(c.wp(r, j));
  run(prune_registry(), "distill.layerwise",
      {xf.view(), yf.view(), wt.view(), TensorView{}, TensorView{}, out.view(), TensorView{}, TensorView{}},
      {{"layout", "kn"}});
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t j = 0; j < c.k; ++j) ASSERT_NEAR(out(j, r), ref(r, j), 2e-3 * (1 + std::abs(ref(r, j))));
}

TEST(DistillLayerwise, LowrankRefitBeatsTruncatedSvd) {
  DistillCase c;
  const std::int64_t r = 6;
  Mat<double> a(c.n, r), b(r, c.k);
  run(prune_registry(), "prune.lowrank", {c.w.view(), a.view(), b.view()}, {{"rank", "6"}, {"split", "balanced"}});
  auto product = [&](const Mat<double>& aa, const Mat<double>& bb) {
    Mat<double> w(c.n, c.k);
    for (std::int64_t i = 0; i < c.n; ++i)
      for (std::int64_t j = 0; j < c.k; ++j) {
        long double s = 0;
        for (std::int64_t p = 0; p < r; ++p) s += static_cast<long double>(aa(i, p)) * bb(p, j);
        w(i, j) = double(s);
      }
    return w;
  };
  const double e_svd = residual(c.x, c.y, product(a, b));
  double prev = e_svd;
  for (const char* iters : {"1", "2", "5"}) {
    Mat<double> af(c.n, r), bf(r, c.k);
    run(prune_registry(), "distill.layerwise",
        {c.x.view(), c.y.view(), TensorView{}, a.view(), b.view(), TensorView{}, af.view(), bf.view()},
        {{"mode", "lowrank"}, {"iters", iters}, {"ridge", "1e-8"}});
    const double e = residual(c.x, c.y, product(af, bf));
    std::printf("rank %lld output error: truncated SVD %.4g, refit (%s iters) %.4g\n", (long long)r, e_svd, iters, e);
    EXPECT_LE(e, prev * (1 + 1e-9));
    prev = e;
  }
  EXPECT_LT(prev, 0.9 * e_svd);  // the refit uses the input correlations the SVD ignores
}

TEST(DistillLayerwise, LowrankKnLayoutIsTheTransposedProblem) {
  // kn: w stored [k,n] ≈ a [k,r] b [r,n] (prune.lowrank of the stored matrix); the
  // refit must equal the nk refit of the logical factors A = bᵀ, B = aᵀ.
  DistillCase c;
  const std::int64_t r = 4;
  Mat<double> wt = transposed(c.w), a(c.k, r), b(r, c.n);
  run(prune_registry(), "prune.lowrank", {wt.view(), a.view(), b.view()}, {{"rank", "4"}});
  Mat<double> af(c.k, r), bf(r, c.n);
  run(prune_registry(), "distill.layerwise",
      {c.x.view(), c.y.view(), TensorView{}, a.view(), b.view(), TensorView{}, af.view(), bf.view()},
      {{"mode", "lowrank"}, {"layout", "kn"}, {"iters", "2"}});
  Mat<double> an = transposed(b), bn = transposed(a), anf(c.n, r), bnf(r, c.k);
  run(prune_registry(), "distill.layerwise",
      {c.x.view(), c.y.view(), TensorView{}, an.view(), bn.view(), TensorView{}, anf.view(), bnf.view()},
      {{"mode", "lowrank"}, {"iters", "2"}});
  for (std::int64_t i = 0; i < c.k; ++i)
    for (std::int64_t p = 0; p < r; ++p) ASSERT_NEAR(af(i, p), bnf(p, i), 1e-9 * (1 + std::abs(bnf(p, i))));
  for (std::int64_t p = 0; p < r; ++p)
    for (std::int64_t j = 0; j < c.n; ++j) ASSERT_NEAR(bf(p, j), anf(j, p), 1e-9 * (1 + std::abs(anf(j, p))));
}

TEST(DistillLayerwise, CheckMessages) {
  const auto& reg = prune_registry();
  auto v = [](std::int64_t r, std::int64_t c) { return shape_view(DType::f32, r, c); };
  const TensorView o{};
  EXPECT_EQ(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), v(5, 8), o, o, v(5, 8), o, o}), "");
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), v(8, 5), o, o, v(5, 8), o, o}).find("port 'w' is 8x5 but expected 5x8"),
            std::string::npos);
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(60, 5), v(5, 8), o, o, v(5, 8), o, o}).find("port 'y_target' is 60x5"),
            std::string::npos);
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), o, o, o, v(5, 8), o, o}).find("mode 'mask' needs port 'w'"),
            std::string::npos);
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), o, v(5, 2), o, o, v(5, 2), o}, {{"mode", "lowrank"}})
                .find("needs port 'b'"),
            std::string::npos);
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), o, v(5, 2), v(3, 8), o, v(5, 2), v(3, 8)}, {{"mode", "lowrank"}})
                .find("port 'b' is 3x8 but expected 2x8"),
            std::string::npos);
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), v(5, 8), o, o, v(5, 8), o, o}, {{"ridge", "-1"}}).find("'ridge'"),
            std::string::npos);
  EXPECT_NE(check(reg, "distill.layerwise", {v(64, 8), v(64, 5), v(5, 8), o, o, v(5, 8), o, o}, {{"mode", "full"}}).find("'mode'"),
            std::string::npos);
}

}  // namespace
}  // namespace ymlopt::test
