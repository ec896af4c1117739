// IRAM (arnoldi() with Restart::implicit) and MIRAM (meram() with implicit
// co-methods): eigenvalues against LAPACK dgeev and ARPACK dnaupd/dneupd on
// the generated matrix families, including those where the explicit restart
// (ERAM) converges to the wrong eigenvalues; conjugate pairs and a wanted set
// that splits one; matvec counts against ARPACK's and against a counting
// operator; the explicit restart a callback can inject; bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen/eigen.hpp"
#include "eigen/generators.hpp"
#include "eigen/meram.hpp"
#include "eigen_reference.hpp"

namespace {

using namespace ymlopt;
using namespace ymlopt::eigen;
using std::int64_t;
using cplx = std::complex<double>;

/// A test matrix with every eigenvalue (dgeev of its dense copy).
struct Family {
  std::string name;
  CsrMatrix a;
  Which which;
  std::vector<cplx> exact;
};

Family make(const std::string& name, CsrMatrix a, Which which) {
  Family f{name, std::move(a), which, {}};
  f.exact = eigref::lapack_geev(to_dense(f.a), f.a.rows);
  return f;
}

/// The bench's families (tests/bench/bench_meram.cpp) at n = 400.
std::vector<Family> families() {
  const int64_t n = 400;
  std::vector<Family> out;
  auto disc = [&](const std::string& name, std::vector<cplx> top, double radius, std::uint64_t seed) {
    const auto eigs = random_spectrum(top, n - spectrum_dims(top), radius, 0.3, seed);
    out.push_back(make(name, matrix_with_spectrum(eigs, {.seed = seed, .upper_scale = 0.2}), Which::largest_magnitude));
  };
  disc("clustered", {{1.0, 0}, {0.995, 0}}, 0.95, 11);
  {
    const std::vector<cplx> top = {{1.0, 0}, {0.9, 0}};
    const auto eigs = random_spectrum_box(top, n - spectrum_dims(top), -0.5, 0.95, 0.1, 0.3, 14);
    out.push_back(make("box", matrix_with_spectrum(eigs, {.seed = 14, .upper_scale = 0.2}), Which::largest_magnitude));
  }
  // Seed 16, not the bench's 12: at n = 400 seed 12 gives a matrix on which ARPACK's
  // dnaupd and IRAM alike stagnate for ncv >= 10 (same counts, info -14).
  disc("origin", {{1e-3, 0}, {0.99e-3, 0}}, 0.95e-3, 16);
  disc("easy", {{1.0, 0}, {0.9, 0}}, 0.5, 13);
  out.push_back(make("cd", convection_diffusion_2d(20, 1000.0), Which::largest_magnitude));
  out.push_back(make("markov", markov_random_walk(20), Which::largest_real));
  return out;
}

double key(cplx z, Which w) { return w == Which::largest_real ? z.real() : std::abs(z); }

/// The k most wanted exact eigenvalues, plus the conjugate of the k-th when it cuts a pair.
std::vector<cplx> wanted(std::vector<cplx> all, int64_t k, Which which) {
  std::stable_sort(all.begin(), all.end(), [&](cplx a, cplx b) {
    if (key(a, which) != key(b, which)) return key(a, which) > key(b, which);
    return a.imag() > b.imag();
  });
  all.resize(static_cast<size_t>(k + 1));
  return all;
}

/// Every computed value equals a distinct wanted exact one to `rel`, and the k
/// computed values cover the k most wanted (up to the conjugate of a cut pair).
void expect_wanted(const std::vector<double>& re, const std::vector<double>& im, const Family& f, int64_t k,
                   double rel, const std::string& who) {
  ASSERT_EQ(static_cast<int64_t>(re.size()), k) << who;
  const auto w = wanted(f.exact, k, f.which);
  std::vector<bool> used(w.size(), false);
  for (size_t i = 0; i < re.size(); ++i) {
    const cplx z(re[i], im[i]);
    size_t best = w.size();
    for (size_t j = 0; j < w.size(); ++j)
      if (!used[j] && (best == w.size() || std::abs(z - w[j]) < std::abs(z - w[best]))) best = j;
    ASSERT_LT(best, w.size()) << who;
    EXPECT_LE(std::abs(z - w[best]) / std::abs(w[best]), rel)
        << who << ": value " << i << " = " << z << ", nearest wanted " << w[best];
    used[best] = true;
  }
  int64_t missed = 0;
  for (int64_t j = 0; j < k; ++j) missed += used[static_cast<size_t>(j)] ? 0 : 1;
  // Only the k-th may be replaced, by the conjugate of a pair cut there.
  EXPECT_LE(missed, 1) << who;
  if (missed == 1) {
    EXPECT_TRUE(used[static_cast<size_t>(k)]) << who;
  }
}

ArnoldiOptions iram_options(int64_t k, int64_t m, Which which, double tol = 1e-12) {
  ArnoldiOptions o;
  o.k = k;
  o.subspace = m;
  o.which = which;
  o.tol = tol;
  o.max_restarts = 5000;
  o.restart = Restart::implicit;
  return o;
}

/// Every returned pair has a true residual ||A x - λ x|| / |λ| below `rel`.
void expect_true_residuals(const Family& f, const EigenResult& r, double rel, const std::string& who) {
  const LinearOperator op = csr_operator(f.a);
  const int64_t n = f.a.rows;
  for (size_t j = 0; j < r.values_re.size(); ++j) {
    const double res = eigref::eig_residual(op.apply, n, r.values_re[j], r.values_im[j], r.vectors_re.data() + j * n,
                                            r.vectors_im.data() + j * n);
    EXPECT_LE(res, rel * std::hypot(r.values_re[j], r.values_im[j])) << who << " pair " << j;
  }
}

// ---------------------------------------------------------------- IRAM

TEST(Iram, EveryFamilyMatchesDgeevAndArpack) {
  for (const Family& f : families()) {
    const double tol = 1e-11;
    for (int64_t m : {8, 10, 16}) {
      const int64_t k = 2;
      const std::string who = f.name + " m=" + std::to_string(m);
      const EigenResult r = arnoldi(csr_operator(f.a), iram_options(k, m, f.which, tol));
      ASSERT_TRUE(r.converged) << who << ": residual " << r.max_residual() << " after " << r.restarts;
      expect_wanted(r.values_re, r.values_im, f, k, 1e-8, who);
      expect_true_residuals(f, r, 10 * tol, who);
    }
    const auto ar = eigref::arpack_nonsymmetric(csr_operator(f.a).apply, f.a.rows, 2,
                                                f.which == Which::largest_real ? "LR" : "LM", 10, tol, 5000);
    ASSERT_EQ(ar.info, 0) << f.name;
    ASSERT_GE(ar.re.size(), 2u) << f.name;
    expect_wanted({ar.re.begin(), ar.re.begin() + 2}, {ar.im.begin(), ar.im.begin() + 2}, f, 2, 1e-8,
                  f.name + " (ARPACK, the reference's own check)");
  }
}

TEST(Iram, ExplicitRestartMisconvergesWhereImplicitDoesNot) {
  // The point of IRAM: on the clustered, non-normal family ERAM(10)'s residuals
  // go to zero on eigenvalues that are not the two of largest modulus.
  for (const Family& f : families()) {
    if (f.name != "clustered" && f.name != "box" && f.name != "origin") continue;
    ArnoldiOptions e = iram_options(2, 10, f.which, 1e-8);
    e.restart = Restart::explicit_;
    const EigenResult er = arnoldi(csr_operator(f.a), e);
    const auto w = wanted(f.exact, 2, f.which);
    double err = 0;
    for (size_t i = 0; i < er.values_re.size(); ++i) {
      double best = 1e300;
      for (auto x : w) best = std::min(best, std::abs(cplx(er.values_re[i], er.values_im[i]) - x) / std::abs(x));
      err = std::max(err, best);
    }
    EXPECT_GT(err, 1e-6) << f.name << ": ERAM found the wanted values here; the test lost its point";
    const EigenResult ir = arnoldi(csr_operator(f.a), iram_options(2, 10, f.which, 1e-8));
    ASSERT_TRUE(ir.converged) << f.name;
    expect_wanted(ir.values_re, ir.values_im, f, 2, 1e-6, f.name + " IRAM(10)");
  }
}

TEST(Iram, MatvecsWithinTwiceArpacks) {
  // Same matrix, k, ncv = m = 10, tol and start vectors (seeds 1..3) for both;
  // the counts are compared summed over the seeds. The two are the same method
  // (exact shifts, ARPACK's k' adjustment) and agree to a few percent on box, easy,
  // cd and markov; on clustered the iteration is chaotic (ARPACK's own count
  // ranges 600..2700 over the start vectors) and ours is higher: bounded by 5x
  // there, 2x elsewhere, and the total over the families by 1.5x.
  int64_t ours_total = 0, theirs_total = 0;
  for (const Family& f : families()) {
    const int64_t k = 2, ncv = 10;
    const double tol = 1e-10;
    int64_t ours = 0, theirs = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      // Count the operator's applications independently of the solver's own count.
      std::atomic<int64_t> applied{0};
      const LinearOperator base = csr_operator(f.a);
      const LinearOperator counted{base.n, [&](const double* x, double* y) {
                                     ++applied;
                                     base.apply(x, y);
                                   }};
      ArnoldiOptions o = iram_options(k, ncv, f.which, tol);
      o.seed = seed;
      const EigenResult r = arnoldi(counted, o);
      ASSERT_TRUE(r.converged) << f.name;
      EXPECT_EQ(r.matvecs, applied.load()) << f.name;
      const auto ar = eigref::arpack_nonsymmetric(base.apply, f.a.rows, k, f.which == Which::largest_real ? "LR" : "LM",
                                                  ncv, tol, 5000, random_vector(f.a.rows, seed));
      ASSERT_EQ(ar.info, 0) << f.name;
      ours += r.matvecs;
      theirs += ar.matvecs;
    }
    std::printf("[ matvecs ] %-10s IRAM(10) %6lld  ARPACK(10) %6lld  (3 start vectors)\n", f.name.c_str(),
                (long long)ours, (long long)theirs);
    EXPECT_LE(ours, (f.name == "clustered" ? 5 : 2) * theirs) << f.name;
    ours_total += ours;
    theirs_total += theirs;
  }
  EXPECT_LE(double(ours_total), 1.5 * double(theirs_total));
}

