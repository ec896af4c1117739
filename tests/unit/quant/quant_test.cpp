// Quantizers (components/quant/quant.cpp) against a naive long-double rendering
// of each rule, and quant::linear against a long-double product of the
// per-token-quantized activations with the dequantized weight.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

#include "../components/test_context.hpp"
#include "quant/quant.hpp"

namespace ymlopt::test {
namespace {

using LD = long double;
using quant::QuantizedWeight;
using quant::QWeight;

/// IEEE float operations written as "exact in long double, then rounded to float".
float fl(LD v) { return static_cast<float>(v); }

std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

/// Reference codes/scales/zeros of one row group, computed from the stated rule.
struct RefGroup {
  std::vector<int> q;
  float scale = 0, zero = 0;
};

RefGroup ref_sym8(const float* x, std::int64_t len) {
  LD amax = 0;
  for (std::int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(LD(x[i])));
  RefGroup r;
  r.scale = fl(amax / 127);
  const float id = r.scale != 0 ? fl(1.0L / r.scale) : 0.0f;
  for (std::int64_t i = 0; i < len; ++i) r.q.push_back(static_cast<int>(std::roundl(fl(LD(x[i]) * id))));
  return r;
}

RefGroup ref_sym4(const float* x, std::int64_t len) {
  LD amax = 0, mx = 0;
  for (std::int64_t i = 0; i < len; ++i)
    if (std::fabs(LD(x[i])) > amax) amax = std::fabs(LD(x[i])), mx = x[i];
  RefGroup r;
  r.scale = fl(mx / -8);
  r.zero = 8;
  const float id = r.scale != 0 ? fl(1.0L / r.scale) : 0.0f;
  for (std::int64_t i = 0; i < len; ++i)
    r.q.push_back(std::min(15, static_cast<int>(std::truncl(fl(LD(fl(LD(x[i]) * id)) + 8.5L)))));
  return r;
}

RefGroup ref_asym(const float* x, std::int64_t len, int qmax) {
  LD lo = x[0], hi = x[0];
  for (std::int64_t i = 0; i < len; ++i) lo = std::min(lo, LD(x[i])), hi = std::max(hi, LD(x[i]));
  RefGroup r;
  r.scale = fl(LD(fl(hi - lo)) / qmax);
  if (r.scale == 0) {
    r.scale = lo != 0 ? fl(std::fabs(lo)) : 1.0f;
    r.zero = fl(-lo / r.scale);
    r.q.assign(static_cast<std::size_t>(len), 0);
    return r;
  }
  r.zero = fl(-lo / r.scale);
  const float id = fl(1.0L / r.scale);
  for (std::int64_t i = 0; i < len; ++i)
    r.q.push_back(std::clamp(static_cast<int>(std::roundl(fl(LD(fl(LD(x[i]) - lo)) * id))), 0, qmax));
  return r;
}

int code_of(const QuantizedWeight& w, std::int64_t r, std::int64_t c) {
  if (w.bits == 8) return w.q[static_cast<std::size_t>(r * w.q_ld + c)];
  const auto b = static_cast<std::uint8_t>(w.q[static_cast<std::size_t>(r * w.q_ld + c / 2)]);
  return (c & 1) ? b >> 4 : b & 15;
}

float scale_of(const QuantizedWeight& w, std::int64_t r, std::int64_t g) {
  const std::size_t i = static_cast<std::size_t>(r * w.groups() + g);
  return w.scale_dtype == DType::f16 ? float(half::f16_bits_to_double(w.scale_f16[i])) : w.scale_f32[i];
}

struct Scheme {
  int bits;
  std::int64_t group;
  bool symmetric;
  bool f16;  // llama.cpp q8_0 / q4_0
  std::string name;
  bool f16_store;  // quantize_int8 / quantize_group with DType::f16 (codes against the stored values)
};

QuantizedWeight run_scheme(const Scheme& s, const float* w, std::int64_t n, std::int64_t k, std::int64_t ldw) {
  if (s.f16_store)
    return s.group == 0 ? quant::quantize_int8(w, n, k, ldw, DType::f16)
                        : quant::quantize_group(w, n, k, ldw, s.bits, s.group, s.symmetric, DType::f16);
  if (s.f16) return s.bits == 8 ? quant::quantize_q8_0(w, n, k, ldw) : quant::quantize_q4_0(w, n, k, ldw);
  if (s.group == 0) return quant::quantize_int8(w, n, k, ldw);
  return quant::quantize_group(w, n, k, ldw, s.bits, s.group, s.symmetric);
}

std::vector<Scheme> all_schemes() {
  std::vector<Scheme> v = {
      {8, 0, true, false, "int8", false}, {8, 32, true, true, "q8_0", false}, {4, 32, true, true, "q4_0", false}};
  for (int bits : {8, 4})
    for (std::int64_t g : {32, 64, 128})
      for (bool sym : {true, false}) {
        std::string name = "bits ";  // appended piecewise: GCC 12 reports a false -Wrestrict on "g" + to_string(..)
        name += std::to_string(bits);
        name += sym ? " symmetric group " : " asymmetric group ";
        name += std::to_string(g);
        v.push_back({bits, g, sym, false, name, false});
      }
  return v;
}

/// The schemes with f16 storage of scales and zeros (codes against the stored values).
std::vector<Scheme> f16_schemes() {
  std::vector<Scheme> v = {{8, 0, true, false, "int8 f16", true}};
  for (int bits : {8, 4})
    for (std::int64_t g : {32, 64, 128})
      for (bool sym : {true, false}) {
        std::string name = "f16 bits ";
        name += std::to_string(bits);
        name += sym ? " symmetric group " : " asymmetric group ";
        name += std::to_string(g);
        v.push_back({bits, g, sym, false, name, true});
      }
  return v;
}

std::vector<Scheme> every_scheme() {
  std::vector<Scheme> v = all_schemes();
  for (const Scheme& s : f16_schemes()) v.push_back(s);
  return v;
}

float f16_round(LD v) { return float(half::f16_bits_to_double(half::f16_bits_from_double(double(v)))); }

// ---- quantizers -------------------------------------------------------------------

TEST(QuantizeTest, CodesScalesAndZerosEqualTheRuleInLongDouble) {
  const std::int64_t n = 5, k = 256, ldw = 260;
  std::vector<float> w = random_vec(static_cast<std::size_t>(n * ldw), 7);
  for (std::int64_t c = 0; c < 32; ++c) w[static_cast<std::size_t>(2 * ldw + c)] = 0.5f;   // a constant group
  for (std::int64_t c = 32; c < 64; ++c) w[static_cast<std::size_t>(3 * ldw + c)] = 0.0f;  // a zero group
  for (const Scheme& s : all_schemes()) {
    SCOPED_TRACE(s.name);
    const QuantizedWeight q = run_scheme(s, w.data(), n, k, ldw);
    ASSERT_EQ(q.groups(), s.group ? k / s.group : 1);
    const std::int64_t gs = s.group ? s.group : k;
    int bad = 0;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t g = 0; g < q.groups(); ++g) {
        const float* x = w.data() + r * ldw + g * gs;
        const RefGroup ref =
            s.symmetric ? (s.bits == 8 ? ref_sym8(x, gs) : ref_sym4(x, gs)) : ref_asym(x, gs, s.bits == 8 ? 255 : 15);
        const float want_scale =
            s.f16 ? float(half::f16_bits_to_double(half::f16_bits_from_double(ref.scale))) : ref.scale;
        EXPECT_EQ(scale_of(q, r, g), want_scale) << "row " << r << " group " << g;
        if (!s.symmetric) {
          // int8 stores zero - 128 and q - 128 (see qlinear.hpp)
          EXPECT_EQ(q.zero[static_cast<std::size_t>(r * q.groups() + g)],
                    s.bits == 8 ? fl(LD(ref.zero) - 128) : ref.zero);
        } else {
          EXPECT_TRUE(q.zero.empty());
        }
        for (std::int64_t c = 0; c < gs; ++c) {
          const int want = ref.q[static_cast<std::size_t>(c)] - (s.bits == 8 && !s.symmetric ? 128 : 0);
          if (code_of(q, r, g * gs + c) != want && bad++ < 5)
            ADD_FAILURE() << "code (" << r << ", " << g * gs + c << "): got " << code_of(q, r, g * gs + c)
                          << " expected " << want;
        }
        if (s.bits == 8) {  // cached code sums
          long sum = 0;
          for (std::int64_t c = 0; c < gs; ++c) sum += code_of(q, r, g * gs + c);
          EXPECT_EQ(q.code_sum[static_cast<std::size_t>(r * q.groups() + g)], sum);
        }
      }
  }
}

TEST(QuantizeTest, RoundTripErrorIsAtMostHalfAStep) {
  const std::int64_t n = 6, k = 384;
  const std::vector<float> w = random_vec(static_cast<std::size_t>(n * k), 11, 0.05f);
  for (const Scheme& s : all_schemes()) {
    SCOPED_TRACE(s.name);
    const QuantizedWeight q = run_scheme(s, w.data(), n, k, k);
    std::vector<float> deq(static_cast<std::size_t>(n * k));
    quant::dequantize(q.view(), deq.data(), k);
    const std::int64_t gs = s.group ? s.group : k;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) {
        const std::int64_t g = c / gs;
        const float x = w[static_cast<std::size_t>(r * k + c)];
        // the step the codes were computed with (f32, before any f16 rounding of the stored scale)
        const RefGroup ref = s.symmetric
                                 ? (s.bits == 8 ? ref_sym8(&w[static_cast<std::size_t>(r * k + g * gs)], gs)
                                                : ref_sym4(&w[static_cast<std::size_t>(r * k + g * gs)], gs))
                                 : ref_asym(&w[static_cast<std::size_t>(r * k + g * gs)], gs, s.bits == 8 ? 255 : 15);
        const LD step = std::fabs(LD(ref.scale));
        const int code = ref.q[static_cast<std::size_t>(c - g * gs)];
        // q4 symmetric: code 15 may be clamped from 16 (x just below -max): one full step
        LD bound = (s.bits == 4 && s.symmetric && code == 15) ? step : step / 2;
        bound += 1e-6L * std::fabs(LD(x)) + 1e-6L * step * 256;
        if (s.f16) bound += std::fabs(LD(code - ref.zero)) * std::fabs(std::fabs(LD(scale_of(q, r, g))) - step);
        ASSERT_LE(std::fabs(LD(deq[static_cast<std::size_t>(r * k + c)]) - x), bound) << "(" << r << ", " << c << ")";
      }
  }
}

