// The eigen workflow building blocks (workflow_components.hpp): eigen.eram_cycle
// driven in a C++ loop as an <until> loop drives it (eigenvalues against LAPACK
// dgeev, cycle count against eigen.arnoldi), a simulated gather restarting from
// another run's pairs, eigen.ritz_select's choice, eigen.generate against the C++ generators, eigen.matrix_market
// round trip and size mismatch, and the check messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen_registry.hpp"
#include "eigen/eigen.hpp"
#include "eigen/generators.hpp"
#include "eigen/matrix_market.hpp"
#include "eigen/workflow_components.hpp"
#include "eigen_reference.hpp"

namespace {

using namespace ymlopt;
using namespace ymlopt::eigen;
using test::Mat;
using std::int64_t;
using std::size_t;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

using eigtest::registry;
using eigtest::run_error;

template <class T> Mat<T> dense_mat(const std::vector<double>& d, int64_t n, int64_t pad = 0) {
  Mat<T> m(n, n, pad);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) m(i, j) = static_cast<T>(d[sz(i * n + j)]);
  return m;
}

/// n = 300: {3, 2.6 ± 0.5i, 2.2} above a bulk in |z| <= 1.5 (as meram_test's magnitude problem).
std::vector<std::complex<double>> magnitude_spectrum() {
  return random_spectrum({{3.0, 0}, {2.6, 0.5}, {2.2, 0}}, 296, 1.5, 0.3, 21);
}

/// n = 299: largest real parts {2, 1.7 ± 1.2i}, the bulk (re in [-4, 1.2]) has larger moduli.
std::vector<std::complex<double>> real_spectrum() {
  return random_spectrum_box({{2.0, 0}, {1.7, 1.2}}, 296, -4.0, 1.2, 0.6, 0.3, 23);
}

/// The k wanted eigenvalues of `all` in solver order (largest key first, +im first).
std::vector<std::complex<double>> wanted(std::vector<std::complex<double>> all, int64_t k, Which which) {
  std::sort(all.begin(), all.end(), [&](auto a, auto b) {
    const double ka = which == Which::largest_real ? a.real() : std::abs(a);
    const double kb = which == Which::largest_real ? b.real() : std::abs(b);
    if (std::abs(ka - kb) > 1e-12 * std::max(std::abs(ka), 1.0)) return ka > kb;
    return a.imag() > b.imag();
  });
  all.resize(sz(k));
  return all;
}

/// The ports of one co-method: vectors [n,k], values [k,3], residual [1], all zero.
struct CycleState {
  Mat<double> v, vals, res;
  CycleState(int64_t n, int64_t k) : v(n, k, 0, DType::f64, 0.0), vals(k, 3, 0, DType::f64, 0.0), res(1, 1) {}
  std::map<std::string, double> cycle(TensorView a, const std::map<std::string, std::string>& args) {
    TensorView r = res.view();
    r.shape = {1};  // the workflow's shape="[1]"
    return test::run(registry(), "eigen.eram_cycle", {a, v.view(), vals.view(), r}, args);
  }
};

struct LoopResult {
  int64_t cycles = 0, matvecs = 0;
  double residual = 0;
};

/// Calls eigen.eram_cycle until residual <= tol, as <until cond="res le tol"> does.
LoopResult loop_until(CycleState& s, TensorView a, const std::map<std::string, std::string>& args, double tol,
                      int64_t max_cycles) {
  LoopResult r;
  // the cycles verify a converged set at the loop's tolerance, as arnoldi() does (its matvecs count the check's)
  auto with_tol = args;
  char tol_text[32];
  std::snprintf(tol_text, sizeof tol_text, "%.17g", tol);
  with_tol.emplace("tol", tol_text);
  while (r.cycles < max_cycles) {
    const auto rep = s.cycle(a, with_tol);
    EXPECT_EQ(rep.at("restarts"), r.cycles == 0 ? 0.0 : 1.0);
    ++r.cycles;
    r.matvecs += static_cast<int64_t>(rep.at("matvecs"));
    if (rep.count("verify_matvecs")) r.matvecs += static_cast<int64_t>(rep.at("verify_matvecs"));
    r.residual = s.res(0, 0);
    EXPECT_EQ(rep.at("residual"), r.residual);
    if (r.residual <= tol) break;
  }
  return r;
}