TEST(Iram, LargestRealPartAndLargestModulusDiffer) {
  // Bulk reaching -1.3 on the left: largest |λ| is there, largest Re λ is 0.9, 0.85.
  const std::vector<cplx> top = {{0.9, 0}, {0.85, 0}};
  const auto eigs = random_spectrum_box(top, 300 - spectrum_dims(top), -1.3, 0.8, 0.1, 0.3, 21);
  const Family f = make("left", matrix_with_spectrum(eigs, {.seed = 21, .upper_scale = 0.2}), Which::largest_real);
  Family lm = f;
  lm.which = Which::largest_magnitude;
  for (const Family* g : std::vector<const Family*>{&f, &lm}) {
    const EigenResult r = arnoldi(csr_operator(g->a), iram_options(2, 12, g->which));
    ASSERT_TRUE(r.converged);
    expect_wanted(r.values_re, r.values_im, *g, 2, 1e-8, g->which == Which::largest_real ? "LR" : "LM");
    for (size_t i = 0; i < 2; ++i) {
      if (g->which == Which::largest_real) EXPECT_GT(r.values_re[i], 0.8);
      else EXPECT_LT(r.values_re[i], -1.0);
    }
  }
}

TEST(Iram, ConjugatePairsAndASplitPair) {
  // Wanted: 1, then the pair 0.97 ± 0.1i (|.| = 0.975), then 0.96.
  const std::vector<cplx> top = {{1.0, 0}, {0.97, 0.1}, {0.96, 0}};
  const auto eigs = random_spectrum(top, 300 - spectrum_dims(top), 0.8, 0.3, 5);
  const Family f = make("pair", matrix_with_spectrum(eigs, {.seed = 5, .upper_scale = 0.2}), Which::largest_magnitude);
  // k = 2 cuts the pair: 1 and 0.97 + 0.1i are returned (the + member first, as ERAM).
  const EigenResult r2 = arnoldi(csr_operator(f.a), iram_options(2, 8, f.which));
  ASSERT_TRUE(r2.converged);
  expect_wanted(r2.values_re, r2.values_im, f, 2, 1e-8, "k=2");
  EXPECT_NEAR(r2.values_re[1], 0.97, 1e-9);
  EXPECT_NEAR(r2.values_im[1], 0.1, 1e-9);
  expect_true_residuals(f, r2, 1e-9, "k=2");
  // k = 3 holds the whole pair; k = 1 and m = 4 is the smallest legal problem.
  const EigenResult r3 = arnoldi(csr_operator(f.a), iram_options(3, 8, f.which));
  ASSERT_TRUE(r3.converged);
  expect_wanted(r3.values_re, r3.values_im, f, 3, 1e-8, "k=3");
  EXPECT_NEAR(r3.values_im[1], -r3.values_im[2], 1e-10);
  expect_true_residuals(f, r3, 1e-9, "k=3");
  // Wanted set = a pair alone (k = 1: the + member) on the convection-diffusion operator.
  const Family cd = make("cd", convection_diffusion_2d(12, 1000.0), Which::largest_magnitude);
  const EigenResult r1 = arnoldi(csr_operator(cd.a), iram_options(1, 12, cd.which, 1e-10));
  ASSERT_TRUE(r1.converged);
  expect_wanted(r1.values_re, r1.values_im, cd, 1, 1e-8, "cd k=1");
  EXPECT_GT(r1.values_im[0], 0);
}

