// Eigensolvers vs ARPACK and LAPACK, same matrices, same run, 1 thread
// (kernels are single-threaded; OpenBLAS is set to 1 thread for everything timed).
//
//   ymlopt_bench_eigen [--n 2000] [--k 10] [--ncv 30] [--nsp 2000] [--kn 5] [--ncvn 30]
//                      [--cd 20] [--spread 1000] [--bulk 980000] [--svd-m 2000] [--svd-n 1000] [--svd-k 20] [--reps 3]
//
// 1. Lanczos (thick restart, full reorthogonalisation) vs ARPACK dsaupd: top-k
//    of Q diag Qᵀ (n x n dense) whose top k eigenvalues are clustered
//    (1 - 1e-3 i) above a bulk uniform in [0, 0.98].
// 2. ERAM vs ARPACK dnaupd: k largest-magnitude eigenvalues of a sparse
//    non-symmetric P T Pᵀ (CSR, ~9 entries per row): T block upper triangular
//    (real Schur blocks on the diagonal, 8 random entries right of each row's
//    block), P a random permutation; eigenvalues known exactly.
// 2b. ERAM vs ARPACK dnaupd on the 2-D convection-diffusion operator on a
//    cd x (cd-1) grid (5-point, convection 0.4 / 0.2): real eigenvalues known
//    in closed form, eigenvectors far from orthogonal (non-normal).
// 3. svd_topk (oversample p, power_iters q: 10/2 and 20/6) vs LAPACK dgesdd
//    (full, then truncated): A = U diag(s) Vᵀ + 1e-3 noise, s_i = 1/(1 + i/4).
// Prints per-repetition figures, medians and ratios (ours / reference).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "../unit/eigen/eigen_reference.hpp"
#include "eigen/eigen.hpp"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace {

using namespace ymlopt::eigen;
using std::int64_t;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

long arg(int argc, char** argv, const char* name, long def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  return def;
}

struct Row {
  std::vector<double> t, mv, rs, err;
  void add(double time, double matvecs, double restarts, double error) {
    t.push_back(time);
    mv.push_back(matvecs);
    rs.push_back(restarts);
    err.push_back(error);
  }
};

void print_row(const char* name, const Row& r) {
  std::printf("  %-22s median time %9.4f s  matvecs %7.0f  restarts %5.0f  max rel err %.2e\n", name, median(r.t),
              median(r.mv), median(r.rs), *std::max_element(r.err.begin(), r.err.end()));
}

/// Max over wanted values of min distance to `exact` (relative to |exact|).
double value_error(const std::vector<std::complex<double>>& got, const std::vector<std::complex<double>>& exact) {
  double e = 0;
  for (auto g : got) {
    double best = 1e300;
    for (auto x : exact) best = std::min(best, std::abs(g - x) / std::abs(x));
    e = std::max(e, best);
  }
  return e;
}