/// f16 storage: the stored scale is the f32 rule's scale rounded to f16; the stored
/// zero is f16(-lo / scale16) (int8: minus 128); every code is a nearest point of the
/// grid (code - zero) * scale16 over the allowed code range, in long double.
TEST(QuantizeTest, F16StorageCodesAreNearestOnTheStoredGrid) {
  const std::int64_t n = 6, k = 256, ldw = 260;
  std::vector<float> w = random_vec(static_cast<std::size_t>(n * ldw), 21, 0.05f);
  for (std::int64_t c = 0; c < 32; ++c) w[static_cast<std::size_t>(2 * ldw + c)] = 0.5f;   // a constant group
  for (std::int64_t c = 32; c < 64; ++c) w[static_cast<std::size_t>(3 * ldw + c)] = 0.0f;  // a zero group
  for (std::int64_t c = 64; c < 128; ++c) w[static_cast<std::size_t>(4 * ldw + c)] += 0.3f;  // all positive
  for (const Scheme& s : f16_schemes()) {
    SCOPED_TRACE(s.name);
    const QuantizedWeight q = run_scheme(s, w.data(), n, k, ldw);
    ASSERT_EQ(q.scale_dtype, DType::f16);
    ASSERT_TRUE(q.scale_f32.empty());
    const std::int64_t gs = s.group ? s.group : k;
    const int qmax = s.bits == 8 ? 255 : 15;
    int bad = 0;
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t g = 0; g < q.groups(); ++g) {
        const float* x = w.data() + r * ldw + g * gs;
        const RefGroup ref =
            s.symmetric ? (s.bits == 8 ? ref_sym8(x, gs) : ref_sym4(x, gs)) : ref_asym(x, gs, qmax);
        const LD s16 = scale_of(q, r, g);
        ASSERT_EQ(float(s16), f16_round(ref.scale)) << "row " << r << " group " << g;
        LD zu = s.symmetric ? (s.bits == 4 ? 8 : 0) : 0;  // the zero point in the unsigned code space
        int lo_code = s.symmetric ? (s.bits == 8 ? -127 : 0) : 0, hi_code = s.symmetric ? (s.bits == 8 ? 127 : 15) : qmax;
        if (!s.symmetric) {
          LD lo = x[0];
          for (std::int64_t c = 0; c < gs; ++c) lo = std::min(lo, LD(x[c]));
          const LD shift = s.bits == 8 ? 128 : 0;
          const float stored = q.zero[static_cast<std::size_t>(r * q.groups() + g)];
          ASSERT_EQ(float(half::f16_bits_to_double(half::f16_bits_from_double(stored))), stored) << "zero not f16";
          // f16(-lo / s16 - shift), up to one f16 ulp (the float quotient may round the other way)
          const LD want = -lo / s16 - shift;
          EXPECT_LE(std::fabs(LD(stored) - want), std::max(std::fabs(want), 1.0L) * 0x1p-10L) << "zero " << r << "," << g;
          zu = LD(stored) + shift;
        }
        for (std::int64_t c = 0; c < gs; ++c) {
          int code = code_of(q, r, g * gs + c);
          if (s.bits == 8 && !s.symmetric) code += 128;
          ASSERT_TRUE(code >= lo_code && code <= hi_code) << code;
          const LD err = std::fabs(LD(x[c]) - (code - zu) * s16);
          LD best = err;
          for (int t = lo_code; t <= hi_code; ++t) best = std::min(best, std::fabs(LD(x[c]) - (t - zu) * s16));
          if (err > best + 1e-6L * std::fabs(s16) + 1e-30L && bad++ < 5)
            ADD_FAILURE() << "code (" << r << ", " << g * gs + c << ") = " << code << ": error " << double(err)
                          << ", nearest grid point " << double(best);
        }
        if (s.bits == 8) {
          long sum = 0;
          for (std::int64_t c = 0; c < gs; ++c) sum += code_of(q, r, g * gs + c);
          EXPECT_EQ(q.code_sum[static_cast<std::size_t>(r * q.groups() + g)], sum);
        }
      }
  }
}

