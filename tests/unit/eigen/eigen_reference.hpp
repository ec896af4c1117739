// Independent references for the eigen family's tests and benchmark: matrices
// with prescribed spectra, LAPACK (dsyevd, dgeev, dgesdd) and ARPACK
// (dsaupd/dseupd, dnaupd/dneupd through its C interface) drivers.
//
//   std::vector<double> a = eigref::symmetric_with_spectrum(eigs, seed);  // Q diag Qᵀ
//   eigref::ArpackResult r = eigref::arpack_symmetric(op, n, 10, "LA", 30, 1e-10);
#pragma once

#include <arpack.h>
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace eigref {

using std::int64_t;
using Apply = std::function<void(const double*, double*)>;

inline std::vector<double> gaussian(int64_t count, std::uint64_t seed) {
  std::mt19937_64 g(seed * 2654435761u + 17);
  std::normal_distribution<double> d;
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = d(g);
  return v;
}

/// A random orthogonal n x n matrix (row-major), QR of a Gaussian matrix.
inline std::vector<double> random_orthogonal(int64_t n, std::uint64_t seed) {
  std::vector<double> q = gaussian(n * n, seed), tau(static_cast<size_t>(n));
  if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, int(n), int(n), q.data(), int(n), tau.data()) != 0 ||
      LAPACKE_dorgqr(LAPACK_ROW_MAJOR, int(n), int(n), int(n), q.data(), int(n), tau.data()) != 0)
    throw std::runtime_error("QR failed");
  return q;
}

/// A = Q diag(eigs) Qᵀ, row-major n x n, exactly symmetric.
inline std::vector<double> symmetric_with_spectrum(const std::vector<double>& eigs, std::uint64_t seed) {
  const int64_t n = static_cast<int64_t>(eigs.size());
  const std::vector<double> q = random_orthogonal(n, seed);
  std::vector<double> qd(q.size()), a(q.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) qd[static_cast<size_t>(i * n + j)] = q[static_cast<size_t>(i * n + j)] * eigs[static_cast<size_t>(j)];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(n), int(n), 1.0, qd.data(), int(n), q.data(),
              int(n), 0.0, a.data(), int(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) {
      const double s = 0.5 * (a[static_cast<size_t>(i * n + j)] + a[static_cast<size_t>(j * n + i)]);
      a[static_cast<size_t>(i * n + j)] = a[static_cast<size_t>(j * n + i)] = s;
    }
  return a;
}

/// A = S T S⁻¹ with T block-diagonal in real Schur form: a real eigenvalue is a
/// 1x1 block, a pair a ± ib (give it once, b > 0) the block [[a, b], [-b, a]];
/// S = Q diag(d), d in [1, 2] (condition number 2); T also gets a strictly upper
/// triangular part (above the blocks) of size `upper`/sqrt(n) per entry, so A is
/// not normal. Row-major.
inline std::vector<double> nonsymmetric_with_spectrum(const std::vector<std::complex<double>>& eigs,
                                                      std::uint64_t seed, int64_t* n_out,
                                                      double upper = 0.5) {
  int64_t n = 0;
  for (auto e : eigs) n += e.imag() != 0 ? 2 : 1;
  std::vector<double> t(static_cast<size_t>(n * n), 0.0);
  int64_t p = 0;
  for (auto e : eigs) {
    if (e.imag() != 0) {
      const double b = std::abs(e.imag());
      t[static_cast<size_t>(p * n + p)] = e.real();
      t[static_cast<size_t>(p * n + p + 1)] = b;
      t[static_cast<size_t>((p + 1) * n + p)] = -b;
      t[static_cast<size_t>((p + 1) * n + p + 1)] = e.real();
      p += 2;
    } else {
      t[static_cast<size_t>(p * n + p)] = e.real();
      p += 1;
    }
  }
  // Non-normal part: a strictly upper triangular coupling outside the blocks.
  std::mt19937_64 g(seed + 99);
  std::uniform_real_distribution<double> c(-1.0, 1.0);
  const double scale = upper / std::sqrt(double(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 2; j < n; ++j) t[static_cast<size_t>(i * n + j)] = scale * c(g);
  const std::vector<double> q = random_orthogonal(n, seed);
  std::uniform_real_distribution<double> u(1.0, 2.0);
  std::vector<double> d(static_cast<size_t>(n));
  for (double& x : d) x = u(g);
  // S = Q diag(d), S⁻¹ = diag(1/d) Qᵀ.
  std::vector<double> s(q.size()), sinv(q.size()), st(q.size()), a(q.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      s[static_cast<size_t>(i * n + j)] = q[static_cast<size_t>(i * n + j)] * d[static_cast<size_t>(j)];
      sinv[static_cast<size_t>(i * n + j)] = q[static_cast<size_t>(j * n + i)] / d[static_cast<size_t>(i)];
    }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0, s.data(), int(n), t.data(),
              int(n), 0.0, st.data(), int(n));
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0, st.data(), int(n), sinv.data(),
              int(n), 0.0, a.data(), int(n));
  *n_out = n;
  return a;
}

