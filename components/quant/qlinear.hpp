// Quantized linear kernels: y = x · dequant(W)ᵀ with int8 or int4 weights.
//
//   quant::QWeight w{.bits = 8, .q = q, .q_ld = k, .n = n, .k = k, .scale = s};
//   quant::linear(x, m, k, w, y, n);   // y[m, n], activations quantized per token (q8_0/q4_0: per block)
//
// Code conventions (value = (c - zero) * scale, c the stored code):
//   - bits 8: c is the int8 code. Symmetric: zero is null (0). Asymmetric: the
//     quantizer's unsigned code u in [0, 255] is stored as c = u - 128 and the
//     stored zero is given in the same (shifted) code space, zero_stored = z_u - 128,
//     so the formula above holds unchanged.
//   - bits 4: two unsigned codes in [0, 15] per byte, element 2j in the low nibble
//     of byte j. Symmetric: zero is null (8). Asymmetric: float zero in [0, 15].
//   - q8_0 / q4_0 (llama.cpp) are bits 8 / 4, group 32, f16 scales, symmetric.
//     llama.cpp interleaves one f16 scale with its 32 codes per block; here scales
//     and codes are separate arrays (same bits per weight: 8.5 and 4.5).
//
// How linear computes (exact integer part, identical on every code path):
//   each row (token) i of x gets a_i = max|x_i| / 127 and codes xq = round(x / a_i)
//   in [-127, 127] (ties to even); int8 weights meet u8 activations xq + 128 in
//   AVX-512 VNNI vpdpbusd (the 128 · Σc term is subtracted), int4 codes are the
//   unsigned operand against s8 activations (nibbles unpacked in registers); on
//   AVX2, vpmaddubsw gives the same exact int32 lane sums (|c| x sign(xq, c) for
//   int8, so no int16 pair saturates).
//   Per channel the dot product is one exact int32; per group each int32 block
//   sum is converted and multiply-added with its scale in f32 (16 lane partials,
//   a fixed reduction tree). The AVX2 and scalar paths reproduce the same
//   operations, so every path gives bit-identical y.
//   Symmetric group-32 weights (q8_0, q4_0) instead quantize the activations per
//   block of 32 (a_ib = max|x_i,block b| / 127, as llama.cpp does for these
//   types): y_ij = Σ_b float(d_ijb) · (s_jb · a_ib), one f32 fma per block in
//   block order, d_ijb the exact int32 block dot product. The vector paths pack 16
//   weight rows at a time so that one vpdpbusd advances 16 outputs (activations
//   broadcast); all paths again give bit-identical y.
#pragma once
#include <ymlopt/content_cache.hpp>
#include <ymlopt/sdk.hpp>

#include <cstdint>
#include <string>

namespace ymlopt::quant {

/// A quantized weight W [n, k] (rows are output features): value = (q - zero) * scale.
struct QWeight {
  int bits = 8;  // 8: q is int8 [n, k]; 4: two unsigned 4-bit codes per byte [n, k/2], element 2j in the low nibble
  const std::int8_t* q = nullptr;
  std::int64_t q_ld = 0;  // bytes between the starts of two rows
  std::int64_t n = 0, k = 0;
  std::int64_t group = 0;       // elements per scale along k; 0: one scale per row (per channel)
  const void* scale = nullptr;  // [n, groups], f32 or f16
  DType scale_dtype = DType::f32;
  std::int64_t scale_ld = 0;    // elements
  const void* zero = nullptr;  // [n, groups], f32 or f16; null: symmetric (zero 0 for int8, 8 for int4)
  DType zero_dtype = DType::f32;
  std::int64_t zero_ld = 0;
  /// Optional cache (bits 8 only): code_sum[r * code_sum_ld + g] = Σ of the codes of
  /// row r in group g (or in the whole row when group == 0). Null: computed per call.
  const std::int32_t* code_sum = nullptr;
  std::int64_t code_sum_ld = 0;
  /// Content ids of the codes and scales (TensorView::content_id; 0: unnamed).
  /// With both named, the AVX-512 panel kernels keep the packed panels of this
  /// weight from its second use in a run (YMLOPT_QLINEAR_PACK_CACHE_MB).
  std::uint64_t q_id = 0, scale_id = 0;