TEST(QuantizeTest, F16ScaleOverflowIsAClearError) {
  std::vector<float> w(64, 1e6f);
  w[1] = -2e6f;
  try {
    quant::quantize_group(w.data(), 1, 64, 64, 4, 32, true, DType::f16);
    FAIL() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit f16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quant::quantize_group(w.data(), 1, 64, 64, 4, 32, true, DType::bf16), KernelError);
  // a group far from 0 with a range below f16's resolution: the zero point cannot be stored
  std::vector<float> far(32, 1000.0f);
  far[3] = 1000.0001f;
  EXPECT_THROW(quant::quantize_group(far.data(), 1, 32, 32, 4, 32, false, DType::f16), KernelError);
}

TEST(QuantizeTest, LlamaCppBlockExampleByHand) {
  // one block of 32: x_j = (j - 16) / 4, i.e. -4, -3.75, ..., 3.75
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[static_cast<std::size_t>(j)] = float(j - 16) / 4;
  // Q8_0: d = 4/127 (f16: 1032 * 2^-15 = 0.031494140625), q = roundf(x * 31.75)
  const QuantizedWeight q8 = quant::quantize_q8_0(x.data(), 1, 32, 32);
  EXPECT_EQ(half::f16_bits_to_double(q8.scale_f16[0]), 0.031494140625);
  EXPECT_EQ(q8.q[0], -127);  // -4 * 31.75
  EXPECT_EQ(q8.q[1], -119);  // -3.75 * 31.75 = -119.0625
  EXPECT_EQ(q8.q[14], -16);  // -0.5 * 31.75 = -15.875
  EXPECT_EQ(q8.q[15], -8);   // -0.25 * 31.75 = -7.9375
  EXPECT_EQ(q8.q[16], 0);
  EXPECT_EQ(q8.q[18], 16);   // 0.5 * 31.75 = 15.875
  EXPECT_EQ(q8.q[22], 48);   // 1.5 * 31.75 = 47.625
  EXPECT_EQ(q8.q[31], 119);  // 3.75 * 31.75 = 119.0625
  // Q4_0: the largest magnitude is -4, d = -4 / -8 = 0.5, q = min(15, (int)(2x + 8.5)) = min(15, (j + 1) / 2)
  const QuantizedWeight q4 = quant::quantize_q4_0(x.data(), 1, 32, 32);
  EXPECT_EQ(half::f16_bits_to_double(q4.scale_f16[0]), 0.5);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(code_of(q4, 0, j), std::min(15, (j + 1) / 2)) << "j = " << j;
  // low nibble first: byte 1 holds elements 2 (code 1) and 3 (code 2)
  EXPECT_EQ(static_cast<std::uint8_t>(q4.q[1]), 0x21);
}

TEST(QuantizeTest, BadArgumentsAreClearErrors) {
  std::vector<float> w(64 * 2, 1.0f);
  auto msg = [&](auto&& f) {
    try {
      f();
    } catch (const KernelError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { quant::quantize_group(w.data(), 2, 48, 64, 4, 32, true); }).find("not a multiple of group 32"),
            std::string::npos);
  EXPECT_NE(msg([&] { quant::quantize_group(w.data(), 2, 64, 64, 3, 32, true); }).find("expected 4 or 8"),
            std::string::npos);
  EXPECT_NE(msg([&] { quant::quantize_group(w.data(), 2, 64, 64, 8, 48, true); }).find("expected 32, 64 or 128"),
            std::string::npos);
  EXPECT_NE(msg([&] { quant::quantize_int8(w.data(), 2, 64, 32); }).find("ldw 32 < k 64"), std::string::npos);
}

// ---- quant::linear ----------------------------------------------------------------

/// The per-token quantization rule of quant::linear, in long double with f32 rounding.
void ref_act_quant(const float* x, std::int64_t k, std::vector<int>& xq, LD& a) {
  LD amax = 0;
  for (std::int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(LD(x[c])));
  xq.assign(static_cast<std::size_t>(k), 0);
  a = 0;
  if (amax == 0) return;
  const float inv = fl(127.0L / amax);
  for (std::int64_t c = 0; c < k; ++c)
    xq[static_cast<std::size_t>(c)] = int(std::clamp(std::nearbyintl(fl(LD(x[c]) * inv)), -127.0L, 127.0L));
  a = fl(amax / 127);
}