/// 1. symmetric, clustered top
void bench_symmetric(int64_t n, int64_t k, int64_t ncv, double spread, double bulk, int reps, double tol) {
  openblas_set_num_threads(2);  // building the matrix is not timed
  std::vector<double> eigs;
  for (int64_t i = 0; i < k; ++i) eigs.push_back(1.0 - spread * double(i));
  std::mt19937_64 g(1);
  std::uniform_real_distribution<double> u(0.0, bulk);
  while (int64_t(eigs.size()) < n) eigs.push_back(u(g));
  const auto a = eigref::symmetric_with_spectrum(eigs, 2);
  openblas_set_num_threads(1);
  std::vector<std::complex<double>> exact;
  for (int64_t i = 0; i < k; ++i) exact.emplace_back(eigs[static_cast<size_t>(i)], 0);
  const LinearOperator op = dense_operator(a.data(), n, n);
  Row ours, arp;
  for (int rep = 0; rep < reps; ++rep) {
    LanczosOptions o;
    o.k = k;
    o.subspace = ncv;
    o.tol = tol;
    o.max_restarts = 100000;
    o.seed = 1 + uint64_t(rep);
    double t0 = now_s();
    const EigenResult r = lanczos(op, o);
    const double t1 = now_s() - t0;
    std::vector<std::complex<double>> got;
    for (double v : r.values_re) got.emplace_back(v, 0);
    ours.add(t1, double(r.matvecs), double(r.restarts), r.converged ? value_error(got, exact) : 1.0);
    t0 = now_s();
    const auto ar = eigref::arpack_symmetric(op.apply, n, k, "LA", ncv, tol, 100000);
    const double t2 = now_s() - t0;
    got.clear();
    for (double v : ar.re) got.emplace_back(v, 0);
    arp.add(t2, double(ar.matvecs), double(ar.restarts), ar.info == 0 ? value_error(got, exact) : 1.0);
    std::printf("  rep %d: lanczos %.4f s %lld matvecs %lld restarts | ARPACK dsaupd %.4f s %lld matvecs %lld iters\n",
                rep, t1, (long long)r.matvecs, (long long)r.restarts, t2, (long long)ar.matvecs,
                (long long)ar.restarts);
  }
  std::printf("symmetric n=%lld k=%lld ncv=%lld (top %lld clustered at 1 - %g i, bulk [0, %g]):\n", (long long)n,
              (long long)k, (long long)ncv, (long long)k, spread, bulk);
  print_row("lanczos (ours)", ours);
  print_row("ARPACK dsaupd", arp);
  std::printf("RESULT lanczos/arpack time %.2f matvecs %.2f\n", median(ours.t) / median(arp.t),
              median(ours.mv) / median(arp.mv));
}

