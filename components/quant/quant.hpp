// Quantization family: weight quantizers (C++ API and components) and the
// quantized linear kernel (qlinear.hpp).
//
// Components (W is f32 [n, k] with layout="nk" (torch Linear, default) or
// [k, n] with layout="kn" (GPT-2 Conv1D); outputs are always [n, k]-rowed):
//   quant.int8    w -> q i8 [n, k], scale f32 [n]          symmetric per output channel
//   quant.group   w -> q i8 [n, k] (bits 8) or [n, k/2] (bits 4, two codes per byte),
//                 scale f32|f16 [n, k/group], zero like scale [n, k/group] (bound iff
//                 symmetric=false); args bits 4|8, group 32|64|128, symmetric
//                 (quant.int8 and quant.group: an f16 scale port stores f16 scales/zeros)
//   quant.q8_0    w -> q i8 [n, k], scale f16 [n, k/32]      (llama.cpp Q8_0 rule)
//   quant.q4_0    w -> q i8 [n, k/2], scale f16 [n, k/32]    (llama.cpp Q4_0 rule)
//   quant.dequant q, scale (f32|f16), zero? (f32|f16) -> w f32 [n, k]; args bits, group (0: per channel)
//
// Rules (all f32 arithmetic, per group of `group` weights of one row; per channel: the row):
//   symmetric int8 (int8, group bits 8, q8_0): d = amax / 127, q = roundf(x * (1/d))
//     (ties away from zero; d = 0 gives q = 0) — ggml's quantize_row_q8_0.
//   symmetric int4 (group bits 4, q4_0): m = the signed value of largest magnitude,
//     d = m / -8, q = min(15, (int)(x * (1/d) + 8.5f)), value = (q - 8) * d — ggml's
//     quantize_row_q4_0 (so |w - deq| <= |d|/2, or <= |d| for the one clamped code 15).
//   asymmetric: lo = min, hi = max, scale = (hi - lo) / qmax (qmax 255 or 15),
//     zero = -lo / scale (a float), q = clamp(roundf((x - lo) * (1/scale)), 0, qmax);
//     int8 stores q - 128 and zero - 128 (see qlinear.hpp). A constant group gets
//     scale = |lo| (1 if 0), zero = -lo / scale, q = 0 (exact).
//   q8_0/q4_0 compute codes with the f32 d and store d rounded to f16, as ggml does.
//   int8 / group with f16 scales (scale port f16): scale and zero rounded to f16 first
//     (round_params_f16), codes against the stored values: symmetric q = roundf(x / d16)
//     (int8) or min(15, (int)(x / d16 + 8.5f)) (int4); asymmetric q = clamp(roundf(x / s16 + z16), 0, qmax).
//   Storage differs from llama.cpp's: scales are a separate [n, groups] array, and
//   int4 pairs are (2j, 2j+1) low nibble first (ggml packs j and j+16 per block).
//
//   auto qw = quant::quantize_group(w.data(), n, k, k, 4, 128, true);
//   quant::linear(x, m, k, qw.view(), y, n);
#pragma once
#include <ymlopt/sdk.hpp>

#include <cstdint>
#include <vector>

#include "quant/qlinear.hpp"

namespace ymlopt {
/// Registers quant.int8, quant.group, quant.q8_0, quant.q4_0, quant.dequant and quant.gptq.
void register_quant(Registry& reg);
/// Registers quant.gptq (gptq.cpp; called by register_quant).
void register_quant_gptq(Registry& reg);
}  // namespace ymlopt

namespace ymlopt::quant {

/// An owning quantized weight (codes, scales, optional zeros, cached int8 code sums).
///   QuantizedWeight qw = quantize_int8(w, n, k, k);  QWeight v = qw.view();
struct QuantizedWeight {
  int bits = 8;
  std::int64_t n = 0, k = 0, group = 0;
  std::vector<std::int8_t> q;  // [n, q_ld] bytes
  std::int64_t q_ld = 0;
  DType scale_dtype = DType::f32;
  std::vector<float> scale_f32;          // [n, groups] when scale_dtype == f32
  std::vector<std::uint16_t> scale_f16;  // [n, groups] f16 bits when scale_dtype == f16
  std::vector<float> zero;               // [n, groups]; empty: symmetric
  std::vector<std::int32_t> code_sum;    // [n, groups] (bits 8)

