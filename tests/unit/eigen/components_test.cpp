// The eigen.* components: outputs against LAPACK on prescribed spectra (f64
// and f32), the reports, and the check messages of bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen_registry.hpp"
#include "eigen/eigen.hpp"
#include "eigen_reference.hpp"

namespace {

using namespace ymlopt;
using test::Mat;
using test::shape_view;
using std::int64_t;

using eigtest::registry;
using eigtest::run_error;

template <class T> Mat<T> to_mat(const std::vector<double>& a, int64_t rows, int64_t cols, int64_t pad = 0) {
  Mat<T> m(rows, cols, pad);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m(i, j) = static_cast<T>(a[static_cast<size_t>(i * cols + j)]);
  return m;
}

std::vector<double> spectrum(std::vector<double> top, int64_t bulk, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < bulk; ++i) top.push_back(u(g));
  return top;
}

TEST(EigenComponents, AllRegistered) {
  for (const char* n : {"eigen.lanczos", "eigen.arnoldi", "eigen.svd_topk", "eigen.power", "eigen.meram"})
    EXPECT_NE(registry().find(n), nullptr) << n;
}

template <class T> void lanczos_case(double tol_values) {
  const int64_t n = 150;
  const auto a = eigref::symmetric_with_spectrum(spectrum({9, 8, 7.5, 7}, n - 4, -3, 3, 1), 2);
  std::vector<double> lvec;
  const auto lw = eigref::lapack_syevd(a, n, &lvec);
  auto am = to_mat<T>(a, n, n, 3);  // padded rows: ld > cols
  Mat<T> values(1, 4), vectors(n, 4);
  const auto rep = test::run(registry(), "eigen.lanczos", {am.view(), values.view(), vectors.view()},
                             {{"k", "4"}, {"tol", "1e-10"}});
  EXPECT_GT(rep.at("matvecs"), 4);
  EXPECT_GE(rep.at("restarts"), 0);
  EXPECT_LT(rep.at("residual"), 1e-8);
  for (int64_t j = 0; j < 4; ++j) {
    const double ref = lw[static_cast<size_t>(n - 1 - j)];
    EXPECT_NEAR(double(values(0, j)), ref, tol_values * std::abs(ref)) << j;
    double d = 0;
    for (int64_t i = 0; i < n; ++i) d += double(vectors(i, j)) * lvec[static_cast<size_t>(i * n + n - 1 - j)];
    EXPECT_GT(std::abs(d), 1 - 10 * tol_values) << j;
  }
}

TEST(EigenComponents, LanczosF64) { lanczos_case<double>(1e-9); }
TEST(EigenComponents, LanczosF32) { lanczos_case<float>(2e-6); }

TEST(EigenComponents, LanczosGramOperatorWithoutVectors) {
  const int64_t m = 90, n = 40;
  const auto x = eigref::gaussian(m * n, 3);
  std::vector<double> h(static_cast<size_t>(n * n));
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(n), int(n), int(m), 1.0, x.data(), int(n), x.data(), int(n),
              0.0, h.data(), int(n));
  const auto lw = eigref::lapack_syevd(h, n);
  auto xm = to_mat<double>(x, m, n);
  Mat<double> values(1, 3);
  TensorView none;
  test::run(registry(), "eigen.lanczos", {xm.view(), values.view(), none}, {{"k", "3"}, {"operator", "gram"}});
  for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(values(0, j), lw[static_cast<size_t>(n - 1 - j)], 1e-9 * lw[static_cast<size_t>(n - 1)]);
}