TEST(Iram, InjectedVectorRestartsExplicitlyAndCountsMatvecs) {
  const Family f = families()[4];  // cd, n = 400
  std::atomic<int64_t> applied{0};
  const LinearOperator base = csr_operator(f.a);
  const LinearOperator counted{base.n, [&](const double* x, double* y) {
                                 ++applied;
                                 base.apply(x, y);
                               }};
  ArnoldiOptions o = iram_options(2, 10, f.which, 1e-10);
  int64_t expected = 10, injected = 0, restarts = 0;
  o.on_restart = [&](RestartState& st) {
    EXPECT_TRUE(st.restart_vector.empty());  // implicit: nothing to overwrite
    EXPECT_EQ(st.matvecs, expected);
    EXPECT_GE(st.next_cost, 1);
    EXPECT_LE(st.next_cost, 10 - 2);
    ASSERT_EQ(st.vectors_re.size(), static_cast<size_t>(2 * f.a.rows));
    ++restarts;
    if (st.restart % 5 == 0) {  // every fifth restart: explicitly from the wanted Ritz vectors' sum
      st.restart_vector.assign(st.vectors_re.begin(), st.vectors_re.begin() + f.a.rows);
      for (int64_t e = 0; e < f.a.rows; ++e) st.restart_vector[static_cast<size_t>(e)] += st.vectors_re[static_cast<size_t>(f.a.rows + e)];
      expected += 10;
      ++injected;
    } else {
      expected += st.next_cost;
    }
  };
  const EigenResult r = arnoldi(counted, o);
  ASSERT_TRUE(r.converged);
  EXPECT_GT(injected, 0);
  EXPECT_EQ(r.restarts, restarts);
  EXPECT_EQ(r.matvecs, expected);
  EXPECT_EQ(r.matvecs, applied.load());
  expect_wanted(r.values_re, r.values_im, f, 2, 1e-8, "with explicit restarts");
  // A wrong-size vector is refused.
  ArnoldiOptions bad = iram_options(2, 10, f.which, 1e-10);
  bad.on_restart = [](RestartState& st) { st.restart_vector.assign(3, 1.0); };
  EXPECT_THROW(
      {
        try {
          arnoldi(base, bad);
        } catch (const KernelError& e) {
          EXPECT_NE(std::string(e.what()).find("expected n = 400"), std::string::npos) << e.what();
          throw;
        }
      },
      KernelError);
}

