// CUDA kernels of the quant family: see quant_cuda.hpp.
#include "quant/quant_cuda.hpp"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <stdexcept>

#include "cuda_libs/cuda_libs.hpp"

namespace ymlopt::quant::cuda {
namespace {

/// cuBLASLt entry points (opened on first use: cuda_libs.hpp).
const cuda_libs::CublasLt& lt() { return cuda_libs::cublaslt(); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) + " (error " + std::to_string(int(e)) + ")");
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + lt().cublasLtGetStatusString(s) + " (status " +
                             std::to_string(int(s)) + ")");
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
std::string i2s(std::int64_t v) { return std::to_string(v); }

constexpr int kThreads = 256;

// Max of v over the block (NaN ignored, as std::max(amax, |x|) on the CPU).
__device__ float block_max(float v) {
  __shared__ float partial[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? partial[lane] : 0.f;
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// One block per row. The CPU's steps: inv = 127 / amax, v = nearbyint(x * inv)
// (round half to even), then std::min(127, std::max(-127, v)) (a NaN becomes -127).
__global__ void quantize_kernel(const float* x, long long k, long long ldx, std::int8_t* xq, long long ldxq,
                                float* a) {
  const float* xr = x + blockIdx.x * ldx;
  std::int8_t* qr = xq + blockIdx.x * ldxq;
  float amax = 0.f;
  for (long long c = threadIdx.x; c < k; c += blockDim.x) amax = fmaxf(amax, fabsf(xr[c]));
  amax = block_max(amax);
  if (!(amax > 0.f) || isinf(amax)) {
    for (long long c = threadIdx.x; c < k; c += blockDim.x) qr[c] = 0;
    if (threadIdx.x == 0) a[blockIdx.x] = 0.f;
    return;
  }
  const float inv = __fdiv_rn(127.0f, amax);
  for (long long c = threadIdx.x; c < k; c += blockDim.x) {
    float v = rintf(__fmul_rn(xr[c], inv));
    v = (-127.0f < v) ? v : -127.0f;  // std::max(-127, v)
    v = (v < 127.0f) ? v : 127.0f;    // std::min(127, v)
    qr[c] = static_cast<std::int8_t>(v);
  }
  if (threadIdx.x == 0) a[blockIdx.x] = __fdiv_rn(amax, 127.0f);
}

__global__ void scale_kernel(const std::int32_t* t, long long ldt, const float* a, const float* s, float* y,
                             long long ldy, long long m, long long n) {
  const long long total = m * n;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long i = e / n, j = e % n;
    y[i * ldy + j] = __fmul_rn(a[i], __fmul_rn(static_cast<float>(t[i * ldt + j]), s[j]));
  }
}

__global__ void dequant_kernel(GroupWeight w, long long gs, float* out, long long ld_out) {
  const long long total = w.n * w.k;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / w.k, c = e % w.k, g = c / gs;
    const std::int8_t* row = w.q + r * w.q_ld;
    int code;
    if (w.bits == 8) {
      code = row[c];
    } else {
      const unsigned b = static_cast<unsigned char>(row[c / 2]);
      code = (c & 1) ? int(b >> 4) : int(b & 15u);
    }
    const float z = w.zero ? w.zero[r * w.zero_ld + g] : (w.bits == 4 ? 8.0f : 0.0f);
    out[r * ld_out + c] = __fmul_rn(__fsub_rn(static_cast<float>(code), z), w.scale[r * w.scale_ld + g]);
  }
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

bool aligned4(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 4 == 0; }

// One cuBLASLt handle per calling thread (StarPU runs one CUDA worker per thread).
cublasLtHandle_t lt_handle() {
  struct Handle {
    cublasLtHandle_t h = nullptr;
    ~Handle() {
      if (h) lt().cublasLtDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h) check(lt().cublasLtCreate(&handle.h), "cublasLtCreate");
  return handle.h;
}

// Owns the cuBLASLt descriptors of one call.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtDescs() {
    if (c) lt().cublasLtMatrixLayoutDestroy(c);
    if (b) lt().cublasLtMatrixLayoutDestroy(b);
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (op) lt().cublasLtMatmulDescDestroy(op);
  }
};

// Device scratch from cudaMallocAsync, freed on the stream (also on an exception).
struct Scratch {
  void* p = nullptr;
  cudaStream_t st;
  Scratch(std::size_t bytes, cudaStream_t s) : st(s) {
    check(cudaMallocAsync(&p, bytes > 0 ? bytes : 1, st), "linear_i8 cudaMallocAsync");
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p) (void)cudaFreeAsync(p, st);
  }
};

}  // namespace

