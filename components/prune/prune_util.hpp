// Internal helpers shared by the prune.* and distill.* kernels (not part of the
// public API; see prune_api.hpp for that): dense double copies of strided
// views (optionally transposed, for the `layout` arg), BLAS/LAPACK wrappers in
// double, and the check-message helpers these families use.
//
//   std::vector<double> w = pu::load(ctx.port(0), /*transpose=*/false);  // rows x cols
//   pu::gemm(false, true, m, n, k, 1.0, x.data(), k, w.data(), k, 0.0, y.data(), n);
//   pu::store(w, ctx.port(2), false);
#pragma once

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <ymlopt/kernel_util.hpp>

namespace ymlopt::prune_util {

using std::int64_t;

/// The first non-empty message of `msgs`, or "".
inline std::string first_error(std::initializer_list<std::string> msgs) {
  for (const std::string& m : msgs)
    if (!m.empty()) return m;
  return "";
}

inline std::string rc(int64_t r, int64_t c) { return std::to_string(r) + "x" + std::to_string(c); }

/// "" when port i is rows x cols, else "port 'i' is AxB but expected RxC (why)".
inline std::string expect_shape(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                int64_t rows, int64_t cols, const std::string& why) {
  if (p[i].rows == rows && p[i].cols == cols) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(p[i]) + " but expected " + rc(rows, cols) + " (" + why + ")";
}

/// "" when the bound port i is a vector of n elements ([n] or [1, n]); unbound passes.
inline std::string expect_vector(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                 int64_t n, const std::string& why) {
  if (!p[i].bound()) return "";
  if (p[i].rows == 1 && p[i].cols == n) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(p[i]) + " but expected [" + std::to_string(n) + "] (" + why +
         ")";
}

/// "" when the bound port i has the dtype of port j (unbound ports pass).
inline std::string same_dtype_opt(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                  std::size_t j) {
  if (!p[i].bound()) return "";
  return kutil::same_dtype(s, p, i, j);
}

/// "" when the `layout` arg is nk or kn.
inline std::string layout_arg(const Args& a) { return kutil::one_of(a, "layout", {"nk", "kn"}); }

/// Whether the weight ports are stored [k, n] (GPT-2 Conv1D) rather than [n, k].
inline bool is_kn(const Args& a) { return a.get_string("layout") == "kn"; }

/// Logical [n, k] dims of a weight view stored in `layout`.
inline int64_t w_n(const TensorView& w, bool kn) { return kn ? w.cols : w.rows; }
inline int64_t w_k(const TensorView& w, bool kn) { return kn ? w.rows : w.cols; }

/// Dense row-major double copy of a float view: rows x cols, or cols x rows when `transpose`.
inline std::vector<double> load(const TensorView& v, bool transpose = false) {
  std::vector<double> out(static_cast<std::size_t>(std::max<int64_t>(v.rows * v.cols, 0)));
  kutil::dispatch_float(v.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T* p = static_cast<const T*>(v.data);
    for (int64_t r = 0; r < v.rows; ++r)
      for (int64_t c = 0; c < v.cols; ++c) {
        const double x = static_cast<double>(p[r * v.ld + c]);
        out[static_cast<std::size_t>(transpose ? c * v.rows + r : r * v.cols + c)] = x;
      }
  });
  return out;
}

/// Writes a dense row-major double matrix into a float view (the inverse of load).
inline void store(const std::vector<double>& src, const TensorView& v, bool transpose = false) {
  kutil::dispatch_float(v.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    T* p = static_cast<T*>(v.data);
    for (int64_t r = 0; r < v.rows; ++r)
      for (int64_t c = 0; c < v.cols; ++c)
        p[r * v.ld + c] = static_cast<T>(src[static_cast<std::size_t>(transpose ? c * v.rows + r : r * v.cols + c)]);
  });
}

/// BLAS integer argument; throws when the dimension does not fit.
inline blasint bi(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(std::numeric_limits<blasint>::max()))
    throw KernelError("dimension " + std::to_string(v) + " does not fit the BLAS integer type");
  return static_cast<blasint>(v);
}

/// C = alpha op(A) op(B) + beta C, row-major doubles; no-op on empty sizes.
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0 : beta * c[i * ldc + j];
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bi(m), bi(n), bi(k),
              alpha, a, bi(std::max<int64_t>(lda, 1)), b, bi(std::max<int64_t>(ldb, 1)), beta, c,
              bi(std::max<int64_t>(ldc, 1)));
}

/// Gram matrix G = Xᵀ X (k x k, full symmetric) of a dense row-major m x k matrix.
inline std::vector<double> gram(const std::vector<double>& x, int64_t m, int64_t k) {
  std::vector<double> g(static_cast<std::size_t>(k * k), 0.0);
  if (m > 0 && k > 0) {
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, bi(k), bi(m), 1.0, x.data(), bi(k), 0.0, g.data(), bi(k));
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < i; ++j) g[i * k + j] = g[j * k + i];
  }
  return g;
}

/// Mean of the diagonal of a dense k x k matrix (0 when k == 0).
inline double mean_diag(const std::vector<double>& h, int64_t k) {
  double s = 0;
  for (int64_t i = 0; i < k; ++i) s += h[static_cast<std::size_t>(i * k + i)];
  return k > 0 ? s / static_cast<double>(k) : 0.0;
}

/// In-place Cholesky A = Uᵀ U (row-major, upper triangle kept, lower zeroed);
/// throws a KernelError naming `what` when A is not positive definite.
inline void cholesky_upper(std::vector<double>& a, int64_t k, const std::string& what) {
  if (k == 0) return;
  const lapack_int info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', static_cast<lapack_int>(k), a.data(),
                                         static_cast<lapack_int>(k));
  if (info != 0)
    throw KernelError(what + " is not positive definite (dpotrf info " + std::to_string(info) +
                      "); increase the damping/ridge arg");
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < i; ++j) a[static_cast<std::size_t>(i * k + j)] = 0;
}

/// Solves A X = B for symmetric positive definite A (k x k, destroyed) and
/// B (k x nrhs, row-major, overwritten by X).
inline void spd_solve(std::vector<double>& a, int64_t k, double* b, int64_t nrhs, const std::string& what) {
  if (k == 0 || nrhs == 0) return;
  const lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', static_cast<lapack_int>(k),
                                        static_cast<lapack_int>(nrhs), a.data(), static_cast<lapack_int>(k), b,
                                        static_cast<lapack_int>(nrhs));
  if (info != 0)
    throw KernelError(what + " is not positive definite (dposv info " + std::to_string(info) +
                      "); increase the ridge arg");
}

/// Frobenius norm of a dense vector.
inline double fro(const std::vector<double>& a) {
  long double s = 0;
  for (double v : a) s += static_cast<long double>(v) * v;
  return static_cast<double>(std::sqrt(s));
}

}  // namespace ymlopt::prune_util
