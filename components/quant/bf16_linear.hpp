// bf16 linears: y = bf16(x) · Wᵀ with W stored in bfloat16 and f32 accumulation.
//
//   quant::linear_bf16(x, m, k, w, n, k, k, y, n);   // y[m, n], W [n, k] bf16 bits
//
// What every path computes: x rounded to bf16 once (round to nearest even, as
// half::bf16_bits_from_float), each product of two bf16 values exact in f32,
// the sum over k in f32. Paths differ only in the order of that sum: the
// AVX-512 BF16 path (vdpbf16ps, 32 products per instruction into 16 lanes;
// like the hardware, it treats subnormal inputs as zero), the AVX2 path
// (bf16 widened to f32 in registers, 8-lane FMAs) and the scalar one.
// AMX-BF16 is not used: no machine of ours has had it to test on.
#pragma once
#include <cstdint>

namespace ymlopt::quant {

enum class Bf16Isa { best, scalar, avx2, avx512_bf16 };

/// True when the CPU has AVX-512 F/BW/VL and AVX512_BF16.
bool cpu_has_avx512_bf16();
/// The path Bf16Isa::best takes here: "AVX-512 BF16", "AVX2" or "scalar" (ymlopt info).
const char* bf16_best_isa_name();

/// y[m, n] = bf16(x)[m, k] · W[n, k]ᵀ (W: bf16 bits, row r at w + r·ldw), overwriting y.
/// Single-threaded. A forced path the CPU lacks throws KernelError.
void linear_bf16(const float* x, std::int64_t m, std::int64_t ldx, const std::uint16_t* w, std::int64_t n,
                 std::int64_t k, std::int64_t ldw, float* y, std::int64_t ldy, Bf16Isa isa = Bf16Isa::best);

}  // namespace ymlopt::quant
