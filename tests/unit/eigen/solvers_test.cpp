// The solver API of components/eigen against LAPACK and ARPACK on matrices
// with prescribed spectra.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <thread>
#include <vector>

#include "eigen/eigen.hpp"
#include "eigen_reference.hpp"

namespace {

using namespace ymlopt::eigen;
using std::int64_t;

/// Top cluster `top` (descending), then `bulk` values uniform in [lo, hi], shuffled order irrelevant.
std::vector<double> spectrum(const std::vector<double>& top, int64_t bulk, double lo, double hi, std::uint64_t seed) {
  std::vector<double> e = top;
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < bulk; ++i) e.push_back(u(g));
  return e;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

/// |cos| of the angle between x (length n) and column j of a row-major n x n matrix.
double abs_cos_col(const double* x, const std::vector<double>& m, int64_t n, int64_t j) {
  double d = 0, nx = 0, ny = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double y = m[static_cast<size_t>(i * n + j)];
    d += x[i] * y;
    nx += x[i] * x[i];
    ny += y * y;
  }
  return std::abs(d) / std::sqrt(nx * ny);
}

TEST(EigenLanczos, TopTenMatchesLapackAndArpack) {
  std::vector<double> top;
  for (int i = 0; i < 10; ++i) top.push_back(20.0 - i);
  top.push_back(-30.0);  // largest in magnitude, not wanted by "largest"
  const auto eigs = spectrum(top, 289, -5, 5, 1);
  const int64_t n = 300;
  const auto a = eigref::symmetric_with_spectrum(eigs, 2);
  std::vector<double> lvec;
  const auto lw = eigref::lapack_syevd(a, n, &lvec);  // ascending
  const LinearOperator op = dense_operator(a.data(), n, n);
  LanczosOptions o;
  o.k = 10;
  o.subspace = 30;
  const EigenResult r = lanczos(op, o);
  ASSERT_TRUE(r.converged);
  const auto ar = eigref::arpack_symmetric(op.apply, n, 10, "LA", 30, 1e-10);
  ASSERT_EQ(ar.info, 0);
  for (int64_t i = 0; i < 10; ++i) {
    const double ref = lw[static_cast<size_t>(n - 1 - i)];
    EXPECT_NEAR(ref, 20.0 - double(i), 1e-9);
    EXPECT_LT(rel(r.values_re[static_cast<size_t>(i)], ref), 1e-8) << i;
    EXPECT_LT(rel(ar.re[static_cast<size_t>(9 - i)], ref), 1e-8) << i;
    const double* x = r.vectors_re.data() + i * n;
    EXPECT_GT(abs_cos_col(x, lvec, n, n - 1 - i), 1 - 1e-8) << i;
    EXPECT_LT(eigref::eig_residual(op.apply, n, r.values_re[static_cast<size_t>(i)], 0, x, nullptr), 1e-8 * std::abs(ref));
    EXPECT_LE(r.residuals[static_cast<size_t>(i)], 1e-9 * std::abs(ref));
  }
  EXPECT_GT(r.matvecs, 10);
  std::printf("[ lanczos ] n=300 k=10: ours %lld matvecs %lld restarts; ARPACK %lld matvecs %lld restarts\n",
              (long long)r.matvecs, (long long)r.restarts, (long long)ar.matvecs, (long long)ar.restarts);
}

TEST(EigenLanczos, LargestMagnitudeFindsTheNegativeEnd) {
  const auto eigs = spectrum({20, 19, -30}, 197, -5, 5, 3);
  const auto a = eigref::symmetric_with_spectrum(eigs, 4);
  LanczosOptions o;
  o.k = 3;
  o.which = Which::largest_magnitude;
  const EigenResult r = lanczos(dense_operator(a.data(), 200, 200), o);
  ASSERT_TRUE(r.converged);
  EXPECT_LT(rel(r.values_re[0], -30), 1e-9);
  EXPECT_LT(rel(r.values_re[1], 20), 1e-9);
  EXPECT_LT(rel(r.values_re[2], 19), 1e-9);
}