/// 2. non-symmetric sparse, known spectrum: P T Pᵀ, T block upper triangular
void bench_sparse_nonsymmetric(int64_t nsp, int64_t kn, int64_t ncvn, int reps, double tol) {
  std::vector<std::complex<double>> eig = {{2.0, 0}, {1.9, 0.4}, {1.85, 0}, {-1.8, 0}};
  std::mt19937_64 g(6);
  std::uniform_real_distribution<double> u(-1, 1);
  int64_t nn = 6;
  while (nn < nsp) {
    if (u(g) < -0.8 && nn + 2 <= nsp) {  // ~10% complex pairs in the bulk
      eig.emplace_back(u(g), 0.05 + 0.45 * std::abs(u(g)));
      nn += 2;
    } else {
      eig.emplace_back(1.5 * u(g), 0);
      nn += 1;
    }
  }
  // Blocks on the diagonal, per_row random entries right of each row's block.
  const int64_t per_row = 8;
  std::vector<int64_t> block_end(static_cast<size_t>(nn));
  std::vector<std::vector<std::pair<int64_t, double>>> rows(static_cast<size_t>(nn));
  int64_t p = 0;
  for (auto e : eig) {
    if (e.imag() != 0) {
      rows[static_cast<size_t>(p)] = {{p, e.real()}, {p + 1, e.imag()}};
      rows[static_cast<size_t>(p + 1)] = {{p, -e.imag()}, {p + 1, e.real()}};
      block_end[static_cast<size_t>(p)] = block_end[static_cast<size_t>(p + 1)] = p + 2;
      p += 2;
    } else {
      rows[static_cast<size_t>(p)] = {{p, e.real()}};
      block_end[static_cast<size_t>(p)] = p + 1;
      p += 1;
    }
  }
  const double scale = 0.3 / std::sqrt(double(per_row));
  for (int64_t i = 0; i < nn; ++i) {
    const int64_t lo = block_end[static_cast<size_t>(i)];
    if (lo >= nn) continue;
    std::uniform_int_distribution<int64_t> c(lo, nn - 1);
    for (int64_t e = 0; e < per_row; ++e) rows[static_cast<size_t>(i)].emplace_back(c(g), scale * u(g));
  }
  std::vector<int64_t> perm(static_cast<size_t>(nn)), inv(static_cast<size_t>(nn));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);
  for (int64_t i = 0; i < nn; ++i) inv[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
  CsrMatrix s;
  s.rows = s.cols = nn;
  s.row_ptr.push_back(0);
  for (int64_t r = 0; r < nn; ++r) {  // row r of P T Pᵀ is row inv[r] of T, columns mapped by perm
    auto row = rows[static_cast<size_t>(inv[static_cast<size_t>(r)])];
    for (auto& [cix, v] : row) cix = perm[static_cast<size_t>(cix)];
    std::sort(row.begin(), row.end());
    for (auto [cix, v] : row) {
      if (!s.col.empty() && int64_t(s.val.size()) > s.row_ptr.back() && s.col.back() == cix) s.val.back() += v;
      else {
        s.col.push_back(cix);
        s.val.push_back(v);
      }
    }
    s.row_ptr.push_back(int64_t(s.val.size()));
  }
  std::vector<std::complex<double>> all;
  for (auto e : eig) {
    all.push_back(e);
    if (e.imag() != 0) all.push_back(std::conj(e));
  }
  std::sort(all.begin(), all.end(), [](auto x, auto y) { return std::abs(x) > std::abs(y); });
  const std::vector<std::complex<double>> exact(all.begin(), all.begin() + kn);
  const LinearOperator op = csr_operator(s);
  Row ours, arp;
  for (int rep = 0; rep < reps; ++rep) {
    ArnoldiOptions o;
    o.k = kn;
    o.subspace = ncvn;
    o.tol = tol;
    o.max_restarts = 200000;
    o.seed = 1 + uint64_t(rep);
    double t0 = now_s();
    const EigenResult r = arnoldi(op, o);
    const double t1 = now_s() - t0;
    std::vector<std::complex<double>> got;
    for (int64_t i = 0; i < kn; ++i) got.emplace_back(r.values_re[static_cast<size_t>(i)], r.values_im[static_cast<size_t>(i)]);
    ours.add(t1, double(r.matvecs), double(r.restarts), r.converged ? value_error(got, exact) : 1.0);
    t0 = now_s();
    const auto ar = eigref::arpack_nonsymmetric(op.apply, nn, kn, "LM", ncvn, tol, 200000);
    const double t2 = now_s() - t0;
    got.clear();
    for (size_t i = 0; i < ar.re.size(); ++i) got.emplace_back(ar.re[i], ar.im[i]);
    arp.add(t2, double(ar.matvecs), double(ar.restarts), ar.info == 0 ? value_error(got, exact) : 1.0);
    std::printf("  rep %d: ERAM %.4f s %lld matvecs %lld restarts (%s) | ARPACK dnaupd %.4f s %lld matvecs %lld "
                "iters\n",
                rep, t1, (long long)r.matvecs, (long long)r.restarts, r.converged ? "converged" : "NOT converged",
                t2, (long long)ar.matvecs, (long long)ar.restarts);
  }
  std::printf("non-symmetric sparse P T Pᵀ n=%lld (CSR nnz %lld; wanted 2, 1.9±0.4i, 1.85, -1.8; bulk |λ| <= 1.5) "
              "k=%lld ncv=%lld, largest |λ|:\n",
              (long long)nn, (long long)s.nnz(), (long long)kn, (long long)ncvn);
  print_row("ERAM (ours)", ours);
  print_row("ARPACK dnaupd", arp);
  std::printf("RESULT eram/arpack time %.2f matvecs %.2f\n", median(ours.t) / median(arp.t),
              median(ours.mv) / median(arp.mv));
}