/// Copies a quantized weight into storage with q_ld, scale_ld and zero_ld larger than needed.
struct Padded {
  std::vector<std::int8_t> q;
  std::vector<float> s32;
  std::vector<std::uint16_t> s16;
  std::vector<float> z;
  std::vector<std::uint16_t> z16;  // f16 scales: the zeros are stored f16 as well
  QWeight view;
};
Padded pad_weight(const QuantizedWeight& src, std::int64_t qpad, std::int64_t spad) {
  Padded p;
  const QWeight v = src.view();
  const std::int64_t G = src.groups();
  p.q.assign(static_cast<std::size_t>(src.n * (src.q_ld + qpad)), std::int8_t(0x5a));
  for (std::int64_t r = 0; r < src.n; ++r)
    std::copy_n(src.q.data() + r * src.q_ld, src.q_ld, p.q.data() + r * (src.q_ld + qpad));
  p.view = v;
  p.view.q = p.q.data();
  p.view.q_ld = src.q_ld + qpad;
  p.view.code_sum = nullptr;  // exercise the per-call code sums
  p.view.scale_ld = p.view.zero_ld = G + spad;
  if (src.scale_dtype == DType::f16) {
    p.s16.assign(static_cast<std::size_t>(src.n * (G + spad)), 0x7c00);
    for (std::int64_t r = 0; r < src.n; ++r)
      std::copy_n(src.scale_f16.data() + r * G, G, p.s16.data() + r * (G + spad));
    p.view.scale = p.s16.data();
  } else {
    p.s32.assign(static_cast<std::size_t>(src.n * (G + spad)), 1e30f);
    for (std::int64_t r = 0; r < src.n; ++r)
      std::copy_n(src.scale_f32.data() + r * G, G, p.s32.data() + r * (G + spad));
    p.view.scale = p.s32.data();
  }
  if (!src.zero.empty() && src.scale_dtype == DType::f16) {
    p.z16.assign(static_cast<std::size_t>(src.n * (G + spad)), 0x7c00);
    for (std::int64_t r = 0; r < src.n; ++r)
      for (std::int64_t g = 0; g < G; ++g)
        p.z16[static_cast<std::size_t>(r * (G + spad) + g)] =
            half::f16_bits_from_double(src.zero[static_cast<std::size_t>(r * G + g)]);
    p.view.zero = p.z16.data();
    p.view.zero_dtype = DType::f16;
  } else if (!src.zero.empty()) {
    p.z.assign(static_cast<std::size_t>(src.n * (G + spad)), 1e30f);
    for (std::int64_t r = 0; r < src.n; ++r) std::copy_n(src.zero.data() + r * G, G, p.z.data() + r * (G + spad));
    p.view.zero = p.z.data();
  }
  return p;
}

struct Case {
  std::int64_t m, k, n;
};

/// Runs quant::linear on strided x/y and checks it against (1) the long-double
/// product of the quantized activations with the dequantized weight and (2) the f32
/// product within the quantization error; returns y (dense [m, n]).
std::vector<float> check_linear(const Scheme& s, const Case& c, quant::Isa isa, bool padded, double f32_tol) {
  const std::int64_t ldx = c.k + 3, ldy = c.n + 5;
  const std::vector<float> x = random_vec(static_cast<std::size_t>(c.m * ldx), std::uint32_t(c.m * 131 + c.k));
  const std::vector<float> w = random_vec(static_cast<std::size_t>(c.n * c.k), std::uint32_t(c.n * 17 + c.k), 0.05f);
  const QuantizedWeight q = run_scheme(s, w.data(), c.n, c.k, c.k);
  Padded p = pad_weight(q, 7, 2);
  const QWeight view = padded ? p.view : q.view();
  std::vector<float> deq(static_cast<std::size_t>(c.n * c.k));
  quant::dequantize(q.view(), deq.data(), c.k);
  std::vector<float> y(static_cast<std::size_t>(c.m * ldy), 77.0f);
  quant::linear(x.data(), c.m, ldx, view, y.data(), ldy, isa);
  std::vector<float> out(static_cast<std::size_t>(c.m * c.n));
  LD err2 = 0, ref2 = 0;
  int bad = 0;
  // symmetric group 32 (Q8_0 / Q4_0): activations quantized per block of 32, else per token
  const std::int64_t span = s.group == 32 && s.symmetric ? 32 : c.k;
  for (std::int64_t i = 0; i < c.m; ++i) {
    std::vector<int> xq(static_cast<std::size_t>(c.k));
    std::vector<LD> a(static_cast<std::size_t>(c.k));  // the scale of each activation's span
    for (std::int64_t b = 0; b < c.k; b += span) {
      std::vector<int> part;
      LD as;
      ref_act_quant(x.data() + i * ldx + b, span, part, as);
      std::copy(part.begin(), part.end(), xq.begin() + b);
      std::fill(a.begin() + b, a.begin() + b + span, as);
    }
    for (std::int64_t j = 0; j < c.n; ++j) {
      LD ref = 0, s_abs = 0, s_f = 0;
      for (std::int64_t kk = 0; kk < c.k; ++kk) {
        const LD d = deq[static_cast<std::size_t>(j * c.k + kk)], ak = a[static_cast<std::size_t>(kk)];
        ref += ak * xq[static_cast<std::size_t>(kk)] * d;
        s_abs += std::fabs(ak * xq[static_cast<std::size_t>(kk)] * d);
        s_f += LD(x[static_cast<std::size_t>(i * ldx + kk)]) * LD(w[static_cast<std::size_t>(j * c.k + kk)]);
      }
      const LD got = y[static_cast<std::size_t>(i * ldy + j)];
      out[static_cast<std::size_t>(i * c.n + j)] = float(got);
      if (std::fabs(got - ref) > 2e-5L * s_abs + 1e-30L && bad++ < 5)
        ADD_FAILURE() << "y(" << i << ", " << j << ") = " << double(got) << ", reference " << double(ref);
      err2 += (got - s_f) * (got - s_f);
      ref2 += s_f * s_f;
    }
    for (std::int64_t j = c.n; j < ldy; ++j) EXPECT_EQ(y[static_cast<std::size_t>(i * ldy + j)], 77.0f) << "padding";
  }
  EXPECT_LE(std::sqrt(double(err2 / std::max(ref2, 1e-30L))), f32_tol) << "relative error vs the f32 product";
  return out;
}

std::vector<Case> cases_for(const Scheme& s) {
  // (16 rows and more: symmetric weights take the AVX-512 panel kernel)
  if (s.group == 0)
    return {{1, 64, 8}, {5, 100, 7}, {7, 130, 13}, {4, 64, 4}, {9, 256, 33}, {1, 770, 9}, {17, 100, 37}, {16, 130, 50}};
  if (s.group == 32) return {{1, 96, 8}, {6, 160, 7}, {9, 256, 33}, {4, 32, 3}, {13, 224, 70}};
  if (s.group == 64) return {{1, 64, 5}, {7, 192, 13}, {8, 320, 6}};
  return {{1, 128, 9}, {5, 384, 11}, {9, 256, 33}};
}

double tol_for(const Scheme& s) { return s.bits == 8 ? 0.03 : 0.2; }

TEST(QLinearTest, MatchesLongDoubleReferenceOnEveryScheme) {
  for (const Scheme& s : every_scheme())
    for (const Case& c : cases_for(s))
      for (bool padded : {false, true}) {
        SCOPED_TRACE(s.name + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) +
                     (padded ? " padded" : ""));
        check_linear(s, c, quant::Isa::best, padded, tol_for(s));
      }
}