TEST(EigenLanczos, ClusteredTopMatchesLapackAndArpack) {
  std::vector<double> top;
  for (int i = 0; i < 10; ++i) top.push_back(10.0 - 1e-3 * i);
  const int64_t n = 400;
  const auto eigs = spectrum(top, n - 10, 0, 9, 5);
  const auto a = eigref::symmetric_with_spectrum(eigs, 6);
  const auto lw = eigref::lapack_syevd(a, n);
  const LinearOperator op = dense_operator(a.data(), n, n);
  LanczosOptions o;
  o.k = 10;
  o.subspace = 40;
  const EigenResult r = lanczos(op, o);
  ASSERT_TRUE(r.converged) << r.max_residual();
  const auto ar = eigref::arpack_symmetric(op.apply, n, 10, "LA", 40, 1e-10);
  ASSERT_EQ(ar.info, 0);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_LT(rel(r.values_re[static_cast<size_t>(i)], lw[static_cast<size_t>(n - 1 - i)]), 1e-8) << i;
    EXPECT_LT(rel(ar.re[static_cast<size_t>(9 - i)], lw[static_cast<size_t>(n - 1 - i)]), 1e-8) << i;
    EXPECT_LT(eigref::eig_residual(op.apply, n, r.values_re[static_cast<size_t>(i)], 0, r.vectors_re.data() + i * n, nullptr),
              1e-8 * 10);
  }
  std::printf("[ lanczos ] clustered n=400 k=10: ours %lld matvecs %lld restarts; ARPACK %lld matvecs\n",
              (long long)r.matvecs, (long long)r.restarts, (long long)ar.matvecs);
}

TEST(EigenLanczos, WithoutReorthogonalisationOnASeparatedSpectrum) {
  const auto eigs = spectrum({50, 40, 30, 25}, 296, -1, 1, 7);
  const auto a = eigref::symmetric_with_spectrum(eigs, 8);
  LanczosOptions o;
  o.k = 4;
  o.full_reorth = false;
  o.subspace = 24;
  const EigenResult r = lanczos(dense_operator(a.data(), 300, 300), o);
  ASSERT_TRUE(r.converged) << r.values_re[0] << " " << r.values_re[1] << " " << r.values_re[2] << " " << r.values_re[3] << " res " << r.residuals[0] << " " << r.residuals[3] << " " << r.restarts;
  const double want[] = {50, 40, 30, 25};
  for (int i = 0; i < 4; ++i) EXPECT_LT(rel(r.values_re[static_cast<size_t>(i)], want[i]), 1e-8) << i << " " << r.values_re[static_cast<size_t>(i)] << " mv " << r.matvecs << " rs " << r.restarts;
}

TEST(EigenLanczos, SmallOperatorSolvedInOneCycle) {
  // subspace >= n: the first factorisation is the whole space.
  const auto a = eigref::symmetric_with_spectrum({3, 2, 1, 0.5, -4}, 9);
  LanczosOptions o;
  o.k = 2;
  const EigenResult r = lanczos(dense_operator(a.data(), 5, 5), o);
  ASSERT_TRUE(r.converged);
  EXPECT_EQ(r.restarts, 0);
  EXPECT_NEAR(r.values_re[0], 3, 1e-12);
  EXPECT_NEAR(r.values_re[1], 2, 1e-12);
}

TEST(EigenOperators, GramMatchesTheFormedProduct) {
  const int64_t m = 120, n = 50;
  const auto x = eigref::gaussian(m * n, 10);
  std::vector<double> h(static_cast<size_t>(n * n));
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(n), int(n), int(m), 1.0, x.data(), int(n), x.data(), int(n),
              0.0, h.data(), int(n));
  const LinearOperator g = gram_operator(x.data(), m, n, n);
  ASSERT_EQ(g.n, n);
  const auto v = eigref::gaussian(n, 11);
  std::vector<double> y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
  g.apply(v.data(), y1.data());
  dense_operator(h.data(), n, n).apply(v.data(), y2.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y1[static_cast<size_t>(i)], y2[static_cast<size_t>(i)], 1e-10 * std::abs(y2[static_cast<size_t>(i)]) + 1e-10);
  // Copies of the operator applied from two threads at once give the same result.
  std::vector<double> y3(static_cast<size_t>(n)), y4(static_cast<size_t>(n));
  const LinearOperator g2 = g;
  std::thread t1([&] { for (int r = 0; r < 200; ++r) g.apply(v.data(), y3.data()); });
  std::thread t2([&] { for (int r = 0; r < 200; ++r) g2.apply(v.data(), y4.data()); });
  t1.join();
  t2.join();
  EXPECT_EQ(y3, y1);
  EXPECT_EQ(y4, y1);
  const auto lw = eigref::lapack_syevd(h, n);
  LanczosOptions o;
  o.k = 5;
  const EigenResult r = lanczos(g, o);
  ASSERT_TRUE(r.converged);
  for (int64_t i = 0; i < 5; ++i) EXPECT_LT(rel(r.values_re[static_cast<size_t>(i)], lw[static_cast<size_t>(n - 1 - i)]), 1e-8) << i;
}

