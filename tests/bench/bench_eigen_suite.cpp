// The unite-and-conquer eigensolver as shipped (MIRAM: IRAM co-methods of
// subspaces 5, 7, 10 exchanging Ritz sets, adopt factor 0.5, asynchronous; the
// default of workflows/unite/meram.xml) against ARPACK's IRAM (dnaupd/dneupd,
// ncv 10) on 20 generated sparse problems of n = 1e5 .. 1e6 (at --scale 1):
// wall time and matvecs of each, the same start vector and tolerance, and
// whether each found the wanted eigenvalues.
//
//   ymlopt_bench_eigen_suite [--scale 1.0] [--k 2] [--tol-exp 8] [--threads 2] [--only NAME]
//                            [--max-restarts 20000] [--subspaces 5,7,10]
//   ymlopt_bench_eigen_suite --mtx FILE.mtx [--which magnitude|real] ...   # one matrix of yours instead
//
// Cores: MIRAM runs its co-methods one thread each (BLAS 1 thread); ARPACK runs
// with a `--threads`-way CSR matvec (rows split evenly) and OpenBLAS on
// `--threads` threads for its orthogonalisation, so both get the same cores.
// Families (eigen/generators.hpp): disc, box and clustered spectra and a
// dominant complex pair (matrix_with_spectrum: a sparse non-normal matrix with
// that exact spectrum), the same near the origin, and Saad's Markov random
// walk (largest real part; checked against ARPACK's values). Prints a row per
// problem, then the median MIRAM / ARPACK time ratio over the problems both got
// right, and every problem where MIRAM is slower or wrong. ok: yes, bad (converged
// to other values) or no (did not converge).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../unit/eigen/eigen_reference.hpp"
#include "bench_args.hpp"
#include "eigen/eigen.hpp"
#include "eigen/generators.hpp"
#include "eigen/matrix_market.hpp"
#include "eigen/meram.hpp"

extern "C" char* openblas_get_corename(void);

namespace {

using namespace ymlopt::eigen;
using std::int64_t;
using cplx = std::complex<double>;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

using bench::arg;
using bench::arg_s;

struct Problem {
  std::string name;
  CsrMatrix a;
  Which which = Which::largest_magnitude;
  std::vector<cplx> wanted;  // the k (+1: a pair cut at k) wanted exact values; empty: check against ARPACK
};

// The k + 1 most wanted of `eigs` (pairs given once, expanded here).
std::vector<cplx> most_wanted(const std::vector<cplx>& eigs, int64_t k, Which which) {
  std::vector<cplx> all;
  for (cplx e : eigs) {
    all.push_back(e);
    if (e.imag() > 0) all.push_back(std::conj(e));
  }
  std::partial_sort(all.begin(), all.begin() + std::min<int64_t>(k + 1, int64_t(all.size())), all.end(),
                    [&](cplx x, cplx y) { return which == Which::largest_real ? x.real() > y.real() : std::abs(x) > std::abs(y); });
  all.resize(size_t(std::min<int64_t>(k + 1, int64_t(all.size()))));
  return all;
}

// The 20 problems; sizes times `scale` (1: n = 1e5 .. 1e6).
std::vector<Problem> make_problems(double scale, int64_t k) {
  std::vector<Problem> ps;
  auto n_of = [&](double n) { return std::max<int64_t>(int64_t(n * scale), 200); };
  auto spectral = [&](const std::string& name, std::vector<cplx> top, int64_t n, std::uint64_t seed, double radius,
                      bool box, double upper) {
    const int64_t bulk = n - spectrum_dims(top);
    const auto eigs = box ? random_spectrum_box(top, bulk, -0.5, radius, 0.1, 0.3, seed)
                          : random_spectrum(top, bulk, radius, 0.3, seed);
    ps.push_back({name + "-" + std::to_string(n), matrix_with_spectrum(eigs, {.seed = seed, .upper_scale = upper}),
                  Which::largest_magnitude, most_wanted(eigs, k, Which::largest_magnitude)});
  };
  const double sizes[4] = {1e5, 2e5, 5e5, 1e6};
  for (int i = 0; i < 4; ++i) spectral("disc", {{1.0, 0}, {0.95, 0}}, n_of(sizes[i]), 100 + i, 0.9, false, 0.2);
  for (int i = 0; i < 4; ++i) spectral("box", {{1.0, 0}, {0.97, 0}}, n_of(sizes[i]), 200 + i, 0.9, true, 0.2);
  for (int i = 0; i < 4; ++i) spectral("clustered", {{1.0, 0}, {0.99, 0}}, n_of(sizes[i]), 300 + i, 0.95, false, 0.2);
  for (int i = 0; i < 3; ++i) spectral("pair", {{0.98, 0.05}}, n_of(sizes[i]), 400 + i, 0.9, false, 0.2);
  for (int i = 0; i < 3; ++i) spectral("origin", {{1e-3, 0}, {0.95e-3, 0}}, n_of(sizes[i]), 500 + i, 0.9e-3, false, 0.2);
  // n = (m+1)(m+2)/2: 1e5, 2e5 (at 4e5 ARPACK alone needs over 10 minutes here)
  for (double m : {446.0, 631.0}) {
    const int64_t mm = std::max<int64_t>(int64_t(m * std::sqrt(scale)), 12);
    ps.push_back({"markov-" + std::to_string((mm + 1) * (mm + 2) / 2), markov_random_walk(mm), Which::largest_real, {}});
  }
  return ps;
}

// y = A x with the rows split over `threads` threads (ARPACK's matvec).
void parallel_csr(const CsrMatrix& a, const double* x, double* y, int threads) {
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      double s = 0;
      for (int64_t p = a.row_ptr[size_t(i)]; p < a.row_ptr[size_t(i + 1)]; ++p) s += a.val[size_t(p)] * x[a.col[size_t(p)]];
      y[i] = s;
    }
  };
  std::vector<std::thread> pool;
  const int64_t n = a.rows;
  for (int t = 1; t < threads; ++t) pool.emplace_back(rows, n * t / threads, n * (t + 1) / threads);
  rows(0, n / threads);
  for (auto& th : pool) th.join();
}