  std::int64_t groups() const { return group > 0 ? k / group : 1; }
  /// An all-zero result of this shape: codes allocated (q_ld = k or k/2), no scales yet.
  static QuantizedWeight zeros(int bits, std::int64_t n, std::int64_t k, std::int64_t group) {
    QuantizedWeight r;
    r.bits = bits;
    r.n = n;
    r.k = k;
    r.group = group;
    r.q_ld = bits == 8 ? k : k / 2;
    r.q.assign(static_cast<std::size_t>(n * r.q_ld), 0);
    return r;
  }
  /// A non-owning view for quant::linear / quant::dequantize (valid while *this lives).
  QWeight view() const;
};

/// Symmetric int8, one scale per output row. w is [n, k] with leading dimension ldw.
QuantizedWeight quantize_int8(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw);

/// Group-wise int8/int4 (bits 8|4, group 32|64|128 dividing k), symmetric or asymmetric, f32 scales.
QuantizedWeight quantize_group(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw, int bits,
                               std::int64_t group, bool symmetric);

/// Same, and quantize_int8 (group 0, symmetric), with scales (and zero points) stored
/// as scale_dtype: f32 gives exactly the results above; f16 stores both rounded to f16
/// and computes every code against the stored values (round_params_f16), so the
/// f16 rounding moves the grid but adds no rounding error of its own. Zeros stay a
/// float vector holding f16-exact values.
///   auto qw = quant::quantize_group(w, n, k, k, 4, 32, false, DType::f16);
QuantizedWeight quantize_group(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw, int bits,
                               std::int64_t group, bool symmetric, DType scale_dtype);
QuantizedWeight quantize_int8(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw, DType scale_dtype);

/// A group's parameters as stored in f16: scale rounded to f16 (a nonzero scale that
/// rounds to 0 becomes 2^-24 when asymmetric); asymmetric: zero = -lo / scale16 in the
/// unsigned code space, rounded to f16 in its stored form (int8: zero - 128).
/// `zero` is returned in the unsigned code space (symmetric: 0 for int8, 8 for int4).
/// Throws KernelError when the scale or zero point overflows f16.
///   StoredParams p = round_params_f16(0.0123f, -0.1f, 4, false);  // code = round(x / p.scale + p.zero)
struct StoredParams {
  float scale = 0, zero = 0;
};
StoredParams round_params_f16(float scale, float lo, int bits, bool symmetric);

/// x rounded to the nearest f16 value (ties to even), as a float.
float round_to_f16(float x);

/// llama.cpp Q8_0: int8, group 32, f16 scales.
QuantizedWeight quantize_q8_0(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw);

/// llama.cpp Q4_0: int4, group 32, f16 scales.
QuantizedWeight quantize_q4_0(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw);

// ---------------------------------------------------------------- GPTQ (gptq.cpp)

/// Options of quantize_gptq. group 0: one scale per row (per channel).
struct GptqOptions {
  int bits = 4;                // 4 or 8
  std::int64_t group = 128;    // 0, 32, 64 or 128
  bool symmetric = true;       // the rules of quantize_group / quantize_int8
  double damp = 0.01;          // H += damp * mean(diag H) * I
  std::int64_t block = 128;    // columns per lazy-update block (without act_order: rounded up to a multiple of group)
  bool act_order = false;      // columns by decreasing diag H, group scales from the original weights
  bool clip_search = false;    // per group: the range shrink a in {1, 0.99, ..., clip_min} with the least
                               // sum_j H_jj (x_j - value_j)^2 (H = I: plain MSE clipping of round-to-nearest)
  double clip_min = 0.75;      // in (0, 1]
  DType scale_dtype = DType::f32;  // f16: scales and zeros stored f16, codes against the stored values
};

/// What quantize_gptq did: sum over weights of (w - q)^2 / (2 [H^-1]_jj) (the OBS
/// proxy of the layer output error), and the columns with H_jj == 0 (kept, rounded to nearest).
struct GptqStats {
  double loss = 0;
  std::int64_t dead_columns = 0;
};

/// GPTQ (Frantar et al. 2022) of W [n, k] (leading dimension ldw) given the layer
/// Hessian H [k, k] (row-major, 2/m XᵀX as prune::hessian makes it): columns are
/// quantized left to right with the quantize_group / quantize_int8 rule of the
/// options (a group's scale and zero come from its current, already error-updated
/// weights when the group starts; with act_order, from its original weights, and the
/// columns go by decreasing diag H), and each column's rounding error is spread over
/// the columns not yet quantized through the Cholesky factor of H^-1. The result
/// has the layout of quantize_group (group > 0) or quantize_int8 (group 0).
///
///   quant::GptqOptions o;  o.bits = 4;  o.group = 128;
///   QuantizedWeight qw = quant::quantize_gptq(w.data(), n, k, k, h.data(), o);
QuantizedWeight quantize_gptq(const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw, const double* h,
                              const GptqOptions& opt, GptqStats* stats = nullptr);

}  // namespace ymlopt::quant