TEST(EigenOperators, CsrMatchesDense) {
  const int64_t n = 200;
  std::vector<double> a(static_cast<size_t>(n * n), 0.0);
  std::mt19937_64 g(12);
  std::uniform_real_distribution<double> u(-1, 1), p(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i * n + i)] = 0.05 * double(i);  // a spread diagonal: eigenvalues up to ~10
    for (int64_t j = 0; j < n; ++j)
      if (j != i && p(g) < 0.03) a[static_cast<size_t>(i * n + j)] = u(g);
  }
  const CsrMatrix s = CsrMatrix::from_dense(a.data(), n, n, n);
  EXPECT_LT(s.nnz(), n * n / 10);
  const LinearOperator cs = csr_operator(s), de = dense_operator(a.data(), n, n);
  const auto v = eigref::gaussian(n, 13);
  std::vector<double> y1(static_cast<size_t>(n)), y2(static_cast<size_t>(n));
  cs.apply(v.data(), y1.data());
  de.apply(v.data(), y2.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y1[static_cast<size_t>(i)], y2[static_cast<size_t>(i)], 1e-12);
  ArnoldiOptions o;
  o.k = 4;
  o.subspace = 30;
  const EigenResult rc = arnoldi(cs, o), rd = arnoldi(de, o);
  ASSERT_TRUE(rc.converged);
  ASSERT_TRUE(rd.converged);
  auto ref = eigref::lapack_geev(a, n);
  std::sort(ref.begin(), ref.end(), [](auto x, auto y) { return std::abs(x) > std::abs(y); });
  for (int i = 0; i < 4; ++i) {
    EXPECT_LT(std::abs(std::complex<double>(rc.values_re[static_cast<size_t>(i)], rc.values_im[static_cast<size_t>(i)]) - ref[static_cast<size_t>(i)]),
              1e-8 * std::abs(ref[static_cast<size_t>(i)]))
        << i;
    EXPECT_NEAR(rc.values_re[static_cast<size_t>(i)], rd.values_re[static_cast<size_t>(i)], 1e-8 * std::abs(ref[static_cast<size_t>(i)]));
  }
  EXPECT_THROW(csr_operator(CsrMatrix::from_dense(a.data(), 2, 3, n)), ymlopt::KernelError);
}

/// Prescribed non-symmetric spectrum: the wanted end, then a bulk of modulus < 4.
std::vector<std::complex<double>> nonsym_spectrum(int64_t bulk_pairs, int64_t bulk_real, std::uint64_t seed) {
  std::vector<std::complex<double>> e = {{10, 3}, {9.5, 0}, {8, 2}, {-8.2, 0}, {7, 0}};
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(-2.5, 2.5);
  for (int64_t i = 0; i < bulk_pairs; ++i) e.emplace_back(u(g), std::abs(u(g)) + 0.01);
  for (int64_t i = 0; i < bulk_real; ++i) e.emplace_back(u(g), 0);
  return e;
}