// Relative distance of every found value to the nearest wanted one; the largest.
double value_error(const std::vector<double>& re, const std::vector<double>& im, const std::vector<cplx>& want,
                   int64_t k) {
  if (int64_t(re.size()) < k) return INFINITY;
  double e = 0;
  for (int64_t i = 0; i < k; ++i) {
    double best = INFINITY;
    for (cplx w : want) best = std::min(best, std::abs(cplx(re[size_t(i)], im[size_t(i)]) - w) / std::abs(w));
    e = std::max(e, best);
  }
  return e;
}

struct Outcome {
  double seconds = 0, err = INFINITY;
  int64_t matvecs = 0, winner_matvecs = 0, check_matvecs = 0;
  bool converged = false;
  std::vector<cplx> values;  // what it returned
  bool right() const { return converged && err <= 1e-6; }
  /// "yes"; "bad": converged to other values; "no": did not converge
  const char* verdict() const { return right() ? "yes" : converged ? "bad" : "no"; }
};

}  // namespace

int main(int argc, char** argv) {
  const double scale = arg(argc, argv, "--scale", 1.0);
  const int64_t k = int64_t(arg(argc, argv, "--k", 2));
  const double tol = std::pow(10.0, -arg(argc, argv, "--tol-exp", 8));
  const int threads = std::max(1, int(arg(argc, argv, "--threads", 2)));
  const int64_t max_restarts = int64_t(arg(argc, argv, "--max-restarts", 20000));
  const std::string only = arg_s(argc, argv, "--only", "");
  std::vector<int64_t> subspaces;
  try {
    subspaces = parse_subspaces(arg_s(argc, argv, "--subspaces", "5,7,10"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "--subspaces: %s\n", e.what());
    return 2;
  }
  std::string sizes;
  for (int64_t m : subspaces) {
    if (!sizes.empty()) sizes += ',';
    sizes += std::to_string(m);
  }
  std::printf("OpenBLAS core %s; MIRAM(%s) co-methods one thread each, BLAS 1 thread; ARPACK ncv 10, "
              "%d-thread matvec and BLAS; %u hardware threads\n",
              openblas_get_corename(), sizes.c_str(), threads, std::thread::hardware_concurrency());
  std::printf("k %lld, tol %.0e, the same start vector; times in seconds, mv = matvecs (MIRAM: the winning "
              "co-method's / all co-methods'; check: those of check_wanted, in all)\n\n",
              (long long)k, tol);
  std::printf("%-18s %9s %10s | %9s %7s %3s | %9s %15s %7s %3s | %6s\n", "problem", "n", "nnz", "ARPACK s", "mv",
              "ok", "MIRAM s", "mv win/all", "check", "ok", "ratio");
  std::vector<double> ratios;
  std::vector<std::string> losses;
  int problems = 0, miram_right = 0, arpack_right = 0;
  std::vector<Problem> suite;
  if (const std::string mtx = arg_s(argc, argv, "--mtx", ""); !mtx.empty()) {
    // checked against ARPACK's values, as the Markov walks are
    const Which which = std::string(arg_s(argc, argv, "--which", "magnitude")) == "real" ? Which::largest_real
                                                                           : Which::largest_magnitude;
    try {
      suite.push_back({mtx.substr(mtx.find_last_of('/') + 1), read_matrix_market(mtx), which, {}});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  } else {
    suite = make_problems(scale, k);
  }
  for (Problem& p : suite) {
    if (!only.empty() && p.name.rfind(only, 0) != 0) continue;
    ++problems;
    const int64_t n = p.a.rows;
    const std::vector<double> start = random_vector(n, 7);
    if (p.wanted.empty() && n <= 3000)  // a matrix of yours, small enough for LAPACK
      p.wanted = most_wanted(eigref::lapack_geev(to_dense(p.a), n), k, p.which);
    // ARPACK
    Outcome ar;
    {
      openblas_set_num_threads(threads);
      const double t0 = now_s();
      const auto r = eigref::arpack_nonsymmetric([&](const double* x, double* y) { parallel_csr(p.a, x, y, threads); },
                                                 n, k, p.which == Which::largest_real ? "LR" : "LM", 10, tol,
                                                 max_restarts, start);
      ar.seconds = now_s() - t0;
      ar.matvecs = ar.winner_matvecs = r.matvecs;
      ar.converged = r.info == 0 && int64_t(r.re.size()) >= k;
      if (p.wanted.empty() && ar.converged)  // Markov: ARPACK's values are the reference (1 is exact)
        for (int64_t i = 0; i < k; ++i) p.wanted.emplace_back(r.re[size_t(i)], r.im[size_t(i)]);
      ar.err = p.wanted.empty() ? INFINITY : value_error(r.re, r.im, p.wanted, k);
      for (size_t i = 0; i < r.re.size(); ++i) ar.values.emplace_back(r.re[i], r.im[i]);
      openblas_set_num_threads(1);
    }
    // MIRAM as shipped
    Outcome mi;
    {
      MeramOptions o;
      o.k = k;
      o.tol = tol;
      o.which = p.which;
      o.subspaces = subspaces;
      o.restart = Restart::implicit;
      o.max_restarts = max_restarts;
      o.start = start;
      const double t0 = now_s();
      try {
        const MeramResult r = meram(csr_operator(p.a), o);
        mi.seconds = now_s() - t0;
        mi.matvecs = r.total_matvecs;
        mi.check_matvecs = r.result.check_matvecs;
        for (const auto& c : r.comethods)
          if (c.name == r.winner) mi.winner_matvecs = c.matvecs;
        mi.converged = r.result.converged;
        mi.err = p.wanted.empty() ? INFINITY : value_error(r.result.values_re, r.result.values_im, p.wanted, k);
        for (size_t i = 0; i < r.result.values_re.size(); ++i)
          mi.values.emplace_back(r.result.values_re[i], r.result.values_im[i]);
      } catch (const std::exception& e) {
        mi.seconds = now_s() - t0;
        std::printf("  MIRAM failed: %s\n", e.what());
      }
    }
    miram_right += mi.right();
    arpack_right += ar.right();
    const double ratio = mi.seconds / ar.seconds;
    char mv[32];
    std::snprintf(mv, sizeof mv, "%lld/%lld", (long long)mi.winner_matvecs, (long long)mi.matvecs);
    std::printf("%-18s %9lld %10lld | %9.3f %7lld %3s | %9.3f %15s %7lld %3s | %6.2f\n", p.name.c_str(),
                (long long)n, (long long)p.a.nnz(), ar.seconds, (long long)ar.matvecs, ar.verdict(), mi.seconds, mv,
                (long long)mi.check_matvecs, mi.verdict(), ratio);
    auto show = [](const char* who, const std::vector<cplx>& v) {
      std::printf("  %s:", who);
      for (cplx z : v) std::printf(" %.10g%+.3gi", z.real(), z.imag());
      std::printf("\n");
    };
    if (!mi.right() || !ar.right()) show("ARPACK", ar.values), show("MIRAM", mi.values), show("wanted", p.wanted);
    std::fflush(stdout);
    if (mi.right() && ar.right()) ratios.push_back(ratio);
    if (!mi.right() || ratio > 1) losses.push_back(p.name + (mi.right() ? "" : " (MIRAM wrong or not converged)"));
  }
  std::sort(ratios.begin(), ratios.end());
  const double med = ratios.empty() ? NAN
                     : ratios.size() % 2 ? ratios[ratios.size() / 2]
                                         : 0.5 * (ratios[ratios.size() / 2 - 1] + ratios[ratios.size() / 2]);
  std::printf("\nRESULT miram/arpack median time %.2f over %zu problems both got right; MIRAM right %d/%d, ARPACK "
              "right %d/%d\n",
              med, ratios.size(), miram_right, problems, arpack_right, problems);
  for (const auto& l : losses) std::printf("  MIRAM loses: %s\n", l.c_str());
  return 0;
}
