#include "gemm/gemm.hpp"

#include <cblas.h>

#include <limits>

#include <ymlopt/sdk.hpp>

#if YMLOPT_HAVE_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace ymlopt::gemm {
namespace {

blasint bi(std::int64_t v) {
  if (v < 0 || v > static_cast<std::int64_t>(std::numeric_limits<blasint>::max()))
    throw KernelError("dimension " + std::to_string(v) + " does not fit the BLAS integer type");
  return static_cast<blasint>(v);
}

#if YMLOPT_HAVE_ONEDNN
/// Once per thread: one OpenMP thread for oneDNN (the setting is per calling
/// thread in libgomp, so a StarPU worker does not spawn a team on the other
/// worker's core).
void single_threaded() {
  thread_local bool done = false;
  if (!done) {
    omp_set_num_threads(1);
    done = true;
  }
}
#endif

/// k == 0: C = beta C (beta == 0 writes zeros without reading C). The
/// libraries reject the leading dimensions an empty operand may have.
template <class T> void scale_only(std::int64_t m, std::int64_t n, T beta, T* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

/// A product with one row or one column of output is a matrix-vector product:
/// cblas_?gemv streams the matrix once, where a GEMM would first copy it into
/// packed panels (OpenBLAS 0.3.21 does, for m = 1): generation's decode steps
/// (one token) are such products. False when neither m nor n is 1.
template <class T, class Gemv>
bool as_gemv(Gemv gemv, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
             std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m != 1 && n != 1) return false;
  if (beta == T(0))  // BLAS may scale y by 0 (NaN stays NaN): beta == 0 must not read C
    for (std::int64_t i = 0; i < (m == 1 ? n : m); ++i) c[m == 1 ? i : i * ldc] = T(0);
  if (m == 1) {  // c[0, :] = alpha op(A)[0, :] op(B) + beta c: the vector is A's row (or column)
    const std::int64_t incx = ta ? lda : 1;
    if (tb) gemv(CblasRowMajor, CblasNoTrans, bi(n), bi(k), alpha, b, bi(ldb), a, bi(incx), beta, c, 1);
    else gemv(CblasRowMajor, CblasTrans, bi(k), bi(n), alpha, b, bi(ldb), a, bi(incx), beta, c, 1);
    return true;
  }
  // n == 1: c[:, 0] = alpha op(A) op(B)[:, 0] + beta c: the vector is B's column (or row)
  const std::int64_t incx = tb ? 1 : ldb;
  if (ta) gemv(CblasRowMajor, CblasTrans, bi(k), bi(m), alpha, a, bi(lda), b, bi(incx), beta, c, bi(ldc));
  else gemv(CblasRowMajor, CblasNoTrans, bi(m), bi(k), alpha, a, bi(lda), b, bi(incx), beta, c, bi(ldc));
  return true;
}

}  // namespace

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, Library lib) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_only(m, n, beta, c, ldc);
  if (as_gemv(cblas_sgemv, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
#if YMLOPT_HAVE_ONEDNN
  if (lib == Library::best) {
    single_threaded();
    const dnnl_status_t s = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (s != dnnl_success)
      throw KernelError("oneDNN sgemm failed (status " + std::to_string(int(s)) + ") on m=" + std::to_string(m) +
                        " n=" + std::to_string(n) + " k=" + std::to_string(k));
    return;
  }
#else
  (void)lib;
#endif
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bi(m), bi(n), bi(k),
              alpha, a, bi(lda), b, bi(ldb), beta, c, bi(ldc));
}

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc, Library) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_only(m, n, beta, c, ldc);
  if (as_gemv(cblas_dgemv, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bi(m), bi(n), bi(k),
              alpha, a, bi(lda), b, bi(ldb), beta, c, bi(ldc));
}

std::string sgemm_library() {
#if YMLOPT_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " sgemm";
#else
  return "OpenBLAS sgemm";
#endif
}

}  // namespace ymlopt::gemm