// Weight-only (activations f32): y = x · dequant(W)ᵀ to f32 GEMM rounding, on
// strided x and y (padding untouched) and on padded weight views, with blocks of
// rows (k = 2048: 16 rows per block, so n = 70 takes five).
TEST(QLinearTest, WeightOnlyEqualsTheDequantizedProductOnEveryScheme) {
  for (const Scheme& s : every_scheme()) {
    std::vector<Case> cases = cases_for(s);
    cases.push_back({3, 2048, 70});
    for (const Case& c : cases)
      for (bool padded : {false, true}) {
        SCOPED_TRACE(s.name + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) +
                     (padded ? " padded" : ""));
        const std::int64_t ldx = c.k + 3, ldy = c.n + 5;
        const std::vector<float> x = random_vec(static_cast<std::size_t>(c.m * ldx), std::uint32_t(c.m * 7 + c.k));
        const std::vector<float> w = random_vec(static_cast<std::size_t>(c.n * c.k), std::uint32_t(c.n * 3 + c.k), 0.05f);
        const QuantizedWeight q = run_scheme(s, w.data(), c.n, c.k, c.k);
        Padded p = pad_weight(q, 7, 2);
        std::vector<float> deq(static_cast<std::size_t>(c.n * c.k));
        quant::dequantize(q.view(), deq.data(), c.k);
        std::vector<float> y(static_cast<std::size_t>(c.m * ldy), 77.0f);
        quant::linear_weight_only(x.data(), c.m, ldx, padded ? p.view : q.view(), y.data(), ldy);
        int bad = 0;
        for (std::int64_t i = 0; i < c.m; ++i) {
          for (std::int64_t j = 0; j < c.n; ++j) {
            LD ref = 0, mag = 0;
            for (std::int64_t kk = 0; kk < c.k; ++kk) {
              const LD t = LD(x[static_cast<std::size_t>(i * ldx + kk)]) * deq[static_cast<std::size_t>(j * c.k + kk)];
              ref += t, mag += std::fabs(t);
            }
            const LD got = y[static_cast<std::size_t>(i * ldy + j)];
            if (std::fabs(got - ref) > 1e-5L * mag + 1e-30L && bad++ < 5)
              ADD_FAILURE() << "y(" << i << ", " << j << ") = " << double(got) << ", reference " << double(ref);
          }
          for (std::int64_t j = c.n; j < ldy; ++j) EXPECT_EQ(y[static_cast<std::size_t>(i * ldy + j)], 77.0f) << "padding";
        }
      }
  }
  std::vector<float> x(4, 1.0f), y(2, 0.0f);
  QWeight bad;
  bad.bits = 3;
  EXPECT_THROW(quant::linear_weight_only(x.data(), 1, 4, bad, y.data(), 2), KernelError);
}

/// Per-channel int4 and asymmetric int8 weights assembled by hand (linear accepts any QWeight).
TEST(QLinearTest, HandBuiltPerChannelInt4AndAsymmetricInt8) {
  const std::int64_t m = 6, k = 200, n = 11;
  const std::vector<float> x = random_vec(static_cast<std::size_t>(m * k), 3);
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> c4(0, 15), c8(-128, 127);
  for (bool asym : {false, true})
    for (int bits : {4, 8}) {
      SCOPED_TRACE("bits " + std::to_string(bits) + (asym ? " asym" : " sym"));
      const std::int64_t row = bits == 8 ? k : k / 2;
      std::vector<std::int8_t> q(static_cast<std::size_t>(n * row));
      for (auto& b : q) b = bits == 8 ? std::int8_t(c8(gen)) : std::int8_t(c4(gen) | (c4(gen) << 4));
      std::vector<float> s(static_cast<std::size_t>(n)), z(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) {
        s[static_cast<std::size_t>(j)] = 0.01f * float(j + 1);
        z[static_cast<std::size_t>(j)] = bits == 8 ? -3.25f + float(j) : 7.5f - 0.25f * float(j);
      }
      QWeight w;
      w.bits = bits;
      w.q = q.data();
      w.q_ld = row;
      w.n = n;
      w.k = k;
      w.scale = s.data();
      w.scale_ld = 1;
      if (asym) {
        w.zero = z.data();
        w.zero_ld = 1;
      }
      std::vector<float> deq(static_cast<std::size_t>(n * k)), y(static_cast<std::size_t>(m * n)), y2(y.size());
      quant::dequantize(w, deq.data(), k);
      quant::linear(x.data(), m, k, w, y.data(), n);
      quant::linear(x.data(), m, k, w, y2.data(), n, quant::Isa::scalar);
      for (std::int64_t i = 0; i < m; ++i) {
        std::vector<int> xq;
        LD a;
        ref_act_quant(x.data() + i * k, k, xq, a);
        for (std::int64_t j = 0; j < n; ++j) {
          LD sq = 0, sa = 0;
          for (std::int64_t c = 0; c < k; ++c) {
            sq += xq[static_cast<std::size_t>(c)] * LD(deq[static_cast<std::size_t>(j * k + c)]);
            sa += std::fabs(xq[static_cast<std::size_t>(c)] * LD(deq[static_cast<std::size_t>(j * k + c)]));
          }
          EXPECT_NEAR(double(y[static_cast<std::size_t>(i * n + j)]), double(a * sq), double(2e-5L * a * sa))
              << "(" << i << ", " << j << ")";
          EXPECT_EQ(y[static_cast<std::size_t>(i * n + j)], y2[static_cast<std::size_t>(i * n + j)]);
        }
      }
    }
}

/// Groups of 256 (4 chunks of 64 per scale) are not a quantizer preset but a valid QWeight.
TEST(QLinearTest, HandBuiltGroupOf256) {
  const std::int64_t m = 5, k = 512, n = 6, g = 256, G = k / g;
  const std::vector<float> x = random_vec(static_cast<std::size_t>(m * k), 8);
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> c4(0, 15), c8(-127, 127);
  for (int bits : {4, 8}) {
    SCOPED_TRACE("bits " + std::to_string(bits));
    const std::int64_t row = bits == 8 ? k : k / 2;
    std::vector<std::int8_t> q(static_cast<std::size_t>(n * row));
    for (auto& b : q) b = bits == 8 ? std::int8_t(c8(gen)) : std::int8_t(c4(gen) | (c4(gen) << 4));
    std::vector<float> s(static_cast<std::size_t>(n * G));
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = 0.003f * float(i + 1);
    QWeight w;
    w.bits = bits;
    w.q = q.data();
    w.q_ld = row;
    w.n = n;
    w.k = k;
    w.group = g;
    w.scale = s.data();
    w.scale_ld = G;
    std::vector<float> deq(static_cast<std::size_t>(n * k)), y(static_cast<std::size_t>(m * n)), y2(y.size());
    quant::dequantize(w, deq.data(), k);
    quant::linear(x.data(), m, k, w, y.data(), n);
    quant::linear(x.data(), m, k, w, y2.data(), n, quant::Isa::scalar);
    for (std::int64_t i = 0; i < m; ++i) {
      std::vector<int> xq;
      LD a;
      ref_act_quant(x.data() + i * k, k, xq, a);
      for (std::int64_t j = 0; j < n; ++j) {
        LD sq = 0, sa = 0;
        for (std::int64_t c = 0; c < k; ++c) {
          sq += xq[static_cast<std::size_t>(c)] * LD(deq[static_cast<std::size_t>(j * k + c)]);
          sa += std::fabs(xq[static_cast<std::size_t>(c)] * LD(deq[static_cast<std::size_t>(j * k + c)]));
        }
        EXPECT_NEAR(double(y[static_cast<std::size_t>(i * n + j)]), double(a * sq), double(2e-5L * a * sa));
        EXPECT_EQ(y[static_cast<std::size_t>(i * n + j)], y2[static_cast<std::size_t>(i * n + j)]);
      }
    }
  }
}

