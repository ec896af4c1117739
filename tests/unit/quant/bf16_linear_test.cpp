// quant::linear_bf16 on every path this CPU has, against a long-double product
// of the bf16-rounded operands (each f32 sum within its rounding bound), and
// the vector paths against the scalar one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ymlopt/half.hpp>
#include <ymlopt/sdk.hpp>

#include "quant/bf16_linear.hpp"
#include "quant/bf16_linear_internal.hpp"
#include "quant/qlinear.hpp"

namespace ymlopt::test {
namespace {

using quant::Bf16Isa;

std::vector<Bf16Isa> paths_here() {
  std::vector<Bf16Isa> p = {Bf16Isa::scalar};
  if (quant::cpu_has_avx2()) p.push_back(Bf16Isa::avx2);
  if (quant::cpu_has_avx512_bf16()) p.push_back(Bf16Isa::avx512_bf16);
  return p;
}

const char* name(Bf16Isa i) {
  switch (i) {
    case Bf16Isa::scalar: return "scalar";
    case Bf16Isa::avx2: return "avx2";
    case Bf16Isa::avx512_bf16: return "avx512_bf16";
    default: return "best";
  }
}

struct Case {
  std::int64_t m, n, k, ldx, ldw, ldy;
};

void check_case(const Case& c, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(c.m * c.ldx));
  for (float& v : x) v = d(gen);
  // the bytes past k in each weight row are NaN: a path that reads them into the sum fails
  std::vector<std::uint16_t> w(static_cast<std::size_t>(c.n * c.ldw), 0x7fc0);
  for (std::int64_t r = 0; r < c.n; ++r)
    for (std::int64_t i = 0; i < c.k; ++i) w[r * c.ldw + i] = half::bf16_bits_from_float(d(gen) * 0.1f);
  std::vector<float> scalar;
  for (Bf16Isa isa : paths_here()) {
    SCOPED_TRACE(::testing::Message() << name(isa) << " m=" << c.m << " n=" << c.n << " k=" << c.k);
    std::vector<float> y(static_cast<std::size_t>(c.m * c.ldy), -7.0f);
    quant::linear_bf16(x.data(), c.m, c.ldx, w.data(), c.n, c.k, c.ldw, y.data(), c.ldy, isa);
    for (std::int64_t i = 0; i < c.m; ++i) {
      for (std::int64_t j = 0; j < c.n; ++j) {
        long double ref = 0, mag = 0;
        for (std::int64_t t = 0; t < c.k; ++t) {
          const long double p = static_cast<long double>(half::bf16_bits_to_float(half::bf16_bits_from_float(x[i * c.ldx + t]))) *
                                half::bf16_bits_to_float(w[j * c.ldw + t]);
          ref += p;
          mag += std::fabs(p);
        }
        // each product is exact in f32; a sum of k terms in any order is within k·u·Σ|p|
        const long double bound = static_cast<long double>(c.k) * std::numeric_limits<float>::epsilon() * mag + 1e-30L;
        ASSERT_LE(std::fabs(static_cast<long double>(y[i * c.ldy + j]) - ref), bound) << "at " << i << "," << j;
      }
      for (std::int64_t j = c.n; j < c.ldy; ++j) ASSERT_EQ(y[i * c.ldy + j], -7.0f) << "wrote past n";
    }
    if (isa == Bf16Isa::scalar) {
      scalar = y;
    } else {  // same products, another summation order: close to the scalar path
      for (std::size_t e = 0; e < y.size(); ++e) ASSERT_NEAR(y[e], scalar[e], 1e-4f * (1 + std::fabs(scalar[e])));
    }
  }
}

TEST(LinearBf16, EveryPathMatchesTheProductOfTheRoundedOperands) {
  const Case cases[] = {
      {1, 1, 1, 1, 1, 1},       {3, 5, 7, 9, 8, 6},       {4, 4, 32, 32, 32, 4},   {5, 7, 33, 40, 35, 9},
      {9, 13, 95, 95, 96, 13},  {17, 6, 64, 70, 64, 8},   {2, 37, 200, 200, 201, 40},
      {130, 19, 768, 768, 768, 19},
      {6, 3, 3000, 3001, 3000, 3},
  };
  std::uint32_t seed = 1;
  for (const Case& c : cases) check_case(c, seed++);
}

TEST(LinearBf16, LargeKUsesSeveralRowBlocks) {
  // 256 KiB of bf16 activations is 32 rows at k = 4096: 70 rows take 3 blocks
  check_case({70, 9, 4096, 4096, 4096, 9}, 99);
}

// The activations' rounding is the same bits on every path: ties to even, NaN
// quieted, infinities and subnormals kept, every tail length.
TEST(LinearBf16, ActivationRoundingIsBitIdenticalOnEveryPath) {
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x3f807fffu,
                                     0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                     0xffbfffffu, 0x00000001u, 0x807fffffu, 0x00408000u, 0x7f7f8000u, 0x477fe000u};
  std::mt19937 gen(7);
  while (bits.size() < 77) bits.push_back(static_cast<std::uint32_t>(gen()));
  std::vector<float> x(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&x[i], &bits[i], 4);
  using Convert = void (*)(const float*, std::int64_t, std::uint16_t*);
  std::vector<std::pair<const char*, Convert>> paths = {{"scalar", quant::bf16_impl::to_bf16_scalar}};
  if (quant::cpu_has_avx2()) paths.emplace_back("avx2", quant::bf16_impl::to_bf16_avx2);
  if (quant::cpu_has_avx512_bf16()) paths.emplace_back("avx512_bf16", quant::bf16_impl::to_bf16_avx512);
  for (const auto& [path, convert] : paths)
    for (std::int64_t n = 0; n <= std::int64_t(x.size()); n += n < 40 ? 1 : 37) {
      std::vector<std::uint16_t> out(x.size() + 1, 0xabcd);
      convert(x.data(), n, out.data());
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i], half::bf16_bits_from_float(x[i])) << path << " n=" << n << " bits 0x" << std::hex << bits[i];
      ASSERT_EQ(out[n], 0xabcd) << path << " wrote past n=" << n;
    }
}

TEST(LinearBf16, ZeroKGivesZeros) {
  std::vector<float> y(6, 5.0f);
  quant::linear_bf16(nullptr, 2, 0, nullptr, 3, 0, 0, y.data(), 3);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(LinearBf16, BadArgumentsThrow) {
  std::vector<float> x(8), y(8);
  std::vector<std::uint16_t> w(8);
  EXPECT_THROW(quant::linear_bf16(x.data(), 2, 3, w.data(), 2, 4, 4, y.data(), 2), KernelError);  // ldx < k
  EXPECT_THROW(quant::linear_bf16(x.data(), 2, 4, w.data(), 2, 4, 3, y.data(), 2), KernelError);  // ldw < k
  EXPECT_THROW(quant::linear_bf16(x.data(), 2, 4, w.data(), 3, 4, 4, y.data(), 2), KernelError);  // ldy < n
  if (!quant::cpu_has_avx512_bf16()) {
    EXPECT_THROW(quant::linear_bf16(x.data(), 1, 4, w.data(), 1, 4, 4, y.data(), 1, Bf16Isa::avx512_bf16), KernelError);
  }
}

}  // namespace
}  // namespace ymlopt::test
