// IEEE binary16 (f16) and bfloat16 (bf16) conversions, header-only.
//
// Narrowing conversions round to nearest, ties to even, overflow to infinity,
// keep the sign of zero, and turn NaN into a quiet NaN. Widening conversions
// are exact. Conversions from double round once (no double rounding through
// float), so f64 -> f16 and f64 -> bf16 give correctly rounded results.
#pragma once

#include <bit>
#include <cstdint>

namespace ymlopt::half {

/// Storage types (no arithmetic: kernels convert to float/double to compute).
struct f16_t {
  std::uint16_t bits;
};
struct bf16_t {
  std::uint16_t bits;
};

/// Rounds a double to a binary format with EB exponent bits and MB mantissa
/// bits (EB + MB == 15) and returns its bit pattern.
template <int EB, int MB>
constexpr std::uint16_t round_from_double(double d) {
  static_assert(EB + MB == 15);
  constexpr int bias = (1 << (EB - 1)) - 1;
  constexpr int emin = 1 - bias;  // exponent of the smallest normal
  constexpr std::uint16_t exp_mask = static_cast<std::uint16_t>(((1 << EB) - 1) << MB);
  const std::uint64_t b = std::bit_cast<std::uint64_t>(d);
  const auto sign = static_cast<std::uint16_t>((b >> 48) & 0x8000u);
  const std::uint64_t abs_bits = b & 0x7fffffffffffffffull;
  const int efield = static_cast<int>(abs_bits >> 52);
  const std::uint64_t frac = abs_bits & ((std::uint64_t{1} << 52) - 1);
  if (efield == 0x7ff) {
    if (frac == 0) return sign | exp_mask;  // infinity
    // quiet NaN, keep the top payload bits
    return static_cast<std::uint16_t>(sign | exp_mask | (1u << (MB - 1)) |
                                      static_cast<std::uint16_t>(frac >> (52 - MB)));
  }
  if (efield == 0) return sign;  // zero or double subnormal: far below the range
  const int e = efield - 1023;
  if (e > bias) return sign | exp_mask;  // >= 2^(bias+1): overflow
  const std::uint64_t m = frac | (std::uint64_t{1} << 52);
  std::uint64_t result;
  int shift;
  if (e >= emin) {  // normal: the carry of the rounding may reach the exponent (or inf)
    shift = 52 - MB;
    result = (static_cast<std::uint64_t>(e + bias) << MB) | (frac >> shift);
  } else {  // subnormal: value / 2^(emin - MB) = m * 2^-(shift)
    shift = 52 + emin - MB - e;
    if (shift > 54) return sign;  // < a quarter of the smallest subnormal
    result = m >> shift;
  }
  const std::uint64_t rem = m & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (shift - 1);
  if (rem > halfway || (rem == halfway && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

/// Widens a binary format with EB exponent bits and MB mantissa bits to double (exact).
template <int EB, int MB>
constexpr double widen_to_double(std::uint16_t h) {
  constexpr int bias = (1 << (EB - 1)) - 1;
  const std::uint64_t sign = static_cast<std::uint64_t>(h & 0x8000u) << 48;
  const int efield = (h >> MB) & ((1 << EB) - 1);
  const std::uint64_t frac = h & ((1u << MB) - 1);
  std::uint64_t bits;
  if (efield == (1 << EB) - 1) {
    bits = sign | (std::uint64_t{0x7ff} << 52) | (frac << (52 - MB)) | (frac ? (std::uint64_t{1} << 51) : 0);
  } else if (efield == 0) {
    if (frac == 0) return std::bit_cast<double>(sign);
    // subnormal: frac * 2^(1 - bias - MB); normalize into a double
    int e = 1 - bias;
    std::uint64_t f = frac;
    while (!(f & (std::uint64_t{1} << MB))) {
      f <<= 1;
      --e;
    }
    f &= (std::uint64_t{1} << MB) - 1;
    bits = sign | (static_cast<std::uint64_t>(e + 1023) << 52) | (f << (52 - MB));
  } else {
    bits = sign | (static_cast<std::uint64_t>(efield - bias + 1023) << 52) | (frac << (52 - MB));
  }
  return std::bit_cast<double>(bits);
}

constexpr std::uint16_t f16_bits_from_double(double d) { return round_from_double<5, 10>(d); }
constexpr std::uint16_t bf16_bits_from_double(double d) { return round_from_double<8, 7>(d); }
constexpr double f16_bits_to_double(std::uint16_t h) { return widen_to_double<5, 10>(h); }
constexpr double bf16_bits_to_double(std::uint16_t h) { return widen_to_double<8, 7>(h); }

/// float -> bf16 directly on the bits (same exponent range; one rounding).
constexpr std::uint16_t bf16_bits_from_float(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/// bf16 -> float is a shift.
constexpr float bf16_bits_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

}  // namespace ymlopt::half
