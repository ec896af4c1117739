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

BlockOperator dense_block_operator(const double* a, int64_t m, int64_t n, int64_t ld) {
  const blasint lda = bi(std::max<int64_t>(ld, 1));
  return {m, n,
          [=](const double* x, int64_t l, double* y) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(m), bi(l), bi(n), 1.0, a, lda, x, bi(l), 0.0, y,
                        bi(l));
          },
          [=](const double* y, int64_t l, double* z) {
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(n), bi(l), bi(m), 1.0, a, lda, y, bi(l), 0.0, z,
                        bi(l));
          }};
}

SvdResult svd_topk(const double* a, int64_t m, int64_t n, int64_t ld, const SvdOptions& opt) {
  return svd_topk(dense_block_operator(a, m, n, ld), opt);
}

SvdResult svd_topk(const BlockOperator& a, const SvdOptions& opt) {
  const int64_t m = a.rows, n = a.cols, k = opt.k, mn = std::min(m, n);
  if (m < 1 || n < 1) throw KernelError("svd_topk: empty matrix");
  if (k < 1 || k > mn)
    throw KernelError("svd_topk: k = " + std::to_string(k) + " must be in [1, min(m, n) = " + std::to_string(mn) + "]");
  if (opt.oversample < 0 || opt.power_iters < 0) throw KernelError("svd_topk: oversample and power_iters must be >= 0");
  const int64_t l = std::min(k + opt.oversample, mn);
  SvdResult r;
  std::vector<double> omega = random_vector(n * l, opt.seed);  // n x l
  std::vector<double> y(sz(m * l)), z(sz(n * l));
  a.times(omega.data(), l, y.data());
  r.matvecs += l;
  orthonormalize(y, m, l);
  for (int64_t q = 0; q < opt.power_iters; ++q) {
    a.times_t(y.data(), l, z.data());
    orthonormalize(z, n, l);
    a.times(z.data(), l, y.data());
    orthonormalize(y, m, l);
    r.matvecs += 2 * l;
  }
  // B = Qᵀ A = (Aᵀ Q)ᵀ (l x n), then its SVD.
  a.times_t(y.data(), l, z.data());
  r.matvecs += l;
  std::vector<double> b(sz(l * n)), s(sz(l)), ub(sz(l * l)), vtb(sz(l * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < l; ++j) b[sz(j * n + i)] = z[sz(i * l + j)];
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