TEST(EigenComponents, ArnoldiComplexPair) {
  int64_t n = 0;
  std::vector<std::complex<double>> e = {{6, 2}, {5, 0}};
  std::mt19937_64 g(4);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int i = 0; i < 100; ++i) e.emplace_back(u(g), 0);
  const auto a = eigref::nonsymmetric_with_spectrum(e, 5, &n);
  auto am = to_mat<double>(a, n, n);
  Mat<double> re(1, 3), im(1, 3), vre(n, 3), vim(n, 3);
  const auto rep = test::run(registry(), "eigen.arnoldi", {am.view(), re.view(), im.view(), vre.view(), vim.view()},
                             {{"k", "3"}, {"subspace", "20"}});
  EXPECT_GT(rep.at("matvecs"), 20);
  EXPECT_NEAR(re(0, 0), 6, 1e-8 * 6);
  EXPECT_NEAR(im(0, 0), 2, 1e-8 * 6);
  EXPECT_NEAR(re(0, 1), 6, 1e-8 * 6);
  EXPECT_NEAR(im(0, 1), -2, 1e-8 * 6);
  EXPECT_NEAR(re(0, 2), 5, 1e-8 * 5);
  EXPECT_NEAR(im(0, 2), 0, 1e-8 * 5);
  // Eigenvector of 6+2i from the output columns.
  std::vector<double> xr(static_cast<size_t>(n)), xi(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    xr[static_cast<size_t>(i)] = vre(i, 0);
    xi[static_cast<size_t>(i)] = vim(i, 0);
  }
  const auto op = eigen::dense_operator(a.data(), n, n);
  EXPECT_LT(eigref::eig_residual(op.apply, n, 6, 2, xr.data(), xi.data()), 1e-8 * 6);
}

TEST(EigenComponents, SvdTopkF64AndF32) {
  const int64_t m = 80, n = 60, k = 5;
  auto a = eigref::gaussian(m * n, 6);
  for (int64_t i = 0; i < m; ++i)  // a few strong directions on top of noise
    for (int64_t j = 0; j < n; ++j) a[static_cast<size_t>(i * n + j)] *= 0.01;
  for (int r = 0; r < k; ++r) {
    const auto u = eigref::gaussian(m, 100 + r), v = eigref::gaussian(n, 200 + r);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) a[static_cast<size_t>(i * n + j)] += (5.0 - r) * u[static_cast<size_t>(i)] * v[static_cast<size_t>(j)] / 8;
  }
  const auto sref = eigref::lapack_gesdd(a, m, n);
  auto a64 = to_mat<double>(a, m, n);
  Mat<double> s(1, k), u(m, k), vt(k, n);
  const auto rep = test::run(registry(), "eigen.svd_topk", {a64.view(), s.view(), u.view(), vt.view()},
                             {{"k", "5"}, {"power_iters", "4"}});
  for (int64_t j = 0; j < k; ++j) EXPECT_NEAR(s(0, j), sref[static_cast<size_t>(j)], 1e-8 * sref[0]) << j;
  EXPECT_LT(rep.at("residual"), 1e-6 * sref[0]);
  auto a32 = to_mat<float>(a, m, n);
  Mat<float> s32(1, k);
  TensorView none;
  test::run(registry(), "eigen.svd_topk", {a32.view(), s32.view(), none, none}, {{"k", "5"}, {"power_iters", "4"}});
  for (int64_t j = 0; j < k; ++j) EXPECT_NEAR(double(s32(0, j)), sref[static_cast<size_t>(j)], 1e-5 * sref[0]) << j;
}

TEST(EigenComponents, PowerOnGram) {
  const int64_t m = 70, n = 30;
  const auto x = eigref::gaussian(m * n, 7);
  std::vector<double> h(static_cast<size_t>(n * n));
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(n), int(n), int(m), 1.0, x.data(), int(n), x.data(), int(n),
              0.0, h.data(), int(n));
  const auto lw = eigref::lapack_syevd(h, n);
  auto xm = to_mat<double>(x, m, n);
  Mat<double> value(1, 1), vec(1, n);
  const auto rep = test::run(registry(), "eigen.power", {xm.view(), value.view(), vec.view()},
                             {{"operator", "gram"}, {"tol", "1e-11"}, {"max_iter", "5000"}});
  EXPECT_NEAR(value(0, 0), lw[static_cast<size_t>(n - 1)], 1e-9 * lw[static_cast<size_t>(n - 1)]);
  EXPECT_EQ(rep.at("restarts"), 0);
  EXPECT_GT(rep.at("matvecs"), 1);
}

TEST(EigenComponents, CostIsPositive) {
  const ComponentSpec& s = registry().get("eigen.lanczos");
  test::TestContext ctx(s, {shape_view(DType::f64, 100, 100), shape_view(DType::f64, 1, 5), {}, {}, {}}, {{"k", "5"}});
  EXPECT_EQ(ctx.check(), "");
  EXPECT_GT(ctx.cost().flops, 0);
  EXPECT_GT(ctx.cost().extra_bytes, 0);
}