/// Every scheme and shape (tails, groups of 32 to 128, edge tiles) on a vector path
/// gives the scalar path's y bit for bit.
void expect_bit_identical_to_scalar(quant::Isa isa) {
  for (const Scheme& s : every_scheme())
    for (const Case& c : cases_for(s)) {
      SCOPED_TRACE(s.name + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + " n=" + std::to_string(c.n));
      const std::vector<float> fast = check_linear(s, c, isa, true, tol_for(s));
      const std::vector<float> slow = check_linear(s, c, quant::Isa::scalar, true, tol_for(s));
      for (std::size_t i = 0; i < fast.size(); ++i) ASSERT_EQ(fast[i], slow[i]) << "element " << i;
    }
}

TEST(QLinearTest, VnniPathIsBitIdenticalToScalarPath) {
  if (!quant::cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  expect_bit_identical_to_scalar(quant::Isa::avx512_vnni);
}

TEST(QLinearTest, Avx2PathIsBitIdenticalToScalarPath) {
  if (!quant::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  expect_bit_identical_to_scalar(quant::Isa::avx2);
}

/// int8 codes at both ends (-128, 127) against activation codes at +-127: the
/// largest int16 pairs the AVX2 path forms (2 * 128 * 127) must not saturate.
TEST(QLinearTest, ExtremeCodesDoNotSaturate) {
  const std::int64_t m = 17, k = 192, n = 7;  // 17 rows: the panel kernels as well
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i / 2) % 3 == 0 ? -1.0f : 1.0f;  // codes +-127
  std::vector<std::int8_t> q(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = (i / 2) % 3 == 0 ? std::int8_t(-128) : std::int8_t(127);
  std::vector<float> s(static_cast<std::size_t>(n * (k / 32)), 0.5f), z(s.size(), 0.25f);
  for (std::int64_t group : {std::int64_t(0), std::int64_t(32), std::int64_t(64)})
    for (bool asym : {false, true}) {
      SCOPED_TRACE("group " + std::to_string(group) + (asym ? " asymmetric" : ""));
      QWeight w;
      w.bits = 8;
      w.q = q.data();
      w.q_ld = k;
      w.n = n;
      w.k = k;
      w.group = group;
      w.scale = s.data();
      w.scale_ld = group ? k / group : 1;
      if (asym) {
        w.zero = z.data();
        w.zero_ld = w.scale_ld;
      }
      std::vector<float> deq(static_cast<std::size_t>(n * k)), y(static_cast<std::size_t>(m * n)), y2(y.size());
      quant::dequantize(w, deq.data(), k);
      quant::linear(x.data(), m, k, w, y.data(), n);
      quant::linear(x.data(), m, k, w, y2.data(), n, quant::Isa::scalar);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          LD ref = 0;
          for (std::int64_t c = 0; c < k; ++c)
            ref += LD(x[static_cast<std::size_t>(i * k + c)]) * LD(deq[static_cast<std::size_t>(j * k + c)]);
          const float got = y[static_cast<std::size_t>(i * n + j)];
          EXPECT_NEAR(double(got), double(ref), 1e-5 * std::fabs(double(ref)) + 1e-3) << "(" << i << ", " << j << ")";
          EXPECT_EQ(got, y2[static_cast<std::size_t>(i * n + j)]);
        }
    }
}

TEST(QLinearTest, RowSlicesGiveTheSameColumns) {
  const std::int64_t m = 9, k = 256, n = 37;
  const std::vector<float> x = random_vec(static_cast<std::size_t>(m * k), 21);
  const std::vector<float> w = random_vec(static_cast<std::size_t>(n * k), 22, 0.05f);
  for (const Scheme& s : all_schemes()) {
    SCOPED_TRACE(s.name);
    const QuantizedWeight q = run_scheme(s, w.data(), n, k, k);
    std::vector<float> full(static_cast<std::size_t>(m * n)), part(full.size(), -1.0f);
    quant::linear(x.data(), m, k, q.view(), full.data(), n);
    for (auto [n0, n1] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 22}, {22, 37}})
      quant::linear(x.data(), m, k, q.view().rows(n0, n1), part.data() + n0, n);
    for (std::size_t i = 0; i < full.size(); ++i) ASSERT_EQ(part[i], full[i]) << "element " << i;
  }
  EXPECT_THROW(quant::quantize_int8(w.data(), n, k, k).view().rows(3, 38), KernelError);
}

// Named weights (content ids): the AVX-512 panel kernels pack them on the
// second use and reuse the panels after, with the scalar path's y bit for bit
// each time; row slices of a named weight are not taken for the whole.
TEST(QLinearTest, KeptPanelsGiveTheSameBits) {
  if (!quant::cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const std::int64_t k = 384, n = 70;
  const std::vector<float> wf = random_vec(static_cast<std::size_t>(n * k), 32, 0.05f);
  std::uint64_t id = (std::uint64_t(0xfff40000) << 32) + 1;  // an epoch no run of this process reaches
  // m = 1: one token (decode) on the q8_0/q4_0 panels; m >= 16: the per-channel panels as well
  for (const std::int64_t m : {std::int64_t{1}, std::int64_t{20}}) {
    for (const Scheme& s : all_schemes()) {
      SCOPED_TRACE(s.name + ", m " + std::to_string(m));
      const std::vector<float> x = random_vec(static_cast<std::size_t>(m * k), 31);
      const QuantizedWeight q = run_scheme(s, wf.data(), n, k, k);
      QWeight w = q.view();
      w.q_id = id++;
      w.scale_id = id++;
      std::vector<float> ref(static_cast<std::size_t>(m * n)), y(ref.size());
      quant::linear(x.data(), m, k, w, ref.data(), n, quant::Isa::scalar);
      const ContentCacheStats s0 = quant::panel_cache_stats();
      for (int use = 0; use < 3; ++use) {
        std::fill(y.begin(), y.end(), -1.0f);
        quant::linear(x.data(), m, k, w, y.data(), n, quant::Isa::avx512_vnni);
        for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], ref[i]) << "use " << use << ", element " << i;
      }
      const ContentCacheStats s1 = quant::panel_cache_stats();
      const bool panels = (w.group == 32 && !w.zero) || (w.group == 0 && !w.zero && m >= 16);  // q8_0/q4_0, per channel
      EXPECT_EQ(s1.misses - s0.misses, panels ? 1 : 0);
      EXPECT_EQ(s1.hits - s0.hits, panels ? 1 : 0);
      for (auto [n0, n1] : {std::pair<std::int64_t, std::int64_t>{0, 33}, {33, 70}}) {
        const QWeight part = w.rows(n0, n1);
        EXPECT_EQ(part.q_id, 0u);
        quant::linear(x.data(), m, k, part, y.data() + n0, n, quant::Isa::avx512_vnni);
      }
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], ref[i]) << "row slices, element " << i;
    }
  }
}