TEST(Iram, DenseSmallAndFullSubspace) {
  // m = n: the factorisation is complete after one cycle (no restart).
  const std::vector<cplx> eigs = {{3, 0}, {2, 1}, {-1, 0}, {0.5, 0}, {0.2, 0}, {0.1, 0}};
  int64_t n = 0;
  const auto a = eigref::nonsymmetric_with_spectrum(eigs, 3, &n);
  ASSERT_EQ(n, 7);
  ArnoldiOptions o = iram_options(2, n, Which::largest_magnitude);
  const EigenResult r = arnoldi(dense_operator(a.data(), n, n), o);
  ASSERT_TRUE(r.converged);
  EXPECT_EQ(r.matvecs, n);
  EXPECT_NEAR(r.values_re[0], 3, 1e-10);
  EXPECT_NEAR(r.values_re[1], 2, 1e-10);
  EXPECT_NEAR(r.values_im[1], 1, 1e-10);
}

TEST(Iram, BadOptionsHaveClearMessages) {
  const Family f = make("cd", convection_diffusion_2d(8, 10.0), Which::largest_magnitude);
  auto message = [&](ArnoldiOptions o) -> std::string {
    try {
      arnoldi(csr_operator(f.a), o);
    } catch (const KernelError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(iram_options(4, 5, Which::largest_magnitude)).find("restart=implicit needs k < subspace - 1"),
            std::string::npos);
  EXPECT_NE(message(iram_options(5, 5, Which::largest_magnitude)).find("must exceed k"), std::string::npos);
  EXPECT_EQ(message(iram_options(3, 5, Which::largest_magnitude)), "");
  try {
    parse_restart("foo");
    ADD_FAILURE() << "parse_restart accepted foo";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("restart 'foo': expected \"explicit\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_restart("implicit"), Restart::implicit);
  EXPECT_EQ(parse_restart("explicit"), Restart::explicit_);
}

}  // namespace