TEST(EigenComponents, BadInputsHaveClearMessages) {
  const auto& r = registry();
  const TensorView none;
  auto sv = [](int64_t rows, int64_t cols, DType d = DType::f64) { return shape_view(d, rows, cols); };
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 12), sv(1, 3), none}, {{"k", "3"}}),
            "port 'a' is 10x12: a square matrix is required");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 12), sv(1, 3), none}, {{"k", "3"}, {"operator", "gram"}}), "");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 10), sv(1, 11), none}, {{"k", "11"}}),
            "param 'k' is 11: must be in [1, n = 10]");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 10), sv(1, 3), none}, {{"k", "3"}, {"which", "smallest"}}),
            "param 'which' is 'smallest': expected one of 'largest', 'magnitude'");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 10), sv(1, 4), none}, {{"k", "3"}}),
            "port 'values' is 1x4 but expected [3] (k eigenvalues)");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(40, 40), sv(1, 3), none}, {{"k", "3"}, {"subspace", "3"}}),
            "param 'subspace' is 3: must exceed k = 3 (or be >= n = 40)");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 10, DType::i8), sv(1, 3), none}, {{"k", "3"}}),
            "port 'a' has dtype i8: only f32 and f64 are supported");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {sv(10, 10), sv(1, 3, DType::f32), none}, {{"k", "3"}}),
            "port 'values' has dtype f32 but port 'a' has dtype f64: dtypes must match");
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {sv(10, 10), sv(1, 3), sv(1, 3), sv(10, 2), none}, {{"k", "3"}}),
            "port 'vectors_re' is 10x2 but expected 10x3 (n x k eigenvectors)");
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {sv(10, 10), sv(1, 3), sv(1, 3), none, none}, {{"k", "3"}, {"tol", "0"}}),
            "param 'tol' is 0.000000: must be > 0");
  EXPECT_EQ(test::check(r, "eigen.svd_topk", {sv(10, 6), sv(1, 7), none, none}, {{"k", "7"}}),
            "param 'k' is 7: must be in [1, min(m, n) = 6] for a 10x6 matrix");
  EXPECT_EQ(test::check(r, "eigen.svd_topk", {sv(10, 6), sv(1, 2), sv(6, 2), none}, {{"k", "2"}}),
            "port 'u' is 6x2 but expected 10x2 (m x k)");
  EXPECT_EQ(test::check(r, "eigen.power", {sv(10, 6), sv(1, 1), none}, {{"max_iter", "0"}}),
            "param 'max_iter' is 0: must be >= 1");

  // Run-time: a non-symmetric matrix given to lanczos, and non-convergence.
  int64_t n = 0;
  const auto a = eigref::nonsymmetric_with_spectrum({{3, 0}, {2, 0}, {1, 0}, {0.5, 0}, {0.2, 0}, {0.1, 0}}, 8, &n);
  auto am = to_mat<double>(a, n, n);
  Mat<double> values(1, 2);
  EXPECT_NE(run_error("eigen.lanczos", {am.view(), values.view(), none}, {{"k", "2"}}).find("port 'a' is not symmetric"),
            std::string::npos);
  const auto s = eigref::symmetric_with_spectrum(spectrum({5, 4.999}, 198, -4.99, 4.99, 9), 10);
  auto sm = to_mat<double>(s, 200, 200);
  const std::string msg =
      run_error("eigen.lanczos", {sm.view(), values.view(), none}, {{"k", "2"}, {"subspace", "5"}, {"max_restarts", "2"}});
  EXPECT_NE(msg.find("eigen.lanczos did not converge within max_restarts = 2: largest residual"), std::string::npos)
      << msg;
  Mat<double> re(1, 2), im(1, 2);
  const std::string amsg = run_error("eigen.arnoldi", {sm.view(), re.view(), im.view(), none, none},
                                    {{"k", "2"}, {"subspace", "5"}, {"max_restarts", "1"}});
  EXPECT_NE(amsg.find("eigen.arnoldi did not converge within max_restarts = 1: largest residual"), std::string::npos)
      << amsg;
  Mat<double> value(1, 1);
  const std::string pmsg = run_error("eigen.power", {sm.view(), value.view(), none}, {{"max_iter", "3"}});
  EXPECT_NE(pmsg.find("eigen.power did not converge within max_iter = 3: largest residual"), std::string::npos) << pmsg;
}

}  // namespace
