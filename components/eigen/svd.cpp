// Randomized SVD (eigen.hpp), apart from the Krylov solvers of solvers.cpp.
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "eigen/eigen.hpp"

namespace ymlopt::eigen {
namespace {

using std::int64_t;
using std::size_t;

blasint bi(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(std::numeric_limits<blasint>::max()))
    throw KernelError("dimension " + std::to_string(v) + " does not fit the BLAS integer type");
  return static_cast<blasint>(v);
}

size_t sz(int64_t v) { return static_cast<size_t>(v); }

}  // namespace

// ---------------------------------------------------------------- randomized SVD

namespace {

/// Replaces the row-major [rows, cols] matrix q (rows >= cols) by an orthonormal basis of its columns.
void orthonormalize(std::vector<double>& q, int64_t rows, int64_t cols) {
  std::vector<double> tau(sz(cols));
  if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, bi(rows), bi(cols), q.data(), bi(cols), tau.data()) != 0 ||
      LAPACKE_dorgqr(LAPACK_ROW_MAJOR, bi(rows), bi(cols), bi(cols), q.data(), bi(cols), tau.data()) != 0)
    throw KernelError("svd_topk: QR (dgeqrf/dorgqr) failed");
}

}  // namespace

SvdResult svd_topk(const double* a, int64_t m, int64_t n, int64_t ld, const SvdOptions& opt) {
  const int64_t k = opt.k, mn = std::min(m, n);
  if (m < 1 || n < 1) throw KernelError("svd_topk: empty matrix");
  if (k < 1 || k > mn)
    throw KernelError("svd_topk: k = " + std::to_string(k) + " must be in [1, min(m, n) = " + std::to_string(mn) + "]");
  if (opt.oversample < 0 || opt.power_iters < 0) throw KernelError("svd_topk: oversample and power_iters must be >= 0");
  const int64_t l = std::min(k + opt.oversample, mn);
  const blasint lda = bi(std::max<int64_t>(ld, 1));
  SvdResult r;
  std::vector<double> omega = random_vector(n * l, opt.seed);  // n x l
  std::vector<double> y(sz(m * l)), z(sz(n * l));
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(m), bi(l), bi(n), 1.0, a, lda, omega.data(), bi(l), 0.0,
              y.data(), bi(l));
  r.matvecs += l;
  orthonormalize(y, m, l);
  for (int64_t q = 0; q < opt.power_iters; ++q) {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(n), bi(l), bi(m), 1.0, a, lda, y.data(), bi(l), 0.0,
                z.data(), bi(l));
    orthonormalize(z, n, l);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(m), bi(l), bi(n), 1.0, a, lda, z.data(), bi(l), 0.0,
                y.data(), bi(l));
    orthonormalize(y, m, l);
    r.matvecs += 2 * l;
  }
  // B = Qᵀ A (l x n), then its SVD.
  std::vector<double> b(sz(l * n)), s(sz(l)), ub(sz(l * l)), vtb(sz(l * n));
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(l), bi(n), bi(m), 1.0, y.data(), bi(l), a, lda, 0.0,
              b.data(), bi(n));
  r.matvecs += l;
  if (LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', bi(l), bi(n), b.data(), bi(n), s.data(), ub.data(), bi(l), vtb.data(),
                     bi(n)) != 0)
    throw KernelError("svd_topk: dgesdd failed on the projected matrix");
  r.s.assign(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(k));
  r.u.assign(sz(m * k), 0.0);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(m), bi(k), bi(l), 1.0, y.data(), bi(l), ub.data(), bi(l),
              0.0, r.u.data(), bi(k));
  r.vt.assign(vtb.begin(), vtb.begin() + static_cast<std::ptrdiff_t>(k * n));
  return r;
}

}  // namespace ymlopt::eigen