  std::int64_t groups() const { return group > 0 ? k / group : 1; }
  /// The sub-weight of rows [n0, n1).
  QWeight rows(std::int64_t n0, std::int64_t n1) const;
  /// A view of stored codes and scales (engine tensors): q [n, k] (int8) or
  /// [n, k/2] (int4), scale [n, groups] or, per row, a [n] vector; zero like
  /// scale or unbound (symmetric). Scales and zeros may each be f32 or f16.
  ///   QWeight w = QWeight::of(4, p[kW], p[kWScale], p[kWZero], n, k, group);
  static QWeight of(int bits, const TensorView& q, const TensorView& scale, const TensorView& zero,
                    std::int64_t n, std::int64_t k, std::int64_t group);
};

/// The kept panels of quantized weights: packed (misses), reused (hits), first
/// uses (deferred), left unpacked once the budget was spent (refused), bytes.
ContentCacheStats panel_cache_stats();
/// Lowers the kept panels' budget (a run under a memory limit; the kept
/// activations get an eighth of it); entries kept stay.
void limit_panel_cache(std::int64_t bytes);
/// The kept quantized activations of the panel paths (linear's x_id).
ContentCacheStats acts_cache_stats();
/// Whether linear() keeps the panels of a named weight of this kind multiplied
/// by m rows (AVX-512 VNNI; symmetric groups of 32, or per channel from 16 rows).
bool keeps_panels(std::int64_t group, bool asymmetric, std::int64_t m);

/// Which kernel linear uses: the best the CPU supports (AVX-512 VNNI, else AVX2,
/// else scalar), or a forced one (tests, benchmarks). All give bit-identical y.
enum class Isa { best, scalar, avx2, avx512_vnni };

/// True when the CPU has AVX-512 F/BW/VL and VNNI (the fast path).
bool cpu_has_avx512_vnni();
/// True when the CPU has AVX2 and FMA (the path of CPUs without AVX-512 VNNI).
bool cpu_has_avx2();
/// The kernel Isa::best runs on this CPU: "AVX-512 VNNI", "AVX2" or "scalar" (ymlopt info).
const char* best_isa_name();

/// y[m, n] = x[m, k] · dequant(W)ᵀ, overwriting y. Activations are quantized to
/// int8 per token inside. Single-threaded (the engine runs column blocks as tasks).
/// Throws KernelError on an invalid weight description.
void linear(const float* x, std::int64_t m, std::int64_t ldx, const QWeight& w, float* y, std::int64_t ldy);

/// Same, with the kernel chosen explicitly (Isa::avx512_vnni or Isa::avx2 on a CPU without it throws),
/// and x's contents named by x_id (TensorView::content_id; 0: unnamed): the
/// panel paths (Q8_0/Q4_0, and symmetric per channel on AVX-512) then quantize
/// one version of x once for all the column-block tasks that read it.
///   quant::linear(x, m, k, w, y, n, quant::Isa::scalar);  // portable reference path
///   quant::linear(x, m, ldx, w, y, ldy, quant::Isa::best, x_view.content_id);
void linear(const float* x, std::int64_t m, std::int64_t ldx, const QWeight& w, float* y, std::int64_t ldy, Isa isa,
            std::uint64_t x_id = 0);

/// y[m, n] = x[m, k] · dequant(W)ᵀ with the activations kept f32 (weight-only
/// int8/int4, "W8A32"): W is dequantized a block of rows at a time into an f32
/// buffer that stays in cache (never the whole matrix: ~128 KiB for up to 16
/// tokens, ~2 MiB for more) and each block is one f32 GEMM with x, so only the
/// int8/int4 codes are read from memory; one token on an AVX-512 or AVX2 CPU is a fused
/// GEMV instead (codes converted in registers, no buffer). Higher accuracy
/// than linear() (no activation rounding), at f32 GEMM speed for many rows and
/// below an f32 GEMV's memory traffic for one. Single-threaded.
///   quant::linear_weight_only(x, m, k, w, y, n);
void linear_weight_only(const float* x, std::int64_t m, std::int64_t ldx, const QWeight& w, float* y,
                        std::int64_t ldy);

/// "" when w describes a usable weight (bits, group, pointers, strides), else a message.
std::string validate(const QWeight& w);

/// Reference dequantization of W into a dense [n, k] f32 matrix (ldw elements).
void dequantize(const QWeight& w, float* out, std::int64_t ldw);

/// The scale / zero point of row r, group g as f32 (f16 storage widened exactly).
///   float s = quant::scale_of(w, r, g), z = quant::zero_of(w, r, g);  // z: 0 / 8 when symmetric
float scale_of(const QWeight& w, std::int64_t r, std::int64_t g);
float zero_of(const QWeight& w, std::int64_t r, std::int64_t g);

}  // namespace ymlopt::quant
