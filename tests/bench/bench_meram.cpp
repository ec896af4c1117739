// MERAM(5,7,10) vs each ERAM alone (the same code with one co-method) vs
// ARPACK's IRAM (dnaupd/dneupd, ncv = 10), same matrices, same run; with
// --restart implicit|both also MIRAM(5,7,10) (IRAM co-methods) vs each IRAM alone.
//
//   ymlopt_bench_meram [--n 2000] [--k 2] [--tol-exp 8] [--reps 5] [--subspaces 5,7,10] [--ncv 10]
//                      [--cd 40] [--markov 40] [--max-restarts 20000] [--only CASE]
//                      [--radius 950 (bulk radius, 1e-3 units)] [--upper 20 (coupling size, 1e-2 units)]
//                      [--step 100] [--policy best_set|per_eigenvalue] [--stall 0 (MeramOptions::stall_window)]
//                      [--deterministic 0|1 (MeramOptions::deterministic)]
//                      [--restart explicit|implicit|both (default both)]
//
// Cases (all sparse CSR, eigenvalues known):
//   clustered  matrix_with_spectrum (coupling --upper): top k = 1, 0.995, ... (complex pair 0.99 ± 0.02i
//              when k >= 3) above a bulk uniform in the disc |z| <= radius (30% conjugate pairs): hard
//   origin     spectrum close to the origin: top 1e-3 * (1, 0.99, ...) above a bulk in |z| <= 1e-3 radius: hard
//   box        top 1, 1 - step, ... (--step, 1e-3 units) above a bulk uniform in the box
//              re in [-0.5, radius], |im| <= 0.1 (a convection-dominated shape)
//   easy       top 1, 0.9, ... above a bulk in |z| <= 0.5
//   cd         2-D convection-diffusion (ARPACK dndrv1), rho = 1000 (complex pairs), largest |λ|
//   markov     Saad's random walk, largest real part (eigenvalue 1)
// MERAM runs its co-methods concurrently, one std::thread each (BLAS 1 thread).
// "mv" is the summed matvecs of all co-methods (the work); "crit" the largest
// co-method count (with one core per co-method, the matvecs done on the busiest
// core). "conv": repetitions that reported convergence; "ok": those whose
// values are the wanted ones (relative error <= 1e-6; explicit restarts can
// converge to other eigenvalues). Each repetition uses start seed = rep + 1 for
// every solver. Prints medians and the ratio MERAM / best single ERAM (matvecs),
// the reference being the single ERAM with the fewest median matvecs among
// those right in every repetition; likewise MIRAM / best single IRAM, and
// MIRAM / ARPACK.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

#include "../unit/eigen/eigen_reference.hpp"
#include "bench_args.hpp"
#include "eigen/eigen.hpp"
#include "eigen/generators.hpp"
#include "eigen/meram.hpp"

extern "C" char* openblas_get_corename(void);

