// CUDA kernels of the sparse family: see sparse_cuda.hpp.
#include "sparse/sparse_cuda.hpp"

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <stdexcept>

#include "cuda_libs/cuda_libs.hpp"

namespace ymlopt::sparse::cuda {
namespace {

/// cuSPARSE entry points (opened on first use: cuda_libs.hpp).
const cuda_libs::Cusparse& sp() { return cuda_libs::cusparse(); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) + " (error " + std::to_string(int(e)) + ")");
}

void check(cusparseStatus_t s, const char* what) {
  if (s != CUSPARSE_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + sp().cusparseGetErrorString(s) + " (status " +
                             std::to_string(int(s)) + ")");
}

std::string i2s(std::int64_t v) { return std::to_string(v); }

// One cuSPARSE handle per calling thread (StarPU runs one CUDA worker per thread).
cusparseHandle_t handle_for(cudaStream_t st) {
  struct Handle {
    cusparseHandle_t h = nullptr;
    ~Handle() {
      if (h) sp().cusparseDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h) check(sp().cusparseCreate(&handle.h), "cusparseCreate");
  check(sp().cusparseSetStream(handle.h, st), "cusparseSetStream");
  return handle.h;
}

// Owns the descriptors and the buffer of one call.
struct SpmmDescs {
  cusparseConstSpMatDescr_t a = nullptr;
  cusparseConstDnMatDescr_t b = nullptr;
  cusparseDnMatDescr_t c = nullptr;
  void* buffer = nullptr;
  cudaStream_t st = nullptr;
  ~SpmmDescs() {
    if (buffer) (void)cudaFreeAsync(buffer, st);
    if (c) sp().cusparseDestroyDnMat(c);
    if (b) sp().cusparseDestroyDnMat(b);
    if (a) sp().cusparseDestroySpMat(a);
  }
};

}  // namespace

std::string csr_linear_shape_error(std::int64_t n, std::int64_t k, std::int64_t nnz, std::int64_t m,
                                   std::int64_t ldx, std::int64_t ldy) {
  if (n < 0 || k < 0 || m < 0 || n > INT_MAX || k > INT_MAX || m > INT_MAX)
    return "csr_linear_f32: bad sizes n=" + i2s(n) + " k=" + i2s(k) + " m=" + i2s(m);
  if (nnz < 0 || nnz > INT_MAX || (k == 0 && nnz > 0) || (n > 0 && k > 0 && nnz > n * k))
    return "csr_linear_f32: nnz=" + i2s(nnz) + " does not fit a " + i2s(n) + " x " + i2s(k) +
           " matrix with 32-bit offsets";
  if (ldx < (k > 0 ? k : 1) || ldy < (n > 0 ? n : 1))
    return "csr_linear_f32: ldx=" + i2s(ldx) + " (>= k=" + i2s(k) + ") and ldy=" + i2s(ldy) + " (>= n=" + i2s(n) +
           ") needed";
  return "";
}

void csr_linear_f32(const float* values, const std::int32_t* col, const std::int32_t* row_ptr, std::int64_t n,
                    std::int64_t k, std::int64_t nnz, const float* x, std::int64_t m, std::int64_t ldx, float* y,
                    std::int64_t ldy, void* stream) {
  if (std::string e = csr_linear_shape_error(n, k, nnz, m, ldx, ldy); !e.empty()) throw std::invalid_argument(e);
  if (m == 0 || n == 0) return;
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (nnz == 0) {  // W = 0
    check(cudaMemset2DAsync(y, std::size_t(ldy) * sizeof(float), 0, std::size_t(n) * sizeof(float), std::size_t(m), st),
          "csr_linear_f32 cudaMemset2DAsync");
    return;
  }
  // Row-major y [m, n] is the column-major [n, m] matrix y^T = W x^T, and the
  // row-major x [m, k] the column-major [k, m] matrix x^T: no transposes.
  cusparseHandle_t h = handle_for(st);
  SpmmDescs d;
  d.st = st;
  check(sp().cusparseCreateConstCsr(&d.a, n, k, nnz, row_ptr, col, values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                    CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
        "cusparseCreateConstCsr");
  check(sp().cusparseCreateConstDnMat(&d.b, k, m, ldx, x, CUDA_R_32F, CUSPARSE_ORDER_COL),
        "cusparseCreateConstDnMat(x)");
  check(sp().cusparseCreateDnMat(&d.c, n, m, ldy, y, CUDA_R_32F, CUSPARSE_ORDER_COL), "cusparseCreateDnMat(y)");
  const float alpha = 1.f, beta = 0.f;
  std::size_t bytes = 0;
  check(sp().cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.a,
                                     d.b, &beta, d.c, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes),
        "cusparseSpMM_bufferSize");
  if (bytes > 0) check(cudaMallocAsync(&d.buffer, bytes, st), "csr_linear_f32 cudaMallocAsync");
  check(sp().cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, d.a, d.b,
                          &beta, d.c, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, d.buffer),
        "cusparseSpMM");
}

std::string nm24_unavailable_reason() {
  return "2:4 sparse GEMM on the GPU: not built (it needs NVIDIA cuSPARSELt, which is not part of the CUDA toolkit "
         "and was not found); nm24 weights run on the CPU (sparse::linear) or are unpacked with sparse.unpack_nm24";
}

}  // namespace ymlopt::sparse::cuda