/// Values [k,3] and dgeev-style vectors against the reference: values to 1e-8
/// relative, true residuals ||A x - λ x|| / ||x|| of the vector columns.
void expect_pairs(const CycleState& s, const std::vector<double>& a, int64_t n,
                  const std::vector<std::complex<double>>& ref, double tol) {
  const int64_t k = static_cast<int64_t>(ref.size());
  const LinearOperator op = dense_operator(a.data(), n, n);
  for (int64_t j = 0; j < k; ++j) {
    const std::complex<double> got(s.vals(j, 0), s.vals(j, 1));
    EXPECT_LE(std::abs(got - ref[sz(j)]), 1e-8 * std::abs(ref[sz(j)])) << "value " << j << ": " << got;
    EXPECT_GE(s.vals(j, 2), 0.0);
    std::vector<double> xr(sz(n)), xi(sz(n), 0.0);
    const bool pair_first = got.imag() > 0 && j + 1 < k;
    const bool pair_second = got.imag() < 0 && j > 0;
    for (int64_t i = 0; i < n; ++i) {
      if (pair_first) {
        xr[sz(i)] = s.v(i, j);
        xi[sz(i)] = s.v(i, j + 1);
      } else if (pair_second) {
        xr[sz(i)] = s.v(i, j - 1);
        xi[sz(i)] = -s.v(i, j);
      } else {
        xr[sz(i)] = s.v(i, j);
      }
    }
    if (got.imag() > 0 && !pair_first) {
      // A lone +im value: the column is Re((1-i) x); (1+i)/2 times it is x + its conjugate's share,
      // so check the real 2-D invariant subspace instead: A c stays in span{c, A c} with A² c = 2 Re λ A c - |λ|² c.
      std::vector<double> ac(sz(n)), aac(sz(n));
      op.apply(xr.data(), ac.data());
      op.apply(ac.data(), aac.data());
      double num = 0, den = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double e = aac[sz(i)] - 2 * got.real() * ac[sz(i)] + std::norm(got) * xr[sz(i)];
        num += e * e;
        den += xr[sz(i)] * xr[sz(i)];
      }
      EXPECT_LE(std::sqrt(num / den), 100 * tol * std::norm(got)) << "lone pair column " << j;
      continue;
    }
    EXPECT_LE(eigref::eig_residual(op.apply, n, got.real(), got.imag(), xr.data(), xi.data()),
              10 * tol * std::abs(got))
        << "true residual of pair " << j;
  }
}

/// The matrices and sizes both cycle components are run on until converged.
struct LoopCase {
  const char* name;
  std::vector<std::complex<double>> eigs;
  std::uint64_t matrix_seed;
  Which which;
  int64_t k, m;
};
const std::vector<LoopCase>& loop_cases() {
  static const std::vector<LoopCase> cases = {
      {"magnitude k=4 m=14", magnitude_spectrum(), 22, Which::largest_magnitude, 4, 14},
      {"magnitude k=3 m=7", magnitude_spectrum(), 22, Which::largest_magnitude, 3, 7},
      {"magnitude k=2 m=8 (lone +im)", magnitude_spectrum(), 22, Which::largest_magnitude, 2, 8},
      {"real k=3 m=12", real_spectrum(), 24, Which::largest_real, 3, 12},
  };
  return cases;
}

/// A loop case's dense matrix, its wanted eigenvalues from LAPACK, and eigen::arnoldi's
/// run on it (seed 5), which the cycle loops must repeat.
struct LoopReference {
  int64_t n;
  std::vector<double> d;
  std::vector<std::complex<double>> ref;
  EigenResult e;
  LoopReference(const LoopCase& c, Restart restart, double tol) {
    const CsrMatrix s = matrix_with_spectrum(c.eigs, {.seed = c.matrix_seed});
    n = s.rows;
    d = to_dense(s);
    ref = wanted(eigref::lapack_geev(d, n), c.k, c.which);
    ArnoldiOptions o;
    o.k = c.k;
    o.subspace = c.m;
    o.tol = tol;
    o.which = c.which;
    o.seed = 5;
    o.restart = restart;
    e = arnoldi(dense_operator(d.data(), n, n), o);
  }
};