void quantize_rows_i8(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx, std::int8_t* xq,
                      std::int64_t ldxq, float* a, void* stream) {
  if (m < 0 || m > INT_MAX || k < 1 || ldx < k || ldxq < k)
    throw std::invalid_argument("quantize_rows_i8: bad sizes m=" + i2s(m) + " k=" + i2s(k) + " ldx=" + i2s(ldx) +
                                " ldxq=" + i2s(ldxq));
  if (m == 0) return;
  quantize_kernel<<<unsigned(m), kThreads, 0, as_stream(stream)>>>(x, k, ldx, xq, ldxq, a);
  check(cudaGetLastError(), "quantize_rows_i8 launch");
}

std::string gemm_i8_shape_error(const void* xq, std::int64_t ldx, const void* w, std::int64_t ldw, const void* t,
                                std::int64_t ldt, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX)
    return "gemm_i8_i32: bad sizes m=" + i2s(m) + " n=" + i2s(n) + " k=" + i2s(k);
  if (k % 4 != 0 || n % 4 != 0)
    return "gemm_i8_i32: k=" + i2s(k) + " and n=" + i2s(n) +
           " must be multiples of 4 (cuBLASLt int8 kernels, regular ordering)";
  if (ldx < k || ldw < k || ldt < n || ldx % 4 != 0 || ldw % 4 != 0 || ldt % 4 != 0)
    return "gemm_i8_i32: leading dimensions ldx=" + i2s(ldx) + ", ldw=" + i2s(ldw) + " (>= k=" + i2s(k) +
           "), ldt=" + i2s(ldt) + " (>= n=" + i2s(n) + ") must be multiples of 4";
  if (!aligned4(xq) || !aligned4(w) || !aligned4(t)) return "gemm_i8_i32: pointers must be 4-byte aligned";
  return "";
}

void gemm_i8_i32(const std::int8_t* xq, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw, std::int32_t* t,
                 std::int64_t ldt, std::int64_t m, std::int64_t n, std::int64_t k, void* stream) {
  if (std::string e = gemm_i8_shape_error(xq, ldx, w, ldw, t, ldt, m, n, k); !e.empty())
    throw std::invalid_argument(e);
  if (m == 0 || n == 0) return;
  cudaStream_t st = as_stream(stream);
  if (k == 0) {  // an empty sum: t = 0
    check(cudaMemset2DAsync(t, std::size_t(ldt) * 4, 0, std::size_t(n) * 4, std::size_t(m), st),
          "gemm_i8_i32 cudaMemset2DAsync");
    return;
  }
  // Row-major t = xq w^T is column-major t^T [n, m] = w [n, k] xq^T [k, m]. The
  // row-major w [n, k] is the column-major [k, n] matrix w^T (A, transposed:
  // "TN"), the row-major xq [m, k] the column-major [k, m] matrix xq^T (B).
  LtDescs d;
  check(lt().cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32I, CUDA_R_32I), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
  check(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
        "cublasLtMatmulDescSetAttribute(TRANSB)");
  check(lt().cublasLtMatrixLayoutCreate(&d.a, CUDA_R_8I, std::uint64_t(k), std::uint64_t(n), ldw),
        "cublasLtMatrixLayoutCreate(w)");
  check(lt().cublasLtMatrixLayoutCreate(&d.b, CUDA_R_8I, std::uint64_t(k), std::uint64_t(m), ldx),
        "cublasLtMatrixLayoutCreate(xq)");
  check(lt().cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32I, std::uint64_t(n), std::uint64_t(m), ldt),
        "cublasLtMatrixLayoutCreate(t)");
  const std::int32_t alpha = 1, beta = 0;
  // algo nullptr: cuBLASLt's own heuristic; no workspace
  check(lt().cublasLtMatmul(lt_handle(), d.op, &alpha, w, d.a, xq, d.b, &beta, t, d.c, t, d.c, nullptr, nullptr, 0, st),
        "cublasLtMatmul(int8)");
}

