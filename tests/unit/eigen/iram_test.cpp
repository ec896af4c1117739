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
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen_registry.hpp"
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
    int64_t ours = 0, theirs = 0, checks = 0;
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
      // ARPACK does not check its set against the deflated operator: compare the solves
      ours += r.matvecs - r.check_matvecs;
      checks += r.check_matvecs;
      theirs += ar.matvecs;
    }
    std::printf("[ matvecs ] %-10s IRAM(10) %6lld (+%lld to check)  ARPACK(10) %6lld  (3 start vectors)\n",
                f.name.c_str(), (long long)ours, (long long)checks, (long long)theirs);
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
  EXPECT_EQ(r.matvecs, expected + r.check_matvecs);
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

// ---------------------------------------------------------------- MIRAM

MeramOptions miram_options(const Family& f, double tol = 1e-10) {
  MeramOptions o;
  o.k = 2;
  o.subspaces = {5, 7, 10};
  o.which = f.which;
  o.tol = tol;
  o.max_restarts = 5000;
  o.restart = Restart::implicit;
  o.deterministic = true;
  return o;
}

TEST(Miram, HardFamiliesGiveTheWantedValues) {
  // clustered, box, origin (largest |λ|) and markov (largest Re λ): ERAM and MERAM
  // converge to other eigenvalues on them (docs/BENCHMARKS.md, MERAM).
  for (const Family& f : families()) {
    if (f.name == "easy" || f.name == "cd") continue;
    for (bool det : {true, false}) {
      // Asynchronous on origin: the exchange order follows the thread speeds, and
      // iram5 can converge to 1.2e-4 + 9.4e-4i (|λ| 9.44e-4, the 5th) before any
      // co-method holds 9.9e-4 at a residual that would veto it (a known limit,
      // shared with MERAM's stopping rule).
      if (!det && f.name == "origin") continue;
      MeramOptions o = miram_options(f);
      o.deterministic = det;
      const MeramResult r = meram(csr_operator(f.a), o);
      const std::string who = f.name + (det ? " deterministic" : " asynchronous");
      ASSERT_TRUE(r.result.converged) << who;
      EXPECT_FALSE(r.winner.empty()) << who;
      expect_wanted(r.result.values_re, r.result.values_im, f, 2, 1e-8, who);
      expect_true_residuals(f, r.result, 1e-8, who);
      for (const auto& c : r.comethods) EXPECT_EQ(c.name.substr(0, 4), "iram") << who;
    }
  }
}

TEST(Miram, AdoptionRestartsExplicitlyOtherwiseImplicitly) {
  // Between two exchanges a co-method does m matvecs after adopting a gathered
  // set (a new factorisation) and p' <= m - k after an implicit restart.
  const Family f = families()[4];  // cd: the co-methods exchange for a while
  std::vector<std::vector<int64_t>> costs(3);
  MeramOptions o = miram_options(f, 1e-9);
  const MeramResult r = meram(csr_operator(f.a), o);
  ASSERT_TRUE(r.result.converged);
  expect_wanted(r.result.values_re, r.result.values_im, f, 2, 1e-7, "cd");
  int64_t adopted = 0, implicit = 0;
  for (const auto& c : r.comethods) {
    adopted += c.adopted;
    EXPECT_EQ(c.history.front().matvecs, c.subspace) << c.name;
    for (size_t h = 1; h < c.history.size(); ++h) {
      const int64_t step = c.history[h].matvecs - c.history[h - 1].matvecs;
      if (c.history[h - 1].adopted) {
        EXPECT_EQ(step, c.subspace) << c.name << " after exchange " << h - 1;
      } else {
        EXPECT_GE(step, 1) << c.name;
        EXPECT_LE(step, c.subspace - o.k) << c.name << " after exchange " << h - 1;
        ++implicit;
      }
    }
  }
  EXPECT_GT(adopted, 0);
  EXPECT_GT(implicit, 0);
  int64_t sum = 0;
  for (const auto& c : r.comethods) sum += c.matvecs + c.verify_matvecs;
  EXPECT_EQ(r.total_matvecs, sum);
}

TEST(Miram, DeterministicIsReproducibleAndOneCoMethodIsIram) {
  const Family f = families()[0];  // clustered
  const MeramResult a = meram(csr_operator(f.a), miram_options(f));
  const MeramResult b = meram(csr_operator(f.a), miram_options(f));
  ASSERT_EQ(a.comethods.size(), b.comethods.size());
  for (size_t i = 0; i < a.comethods.size(); ++i) {
    EXPECT_EQ(a.comethods[i].matvecs, b.comethods[i].matvecs) << i;
    EXPECT_EQ(a.comethods[i].adopted, b.comethods[i].adopted) << i;
  }
  EXPECT_EQ(a.winner, b.winner);
  EXPECT_EQ(a.result.values_re, b.result.values_re);
  // One co-method: arnoldi() with Restart::implicit (the same restarts; MERAM's
  // convergence floor uses the k wanted values' largest modulus, arnoldi()'s all m).
  MeramOptions one = miram_options(f);
  one.subspaces = {10};
  const MeramResult m1 = meram(csr_operator(f.a), one);
  ArnoldiOptions ao = iram_options(2, 10, f.which, 1e-10);
  const EigenResult r1 = arnoldi(csr_operator(f.a), ao);
  ASSERT_TRUE(m1.result.converged);
  ASSERT_TRUE(r1.converged);
  EXPECT_EQ(m1.comethods[0].name, "iram10");
  EXPECT_EQ(m1.comethods[0].adopted, 0);
  EXPECT_LE(std::abs(m1.total_matvecs - r1.matvecs), 10) << m1.total_matvecs << " vs " << r1.matvecs;
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_NEAR(m1.result.values_re[j], r1.values_re[j], 1e-9);
    EXPECT_NEAR(m1.result.values_im[j], r1.values_im[j], 1e-9);
  }
}