TEST(EramCycle, LoopMatchesDgeevAndArnoldi) {
  const double tol = 1e-10;
  for (const LoopCase& c : loop_cases()) {
    SCOPED_TRACE(c.name);
    const LoopReference lr(c, Restart::explicit_, tol);
    const int64_t n = lr.n;
    const std::vector<double>& d = lr.d;
    const auto& ref = lr.ref;
    const EigenResult& e = lr.e;
    ASSERT_TRUE(e.converged);

    Mat<double> a = dense_mat<double>(d, n);
    CycleState st(n, c.k);
    const LoopResult r = loop_until(st, a.view(),
                                    {{"k", std::to_string(c.k)},
                                     {"subspace", std::to_string(c.m)},
                                     {"which", c.which == Which::largest_real ? "real" : "magnitude"},
                                     {"seed", "5"}},
                                    tol, 1000);
    ASSERT_LE(r.residual, tol);
    // The same algorithm as eigen.arnoldi: as many cycles (restarts + 1), matvecs and the same values.
    EXPECT_EQ(r.cycles, e.restarts + 1);
    EXPECT_EQ(r.matvecs, e.matvecs);
    EXPECT_GT(r.cycles, 2);
    for (int64_t j = 0; j < c.k; ++j) {
      EXPECT_NEAR(st.vals(j, 0), e.values_re[sz(j)], 1e-12 * std::abs(ref[sz(j)]));
      EXPECT_NEAR(st.vals(j, 1), e.values_im[sz(j)], 1e-12 * std::abs(ref[sz(j)]));
    }
    expect_pairs(st, d, n, ref, tol);
    // The eigen.arnoldi component itself (the ports, not the API) needs the same cycles.
    Mat<double> re(1, c.k), im(1, c.k);
    const auto rep = test::run(registry(), "eigen.arnoldi", {a.view(), re.view(), im.view()},
                               {{"k", std::to_string(c.k)},
                                {"subspace", std::to_string(c.m)},
                                {"which", c.which == Which::largest_real ? "real" : "magnitude"},
                                {"tol", "1e-10"},
                                {"seed", "5"}});
    EXPECT_EQ(rep.at("restarts") + 1, double(r.cycles));
    std::printf("[ eram_cycle ] %s: %lld cycles, %lld matvecs (eigen.arnoldi: %lld restarts)\n", c.name,
                (long long)r.cycles, (long long)r.matvecs, (long long)e.restarts);
  }
}

TEST(EramCycle, F32MatrixMatchesDgeevOfTheRoundedMatrix) {
  const CsrMatrix s = matrix_with_spectrum(magnitude_spectrum(), {.seed = 22});
  const int64_t n = s.rows;
  const std::vector<double> d = to_dense(s);
  Mat<float> a = dense_mat<float>(d, n, 3);  // padded rows: ld > n
  std::vector<double> rounded(d.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) rounded[sz(i * n + j)] = double(a(i, j));
  const auto ref = wanted(eigref::lapack_geev(rounded, n), 4, Which::largest_magnitude);
  CycleState st(n, 4);
  const LoopResult r = loop_until(st, a.view(), {{"k", "4"}, {"subspace", "14"}}, 1e-10, 1000);
  ASSERT_LE(r.residual, 1e-10);
  expect_pairs(st, rounded, n, ref, 1e-10);
}

TEST(EramCycle, GatheredPairsRestartTheCycle) {
  // ERAM(5) alone converges to a wrong third value on this matrix (meram_test);
  // gathering ERAM(10)'s converged pairs into its ports makes its next cycle converge to the right ones.
  const CsrMatrix s = matrix_with_spectrum(magnitude_spectrum(), {.seed = 22});
  const int64_t n = s.rows;
  const std::vector<double> d = to_dense(s);
  const auto ref = wanted(eigref::lapack_geev(d, n), 3, Which::largest_magnitude);
  Mat<double> a = dense_mat<double>(d, n, 5);  // padded rows: ld > n
  const double tol = 1e-10;

  CycleState big(n, 3);
  ASSERT_LE(loop_until(big, a.view(), {{"k", "3"}, {"subspace", "10"}}, tol, 1000).residual, tol);

  CycleState small(n, 3);
  const std::map<std::string, std::string> args5 = {{"k", "3"}, {"subspace", "5"}};
  small.cycle(a.view(), args5);
  small.cycle(a.view(), args5);
  const double own = small.res(0, 0);
  EXPECT_GT(own, 1e3 * tol);  // two cycles of ERAM(5) are far from converged
  // The gather: copy the better co-method's tensors into this one's (same shapes).
  small.v.buf = big.v.buf;
  small.vals.buf = big.vals.buf;
  const auto rep = small.cycle(a.view(), args5);
  EXPECT_EQ(rep.at("restarts"), 1);
  EXPECT_EQ(rep.at("matvecs"), 5);
  // One cycle of ERAM(5) from pairs converged to tol keeps them converged to a few tol.
  EXPECT_LE(small.res(0, 0), 10 * tol);
  expect_pairs(small, d, n, ref, 10 * tol);

  // Only the vectors (values zeroed): their plain sum restarts the cycle, also converged.
  CycleState plain(n, 3);
  plain.v.buf = big.v.buf;
  plain.cycle(a.view(), args5);
  EXPECT_LE(plain.res(0, 0), 10 * tol);
}