/// All eigenvalues (ascending) and eigenvectors (column j of the row-major result) by LAPACK dsyevd.
inline std::vector<double> lapack_syevd(std::vector<double> a, int64_t n, std::vector<double>* vectors = nullptr) {
  std::vector<double> w(static_cast<size_t>(n));
  if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', int(n), a.data(), int(n), w.data()) != 0)
    throw std::runtime_error("dsyevd failed");
  if (vectors) *vectors = std::move(a);
  return w;
}

/// All eigenvalues of a general matrix by LAPACK dgeev.
inline std::vector<std::complex<double>> lapack_geev(std::vector<double> a, int64_t n) {
  std::vector<double> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n));
  if (LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', int(n), a.data(), int(n), wr.data(), wi.data(), nullptr, 1, nullptr,
                    1) != 0)
    throw std::runtime_error("dgeev failed");
  std::vector<std::complex<double>> out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(wr[static_cast<size_t>(i)], wi[static_cast<size_t>(i)]);
  return out;
}

/// Singular values (descending) of a row-major m x n matrix by LAPACK dgesdd; U (m x min) and Vt (min x n) if asked.
inline std::vector<double> lapack_gesdd(std::vector<double> a, int64_t m, int64_t n, std::vector<double>* u = nullptr,
                                        std::vector<double>* vt = nullptr) {
  const int64_t mn = std::min(m, n);
  std::vector<double> s(static_cast<size_t>(mn)), uu(static_cast<size_t>(m * mn)), vv(static_cast<size_t>(mn * n));
  if (LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', int(m), int(n), a.data(), int(n), s.data(), uu.data(), int(mn), vv.data(),
                     int(n)) != 0)
    throw std::runtime_error("dgesdd failed");
  if (u) *u = std::move(uu);
  if (vt) *vt = std::move(vv);
  return s;
}

struct ArpackResult {
  std::vector<double> re, im;  // eigenvalues as ARPACK orders them
  std::vector<double> vectors;  // n x nconv, vector j at j*n (complex pair: re at j, im at j+1)
  int64_t matvecs = 0, restarts = 0, info = 0;
};

/// ARPACK dsaupd/dseupd, mode 1 (regular), `which` "LA" or "LM"; values ascending.
inline ArpackResult arpack_symmetric(const Apply& op, int64_t n, int64_t k, const char* which, int64_t ncv,
                                     double tol, int64_t maxiter = 3000) {
  a_int ido = 0, info = 0;
  std::vector<double> resid(static_cast<size_t>(n)), v(static_cast<size_t>(n * ncv)), workd(static_cast<size_t>(3 * n)), workl(static_cast<size_t>(ncv * (ncv + 8)));
  a_int iparam[11] = {1, 0, a_int(maxiter), 1, 0, 0, 1, 0, 0, 0, 0}, ipntr[11] = {};
  const a_int lworkl = a_int(workl.size());
  while (true) {
    dsaupd_c(&ido, "I", a_int(n), which, a_int(k), tol, resid.data(), a_int(ncv), v.data(), a_int(n), iparam, ipntr,
             workd.data(), workl.data(), lworkl, &info);
    if (ido != -1 && ido != 1) break;
    op(workd.data() + ipntr[0] - 1, workd.data() + ipntr[1] - 1);
  }
  ArpackResult r;
  r.info = info;
  r.matvecs = iparam[8];
  r.restarts = iparam[2];
  if (info < 0) return r;
  std::vector<a_int> select(static_cast<size_t>(ncv));
  r.re.assign(static_cast<size_t>(k), 0.0);
  r.vectors.assign(static_cast<size_t>(n * k), 0.0);
  a_int info2 = 0;
  dseupd_c(1, "A", select.data(), r.re.data(), r.vectors.data(), a_int(n), 0.0, "I", a_int(n), which, a_int(k), tol,
           resid.data(), a_int(ncv), v.data(), a_int(n), iparam, ipntr, workd.data(), workl.data(), lworkl, &info2);
  if (info2 != 0) r.info = info2;
  r.im.assign(static_cast<size_t>(k), 0.0);
  return r;
}