TEST(Miram, FailingCoMethodIsReportedAndOthersFinish) {
  const Family f = families()[4];  // cd
  MeramOptions o = miram_options(f, 1e-9);
  o.observe = [](std::size_t i, const RestartState& st) {
    if (i == 1 && st.restart == 3) throw std::runtime_error("injected fault in co-method 1");
  };
  for (bool det : {true, false}) {
    o.deterministic = det;
    const MeramResult r = meram(csr_operator(f.a), o);
    EXPECT_TRUE(r.comethods[1].failed);
    EXPECT_EQ(r.comethods[1].error, "injected fault in co-method 1");
    EXPECT_FALSE(r.comethods[0].failed);
    EXPECT_FALSE(r.comethods[2].failed);
    ASSERT_TRUE(r.result.converged);
    EXPECT_NE(r.winner, "iram7");
    expect_wanted(r.result.values_re, r.result.values_im, f, 2, 1e-7, det ? "det" : "async");
  }
  // Every co-method failing is an error naming them.
  o.observe = [](std::size_t, const RestartState&) { throw std::runtime_error("down"); };
  try {
    meram(csr_operator(f.a), o);
    ADD_FAILURE() << "expected a KernelError";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("all 3 co-methods failed: iram5: down"), std::string::npos) << e.what();
  }
}

TEST(Miram, BadOptions) {
  const Family f = make("cd", convection_diffusion_2d(8, 10.0), Which::largest_magnitude);
  MeramOptions o = miram_options(f);
  o.k = 4;
  o.subspaces = {5, 7};
  try {
    meram(csr_operator(f.a), o);
    ADD_FAILURE() << "expected a KernelError";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("restart=implicit needs every subspace > k + 1 (at least 2 shifts); subspace 5 "
                                         "with k = 4"),
              std::string::npos)
        << e.what();
  }
  o.subspaces = {6, 7};
  EXPECT_NO_THROW(meram(csr_operator(f.a), o));
}

// ---------------------------------------------------------------- components

using eigtest::registry;

TEST(IramComponents, ArnoldiAndMeramWithImplicitRestarts) {
  const Family f = families()[0];  // clustered: ERAM's misconvergence case
  const int64_t n = f.a.rows;
  const auto d = to_dense(f.a);
  test::Mat<double> a(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) a(i, j) = d[static_cast<size_t>(i * n + j)];
  for (const char* name : {"eigen.arnoldi", "eigen.meram"}) {
    test::Mat<double> re(1, 2), im(1, 2), vre(n, 2), vim(n, 2);
    std::map<std::string, std::string> args = {{"k", "2"}, {"tol", "1e-10"}, {"restart", "implicit"},
                                               {"max_restarts", "5000"}};
    if (std::string(name) == "eigen.arnoldi") args["subspace"] = "10";
    else args["deterministic"] = "true";
    const auto rep = test::run(registry(), name, {a.view(), re.view(), im.view(), vre.view(), vim.view()}, args);
    expect_wanted({re(0, 0), re(0, 1)}, {im(0, 0), im(0, 1)}, f, 2, 1e-8, name);
    EXPECT_GT(rep.at("matvecs"), 10) << name;
    if (std::string(name) == "eigen.meram") {
      EXPECT_EQ(rep.at("matvecs"), rep.at("iram5.matvecs") + rep.at("iram7.matvecs") + rep.at("iram10.matvecs") +
                                       rep.at("check_matvecs"));
    }
  }
}

TEST(IramComponents, CheckMessages) {
  const auto& r = registry();
  const TensorView none;
  auto sv = [](int64_t rows, int64_t cols) { return test::shape_view(DType::f64, rows, cols); };
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {sv(40, 40), sv(1, 3), sv(1, 3), none, none},
                        {{"k", "3"}, {"subspace", "5"}, {"restart", "implicit"}}),
            "");
  const std::string foo = test::check(r, "eigen.arnoldi", {sv(40, 40), sv(1, 3), sv(1, 3), none, none},
                                      {{"k", "3"}, {"restart", "foo"}});
  EXPECT_NE(foo.find("restart"), std::string::npos) << foo;
  EXPECT_NE(foo.find("implicit"), std::string::npos) << foo;
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {sv(40, 40), sv(1, 3), sv(1, 3), none, none},
                        {{"k", "3"}, {"subspace", "4"}, {"restart", "implicit"}}),
            "param 'subspace' has 4: restart=implicit needs every subspace > k + 1 = 4 (at least 2 shifts)");
  EXPECT_EQ(test::check(r, "eigen.meram", {sv(40, 40), sv(1, 3), sv(1, 3), none, none},
                        {{"k", "3"}, {"subspaces", "5,7"}, {"restart", "implicit"}}),
            "");
  EXPECT_EQ(test::check(r, "eigen.meram", {sv(40, 40), sv(1, 3), sv(1, 3), none, none},
                        {{"k", "3"}, {"subspaces", "4,7"}, {"restart", "implicit"}}),
            "param 'subspaces' has 4: restart=implicit needs every subspace > k + 1 = 4 (at least 2 shifts)");
  const std::string mfoo = test::check(r, "eigen.meram", {sv(40, 40), sv(1, 3), sv(1, 3), none, none},
                                       {{"k", "3"}, {"restart", "foo"}});
  EXPECT_NE(mfoo.find("restart"), std::string::npos) << mfoo;
}

}  // namespace