TEST(EramCycle, FirstCycleFromZerosIsArnoldisFirstCycle) {
  const CsrMatrix s = matrix_with_spectrum(real_spectrum(), {.seed = 24});
  const int64_t n = s.rows;
  const std::vector<double> d = to_dense(s);
  Mat<double> a = dense_mat<double>(d, n);
  for (const int64_t seed : {1, 9}) {
    ArnoldiOptions o;
    o.k = 3;
    o.subspace = 12;
    o.which = Which::largest_real;
    o.max_restarts = 0;  // one cycle
    o.seed = static_cast<std::uint64_t>(seed);
    const EigenResult e = arnoldi(dense_operator(d.data(), n, n), o);
    CycleState st(n, 3);
    st.cycle(a.view(), {{"k", "3"}, {"subspace", "12"}, {"which", "real"}, {"seed", std::to_string(seed)}});
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(st.vals(j, 0), e.values_re[sz(j)]) << seed;
      EXPECT_EQ(st.vals(j, 1), e.values_im[sz(j)]) << seed;
      EXPECT_EQ(st.vals(j, 2), e.residuals[sz(j)]) << seed;
    }
  }
}


TEST(EramCycle, CheckMessages) {
  const auto& r = registry();
  auto sv = [](int64_t rows, int64_t cols, DType dt = DType::f64) { return test::shape_view(dt, rows, cols); };
  const std::map<std::string, std::string> k3 = {{"k", "3"}, {"subspace", "8"}};
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3), sv(3, 3), sv(1, 1)}, k3), "");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40, DType::f32), sv(40, 3), sv(3, 3), sv(1, 1)}, k3), "");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 4), sv(3, 3), sv(1, 1)}, k3),
            "port 'vectors' is 40x4 but expected 40x3 (n x k Ritz vectors)");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3), sv(3, 2), sv(1, 1)}, k3),
            "port 'values' is 3x2 but expected 3x3 (k rows of re, im, residual)");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3), sv(3, 3), sv(1, 2)}, k3),
            "port 'residual' is 1x2 but expected 1x1 (one residual)");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3, DType::f32), sv(3, 3), sv(1, 1)}, k3),
            "port 'vectors' has dtype f32: must be f64 (the Ritz vectors are kept in double)");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 30), sv(40, 3), sv(3, 3), sv(1, 1)}, k3),
            "port 'a' is 40x30: a square matrix is required");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3), sv(3, 3), sv(1, 1)},
                        {{"k", "3"}, {"subspace", "3"}}),
            "param 'subspace' is 3: must exceed k = 3 (or be >= n = 40)");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 41), sv(41, 3), sv(1, 1)}, {{"k", "41"}}),
            "param 'k' is 41: must be in [1, n = 40]");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3), sv(3, 3), sv(1, 1)},
                        {{"k", "3"}, {"which", "smallest"}}),
            "param 'which' is 'smallest': expected one of 'magnitude', 'real'");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle", {sv(40, 40), sv(40, 3), sv(3, 3), TensorView{}}, k3),
            "port 'residual' is not bound");
  // Run-time checks of the inout data.
  Mat<double> a(40, 40), v(40, 3, 0, DType::f64, 0.0), vals(3, 3, 0, DType::f64, 0.0), res(1, 1);
  a.random(3);
  v(7, 1) = std::nan("");
  EXPECT_EQ(run_error("eigen.eram_cycle", {a.view(), v.view(), vals.view(), res.view()}, k3),
            "port 'vectors' holds a non-finite value at (7, 1)");
  v(7, 1) = 0.5;
  vals(2, 2) = -1;
  EXPECT_EQ(run_error("eigen.eram_cycle", {a.view(), v.view(), vals.view(), res.view()}, k3),
            "port 'values' row 2 column 2 is -1.000000: values must be finite and residuals >= 0");
  // The cost model sees m matvecs of 2n² flops at least.
  const Cost c = test::TestContext(r.get("eigen.eram_cycle"), {sv(40, 40), sv(40, 3), sv(3, 3), sv(1, 1), {}, {}}, k3).cost();
  EXPECT_GE(c.flops, 8 * 2.0 * 40 * 40);
}