// Named activations (x_id): the column blocks of one product quantize x once
// and give the unnamed call's bits; another x under another id is not mixed up.
TEST(QLinearTest, KeptActivationsAreQuantizedOncePerContents) {
  const std::int64_t k = 256, n = 64, m = 24;
  const std::vector<float> wf = random_vec(static_cast<std::size_t>(n * k), 41, 0.05f);
  std::uint64_t id = (std::uint64_t(0xfff50000) << 32) + 1;  // an epoch no run of this process reaches
  for (const Scheme& s : all_schemes()) {
    SCOPED_TRACE(s.name);
    const QuantizedWeight q = run_scheme(s, wf.data(), n, k, k);
    const QWeight w = q.view();
    const bool panels = quant::cpu_has_avx512_vnni() ? (w.group == 32 || w.group == 0) && !w.zero
                                                     : w.group == 32 && !w.zero;  // the paths that prepare PanelActs
    for (int version = 0; version < 2; ++version) {
      const std::vector<float> x = random_vec(static_cast<std::size_t>(m * k), 43 + version);
      std::vector<float> ref(static_cast<std::size_t>(m * n)), y(ref.size(), -1.0f);
      quant::linear(x.data(), m, k, w, ref.data(), n);
      const ContentCacheStats s0 = quant::acts_cache_stats();
      for (auto [n0, n1] : {std::pair<std::int64_t, std::int64_t>{0, 16}, {16, 48}, {48, 64}})
        quant::linear(x.data(), m, k, w.rows(n0, n1), y.data() + n0, n, quant::Isa::best, id);
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], ref[i]) << "version " << version << ", element " << i;
      const ContentCacheStats s1 = quant::acts_cache_stats();
      EXPECT_EQ(s1.misses - s0.misses, panels ? 1 : 0);
      EXPECT_EQ(s1.hits - s0.hits, panels ? 2 : 0);
      ++id;
    }
  }
}

TEST(QLinearTest, ZeroRowsAndBadWeightsAreHandled) {
  const std::int64_t k = 64, n = 4;
  std::vector<float> x(static_cast<std::size_t>(2 * k), 0.0f), y(static_cast<std::size_t>(2 * n), 5.0f);
  for (std::int64_t c = 0; c < k; ++c) x[static_cast<std::size_t>(k + c)] = float(c % 7) - 3;
  const std::vector<float> w = random_vec(static_cast<std::size_t>(n * k), 1);
  const QuantizedWeight q = quant::quantize_q4_0(w.data(), n, k, k);
  quant::linear(x.data(), 2, k, q.view(), y.data(), n);
  for (std::int64_t j = 0; j < n; ++j) EXPECT_EQ(y[static_cast<std::size_t>(j)], 0.0f) << "an all-zero token gives 0";
  QWeight bad = q.view();
  bad.q_ld = 10;
  try {
    quant::linear(x.data(), 2, k, bad, y.data(), n);
    ADD_FAILURE() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("q_ld 10 < 32 bytes per row"), std::string::npos) << e.what();
  }
  bad = q.view();
  bad.group = 48;
  EXPECT_NE(quant::validate(bad).find("expected 0 (per channel), 32 or a multiple of 64"), std::string::npos);
  bad = q.view();
  bad.bits = 2;
  EXPECT_NE(quant::validate(bad).find("expected 4 or 8"), std::string::npos);
}

// ---- components ---------------------------------------------------------------------

class QuantComponentTest : public ::testing::Test {
 protected:
  void SetUp() override { register_quant(reg); }
  TestRegistry reg;
};

TEST_F(QuantComponentTest, Int8LayoutKnEqualsTheApiOnTheTranspose) {
  const std::int64_t n = 6, k = 40;
  Mat<float> wkn(k, n, 2);
  wkn.random(3);
  std::vector<float> wnk(static_cast<std::size_t>(n * k));
  for (std::int64_t r = 0; r < k; ++r)
    for (std::int64_t c = 0; c < n; ++c) wnk[static_cast<std::size_t>(c * k + r)] = wkn(r, c);
  const QuantizedWeight ref = quant::quantize_int8(wnk.data(), n, k, k);
  Mat<std::int8_t> q(n, k, 3, DType::i8);
  Mat<float> s(1, n);
  run(reg, "quant.int8", {wkn.view(), q.view(), s.view()}, {{"layout", "kn"}});
  for (std::int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(s(0, r), ref.scale_f32[static_cast<std::size_t>(r)]);
    for (std::int64_t c = 0; c < k; ++c) ASSERT_EQ(q(r, c), ref.q[static_cast<std::size_t>(r * k + c)]);
    for (std::int64_t c = k; c < q.ld; ++c) ASSERT_EQ(q(r, c), std::int8_t(77)) << "padding";
  }
}

TEST_F(QuantComponentTest, GroupAsymmetricThenDequantRoundTrips) {
  const std::int64_t n = 5, k = 128;
  Mat<float> w(n, k);
  w.random(9, -0.3, 0.7);
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    Mat<std::int8_t> q(n, bits == 8 ? k : k / 2, 0, DType::i8);
    Mat<float> s(n, k / 32), z(n, k / 32), back(n, k);
    const std::map<std::string, std::string> a = {
        {"bits", std::to_string(bits)}, {"group", "32"}, {"symmetric", "false"}};
    run(reg, "quant.group", {w.view(), q.view(), s.view(), z.view()}, a);
    run(reg, "quant.dequant", {q.view(), s.view(), z.view(), back.view()},
        {{"bits", std::to_string(bits)}, {"group", "32"}});
    const QuantizedWeight ref = quant::quantize_group(w.buf.data(), n, k, k, bits, 32, false);
    std::vector<float> deq(static_cast<std::size_t>(n * k));
    quant::dequantize(ref.view(), deq.data(), k);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) {
        ASSERT_EQ(back(r, c), deq[static_cast<std::size_t>(r * k + c)]);
        EXPECT_LE(std::fabs(back(r, c) - w(r, c)), s(r, c / 32) * 0.5001f + 1e-6f);
      }
  }
}

