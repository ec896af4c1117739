// CUDA kernels of the quant family: per-token int8 activation quantization,
// the int8 x int8 -> int32 GEMM (cuBLASLt), its f32 epilogue, the int8 linear
// that chains the three (the semantics of quant::linear for a symmetric
// per-channel int8 weight, qlinear.hpp), and the dequantization of
// quant.group / quant.dequant codes. Pointers are device pointers, row-major,
// leading dimensions in elements; `stream` is a cudaStream_t (nullptr: the
// default stream). Every CUDA / cuBLASLt status is checked and a failure throws
// std::runtime_error naming the call; bad sizes throw std::invalid_argument
// before anything is launched (the *_error functions say why, "" when fine).
//
//   namespace qc = ymlopt::quant::cuda;
//   qc::linear_i8(d_x, m, k, k, d_wq, k, d_wscale, n, d_y, n, stream);  // y = x dequant(W)^T
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::quant::cuda {

/// Per-token quantization, as quant::linear does it on the CPU: for each row i
/// of x [m, k], a[i] = max|x_i| / 127 and xq[i, c] = round_half_even(x[i, c] *
/// (127 / max|x_i|)) clamped to [-127, 127]; a row of zeros (or holding
/// inf/NaN) gets a[i] = 0 and zero codes.
void quantize_rows_i8(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx, std::int8_t* xq,
                      std::int64_t ldxq, float* a, void* stream);

/// "" when gemm_i8_i32 accepts these sizes and pointers, else why not.
/// cuBLASLt's int8 tensor-core (IMMA) kernels with the regular ordering need
/// the "TN" form (used here), k and n multiples of 4, leading dimensions
/// multiples of 4 and 4-byte aligned pointers.
std::string gemm_i8_shape_error(const void* xq, std::int64_t ldx, const void* w, std::int64_t ldw, const void* t,
                                std::int64_t ldt, std::int64_t m, std::int64_t n, std::int64_t k);

/// t[m, n] = xq[m, k] w[n, k]^T, exact in int32, with cuBLASLt
/// (CUBLAS_COMPUTE_32I; one handle per calling thread).
void gemm_i8_i32(const std::int8_t* xq, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw, std::int32_t* t,
                 std::int64_t ldt, std::int64_t m, std::int64_t n, std::int64_t k, void* stream);

/// y[i, j] = a[i] * (float(t[i, j]) * s[j]): the per-channel epilogue of
/// quant::linear (same two roundings, so y matches it bit for bit given t).
void scale_i32_f32(const std::int32_t* t, std::int64_t ldt, const float* a, const float* s, float* y,
                   std::int64_t ldy, std::int64_t m, std::int64_t n, void* stream);

/// y[m, n] = x[m, k] dequant(W)^T for a symmetric per-channel int8 weight
/// (codes w [n, k], f32 scales s [n]): quantize_rows_i8, gemm_i8_i32 and
/// scale_i32_f32 with scratch from cudaMallocAsync on `stream`. Sizes as
/// gemm_i8_shape_error (k, n multiples of 4).
void linear_i8(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx, const std::int8_t* w,
               std::int64_t ldw, const float* s, std::int64_t n, float* y, std::int64_t ldy, void* stream);

/// A quant.group / quant.dequant weight W [n, k]: value = (code - zero) * scale.
/// bits 8: int8 codes [n, k]; bits 4: two unsigned codes per byte [n, k/2],
/// element 2j in the low nibble. group: weights per scale along k (0: one per
/// row). scale / zero: f32, element (r, g) at r * ld + g; zero nullptr:
/// symmetric (0 for 8 bits, 8 for 4 bits).
struct GroupWeight {
  int bits = 8;
  const std::int8_t* q = nullptr;
  std::int64_t q_ld = 0;  // bytes
  std::int64_t n = 0, k = 0, group = 0;
  const float* scale = nullptr;
  std::int64_t scale_ld = 0;
  const float* zero = nullptr;
  std::int64_t zero_ld = 0;
};

/// "" when dequantize_group accepts w, else why not.
std::string group_weight_error(const GroupWeight& w);

/// out[r, c] = (float(code(r, c)) - zero(r, g)) * scale(r, g), g = c / group, as
/// quant::dequantize (same operations: bit-identical).
void dequantize_group(const GroupWeight& w, float* out, std::int64_t ld_out, void* stream);

}  // namespace ymlopt::quant::cuda
