// The dense GEMM every CPU kernel calls: C = alpha op(A) op(B) + beta C on
// row-major matrices with leading dimensions, on the calling thread only (the
// runtime provides the parallelism, one task per worker).
//
// Library::best: f32 runs oneDNN's dnnl_sgemm when ymlopt is built with it
// (cmake/onednn.cmake), else OpenBLAS; Library::openblas always OpenBLAS. f64
// runs OpenBLAS dgemm. Single-threaded here whatever OMP_NUM_THREADS /
// OPENBLAS_NUM_THREADS say. blas.gemm uses best; the model kernels (nn.linear,
// attention) OpenBLAS, which ran LLaMA 1.1B's linears 1.35x faster
// (docs/BENCHMARKS.md, "oneDNN's sgemm in the model linears").
//
//   // y[m,n] = x[m,k] · W[n,k]ᵀ
//   ymlopt::gemm::gemm(false, true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::gemm {

/// Which library runs an f32 GEMM.
enum class Library { best, openblas };

/// C = alpha op(A) op(B) + beta C (row-major; op(X) = Xᵀ when the flag is set).
/// beta == 0 overwrites C without reading it. Throws ymlopt::KernelError when a
/// dimension does not fit the library's integer type or the library fails.
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
          Library lib = Library::best);
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc,
          Library lib = Library::best);

/// The library behind Library::best's f32 GEMM, as `ymlopt info` and the
/// benchmarks print it: "oneDNN 2.6.3 sgemm" or "OpenBLAS sgemm".
std::string sgemm_library();

}  // namespace ymlopt::gemm