void scale_i32_f32(const std::int32_t* t, std::int64_t ldt, const float* a, const float* s, float* y,
                   std::int64_t ldy, std::int64_t m, std::int64_t n, void* stream) {
  if (m < 0 || n < 0 || ldt < n || ldy < n)
    throw std::invalid_argument("scale_i32_f32: bad sizes m=" + i2s(m) + " n=" + i2s(n) + " ldt=" + i2s(ldt) +
                                " ldy=" + i2s(ldy));
  if (m == 0 || n == 0) return;
  scale_kernel<<<grid_for(m * n), kThreads, 0, as_stream(stream)>>>(t, ldt, a, s, y, ldy, m, n);
  check(cudaGetLastError(), "scale_i32_f32 launch");
}

void linear_i8(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx, const std::int8_t* w,
               std::int64_t ldw, const float* s, std::int64_t n, float* y, std::int64_t ldy, void* stream) {
  // the scratch xq [m, k] and t [m, n] are packed (ld k and n): check those sizes first
  const std::int64_t kp = k, np = n;
  if (std::string e = gemm_i8_shape_error(w, kp, w, ldw, w, np, m, n, k); !e.empty())
    throw std::invalid_argument("linear_i8: " + e);
  if (ldx < k || ldy < n)
    throw std::invalid_argument("linear_i8: ldx=" + i2s(ldx) + " < k=" + i2s(k) + " or ldy=" + i2s(ldy) + " < n=" +
                                i2s(n));
  if (m == 0 || n == 0) return;
  cudaStream_t st = as_stream(stream);
  // one allocation: t (int32, 4-aligned first), a (f32), xq (int8)
  const std::size_t t_bytes = std::size_t(m) * std::size_t(np) * 4, a_bytes = std::size_t(m) * 4;
  Scratch scratch(t_bytes + a_bytes + std::size_t(m) * std::size_t(kp), st);
  auto* t = static_cast<std::int32_t*>(scratch.p);
  auto* a = reinterpret_cast<float*>(static_cast<char*>(scratch.p) + t_bytes);
  auto* xq = reinterpret_cast<std::int8_t*>(static_cast<char*>(scratch.p) + t_bytes + a_bytes);
  if (k > 0) {
    quantize_rows_i8(x, m, k, ldx, xq, kp, a, stream);
  } else {
    check(cudaMemsetAsync(a, 0, a_bytes, st), "linear_i8 cudaMemsetAsync");
  }
  gemm_i8_i32(xq, kp, w, ldw, t, np, m, n, k, stream);
  scale_i32_f32(t, np, a, s, y, ldy, m, n, stream);
}

std::string group_weight_error(const GroupWeight& w) {
  if (w.bits != 8 && w.bits != 4) return "dequantize_group: bits is " + i2s(w.bits) + ", expected 4 or 8";
  if (w.n < 0 || w.k < 0) return "dequantize_group: bad sizes n=" + i2s(w.n) + " k=" + i2s(w.k);
  if (w.group < 0 || (w.group > 0 && w.k % w.group != 0))
    return "dequantize_group: k=" + i2s(w.k) + " is not a multiple of group " + i2s(w.group);
  if (w.bits == 4 && w.k % 2 != 0) return "dequantize_group: int4 needs an even k, got " + i2s(w.k);
  const std::int64_t q_cols = w.bits == 8 ? w.k : w.k / 2, groups = w.group > 0 ? w.k / w.group : 1;
  if (w.n > 1 && w.q_ld < q_cols) return "dequantize_group: q_ld=" + i2s(w.q_ld) + " < " + i2s(q_cols) + " bytes";
  if (w.n > 1 && (w.scale_ld < groups || (w.zero && w.zero_ld < groups)))
    return "dequantize_group: scale_ld=" + i2s(w.scale_ld) + " / zero_ld=" + i2s(w.zero_ld) + " < " + i2s(groups) +
           " groups";
  if (w.n * w.k > 0 && (!w.q || !w.scale)) return "dequantize_group: codes or scales missing";
  return "";
}

void dequantize_group(const GroupWeight& w, float* out, std::int64_t ld_out, void* stream) {
  if (std::string e = group_weight_error(w); !e.empty()) throw std::invalid_argument(e);
  if (w.n > 1 && ld_out < w.k)
    throw std::invalid_argument("dequantize_group: ld_out=" + i2s(ld_out) + " < k=" + i2s(w.k));
  if (w.n == 0 || w.k == 0) return;
  const std::int64_t gs = w.group > 0 ? w.group : w.k;
  dequant_kernel<<<grid_for(w.n * w.k), kThreads, 0, as_stream(stream)>>>(w, gs, out, ld_out);
  check(cudaGetLastError(), "dequantize_group launch");
}

}  // namespace ymlopt::quant::cuda