/// The ports of one MIRAM co-method: the pairs plus the kept factorisation, all zero.
struct IramCycleState : CycleState {
  Mat<double> basis, hess, state;
  IramCycleState(int64_t n, int64_t k, int64_t m)
      : CycleState(n, k),
        basis(m + 1, n, 0, DType::f64, 0.0),
        hess(m + 1, m, 0, DType::f64, 0.0),
        state(k + 1, 3, 0, DType::f64, 0.0) {}
  std::map<std::string, double> cycle(TensorView a, const std::map<std::string, std::string>& args) {
    TensorView r = res.view();
    r.shape = {1};
    return test::run(registry(), "eigen.iram_cycle",
                     {a, v.view(), vals.view(), r, basis.view(), hess.view(), state.view()}, args);
  }
};

// An <until> loop of eigen.iram_cycle is eigen::arnoldi(restart=implicit):
// the same cycles and matvecs (m, then m - k' per restart), values to
// round-off, and pairs that dgeev confirms.
TEST(IramCycle, LoopMatchesDgeevAndImplicitArnoldi) {
  const double tol = 1e-10;
  for (const LoopCase& c : loop_cases()) {
    SCOPED_TRACE(c.name);
    const LoopReference lr(c, Restart::implicit, tol);
    const int64_t n = lr.n;
    const std::vector<double>& d = lr.d;
    const auto& ref = lr.ref;
    const EigenResult& e = lr.e;
    ASSERT_TRUE(e.converged);

    Mat<double> a = dense_mat<double>(d, n, 2);  // padded rows: ld > n
    IramCycleState st(n, c.k, c.m);
    const std::map<std::string, std::string> args = {{"k", std::to_string(c.k)},
                                                     {"subspace", std::to_string(c.m)},
                                                     {"which", c.which == Which::largest_real ? "real" : "magnitude"},
                                                     {"tol", "1e-10"},
                                                     {"seed", "5"}};
    int64_t cycles = 0, matvecs = 0;
    while (cycles < 2000) {
      const auto rep = st.cycle(a.view(), args);
      EXPECT_EQ(rep.at("restarts"), cycles == 0 ? 0.0 : 1.0);
      EXPECT_EQ(rep.at("explicit"), 0.0);
      if (cycles == 0) {
        EXPECT_EQ(rep.at("matvecs"), double(c.m));
      } else {
        EXPECT_LT(rep.at("matvecs"), double(c.m));
      }
      ++cycles;
      matvecs += static_cast<int64_t>(rep.at("matvecs"));
      if (rep.count("verify_matvecs")) matvecs += static_cast<int64_t>(rep.at("verify_matvecs"));
      if (st.res(0, 0) <= tol) break;
    }
    ASSERT_LE(st.res(0, 0), tol);
    EXPECT_EQ(cycles, e.restarts + 1);
    EXPECT_EQ(matvecs, e.matvecs);
    EXPECT_GT(cycles, 2);
    for (int64_t j = 0; j < c.k; ++j) {
      EXPECT_NEAR(st.vals(j, 0), e.values_re[sz(j)], 1e-12 * std::abs(ref[sz(j)]));
      EXPECT_NEAR(st.vals(j, 1), e.values_im[sz(j)], 1e-12 * std::abs(ref[sz(j)]));
    }
    expect_pairs(st, d, n, ref, tol);
    std::printf("[ iram_cycle ] %s: %lld cycles, %lld matvecs (ERAM loop above needs more)\n", c.name,
                (long long)cycles, (long long)matvecs);
  }
}

TEST(IramCycle, AdoptedPairsRestartExplicitly) {
  const CsrMatrix s = matrix_with_spectrum(magnitude_spectrum(), {.seed = 22});
  const int64_t n = s.rows;
  const std::vector<double> d = to_dense(s);
  const auto ref = wanted(eigref::lapack_geev(d, n), 2, Which::largest_magnitude);
  Mat<double> a = dense_mat<double>(d, n);
  const double tol = 1e-10;
  IramCycleState big(n, 2, 12);
  const std::map<std::string, std::string> args12 = {{"k", "2"}, {"subspace", "12"}, {"tol", "1e-10"}};
  for (int i = 0; i < 500 && !(big.res(0, 0) <= tol && i > 0); ++i) big.cycle(a.view(), args12);
  ASSERT_LE(big.res(0, 0), tol);

  IramCycleState small(n, 2, 5);
  const std::map<std::string, std::string> args5 = {{"k", "2"}, {"subspace", "5"}, {"tol", "1e-10"}};
  small.cycle(a.view(), args5);
  EXPECT_EQ(small.cycle(a.view(), args5).at("explicit"), 0.0);
  EXPECT_GT(small.res(0, 0), 1e3 * tol);
  // What eigen.ritz_select does on adoption: the gathered pairs replace the own ones.
  small.v.buf = big.v.buf;
  small.vals.buf = big.vals.buf;
  const auto rep = small.cycle(a.view(), args5);
  EXPECT_EQ(rep.at("explicit"), 1.0);
  EXPECT_EQ(rep.at("matvecs"), 5);  // a new factorisation
  EXPECT_LE(small.res(0, 0), 10 * tol);
  expect_pairs(small, d, n, ref, 10 * tol);
  // And the next cycle restarts implicitly from that factorisation again.
  const auto next = small.cycle(a.view(), args5);
  EXPECT_EQ(next.at("explicit"), 0.0);
  EXPECT_LT(next.at("matvecs"), 5);
}