/// 2b. non-symmetric, non-normal: 2-D convection-diffusion (central differences)
void bench_convection_diffusion(int64_t cd, int reps, double tol) {
  const int64_t nx = cd, ny = cd - 1, nn = nx * ny;
  const double gx = 0.4, gy = 0.2;  // half the cell Péclet numbers (< 1: real eigenvalues)
  CsrMatrix s;
  s.rows = s.cols = nn;
  s.row_ptr.push_back(0);
  for (int64_t y = 0; y < ny; ++y)
    for (int64_t x = 0; x < nx; ++x) {
      auto put = [&](int64_t xx, int64_t yy, double v) {
        if (xx >= 0 && xx < nx && yy >= 0 && yy < ny) {
          s.col.push_back(yy * nx + xx);
          s.val.push_back(v);
        }
      };
      put(x, y - 1, -1 - gy);
      put(x - 1, y, -1 - gx);
      put(x, y, 4);
      put(x + 1, y, -1 + gx);
      put(x, y + 1, -1 + gy);
      s.row_ptr.push_back(int64_t(s.val.size()));
    }
  // λ(a, b) = 4 - 2 sqrt(1-gx²) cos(aπ/(nx+1)) - 2 sqrt(1-gy²) cos(bπ/(ny+1)).
  std::vector<std::complex<double>> all;
  const double pi = std::acos(-1.0);
  for (int64_t a = 1; a <= nx; ++a)
    for (int64_t b = 1; b <= ny; ++b)
      all.emplace_back(4 - 2 * std::sqrt(1 - gx * gx) * std::cos(double(a) * pi / double(nx + 1)) -
                           2 * std::sqrt(1 - gy * gy) * std::cos(double(b) * pi / double(ny + 1)),
                       0);
  std::sort(all.begin(), all.end(), [](auto p, auto q) { return std::abs(p) > std::abs(q); });
  const int64_t kc = 4;
  const std::vector<std::complex<double>> exact(all.begin(), all.begin() + kc);
  const LinearOperator op = csr_operator(s);
  Row ours, arp;
  for (int rep = 0; rep < reps; ++rep) {
    ArnoldiOptions o;
    o.k = kc;
    o.subspace = 30;
    o.tol = tol;
    o.max_restarts = 20000;
    o.seed = 1 + uint64_t(rep);
    double t0 = now_s();
    const EigenResult r = arnoldi(op, o);
    const double t1 = now_s() - t0;
    std::vector<std::complex<double>> got;
    for (int64_t i = 0; i < kc; ++i)
      got.emplace_back(r.values_re[static_cast<size_t>(i)], r.values_im[static_cast<size_t>(i)]);
    ours.add(t1, double(r.matvecs), double(r.restarts), r.converged ? value_error(got, exact) : 1.0);
    t0 = now_s();
    const auto ar = eigref::arpack_nonsymmetric(op.apply, nn, kc, "LM", 30, tol, 20000);
    const double t2 = now_s() - t0;
    got.clear();
    for (size_t i = 0; i < ar.re.size(); ++i) got.emplace_back(ar.re[i], ar.im[i]);
    arp.add(t2, double(ar.matvecs), double(ar.restarts), ar.info == 0 ? value_error(got, exact) : 1.0);
  }
  std::printf("non-symmetric convection-diffusion %lldx%lld (n=%lld, non-normal) k=%lld ncv=30, largest |λ| "
              "(err 1.0 = not converged):\n",
              (long long)nx, (long long)ny, (long long)nn, (long long)kc);
  print_row("ERAM (ours)", ours);
  print_row("ARPACK dnaupd", arp);
  std::printf("RESULT eram/arpack (convection-diffusion) time %.2f matvecs %.2f\n", median(ours.t) / median(arp.t),
              median(ours.mv) / median(arp.mv));
}

