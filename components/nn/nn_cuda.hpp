// CUDA implementations of the nn family's row-wise and element-wise kernels
// and of the f32 GEMM (cuBLAS), beside their CPU versions (nn.cpp,
// transformer_*.cpp). Pointers are device pointers; `stream` is a cudaStream_t
// (StarPU's starpu_cuda_get_local_stream() inside a task), nullptr for the
// default stream. Calls are asynchronous on that stream; every CUDA and cuBLAS
// status is checked and a failure throws std::runtime_error naming the call.
// Built only when nvcc is found (cmake/cuda.cmake defines YMLOPT_HAVE_CUDA).
//
//   std::string why;
//   if (ymlopt::nn::cuda::device_available(&why))
//     ymlopt::nn::cuda::softmax_rows(d_x, d_y, rows, cols, stream);
//   else std::cerr << why << "\n";  // "no CUDA device: ..."
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::nn::cuda {

/// True when a CUDA device can be used; otherwise `why` (if given) says why,
/// e.g. "no CUDA device: cudaGetDeviceCount: CUDA driver version is
/// insufficient for CUDA runtime version (error 35)".
bool device_available(std::string* why = nullptr);

/// What `ymlopt info` prints: "1 device: NVIDIA H100 80GB HBM3 (sm_90, 79.1
/// GiB)", or the reason there is none.
std::string describe_devices();

/// The GPU architectures the kernels were compiled for ("90").
const char* built_architectures();

/// y[r, :] = softmax(x[r, :]) for `rows` rows of `cols` contiguous floats
/// (max-subtracted; x and y may alias).
void softmax_rows(const float* x, float* y, std::int64_t rows, std::int64_t cols, void* stream);

/// LayerNorm over each row: (x - mean) / sqrt(var + eps) * gamma + beta, with
/// the biased variance, as nn.layernorm on the CPU. gamma / beta may be
/// nullptr (1 / 0), as the optional ports.
void layernorm_rows(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
                    std::int64_t cols, float eps, void* stream);

/// RMSNorm over each row: x / sqrt(mean(x^2) + eps) * gamma (gamma nullptr: 1).
void rmsnorm_rows(const float* x, const float* gamma, float* y, std::int64_t rows, std::int64_t cols, float eps,
                  void* stream);

/// Element-wise GELU (erf form, or the tanh approximation) and SiLU on n floats.
void gelu(const float* x, float* y, std::int64_t n, bool tanh_form, void* stream);
void silu(const float* x, float* y, std::int64_t n, void* stream);

/// Row-major C[m,n] = alpha * A[m,k] B[k,n] + beta * C with cuBLAS (one
/// handle per calling thread, bound to `stream`), leading dimensions lda,
/// ldb, ldc in elements.
void gemm_f32(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
              std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float beta, void* stream);

/// Row-major C[m,n] = alpha * op(A) op(B) + beta * C, op(X) = X^T when the
/// flag is set (as cblas_sgemm(CblasRowMajor, ...) and blas.gemm): A is [m,k]
/// or [k,m] (transa), B is [k,n] or [n,k] (transb). Plain FP32 math (cuBLAS's
/// default math mode: no TF32). Throws std::invalid_argument on a leading
/// dimension shorter than its row or a size above INT_MAX.
///   gemm_f32_op(false, true, d_x, k, d_w, k, d_y, n, m, n, k, 1.f, 0.f, stream);  // y = x w^T
void gemm_f32_op(bool transa, bool transb, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float* c, std::int64_t ldc, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float beta,
                 void* stream);

}  // namespace ymlopt::nn::cuda