TEST(IramCycle, CheckMessages) {
  const auto& r = registry();
  auto sv = [](int64_t rows, int64_t cols, DType dt = DType::f64) { return test::shape_view(dt, rows, cols); };
  const std::map<std::string, std::string> k3 = {{"k", "3"}, {"subspace", "8"}};
  auto ports = [&](TensorView basis, TensorView hess, TensorView state) {
    return std::vector<TensorView>{sv(40, 40), sv(40, 3), sv(3, 3), sv(1, 1), basis, hess, state};
  };
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(9, 40), sv(9, 8), sv(4, 3)), k3), "");
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(8, 40), sv(9, 8), sv(4, 3)), k3),
            "port 'basis' is 8x40 but expected 9x40 ((subspace + 1) x n: V_m and f, a vector per row)");
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(9, 40), sv(8, 8), sv(4, 3)), k3),
            "port 'hessenberg' is 8x8 but expected 9x8 ((subspace + 1) x subspace)");
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(9, 40), sv(9, 8), sv(3, 3)), k3),
            "port 'state' is 3x3 but expected 4x3 ((k + 1) x 3)");
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(5, 40), sv(5, 4), sv(4, 3)), {{"k", "3"}, {"subspace", "4"}}),
            "param 'k' is 3: an implicit restart needs k < subspace - 1 = 3 (at least 2 shifts)");
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(9, 40), sv(9, 8, DType::f32), sv(4, 3)), k3),
            "port 'hessenberg' has dtype f32: must be f64 (the factorisation is kept in double)");
  EXPECT_EQ(test::check(r, "eigen.iram_cycle", ports(sv(9, 40), sv(9, 8), sv(4, 3)),
                        {{"k", "3"}, {"subspace", "8"}, {"tol", "0"}}),
            "param 'tol' must be > 0");
  Mat<double> a(40, 40), v(40, 3, 0, DType::f64, 0.0), vals(3, 3, 0, DType::f64, 0.0), res(1, 1),
      basis(9, 40, 0, DType::f64, 0.0), hess(9, 8, 0, DType::f64, 0.0), state(4, 3, 0, DType::f64, 0.0);
  a.random(3);
  hess(2, 1) = std::numeric_limits<double>::infinity();
  EXPECT_EQ(run_error("eigen.iram_cycle",
                      {a.view(), v.view(), vals.view(), res.view(), basis.view(), hess.view(), state.view()}, k3),
            "port 'hessenberg' holds a non-finite value at (2, 1)");
}

TEST(RitzSelect, TakesAClearlyBetterAndAtLeastAsWantedSet) {
  const auto& r = registry();
  const int64_t n = 6, k = 2;
  auto run = [&](double own_res, double gathered_res, double gathered_top, const std::string& factor) {
    Mat<double> v(n, k, 0, DType::f64, 1.0), vals(k, 3, 0, DType::f64, 0.0), res(1, 1, 0, DType::f64, own_res);
    Mat<double> gv(n, k, 0, DType::f64, 2.0), gvals(k, 3, 0, DType::f64, 0.0), gres(1, 1, 0, DType::f64, gathered_res);
    vals(0, 0) = 3.0, vals(1, 0) = 2.0;  // own values 3, 2
    gvals(0, 0) = gathered_top, gvals(1, 0) = 2.0;
    const auto rep = test::run(r, "eigen.ritz_select", {v.view(), vals.view(), res.view(), gv.view(), gvals.view(), gres.view()},
                               {{"factor", factor}});
    const bool took = rep.at("adopted") == 1;
    EXPECT_EQ(v(3, 1), took ? 2.0 : 1.0);
    EXPECT_EQ(res(0, 0), took ? gathered_res : own_res);
    EXPECT_EQ(vals(0, 0), took ? gathered_top : 3.0);
    return took;
  };
  EXPECT_FALSE(run(1e-4, 0.6e-4, 3.0, "2"));  // lower, but not by the factor
  EXPECT_TRUE(run(1e-4, 0.4e-4, 3.0, "2"));
  EXPECT_TRUE(run(1e-4, 0.6e-4, 3.0, "1"));   // factor 1: any lower residual
  EXPECT_FALSE(run(1e-4, 1e-4, 3.0, "1"));
  EXPECT_FALSE(run(1e-4, 1e-9, 2.5, "2"));    // converged, but to a less wanted value than the own 3
  auto sv = [](int64_t rows, int64_t cols) { return test::shape_view(DType::f64, rows, cols); };
  EXPECT_EQ(test::check(r, "eigen.ritz_select", {sv(n, k), sv(k, 3), sv(1, 1), sv(n, k), sv(k, 3), sv(1, 1)}, {{"factor", "0.5"}}),
            "param 'factor' is 0.500000: must be in [1.000000, inf]");
}