/// quant.group / quant.int8 with f16 scale (and zero) ports write the API's f16 results;
/// quant.dequant reads f16 zeros back to the API's dequantization.
TEST_F(QuantComponentTest, GroupAndInt8WithF16PortsEqualTheApi) {
  const std::int64_t n = 5, k = 128;
  Mat<float> w(n, k);
  w.random(12, -0.3, 0.7);
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    Mat<std::int8_t> q(n, bits == 8 ? k : k / 2, 0, DType::i8);
    Mat<std::uint16_t> s(n, k / 32, 0, DType::f16), z(n, k / 32, 0, DType::f16);
    Mat<float> back(n, k);
    run(reg, "quant.group", {w.view(), q.view(), s.view(), z.view()},
        {{"bits", std::to_string(bits)}, {"group", "32"}, {"symmetric", "false"}});
    const QuantizedWeight ref = quant::quantize_group(w.buf.data(), n, k, k, bits, 32, false, DType::f16);
    EXPECT_EQ(q.buf, ref.q);
    EXPECT_EQ(s.buf, ref.scale_f16);
    for (std::size_t i = 0; i < ref.zero.size(); ++i)
      ASSERT_EQ(half::f16_bits_to_double(z.buf[i]), double(ref.zero[i])) << i;
    run(reg, "quant.dequant", {q.view(), s.view(), z.view(), back.view()}, {{"bits", std::to_string(bits)}, {"group", "32"}});
    std::vector<float> deq(static_cast<std::size_t>(n * k));
    quant::dequantize(ref.view(), deq.data(), k);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) ASSERT_EQ(back(r, c), deq[static_cast<std::size_t>(r * k + c)]);
  }
  Mat<std::int8_t> q8(n, k, 0, DType::i8);
  Mat<std::uint16_t> s8(1, n, 0, DType::f16);
  run(reg, "quant.int8", {w.view(), q8.view(), s8.view()});
  const QuantizedWeight r8 = quant::quantize_int8(w.buf.data(), n, k, k, DType::f16);
  EXPECT_EQ(q8.buf, r8.q);
  EXPECT_EQ(s8.buf, r8.scale_f16);
}

TEST_F(QuantComponentTest, Q4_0AndQ8_0WriteF16Scales) {
  const std::int64_t n = 3, k = 64;
  Mat<float> w(n, k);
  w.random(4);
  Mat<std::int8_t> q4(n, k / 2, 0, DType::i8), q8(n, k, 0, DType::i8);
  Mat<std::uint16_t> s4(n, 2, 0, DType::f16), s8(n, 2, 0, DType::f16);
  run(reg, "quant.q4_0", {w.view(), q4.view(), s4.view()});
  run(reg, "quant.q8_0", {w.view(), q8.view(), s8.view()});
  const QuantizedWeight r4 = quant::quantize_q4_0(w.buf.data(), n, k, k),
                        r8 = quant::quantize_q8_0(w.buf.data(), n, k, k);
  EXPECT_EQ(s4.buf, r4.scale_f16);
  EXPECT_EQ(s8.buf, r8.scale_f16);
  EXPECT_EQ(q4.buf, r4.q);
  EXPECT_EQ(q8.buf, r8.q);
  const Cost c = TestContext(reg.get("quant.q4_0"), {w.view(), q4.view(), s4.view()}).cost();
  EXPECT_GT(c.flops, 0);
  EXPECT_EQ(c.bytes, double(n * k * 4 + n * k / 2 + n * 2 * 2));
}

TEST_F(QuantComponentTest, CheckMessages) {
  using V = TensorView;
  const V w = shape_view(DType::f32, 8, 96), q8 = shape_view(DType::i8, 8, 96), q4 = shape_view(DType::i8, 8, 48);
  const V s3 = shape_view(DType::f32, 8, 3), z3 = shape_view(DType::f32, 8, 3);
  EXPECT_EQ(check(reg, "quant.group", {w, q4, s3, V{}}, {{"group", "32"}}), "");
  EXPECT_NE(check(reg, "quant.group", {w, q4, shape_view(DType::f32, 8, 1), V{}})
                .find("k = 96 is not a multiple of group 128"),
            std::string::npos);
  EXPECT_NE(check(reg, "quant.group", {w, q4, s3, V{}}, {{"bits", "5"}, {"group", "32"}}).find("param 'bits' is 5"),
            std::string::npos);
  EXPECT_NE(check(reg, "quant.group", {w, q4, s3, V{}}, {{"group", "32"}, {"symmetric", "false"}})
                .find("port 'zero' is required with symmetric=false"),
            std::string::npos);
  EXPECT_NE(check(reg, "quant.group", {w, q4, s3, z3}, {{"group", "32"}}).find("symmetric"), std::string::npos);
  EXPECT_NE(check(reg, "quant.group", {w, q8, s3, V{}}, {{"group", "32"}}).find("port 'q' is 8x96, expected 8x48"),
            std::string::npos);
  EXPECT_NE(check(reg, "quant.q4_0", {w, q4, s3}).find("port 'scale' has dtype f32, expected f16"), std::string::npos);
  EXPECT_EQ(check(reg, "quant.group", {w, q4, shape_view(DType::f16, 8, 3), shape_view(DType::f16, 8, 3)},
                  {{"group", "32"}, {"symmetric", "false"}}),
            "");
  EXPECT_EQ(check(reg, "quant.group", {w, q4, shape_view(DType::f16, 8, 3), z3}, {{"group", "32"}, {"symmetric", "false"}}),
            "port 'zero' has dtype f32 but 'scale' is f16: zero points are stored like the scales");
  EXPECT_NE(check(reg, "quant.int8", {w, q8, shape_view(DType::f32, 1, 7)}).find("expected 8 elements"),
            std::string::npos);
  EXPECT_NE(check(reg, "quant.int8", {w, q8, shape_view(DType::f32, 1, 8)}, {{"layout", "kx"}}).find("param 'layout'"),
            std::string::npos);
  EXPECT_NE(check(reg, "quant.dequant", {q4, s3, V{}, shape_view(DType::f32, 8, 96)}, {{"bits", "4"}, {"group", "48"}})
                .find("param 'group' is 48"),
            std::string::npos);
  // a kernel run with a bad shape throws the same message
  Mat<float> wm(8, 96);
  Mat<std::int8_t> qm(8, 40, 0, DType::i8);
  Mat<float> sm(8, 3);
  EXPECT_THROW(run(reg, "quant.group", {wm.view(), qm.view(), sm.view(), V{}}, {{"group", "32"}}), KernelError);
}

}  // namespace
}  // namespace ymlopt::test