TEST(EigenArnoldi, ComplexPairsMatchGeevAndArpack) {
  int64_t n = 0;
  const auto a = eigref::nonsymmetric_with_spectrum(nonsym_spectrum(60, 173, 14), 15, &n);
  ASSERT_EQ(n, 300);
  const LinearOperator op = dense_operator(a.data(), n, n);
  ArnoldiOptions o;
  o.k = 6;
  o.subspace = 30;
  const EigenResult r = arnoldi(op, o);
  ASSERT_TRUE(r.converged) << r.max_residual();
  // Wanted by modulus: 10±3i (10.44), 9.5, 8±2i (8.25), -8.2.
  const std::complex<double> want[] = {{10, 3}, {10, -3}, {9.5, 0}, {8, 2}, {8, -2}, {-8.2, 0}};
  auto ref = eigref::lapack_geev(a, n);
  for (int i = 0; i < 6; ++i) {
    const std::complex<double> got(r.values_re[static_cast<size_t>(i)], r.values_im[static_cast<size_t>(i)]);
    EXPECT_LT(std::abs(got - want[i]), 1e-8 * std::abs(want[i])) << i << " " << got;
    double best = 1e9;  // LAPACK has the same value
    for (auto z : ref) best = std::min(best, std::abs(z - got));
    EXPECT_LT(best, 1e-8 * std::abs(want[i]));
    const double* xi = r.values_im[static_cast<size_t>(i)] != 0 ? r.vectors_im.data() + i * n : nullptr;
    EXPECT_LT(eigref::eig_residual(op.apply, n, got.real(), got.imag(), r.vectors_re.data() + i * n, xi),
              1e-8 * std::abs(want[i]))
        << i;
  }
  const auto ar = eigref::arpack_nonsymmetric(op.apply, n, 6, "LM", 30, 1e-10);
  ASSERT_EQ(ar.info, 0);
  for (size_t j = 0; j < ar.re.size(); ++j) {
    double best = 1e9;
    for (auto w : want) best = std::min(best, std::abs(w - std::complex<double>(ar.re[j], ar.im[j])));
    EXPECT_LT(best, 1e-8 * 8) << j;
  }
  std::printf("[ arnoldi ] n=300 k=6: ERAM %lld matvecs %lld restarts; ARPACK %lld matvecs %lld restarts\n",
              (long long)r.matvecs, (long long)r.restarts, (long long)ar.matvecs, (long long)ar.restarts);
}

TEST(EigenArnoldi, LargestRealPart) {
  int64_t n = 0;
  const auto a = eigref::nonsymmetric_with_spectrum(nonsym_spectrum(40, 100, 16), 17, &n);
  ArnoldiOptions o;
  o.k = 3;
  o.which = Which::largest_real;
  o.subspace = 30;
  const EigenResult r = arnoldi(dense_operator(a.data(), n, n), o);
  ASSERT_TRUE(r.converged) << r.max_residual();
  // Largest real parts: 10±3i then 9.5 (-8.2 is not wanted).
  EXPECT_NEAR(r.values_re[0], 10, 1e-8 * 10);
  EXPECT_NEAR(r.values_im[0], 3, 1e-8 * 10);
  EXPECT_NEAR(r.values_im[1], -3, 1e-8 * 10);
  EXPECT_NEAR(r.values_re[2], 9.5, 1e-8 * 10);
}

TEST(EigenArnoldi, RestartFromGivenVectorsAndInjectionByCallback) {
  int64_t n = 0;
  const auto a = eigref::nonsymmetric_with_spectrum(nonsym_spectrum(40, 100, 18), 19, &n);
  const LinearOperator op = dense_operator(a.data(), n, n);
  ArnoldiOptions o;
  o.k = 3;
  o.subspace = 20;
  int calls = 0;
  int64_t last_restart = 0;
  o.on_restart = [&](RestartState& s) {
    ++calls;
    last_restart = s.restart;
    EXPECT_EQ(s.values_re.size(), 3u);
    EXPECT_EQ(s.vectors_re.size(), static_cast<size_t>(3 * n));
    EXPECT_EQ(s.restart_vector.size(), static_cast<size_t>(n));
  };
  const EigenResult first = arnoldi(op, o);
  ASSERT_TRUE(first.converged);
  EXPECT_EQ(calls, first.restarts);
  EXPECT_EQ(last_restart, first.restarts);
  ASSERT_GT(first.restarts, 1);

  // Starting from the converged Ritz vectors (real and imaginary parts): no restart needed.
  ArnoldiOptions o2 = o;
  o2.on_restart = nullptr;
  o2.start = first.vectors_re;
  o2.start.insert(o2.start.end(), first.vectors_im.begin(), first.vectors_im.end());
  const EigenResult again = arnoldi(op, o2);
  ASSERT_TRUE(again.converged);
  EXPECT_EQ(again.restarts, 0);

  // A co-method injecting the same vectors at the first restart: converged one cycle later.
  std::vector<double> inject(static_cast<size_t>(n), 0.0);
  for (size_t i = 0; i < o2.start.size(); ++i) inject[i % static_cast<size_t>(n)] += o2.start[i];
  ArnoldiOptions o3 = o;
  o3.on_restart = [&](RestartState& s) {
    if (s.restart == 1) s.restart_vector = inject;
  };
  const EigenResult injected = arnoldi(op, o3);
  ASSERT_TRUE(injected.converged);
  EXPECT_EQ(injected.restarts, 1);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(injected.values_re[static_cast<size_t>(i)], first.values_re[static_cast<size_t>(i)], 1e-8 * 10);

  // One cycle as a building block; stop from the callback.
  const EigenResult cyc = arnoldi_cycle(op, inject, 3, 20, Which::largest_magnitude);
  EXPECT_EQ(cyc.matvecs, 20);
  EXPECT_LT(cyc.max_residual(), 1e-8 * 10);
  ArnoldiOptions o4 = o;
  o4.on_restart = [](RestartState& s) { s.stop = true; };
  const EigenResult stopped = arnoldi(op, o4);
  EXPECT_EQ(stopped.restarts, 1);
  EXPECT_FALSE(stopped.converged);
}