namespace {

using namespace ymlopt::eigen;
using std::int64_t;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using bench::arg;
using bench::arg_s;

struct Case {
  std::string name;
  CsrMatrix a;
  Which which;
  std::vector<std::complex<double>> exact;  // all eigenvalues
};

/// Max over the got values of the relative distance to the nearest wanted exact value.
double value_error(const std::vector<double>& re, const std::vector<double>& im,
                   const std::vector<std::complex<double>>& wanted) {
  double e = 0;
  for (size_t i = 0; i < re.size(); ++i) {
    double best = 1e300;
    for (auto x : wanted) best = std::min(best, std::abs(std::complex<double>(re[i], im[i]) - x) / std::abs(x));
    e = std::max(e, best);
  }
  return e;
}

/// The k wanted exact values (each pair expanded), by the ordering of `which`.
std::vector<std::complex<double>> wanted(std::vector<std::complex<double>> all, int64_t k, Which which) {
  std::vector<std::complex<double>> full;
  for (auto e : all) {
    full.push_back(e);
    if (e.imag() != 0 && std::find(all.begin(), all.end(), std::conj(e)) == all.end()) full.push_back(std::conj(e));
  }
  std::sort(full.begin(), full.end(), [&](auto a, auto b) {
    return which == Which::largest_real ? a.real() > b.real() : std::abs(a) > std::abs(b);
  });
  full.resize(static_cast<size_t>(std::min<int64_t>(k + 1, static_cast<int64_t>(full.size()))));
  return full;  // k + 1: a pair cut at the k-th position is matched either way
}

struct Row {
  explicit Row(std::string n) : name(std::move(n)) {}
  std::string name;
  std::vector<double> t, mv, crit, rs, err, conv;
};

/// Repetitions that converged to the wanted eigenvalues (relative error <= 1e-6).
int ok_count(const Row& r) {
  int ok = 0;
  for (size_t i = 0; i < r.conv.size(); ++i) ok += r.conv[i] > 0 && r.err[i] <= 1e-6;
  return ok;
}

void print_row(const Row& r, double ref_mv) {
  int conv = 0;
  for (double c : r.conv) conv += c > 0;
  std::printf("  %-16s %9.4f %9.0f %9.0f %8.0f %9.2e %4d/%-3zu %4d", r.name.c_str(), median(r.t), median(r.mv),
              median(r.crit), median(r.rs), r.err.empty() ? NAN : *std::max_element(r.err.begin(), r.err.end()), conv,
              r.conv.size(), ok_count(r));
  if (ref_mv > 0) std::printf("  %6.2f", median(r.mv) / ref_mv);
  std::printf("\n");
}

/// The command line's settings.
struct Settings {
  int64_t n = 2000, k = 2, ncv = 10, cd = 40, mk = 40, max_restarts = 20000, stall = 0;
  int reps = 5;
  double tol = 1e-8, upper = 0.2, radius = 0.95, step = 0.1;
  std::vector<int64_t> subspaces;
  std::string only, restart_sel;
  bool lockstep = false;
  MeramPolicy policy = MeramPolicy::best_set;
};

/// The test problems: four random spectra around the wanted top, then the
/// convection-diffusion and Markov matrices.
std::vector<Case> make_cases(const Settings& st) {
  const int64_t k = st.k, n = st.n;
  std::vector<Case> cases;
  auto top = [&](double scale, double step) {
    std::vector<std::complex<double>> t;
    for (int64_t i = 0; i < k; ++i) t.emplace_back(scale * (1.0 - step * double(i)), 0.0);
    if (k >= 3) t[2] = {scale * 0.99, scale * 0.02};
    return t;
  };
  auto with_top = [&](const std::string& name, std::vector<std::complex<double>> t, double r, uint64_t seed) {
    const auto eigs = random_spectrum(t, n - spectrum_dims(t), r, 0.3, seed);
    cases.push_back(
        {name, matrix_with_spectrum(eigs, {.seed = seed, .upper_scale = st.upper}), Which::largest_magnitude, eigs});
  };
  with_top("clustered", top(1.0, 0.005), st.radius, 11);
  {
    const auto t = top(1.0, st.step);
    const auto eigs = random_spectrum_box(t, n - spectrum_dims(t), -0.5, st.radius, 0.1, 0.3, 14);
    cases.push_back(
        {"box", matrix_with_spectrum(eigs, {.seed = 14, .upper_scale = st.upper}), Which::largest_magnitude, eigs});
  }
  with_top("origin", top(1e-3, 0.01), 1e-3 * st.radius, 12);
  with_top("easy", top(1.0, 0.1), 0.5, 13);
  if (st.cd > 0) cases.push_back({"cd", convection_diffusion_2d(st.cd, 1000.0), Which::largest_magnitude,
                                  convection_diffusion_2d_eigenvalues(st.cd, 1000.0)});
  if (st.mk > 0) {
    Case c{"markov", markov_random_walk(st.mk), Which::largest_real, {}};
    c.exact = eigref::lapack_geev(to_dense(c.a), c.a.rows);
    cases.push_back(std::move(c));
  }
  return cases;
}

/// One repetition of the multiple method (v = 0) or single method v of one
/// restart kind, into its row.
void run_meram(const Case& c, const Settings& st, const LinearOperator& op, const std::vector<std::complex<double>>& want,
               Restart kind, size_t v, int rep, Row& row) {
  MeramOptions o;
  o.k = st.k;
  o.tol = st.tol;
  o.which = c.which;
  o.max_restarts = st.max_restarts;
  o.seed = static_cast<uint64_t>(rep + 1);
  o.subspaces = v == 0 ? st.subspaces : std::vector<int64_t>{st.subspaces[v - 1]};
  o.policy = st.policy;
  o.stall_window = st.stall;
  o.deterministic = st.lockstep;
  o.restart = kind;
  if (kind == Restart::implicit && o.subspaces.size() == 1 && o.subspaces[0] < c.a.rows && o.subspaces[0] <= st.k + 1) {
    row.conv.push_back(0);  // IRAM needs m > k + 1
    row.err.push_back(NAN);
    return;
  }
  const double t0 = now_s();
  const MeramResult r = meram(op, o);
  const double t = now_s() - t0;
  row.t.push_back(t);
  row.mv.push_back(double(r.total_matvecs));
  row.crit.push_back(double(r.critical_matvecs));
  int64_t restarts = 0;
  for (const auto& cm : r.comethods) restarts = std::max(restarts, cm.restarts);
  row.rs.push_back(double(restarts));
  row.err.push_back(value_error(r.result.values_re, r.result.values_im, want));
  row.conv.push_back(r.result.converged ? 1 : 0);
}

/// One repetition of ARPACK, into its row.
void run_arpack(const Case& c, const Settings& st, const LinearOperator& op,
                const std::vector<std::complex<double>>& want, int rep, Row& row) {
  const double t0 = now_s();
  const auto ar = eigref::arpack_nonsymmetric(op.apply, c.a.rows, st.k, c.which == Which::largest_real ? "LR" : "LM",
                                              st.ncv, st.tol, st.max_restarts,
                                              random_vector(c.a.rows, static_cast<uint64_t>(rep + 1)));
  const double t = now_s() - t0;
  row.t.push_back(t);
  row.mv.push_back(double(ar.matvecs));
  row.crit.push_back(double(ar.matvecs));
  row.rs.push_back(double(ar.restarts));
  row.err.push_back(ar.re.empty() ? NAN : value_error(ar.re, ar.im, want));
  row.conv.push_back(ar.info == 0 && int64_t(ar.re.size()) >= st.k ? 1 : 0);
}

/// A case's table: per restart kind the multiple method and each single one,
/// with RESULT lines against the best single method and ARPACK; ARPACK last.
void print_case(const Case& c, const Settings& st, const std::vector<Restart>& kinds, const std::vector<Row>& rows) {
  const size_t group = st.subspaces.size() + 1;
  const int reps = st.reps;
  std::printf("\n%s: n %lld, nnz %lld, which %s\n", c.name.c_str(), (long long)c.a.rows, (long long)c.a.nnz(),
              c.which == Which::largest_real ? "LR" : "LM");
  std::printf("  %-16s %9s %9s %9s %8s %9s %8s %4s  %6s\n", "solver", "time s", "mv", "crit mv", "restarts",
              "max err", "conv", "ok", "mv/ref");
  const Row& arpack = rows.back();
  for (size_t g = 0; g < kinds.size(); ++g) {
    const bool imp = kinds[g] == Restart::implicit;
    const char* multi = imp ? "miram" : "meram";
    const char* single = imp ? "IRAM" : "ERAM";
    // Reference: the best single method that found the wanted values in every repetition (fewest median matvecs).
    double best = 0;
    size_t best_v = 0;
    std::string best_name = "none";
    for (size_t v = 1; v <= st.subspaces.size(); ++v) {
      const Row& r = rows[g * group + v];
      if (ok_count(r) != reps) continue;
      if (best == 0 || median(r.mv) < best) {
        best = median(r.mv);
        best_v = v;
        best_name = r.name;
      }
    }
    for (size_t v = 0; v <= st.subspaces.size(); ++v) print_row(rows[g * group + v], best);
    const Row& mr = rows[g * group];
    const int ok = ok_count(mr);
    if (best > 0)
      std::printf("RESULT %s %s/%s matvecs %.2f critical %.2f time %.2f (%s right %d/%d)\n", c.name.c_str(), multi,
                  best_name.c_str(), median(mr.mv) / best, median(mr.crit) / best,
                  median(mr.t) / median(rows[g * group + best_v].t), multi, ok, reps);
    else
      std::printf("RESULT %s no single %s found the wanted values in every repetition (%s right %d/%d)\n",
                  c.name.c_str(), single, multi, ok, reps);
    if (!arpack.mv.empty())
      std::printf("RESULT %s %s/arpack matvecs %.2f critical %.2f time %.2f (ARPACK right %d/%d)\n", c.name.c_str(),
                  multi, median(mr.mv) / median(arpack.mv), median(mr.crit) / median(arpack.mv),
                  median(mr.t) / median(arpack.t), ok_count(arpack), reps);
  }
  print_row(arpack, 0);
}

/// Every repetition of every method on one case, then its table.
void run_case(const Case& c, const Settings& st) {
  const LinearOperator op = csr_operator(c.a);
  const auto want = wanted(c.exact, st.k, c.which);
  std::string sizes;
  for (size_t i = 0; i < st.subspaces.size(); ++i) {
    if (i) sizes += ',';
    sizes += std::to_string(st.subspaces[i]);
  }
  // Row groups: per restart kind, the multiple method then each single one; ARPACK last.
  std::vector<Restart> kinds;
  if (st.restart_sel != "implicit") kinds.push_back(Restart::explicit_);
  if (st.restart_sel != "explicit") kinds.push_back(Restart::implicit);
  std::vector<Row> rows;
  for (Restart kind : kinds) {
    const bool imp = kind == Restart::implicit;
    rows.emplace_back(std::string(imp ? "MIRAM(" : "MERAM(") + sizes + ")");
    for (int64_t m : st.subspaces) rows.emplace_back(std::string(imp ? "IRAM(" : "ERAM(") + std::to_string(m) + ")");
  }
  rows.emplace_back("ARPACK(" + std::to_string(st.ncv) + ")");
  const size_t group = st.subspaces.size() + 1;
  for (int rep = 0; rep < st.reps; ++rep) {
    for (size_t g = 0; g < kinds.size(); ++g)
      for (size_t v = 0; v <= st.subspaces.size(); ++v) run_meram(c, st, op, want, kinds[g], v, rep, rows[g * group + v]);
    run_arpack(c, st, op, want, rep, rows.back());
  }
  print_case(c, st, kinds, rows);
}

}  // namespace