/// ARPACK dnaupd/dneupd, mode 1, `which` "LM" or "LR"; `start` (n values): the
/// start vector (info = 1), else ARPACK's own random one.
inline ArpackResult arpack_nonsymmetric(const Apply& op, int64_t n, int64_t k, const char* which, int64_t ncv,
                                        double tol, int64_t maxiter = 3000, const std::vector<double>& start = {}) {
  a_int ido = 0, info = start.empty() ? 0 : 1;
  std::vector<double> resid = start.empty() ? std::vector<double>(static_cast<size_t>(n)) : start;
  std::vector<double> v(static_cast<size_t>(n * ncv)), workd(static_cast<size_t>(3 * n)),
      workl(static_cast<size_t>(3 * ncv * ncv + 6 * ncv));
  a_int iparam[11] = {1, 0, a_int(maxiter), 1, 0, 0, 1, 0, 0, 0, 0}, ipntr[14] = {};
  const a_int lworkl = a_int(workl.size());
  while (true) {
    dnaupd_c(&ido, "I", a_int(n), which, a_int(k), tol, resid.data(), a_int(ncv), v.data(), a_int(n), iparam, ipntr,
             workd.data(), workl.data(), lworkl, &info);
    if (ido != -1 && ido != 1) break;
    op(workd.data() + ipntr[0] - 1, workd.data() + ipntr[1] - 1);
  }
  ArpackResult r;
  r.info = info;
  r.matvecs = iparam[8];
  r.restarts = iparam[2];
  if (info < 0) return r;
  std::vector<a_int> select(static_cast<size_t>(ncv));
  std::vector<double> dr(static_cast<size_t>(k + 1)), di(static_cast<size_t>(k + 1)), z(static_cast<size_t>(n * (k + 1))), workev(static_cast<size_t>(3 * ncv));
  a_int info2 = 0;
  dneupd_c(1, "A", select.data(), dr.data(), di.data(), z.data(), a_int(n), 0.0, 0.0, workev.data(), "I", a_int(n),
           which, a_int(k), tol, resid.data(), a_int(ncv), v.data(), a_int(n), iparam, ipntr, workd.data(),
           workl.data(), lworkl, &info2);
  if (info2 != 0) r.info = info2;
  const int64_t nconv = iparam[4];
  r.re.assign(dr.begin(), dr.begin() + nconv);
  r.im.assign(di.begin(), di.begin() + nconv);
  r.vectors.assign(z.begin(), z.begin() + n * nconv);
  return r;
}

/// ||A x - λ x|| / ||x|| for x = xr + i xi, λ = lr + i li (xi may be null for real pairs).
inline double eig_residual(const Apply& op, int64_t n, double lr, double li, const double* xr, const double* xi) {
  std::vector<double> ar(static_cast<size_t>(n)), ai(static_cast<size_t>(n), 0.0), zero(static_cast<size_t>(n), 0.0);
  op(xr, ar.data());
  if (xi) op(xi, ai.data());
  else xi = zero.data();
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double er = ar[static_cast<size_t>(i)] - (lr * xr[i] - li * xi[i]);
    const double ei = ai[static_cast<size_t>(i)] - (lr * xi[i] + li * xr[i]);
    num += er * er + ei * ei;
    den += xr[i] * xr[i] + xi[i] * xi[i];
  }
  return std::sqrt(num / den);
}

}  // namespace eigref