TEST(EigenSvd, TopKMatchesGesdd) {
  const int64_t m = 300, n = 200, k = 8;
  // A = U diag(0.7^i) Vᵀ with random orthogonal U, V.
  const auto u = eigref::random_orthogonal(m, 20), v = eigref::random_orthogonal(n, 21);
  std::vector<double> a(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < n; ++p) s += u[static_cast<size_t>(i * m + p)] * std::pow(0.7, double(p)) * v[static_cast<size_t>(j * n + p)];
      a[static_cast<size_t>(i * n + j)] = s;
    }
  std::vector<double> uref, vtref;
  const auto sref = eigref::lapack_gesdd(a, m, n, &uref, &vtref);
  SvdOptions o;
  o.k = k;
  o.power_iters = 3;
  const SvdResult r = svd_topk(a.data(), m, n, n, o);
  ASSERT_EQ(r.s.size(), static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    EXPECT_LT(rel(r.s[static_cast<size_t>(j)], sref[static_cast<size_t>(j)]), 1e-8) << j;
    double du = 0, dv = 0;
    for (int64_t i = 0; i < m; ++i) du += r.u[static_cast<size_t>(i * k + j)] * uref[static_cast<size_t>(i * n + j)];
    for (int64_t c = 0; c < n; ++c) dv += r.vt[static_cast<size_t>(j * n + c)] * vtref[static_cast<size_t>(j * n + c)];
    EXPECT_GT(std::abs(du), 1 - 1e-7) << j;
    EXPECT_GT(std::abs(dv), 1 - 1e-7) << j;
    EXPECT_GT(du * dv, 0) << j;  // consistent signs: u s vᵀ is the same triplet
  }
  EXPECT_EQ(r.matvecs, 18 * (2 * 3 + 2));
  EXPECT_THROW(svd_topk(a.data(), m, n, n, {.k = 201}), ymlopt::KernelError);
}

TEST(EigenPower, MatchesLapackTopEigenvalue) {
  const auto eigs = spectrum({-10, 6}, 148, -3, 3, 22);
  const auto a = eigref::symmetric_with_spectrum(eigs, 23);
  std::vector<double> vecs;
  const auto lw = eigref::lapack_syevd(a, 150, &vecs);
  PowerOptions o;
  o.tol = 1e-10;
  const EigenResult r = power_iteration(dense_operator(a.data(), 150, 150), o);
  ASSERT_TRUE(r.converged);
  EXPECT_LT(rel(r.values_re[0], lw[0]), 1e-9);  // -10 is the smallest and the largest in modulus
  EXPECT_GT(abs_cos_col(r.vectors_re.data(), vecs, 150, 0), 1 - 1e-9);
  EXPECT_GT(r.matvecs, 10);
  PowerOptions few;
  few.max_iter = 3;
  EXPECT_FALSE(power_iteration(dense_operator(a.data(), 150, 150), few).converged);
}

TEST(EigenApi, BadSizesThrow) {
  const auto a = eigref::symmetric_with_spectrum({1, 2, 3, 4, 5, 6, 7, 8}, 24);
  const LinearOperator op = dense_operator(a.data(), 8, 8);
  LanczosOptions o;
  o.k = 9;
  try {
    lanczos(op, o);
    FAIL();
  } catch (const ymlopt::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("k = 9 must be in [1, n = 8]"), std::string::npos) << e.what();
  }
  o.k = 4;
  o.subspace = 4;
  EXPECT_THROW(lanczos(op, o), ymlopt::KernelError);
  ArnoldiOptions ao;
  ao.which = Which::largest_algebraic;
  EXPECT_THROW(arnoldi(op, ao), ymlopt::KernelError);
  ao.which = Which::largest_magnitude;
  ao.start = {1, 2, 3};
  EXPECT_THROW(arnoldi(op, ao), ymlopt::KernelError);
}

}  // namespace