// ---------------------------------------------------------------- eigen.generate

TEST(EigenGenerate, MatchesTheGeneratorsBitForBit) {
  struct Case {
    std::map<std::string, std::string> args;
    int64_t n;
    CsrMatrix expect;
  };
  const std::vector<Case> cases = {
      {{{"kind", "disc"}, {"top", "3, 2.6+0.5i, 2.2"}, {"radius", "1.5"}, {"seed", "21"}, {"matrix_seed", "22"}},
       300,
       matrix_with_spectrum(magnitude_spectrum(), {.seed = 22})},
      {{{"kind", "box"},
        {"top", "2,1.7+1.2i"},
        {"re_lo", "-4"},
        {"re_hi", "1.2"},
        {"im_max", "0.6"},
        {"seed", "23"},
        {"matrix_seed", "24"}},
       299,
       matrix_with_spectrum(real_spectrum(), {.seed = 24})},
      {{{"kind", "disc"},
        {"top", "1, 0.5+0.25i"},
        {"radius", "0.3"},
        {"complex_fraction", "0.8"},
        {"upper_per_row", "5"},
        {"upper_scale", "0.25"},
        {"permute", "false"},
        {"seed", "4"},
        {"matrix_seed", "6"}},
       50,
       matrix_with_spectrum(random_spectrum({{1, 0}, {0.5, 0.25}}, 47, 0.3, 0.8, 4),
                            {.seed = 6, .upper_per_row = 5, .upper_scale = 0.25, .permute = false})},
      {{{"kind", "convection_diffusion"}, {"rho", "25"}}, 144, convection_diffusion_2d(12, 25.0)},
      {{{"kind", "markov"}}, 66, markov_random_walk(10)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args.at("kind") + " n=" + std::to_string(c.n));
    const std::vector<double> want = to_dense(c.expect);
    Mat<double> a(c.n, c.n, 2);
    const auto rep = test::run(registry(), "eigen.generate", {a.view()}, c.args);
    EXPECT_EQ(rep.at("nnz"), double(c.expect.nnz()));
    int64_t diff = 0;
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.n; ++j) diff += a(i, j) != want[sz(i * c.n + j)] ? 1 : 0;
    EXPECT_EQ(diff, 0);
    EXPECT_EQ(a(0, c.n), 77.0);  // the padding is left alone
    Mat<float> f(c.n, c.n);
    test::run(registry(), "eigen.generate", {f.view()}, c.args);
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.n; ++j) diff += f(i, j) != static_cast<float>(want[sz(i * c.n + j)]) ? 1 : 0;
    EXPECT_EQ(diff, 0);
  }
  // Independently: dgeev of the generated disc matrix has the prescribed top values.
  Mat<double> a(300, 300);
  test::run(registry(), "eigen.generate", {a.view()},
            {{"top", "3, 2.6+0.5i, 2.2"}, {"radius", "1.5"}, {"seed", "21"}, {"matrix_seed", "22"}});
  const auto got = wanted(eigref::lapack_geev(a.buf, 300), 4, Which::largest_magnitude);
  const std::complex<double> want[] = {{3, 0}, {2.6, 0.5}, {2.6, -0.5}, {2.2, 0}};
  for (int j = 0; j < 4; ++j) EXPECT_LE(std::abs(got[sz(j)] - want[j]), 1e-10) << j;
}

