// Helpers the Krylov solvers share (solvers.cpp): BLAS sizes, Gram-Schmidt,
// start vectors, size checks and ARPACK's convergence test. Private to eigen.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "eigen/eigen.hpp"

namespace ymlopt::eigen::detail {

using std::int64_t;
using std::size_t;

inline blasint bi(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(std::numeric_limits<blasint>::max()))
    throw KernelError("dimension " + std::to_string(v) + " does not fit the BLAS integer type");
  return static_cast<blasint>(v);
}

inline size_t sz(int64_t v) { return static_cast<size_t>(v); }

inline double* col(std::vector<double>& v, int64_t n, int64_t j) { return v.data() + j * n; }

inline double nrm2(int64_t n, const double* x) { return cblas_dnrm2(bi(n), x, 1); }

/// w -= V[:, 0:c] (V[:, 0:c]ᵀ w), once (classical Gram-Schmidt); the
/// coefficients are added to h (size c).
inline void cgs_pass(int64_t n, int64_t c, const double* v, double* w, double* h, double* tmp) {
  if (c == 0) return;
  cblas_dgemv(CblasColMajor, CblasTrans, bi(n), bi(c), 1.0, v, bi(n), w, 1, 0.0, tmp, 1);
  cblas_dgemv(CblasColMajor, CblasNoTrans, bi(n), bi(c), -1.0, v, bi(n), tmp, 1, 1.0, w, 1);
  for (int64_t i = 0; i < c; ++i) h[i] += tmp[i];
}

/// cgs_pass twice (one reorthogonalisation pass).
inline void cgs2(int64_t n, int64_t c, const double* v, double* w, double* h, double* tmp) {
  cgs_pass(n, c, v, w, h, tmp);
  cgs_pass(n, c, v, w, h, tmp);
}

/// Modified Gram-Schmidt against V[:, 0:c], two passes; coefficients added to h.
inline void mgs2(int64_t n, int64_t c, const double* v, double* w, double* h) {
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t i = 0; i < c; ++i) {
      const double ci = cblas_ddot(bi(n), v + i * n, 1, w, 1);
      cblas_daxpy(bi(n), -ci, v + i * n, 1, w, 1);
      h[i] += ci;
    }
}

/// A unit vector orthogonal to V[:, 0:c] (c < n), from a seeded random draw.
inline void random_orthogonal(int64_t n, int64_t c, const double* v, double* out, std::uint64_t seed) {
  std::vector<double> h(sz(std::max<int64_t>(c, 1))), tmp(sz(std::max<int64_t>(c, 1)));
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::vector<double> r = random_vector(n, seed + 7919u * static_cast<std::uint64_t>(attempt + 1));
    std::copy(r.begin(), r.end(), out);
    cgs2(n, c, v, out, h.data(), tmp.data());
    const double nr = nrm2(n, out);
    if (nr > 1e-8) {
      cblas_dscal(bi(n), 1.0 / nr, out, 1);
      return;
    }
  }
  throw KernelError("could not extend the Krylov basis (the operator's dimension is exhausted)");
}

/// Sum of the p vectors in `start` (n x p), or a random vector when empty; unit norm.
inline std::vector<double> start_vector(int64_t n, const std::vector<double>& start, std::uint64_t seed) {
  std::vector<double> v(sz(n), 0.0);
  if (!start.empty()) {
    if (start.size() % sz(n) != 0)
      throw KernelError("start vectors: " + std::to_string(start.size()) + " values is not a multiple of n = " +
                        std::to_string(n));
    for (size_t i = 0; i < start.size(); ++i) v[i % sz(n)] += start[i];
  }
  double nr = nrm2(n, v.data());
  if (nr == 0 || !std::isfinite(nr)) {
    v = random_vector(n, seed);
    nr = nrm2(n, v.data());
  }
  cblas_dscal(bi(n), 1.0 / nr, v.data(), 1);
  return v;
}

inline void check_sizes(const LinearOperator& op, int64_t k, int64_t& m, const char* what) {
  const int64_t n = op.n;
  if (n < 1 || !op.apply) throw KernelError(std::string(what) + ": empty operator");
  if (k < 1 || k > n)
    throw KernelError(std::string(what) + ": k = " + std::to_string(k) + " must be in [1, n = " + std::to_string(n) +
                      "]");
  if (m == 0) m = std::max<int64_t>(2 * k + 1, k + 20);
  m = std::min(m, n);
  if (m <= k && m < n)
    throw KernelError(std::string(what) + ": subspace = " + std::to_string(m) + " must exceed k = " +
                      std::to_string(k) + " (or equal n)");
}

/// ARPACK's lower bound on the scale of a residual test: eps^(2/3) * anorm.
inline double arpack_floor(double anorm) { return std::pow(std::numeric_limits<double>::epsilon(), 2.0 / 3.0) * anorm; }

/// Converged when res <= tol * max(|λ|, eps^(2/3) * anorm), as ARPACK.
inline bool is_converged(double res, double lam_abs, double anorm, double tol) {
  return res <= tol * std::max(lam_abs, arpack_floor(anorm));
}

// How many of the first k Ritz pairs pass is_converged.
inline int64_t count_converged(const EigenResult& res, int64_t k, double anorm, double tol) {
  int64_t n = 0;
  for (int64_t i = 0; i < k; ++i)
    n += is_converged(res.residuals[sz(i)], std::hypot(res.values_re[sz(i)], res.values_im[sz(i)]), anorm, tol) ? 1 : 0;
  return n;
}

}  // namespace ymlopt::eigen::detail
