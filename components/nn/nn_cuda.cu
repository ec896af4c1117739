// CUDA kernels of the nn family: see nn_cuda.hpp.
#include "nn/nn_cuda.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <stdexcept>

#include "cuda_libs/cuda_libs.hpp"

namespace ymlopt::nn::cuda {
namespace {

/// cuBLAS entry points (opened on first use: cuda_libs.hpp).
const cuda_libs::Cublas& blas() { return cuda_libs::cublas(); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) + " (error " + std::to_string(int(e)) + ")");
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + blas().cublasGetStatusString(s) + " (status " +
                             std::to_string(int(s)) + ")");
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

constexpr int kThreads = 256;  // per block; a multiple of the warp size

// Sum (or max) of v over the block; every thread gets the result.
template <bool Max>
__device__ float block_reduce(float v) {
  __shared__ float partial[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_down_sync(0xffffffffu, v, off);
    v = Max ? fmaxf(v, o) : v + o;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial[] may still be read from a previous reduction
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? partial[lane] : (Max ? -INFINITY : 0.f);
    for (int off = 16; off > 0; off /= 2) {
      const float o = __shfl_down_sync(0xffffffffu, v, off);
      v = Max ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

__global__ void softmax_kernel(const float* x, float* y, std::int64_t cols) {
  const float* xr = x + blockIdx.x * cols;
  float* yr = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
  m = block_reduce<true>(m);
  float s = 0.f;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
  s = block_reduce<false>(s);
  const float inv = 1.f / s;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
}

__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y, std::int64_t cols,
                                 float eps) {
  const float* xr = x + blockIdx.x * cols;
  float* yr = y + blockIdx.x * cols;
  float s = 0.f;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
  const float mean = block_reduce<false>(s) / float(cols);
  float q = 0.f;  // second pass: no cancellation of E[x^2] - mean^2
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float d = xr[j] - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_reduce<false>(q) / float(cols) + eps);
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float v = (xr[j] - mean) * rstd;  // the CPU's order: (x - m) * rs * g + b
    if (gamma) v *= gamma[j];
    if (beta) v += beta[j];
    yr[j] = v;
  }
}

__global__ void rmsnorm_kernel(const float* x, const float* gamma, float* y, std::int64_t cols, float eps) {
  const float* xr = x + blockIdx.x * cols;
  float* yr = y + blockIdx.x * cols;
  float q = 0.f;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) q += xr[j] * xr[j];
  const float r = rsqrtf(block_reduce<false>(q) / float(cols) + eps);
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = gamma ? xr[j] * r * gamma[j] : xr[j] * r;
}

__global__ void gelu_kernel(const float* x, float* y, std::int64_t n, bool tanh_form) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    y[i] = tanh_form ? 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                     : 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
  }
}

__global__ void silu_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] / (1.f + expf(-x[i]));
}

void check_rows(std::int64_t rows, std::int64_t cols, const char* what) {
  if (rows < 0 || cols <= 0 || rows > INT_MAX)
    throw std::invalid_argument(std::string(what) + ": bad shape [" + std::to_string(rows) + ", " +
                                std::to_string(cols) + "]");
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

bool device_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why)
      *why = e != cudaSuccess ? std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(e) +
                                    " (error " + std::to_string(int(e)) + ")"
                              : "no CUDA device: cudaGetDeviceCount found none";
    (void)cudaGetLastError();  // clear the sticky error for later calls
    return false;
  }
  return true;
}

std::string describe_devices() {
  std::string why;
  if (!device_available(&why)) return why;
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  std::string s = std::to_string(count) + (count == 1 ? " device:" : " devices:");
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f", double(p.totalGlobalMem) / double(1ull << 30));
    s += std::string(d ? ";" : "") + " " + p.name + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         mem + " GiB)";
  }
  return s;
}

const char* built_architectures() { return YMLOPT_CUDA_ARCHS; }

void softmax_rows(const float* x, float* y, std::int64_t rows, std::int64_t cols, void* stream) {
  check_rows(rows, cols, "softmax_rows");
  if (rows == 0) return;
  softmax_kernel<<<unsigned(rows), kThreads, 0, as_stream(stream)>>>(x, y, cols);
  check(cudaGetLastError(), "softmax_rows launch");
}

void layernorm_rows(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
                    std::int64_t cols, float eps, void* stream) {
  check_rows(rows, cols, "layernorm_rows");
  if (rows == 0) return;
  layernorm_kernel<<<unsigned(rows), kThreads, 0, as_stream(stream)>>>(x, gamma, beta, y, cols, eps);
  check(cudaGetLastError(), "layernorm_rows launch");
}

void rmsnorm_rows(const float* x, const float* gamma, float* y, std::int64_t rows, std::int64_t cols, float eps,
                  void* stream) {
  check_rows(rows, cols, "rmsnorm_rows");
  if (rows == 0) return;
  rmsnorm_kernel<<<unsigned(rows), kThreads, 0, as_stream(stream)>>>(x, gamma, y, cols, eps);
  check(cudaGetLastError(), "rmsnorm_rows launch");
}

void gelu(const float* x, float* y, std::int64_t n, bool tanh_form, void* stream) {
  if (n <= 0) return;
  gelu_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(x, y, n, tanh_form);
  check(cudaGetLastError(), "gelu launch");
}

void silu(const float* x, float* y, std::int64_t n, void* stream) {
  if (n <= 0) return;
  silu_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(x, y, n);
  check(cudaGetLastError(), "silu launch");
}

void gemm_f32(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
              std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float beta, void* stream) {
  gemm_f32_op(false, false, a, lda, b, ldb, c, ldc, m, n, k, alpha, beta, stream);
}

void gemm_f32_op(bool transa, bool transb, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float* c, std::int64_t ldc, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float beta,
                 void* stream) {
  const std::int64_t a_cols = transa ? m : k, b_cols = transb ? k : n;
  if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
      ldc > INT_MAX || lda < std::max<std::int64_t>(a_cols, 1) || ldb < std::max<std::int64_t>(b_cols, 1) ||
      ldc < std::max<std::int64_t>(n, 1))
    throw std::invalid_argument("gemm_f32: bad sizes m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                " k=" + std::to_string(k) + " lda=" + std::to_string(lda) + " ldb=" +
                                std::to_string(ldb) + " ldc=" + std::to_string(ldc));
  if (m == 0 || n == 0) return;
  // one handle per thread (StarPU runs a CUDA worker per thread), destroyed with it
  struct Handle {
    cublasHandle_t h = nullptr;
    ~Handle() {
      if (h) blas().cublasDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h) {
    check(blas().cublasCreate(&handle.h), "cublasCreate");
    check(blas().cublasSetMathMode(handle.h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // FP32, no TF32
  }
  check(blas().cublasSetStream(handle.h, as_stream(stream)), "cublasSetStream");
  // row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
  // row-major X is the column-major X^T: swap the operands, keep the flags
  const cublasOperation_t oa = transa ? CUBLAS_OP_T : CUBLAS_OP_N, ob = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(blas().cublasSgemm(handle.h, ob, oa, int(n), int(m), int(k), &alpha, b, int(ldb), a, int(lda), &beta, c,
                           int(ldc)),
        "cublasSgemm");
}

}  // namespace ymlopt::nn::cuda