/// 3. top-k SVD
void bench_svd(int64_t sm, int64_t sn, int64_t sk, int reps) {
  openblas_set_num_threads(2);
  const int64_t r = std::min<int64_t>(std::min(sm, sn), 4 * sk);
  std::vector<double> uq = eigref::gaussian(sm * r, 3), vq = eigref::gaussian(sn * r, 4), tau(static_cast<size_t>(r));
  LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, int(sm), int(r), uq.data(), int(r), tau.data());
  LAPACKE_dorgqr(LAPACK_ROW_MAJOR, int(sm), int(r), int(r), uq.data(), int(r), tau.data());
  LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, int(sn), int(r), vq.data(), int(r), tau.data());
  LAPACKE_dorgqr(LAPACK_ROW_MAJOR, int(sn), int(r), int(r), vq.data(), int(r), tau.data());
  for (int64_t i = 0; i < sm; ++i)
    for (int64_t j = 0; j < r; ++j) uq[static_cast<size_t>(i * r + j)] *= 1.0 / (1.0 + double(j) / 4.0);
  std::vector<double> a = eigref::gaussian(sm * sn, 5);
  for (double& x : a) x *= 1e-3;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(sm), int(sn), int(r), 1.0, uq.data(), int(r), vq.data(),
              int(r), 1.0, a.data(), int(sn));
  openblas_set_num_threads(1);
  std::vector<double> sref;
  std::vector<double> tl;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = now_s();
    sref = eigref::lapack_gesdd(a, sm, sn);
    tl.push_back(now_s() - t0);
  }
  std::printf("svd %lldx%lld top-%lld (rank-%lld signal s_i = 1/(1+i/4), noise 1e-3): dgesdd (full) median %.4f s\n",
              (long long)sm, (long long)sn, (long long)sk, (long long)r, median(tl));
  for (auto [p, q] : {std::pair<int64_t, int64_t>{10, 2}, {20, 6}}) {
    Row ours;
    for (int rep = 0; rep < reps; ++rep) {
      SvdOptions o;
      o.k = sk;
      o.oversample = p;
      o.power_iters = q;
      o.seed = 1 + uint64_t(rep);
      const double t0 = now_s();
      const SvdResult res = svd_topk(a.data(), sm, sn, sn, o);
      const double t1 = now_s() - t0;
      double err = 0;
      for (int64_t j = 0; j < sk; ++j)
        err = std::max(err, std::abs(res.s[static_cast<size_t>(j)] - sref[static_cast<size_t>(j)]) /
                                sref[static_cast<size_t>(j)]);
      ours.add(t1, double(res.matvecs), double(q), err);
    }
    char name[64];
    std::snprintf(name, sizeof name, "svd_topk p=%lld q=%lld", (long long)p, (long long)q);
    print_row(name, ours);
    std::printf("RESULT svd_topk(p=%lld,q=%lld)/dgesdd time %.3f max rel err of top-%lld %.2e\n", (long long)p,
                (long long)q, median(ours.t) / median(tl), (long long)sk,
                *std::max_element(ours.err.begin(), ours.err.end()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = arg(argc, argv, "--n", 2000), k = arg(argc, argv, "--k", 10), ncv = arg(argc, argv, "--ncv", 30);
  const int64_t nsp = arg(argc, argv, "--nsp", 2000), kn = arg(argc, argv, "--kn", 5),
                ncvn = arg(argc, argv, "--ncvn", 30);
  const int64_t sm = arg(argc, argv, "--svd-m", 2000), sn = arg(argc, argv, "--svd-n", 1000),
                sk = arg(argc, argv, "--svd-k", 20);
  const int reps = int(arg(argc, argv, "--reps", 3));
  const int64_t cd = arg(argc, argv, "--cd", 20);  // convection-diffusion grid; 0: skip
  // Cluster spacing and top of the bulk, in 1e-6 units: --spread 1000 --bulk 980000.
  const double spread = 1e-6 * double(arg(argc, argv, "--spread", 1000)),
               bulk = 1e-6 * double(arg(argc, argv, "--bulk", 980000));
  const double tol = 1e-10;
  std::printf("OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), 1 thread, tol %.0e, %d reps\n", openblas_get_corename(),
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset", tol, reps);

  bench_symmetric(n, k, ncv, spread, bulk, reps, tol);
  bench_sparse_nonsymmetric(nsp, kn, ncvn, reps, tol);
  if (cd > 0) bench_convection_diffusion(cd, reps, tol);
  bench_svd(sm, sn, sk, reps);
  return 0;
}
