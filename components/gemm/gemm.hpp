// The dense GEMM every CPU kernel calls: C = alpha op(A) op(B) + beta C on
// row-major matrices with leading dimensions, on the calling thread only (the
// runtime provides the parallelism, one task per worker).
//
// f32 runs oneDNN's dnnl_sgemm when ymlopt is built with it (cmake/onednn.cmake),
// else OpenBLAS; f64 runs OpenBLAS dgemm. Both are single-threaded here whatever
// OMP_NUM_THREADS / OPENBLAS_NUM_THREADS say.
//
//   // y[m,n] = x[m,k] · W[n,k]ᵀ
//   ymlopt::gemm::gemm(false, true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::gemm {

/// C = alpha op(A) op(B) + beta C (row-major; op(X) = Xᵀ when the flag is set).
/// beta == 0 overwrites C without reading it. Throws ymlopt::KernelError when a
/// dimension does not fit the library's integer type or the library fails.
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc);

/// The library behind the f32 GEMM, as `ymlopt info` and the benchmarks print
/// it: "oneDNN 2.6.3 sgemm" or "OpenBLAS sgemm".
std::string sgemm_library();

}  // namespace ymlopt::gemm