TEST(EigenGenerate, ParseSpectrumAndCheckMessages) {
  const auto e = parse_spectrum(" 3, 2.6+0.5i,2.2 ,-1e-3+2e-2i");
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[1], std::complex<double>(2.6, 0.5));
  EXPECT_EQ(e[3], std::complex<double>(-1e-3, 2e-2));
  EXPECT_EQ(spectrum_dims(e), 6);
  EXPECT_TRUE(parse_spectrum("").empty());
  const auto& r = registry();
  auto sv = [](int64_t rows, int64_t cols) { return test::shape_view(DType::f64, rows, cols); };
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {}), "");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"top", "1, 0.9-0.1i"}}),
            "param 'top' item '0.9-0.1i' in '1, 0.9-0.1i': give each conjugate pair once, with a positive imaginary "
            "part (\"a+bi\", b > 0)");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"top", "1, x"}}),
            "param 'top' item 'x' in '1, x': not a number (expected \"a\" or \"a+bi\")");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(3, 3)}, {{"top", "1, 2+1i, 0.5"}}),
            "param 'top' fills 4 dimensions but n is 3");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"kind", "convection_diffusion"}}),
            "kind 'convection_diffusion' needs n = nx² (an nx x nx grid) but n is 10");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(16, 16)}, {{"kind", "convection_diffusion"}}), "");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(11, 11)}, {{"kind", "markov"}}),
            "kind 'markov' needs n = (m+1)(m+2)/2 states (3, 6, 10, 15, ...) but n is 11");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"kind", "markov"}}), "");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"kind", "random"}}),
            "param 'kind' is 'random': expected one of 'disc', 'box', 'schur', 'convection_diffusion', 'markov'");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"complex_fraction", "1.5"}}),
            "param 'complex_fraction' is 1.500000: must be in [0.000000, 1.000000]");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 10)}, {{"kind", "box"}, {"re_lo", "2"}, {"re_hi", "1"}}),
            "param 're_lo' is 2.000000: must be <= re_hi = 1.000000");
  EXPECT_EQ(test::check(r, "eigen.generate", {sv(10, 12)}, {}), "port 'a' is 10x12: a square matrix is required");
}

// ---------------------------------------------------------------- eigen.matrix_market

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ymlopt_eram_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(EigenMatrixMarket, RoundTripSymmetricAndSizeMismatch) {
  const CsrMatrix s = matrix_with_spectrum(random_spectrum({{2.5, 0}, {1, 0.75}}, 37, 1.0, 0.3, 5), {.seed = 9});
  const std::string path = temp_path("general.mtx");
  write_matrix_market(path, s, "eram_cycle_test");
  const std::vector<double> want = to_dense(s);
  const int64_t n = s.rows;
  Mat<double> a(n, n, 1);
  const auto rep = test::run(registry(), "eigen.matrix_market", {a.view()}, {{"path", path}});
  EXPECT_EQ(rep.at("nnz"), double(s.nnz()));
  int64_t diff = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) diff += a(i, j) != want[sz(i * n + j)] ? 1 : 0;
  EXPECT_EQ(diff, 0);

  // coordinate real symmetric: the lower triangle is mirrored; f32 output.
  const std::string sym = temp_path("sym.mtx");
  std::ofstream(sym) << "%%MatrixMarket matrix coordinate real symmetric\n% c\n3 3 4\n1 1 2.5\n2 1 -1\n3 2 0.25\n3 3 "
                        "4\n";
  Mat<float> b(3, 3);
  test::run(registry(), "eigen.matrix_market", {b.view()}, {{"path", sym}});
  const float expect[3][3] = {{2.5f, -1, 0}, {-1, 0, 0.25f}, {0, 0.25f, 4}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(b(i, j), expect[i][j]) << i << "," << j;

  Mat<double> wrong(n + 1, n + 1);
  EXPECT_EQ(run_error("eigen.matrix_market", {wrong.view()}, {{"path", path}}),
            path + " holds a " + std::to_string(n) + "x" + std::to_string(n) + " matrix (" + std::to_string(s.nnz()) +
                " entries stored, up to " + std::to_string(s.nnz()) + " nonzeros) but port 'a' is " +
                std::to_string(n + 1) + "x" + std::to_string(n + 1));
  const std::string missing = run_error("eigen.matrix_market", {b.view()}, {{"path", temp_path("missing.mtx")}});
  EXPECT_EQ(missing.rfind(temp_path("missing.mtx"), 0), 0u) << missing;
  EXPECT_EQ(test::check(registry(), "eigen.matrix_market", {test::shape_view(DType::f64, 3, 3)}, {}),
            "param 'path' is empty");
  EXPECT_EQ(test::check(registry(), "eigen.matrix_market", {test::shape_view(DType::i32, 3, 3)}, {{"path", sym}}),
            "port 'a' has dtype i32: only f32 and f64 are supported");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