int main(int argc, char** argv) {
  Settings st;
  st.n = int64_t(arg(argc, argv, "--n", 2000));
  st.k = int64_t(arg(argc, argv, "--k", 2));
  st.ncv = int64_t(arg(argc, argv, "--ncv", 10));
  st.reps = int(arg(argc, argv, "--reps", 5));
  st.tol = std::pow(10.0, -double(arg(argc, argv, "--tol-exp", 8)));
  st.cd = int64_t(arg(argc, argv, "--cd", 40));
  st.mk = int64_t(arg(argc, argv, "--markov", 40));
  st.max_restarts = int64_t(arg(argc, argv, "--max-restarts", 20000));
  st.subspaces = parse_subspaces(arg_s(argc, argv, "--subspaces", "5,7,10"));
  st.only = arg_s(argc, argv, "--only", "");
  st.stall = int64_t(arg(argc, argv, "--stall", 0));
  st.lockstep = arg(argc, argv, "--deterministic", 0) != 0;
  st.restart_sel = arg_s(argc, argv, "--restart", "both");
  if (st.restart_sel != "explicit" && st.restart_sel != "implicit" && st.restart_sel != "both") {
    std::fprintf(stderr, "--restart %s: expected explicit, implicit or both\n", st.restart_sel.c_str());
    return 2;
  }
  st.policy = std::string(arg_s(argc, argv, "--policy", "best_set")) == "per_eigenvalue" ? MeramPolicy::per_eigenvalue
                                                                                          : MeramPolicy::best_set;
  st.upper = 1e-2 * double(arg(argc, argv, "--upper", 20));
  st.radius = 1e-3 * double(arg(argc, argv, "--radius", 950));
  st.step = 1e-3 * double(arg(argc, argv, "--step", 100));
  openblas_set_num_threads(1);
  std::printf("OpenBLAS core: %s, BLAS 1 thread per solver; MERAM: %zu co-method threads on %u hardware threads\n",
              openblas_get_corename(), st.subspaces.size(), std::thread::hardware_concurrency());
  std::printf("k %lld, tol %.0e (|r| <= tol |λ|), reps %d, max_restarts %lld per co-method, ARPACK ncv %lld\n",
              (long long)st.k, st.tol, st.reps, (long long)st.max_restarts, (long long)st.ncv);
  std::printf("MERAM policy %s, stall_window %lld, %s\n",
              st.policy == MeramPolicy::best_set ? "best_set" : "per_eigenvalue", (long long)st.stall,
              st.lockstep ? "deterministic (exchanges in matvec-time order)" : "asynchronous");
  for (const Case& c : make_cases(st))
    if (st.only.empty() || c.name == st.only) run_case(c, st);
  return 0;
}
