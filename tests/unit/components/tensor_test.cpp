// tensor.* components against independent references (known bit patterns,
// a frexp/nearbyint rounding model for f16/bf16, long-double loops).
#include "tensor/tensor.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "test_context.hpp"

namespace ymlopt::test {
namespace {

using u16 = std::uint16_t;

class Tensor : public ::testing::Test {
 protected:
  void SetUp() override { register_tensor(reg); }
  TestRegistry reg;

  /// Converts one value with tensor.copy from a 1x1 `S` tensor to a 1x1 `D` tensor.
  template <class D, class S>
  D convert1(S v, DType sdt = default_dtype<S>(), DType ddt = default_dtype<D>()) {
    Mat<S> x(1, 1, 0, sdt);
    Mat<D> y(1, 1, 0, ddt);
    x(0, 0) = v;
    run(reg, "tensor.copy", {x.view(), y.view()});
    return y(0, 0);
  }
};

// ---- independent reference for narrow float formats ---------------------------

/// Value of `d` rounded to nearest-even in a binary format with `p` significant
/// bits, smallest normal exponent `emin` (value 2^emin) and largest finite `maxf`.
double round_model(double d, int p, int emin, double maxf) {
  if (std::isnan(d) || std::isinf(d) || d == 0) return d;
  int e;
  std::frexp(d, &e);                                     // |d| in [2^(e-1), 2^e)
  const int qexp = std::max(e - p, emin - (p - 1));      // quantum (subnormals: fixed)
  const double r = std::ldexp(std::nearbyint(std::ldexp(d, -qexp)), qexp);  // exact scaling
  if (std::fabs(r) > maxf) return std::copysign(std::numeric_limits<double>::infinity(), d);
  return r == 0 ? std::copysign(0.0, d) : r;
}
double f16_model(double d) { return round_model(d, 11, -14, 65504.0); }
double bf16_model(double d) { return round_model(d, 8, -126, std::ldexp(255.0, 120)); }

/// Reference decoding of a bit pattern by formula.
double decode(u16 h, int eb, int mb) {
  const int bias = (1 << (eb - 1)) - 1;
  const int ef = (h >> mb) & ((1 << eb) - 1);
  const int fr = h & ((1 << mb) - 1);
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (ef == (1 << eb) - 1) return fr ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (ef == 0) return sign * std::ldexp(double(fr), 1 - bias - mb);
  return sign * std::ldexp(double(fr + (1 << mb)), ef - bias - mb);
}

bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// ---- fill -----------------------------------------------------------------------

TEST_F(Tensor, FillAllDtypesLeavesPadding) {
  Mat<float> f(3, 5, 2);
  run(reg, "tensor.fill", {f.view()}, {{"value", "2.5"}});
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 7; ++j) EXPECT_EQ(f(i, j), j < 5 ? 2.5f : 77.0f);
  Mat<double> d(2, 2);
  run(reg, "tensor.fill", {d.view()});
  for (double v : d.buf) EXPECT_EQ(v, 0.0);
  Mat<u16> h(2, 3, 1, DType::f16), b(2, 3, 0, DType::bf16);
  run(reg, "tensor.fill", {h.view()}, {{"value", "1"}});
  run(reg, "tensor.fill", {b.view()}, {{"value", "1"}});
  EXPECT_EQ(h(1, 2), 0x3C00);
  EXPECT_EQ(h(1, 3), 77);
  EXPECT_EQ(b(1, 2), 0x3F80);
  Mat<std::int8_t> i8(1, 4);
  run(reg, "tensor.fill", {i8.view()}, {{"value", "300"}});
  EXPECT_EQ(i8(0, 3), 127);
  Mat<std::int32_t> i32(4, 1);
  run(reg, "tensor.fill", {i32.view()}, {{"value", "-2.5"}});
  EXPECT_EQ(i32(3, 0), -2);  // nearest, ties to even
}

// ---- copy / conversions ---------------------------------------------------------------

TEST_F(Tensor, CopyKnownBitPatterns) {
  // f32 -> f16
  EXPECT_EQ((convert1<u16, float>(1.0f)), 0x3C00);
  EXPECT_EQ((convert1<u16, float>(-2.0f)), 0xC000);
  EXPECT_EQ((convert1<u16, float>(65504.0f)), 0x7BFF);
  EXPECT_EQ((convert1<u16, float>(65519.0f)), 0x7BFF);
  EXPECT_EQ((convert1<u16, float>(65520.0f)), 0x7C00);  // tie rounds to even: infinity
  EXPECT_EQ((convert1<u16, float>(0.1f)), 0x2E66);
  EXPECT_EQ((convert1<u16, float>(std::ldexp(1.0f, -14))), 0x0400);
  EXPECT_EQ((convert1<u16, float>(std::ldexp(1.0f, -24))), 0x0001);
  EXPECT_EQ((convert1<u16, float>(std::ldexp(1.0f, -25))), 0x0000);    // tie to even
  EXPECT_EQ((convert1<u16, float>(std::ldexp(1.5f, -25))), 0x0001);
  EXPECT_EQ((convert1<u16, float>(1.0f + std::ldexp(1.0f, -11))), 0x3C00);  // tie to even
  EXPECT_EQ((convert1<u16, float>(1.0f + 3 * std::ldexp(1.0f, -11))), 0x3C02);
  EXPECT_EQ((convert1<u16, float>(-0.0f)), 0x8000);
  EXPECT_EQ((convert1<u16, float>(INFINITY)), 0x7C00);
  EXPECT_EQ((convert1<u16, float>(std::numeric_limits<float>::quiet_NaN())) & 0x7E00, 0x7E00);
  // f32 -> bf16
  EXPECT_EQ((convert1<u16, float>(1.0f, DType::f32, DType::bf16)), 0x3F80);
  EXPECT_EQ((convert1<u16, float>(0.1f, DType::f32, DType::bf16)), 0x3DCD);
  EXPECT_EQ((convert1<u16, float>(1.0f + std::ldexp(1.0f, -8), DType::f32, DType::bf16)), 0x3F80);
  EXPECT_EQ((convert1<u16, float>(1.0f + 3 * std::ldexp(1.0f, -8), DType::f32, DType::bf16)), 0x3F82);
  EXPECT_EQ((convert1<u16, float>(-INFINITY, DType::f32, DType::bf16)), 0xFF80);
  EXPECT_EQ((convert1<u16, float>(std::numeric_limits<float>::max(), DType::f32, DType::bf16)), 0x7F80);
  EXPECT_EQ((convert1<u16, float>(std::numeric_limits<float>::quiet_NaN(), DType::f32, DType::bf16)) & 0x7FC0,
            0x7FC0);
  // f64 -> f16 / bf16 round once (a detour through f32 would round to the even neighbour)
  EXPECT_EQ((convert1<u16, double>(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))), 0x3C01);
  EXPECT_EQ((convert1<u16, double>(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), DType::f64, DType::bf16)),
            0x3F81);
  // widening
  EXPECT_EQ((convert1<float, u16>(0x3555)), 0.333251953125f);
  EXPECT_EQ((convert1<float, u16>(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ((convert1<float, u16>(0xFC00)), -INFINITY);
  EXPECT_EQ((convert1<double, u16>(0x3F81, DType::bf16, DType::f64)), 1.0078125);
  EXPECT_EQ((convert1<float, u16>(0xC0490FDB >> 16, DType::bf16, DType::f32)), -3.140625f);
  // f16 <-> bf16
  EXPECT_EQ((convert1<u16, u16>(0x3C00, DType::f16, DType::bf16)), 0x3F80);
  EXPECT_EQ((convert1<u16, u16>(0x3F80, DType::bf16, DType::f16)), 0x3C00);
  EXPECT_EQ((convert1<u16, u16>(0x4780, DType::bf16, DType::f16)), 0x7C00);  // 65536 overflows f16
}

TEST_F(Tensor, CopyIntegerConversionsRoundAndSaturate) {
  EXPECT_EQ((convert1<std::int8_t, float>(200.f)), 127);
  EXPECT_EQ((convert1<std::int8_t, float>(-200.f)), -128);
  EXPECT_EQ((convert1<std::int8_t, float>(2.5f)), 2);
  EXPECT_EQ((convert1<std::int8_t, float>(3.5f)), 4);
  EXPECT_EQ((convert1<std::int8_t, float>(-2.5f)), -2);
  EXPECT_EQ((convert1<std::int8_t, float>(-1.4f)), -1);
  EXPECT_EQ((convert1<std::int8_t, float>(std::numeric_limits<float>::quiet_NaN())), 0);
  EXPECT_EQ((convert1<std::int8_t, float>(INFINITY)), 127);
  EXPECT_EQ((convert1<std::int8_t, std::int32_t>(1000)), 127);
  EXPECT_EQ((convert1<std::int8_t, std::int32_t>(-1000)), -128);
  EXPECT_EQ((convert1<std::int32_t, double>(3e9)), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ((convert1<std::int32_t, double>(-3e9)), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ((convert1<std::int32_t, double>(-7.0)), -7);
  EXPECT_EQ((convert1<std::int32_t, std::int8_t>(-128)), -128);
  EXPECT_EQ((convert1<u16, std::int8_t>(-128)), 0xD800);
  EXPECT_EQ((convert1<double, std::int32_t>(-2147483647)), -2147483647.0);
  EXPECT_EQ((convert1<float, std::int32_t>(16777217)), 16777216.0f);
  EXPECT_EQ((convert1<std::int32_t, u16>(0x3E00)), 2);  // f16 1.5 -> 2
  EXPECT_EQ((convert1<std::int8_t, u16>(0x7C00)), 127);
}

TEST_F(Tensor, CopyExhaustiveHalfRoundTrip) {
  for (DType dt : {DType::f16, DType::bf16}) {
    const int eb = dt == DType::f16 ? 5 : 8, mb = dt == DType::f16 ? 10 : 7;
    Mat<u16> h(256, 256, 0, dt), back(256, 256, 0, dt);
    for (std::size_t i = 0; i < h.buf.size(); ++i) h.buf[i] = static_cast<u16>(i);
    Mat<double> d(256, 256, 3);
    Mat<float> f(256, 256);
    run(reg, "tensor.copy", {h.view(), d.view()});
    run(reg, "tensor.copy", {h.view(), f.view()});
    for (std::int64_t i = 0; i < 256; ++i)
      for (std::int64_t j = 0; j < 256; ++j) {
        const double ref = decode(h(i, j), eb, mb);
        ASSERT_TRUE(same_value(d(i, j), ref)) << dtype_name(dt) << " bits " << h(i, j);
        ASSERT_TRUE(same_value(f(i, j), ref)) << dtype_name(dt) << " bits " << h(i, j);
      }
    run(reg, "tensor.copy", {d.view(), back.view()});
    for (std::size_t i = 0; i < h.buf.size(); ++i) {
      if (std::isnan(decode(h.buf[i], eb, mb))) EXPECT_TRUE(std::isnan(decode(back.buf[i], eb, mb)));
      else ASSERT_EQ(back.buf[i], h.buf[i]) << dtype_name(dt);
    }
    run(reg, "tensor.copy", {f.view(), back.view()});
    for (std::size_t i = 0; i < h.buf.size(); ++i)
      if (!std::isnan(decode(h.buf[i], eb, mb))) {
        ASSERT_EQ(back.buf[i], h.buf[i]) << dtype_name(dt);
      }
  }
}

TEST_F(Tensor, CopyRandomRoundingMatchesModel) {
  std::mt19937_64 gen(123);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  const std::int64_t n = 1 << 16;
  struct Fmt {
    DType dt;
    int eb, mb, elo, ehi;
    double (*model)(double);
  };
  for (Fmt fm : {Fmt{DType::f16, 5, 10, -27, 17, f16_model}, Fmt{DType::bf16, 8, 7, -136, 129, bf16_model}}) {
    std::uniform_int_distribution<int> ex(fm.elo, fm.ehi);
    Mat<double> d(1, n);
    Mat<float> f(1, n);
    for (std::int64_t j = 0; j < n; ++j) {
      double v = std::ldexp(mant(gen), ex(gen));
      if (j % 4 == 1) {  // an exact tie: a representable value plus half a quantum
        v = fm.model(v);
        int e;
        std::frexp(v, &e);
        v += std::ldexp(1.0, std::max(e - fm.mb - 1, 1 - ((1 << (fm.eb - 1)) - 1) - fm.mb) - 1);
      }
      d(0, j) = (j & 2) ? -v : v;
      f(0, j) = static_cast<float>(d(0, j));
    }
    Mat<u16> hd(1, n, 0, fm.dt), hf(1, n, 0, fm.dt);
    run(reg, "tensor.copy", {d.view(), hd.view()});
    run(reg, "tensor.copy", {f.view(), hf.view()});
    for (std::int64_t j = 0; j < n; ++j) {
      ASSERT_TRUE(same_value(decode(hd(0, j), fm.eb, fm.mb), fm.model(d(0, j))))
          << dtype_name(fm.dt) << " from f64 " << d(0, j);
      ASSERT_TRUE(same_value(decode(hf(0, j), fm.eb, fm.mb), fm.model(f(0, j))))
          << dtype_name(fm.dt) << " from f32 " << f(0, j);
    }
  }
}

TEST_F(Tensor, CopySameDtypeStridedAndF32F64) {
  Mat<float> x(9, 13, 3), y(9, 13, 1);
  x.random(3);
  run(reg, "tensor.copy", {x.view(), y.view()});
  Mat<double> z(9, 13, 2);
  run(reg, "tensor.copy", {x.view(), z.view()});
  Mat<float> w(9, 13);
  run(reg, "tensor.copy", {z.view(), w.view()});
  for (std::int64_t i = 0; i < 9; ++i) {
    for (std::int64_t j = 0; j < 13; ++j) {
      EXPECT_EQ(y(i, j), x(i, j));
      EXPECT_EQ(z(i, j), double(x(i, j)));
      EXPECT_EQ(w(i, j), x(i, j));
    }
    EXPECT_EQ(y(i, 13), 77.0f);
  }
  EXPECT_EQ(check(reg, "tensor.copy", {shape_view(DType::f32, 2, 3), shape_view(DType::i8, 3, 2)}),
            "port 'y' is 3x2 but port 'x' is 2x3: shapes must match");
}

// ---- add / scale ------------------------------------------------------------------

template <class T> class TensorTyped : public Tensor {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TensorTyped, FloatTypes);

TYPED_TEST(TensorTyped, AddFullAndBiasBroadcast) {
  using T = TypeParam;
  Mat<T> a(6, 5, 1), b(6, 5, 2), bias(1, 5), c(6, 5, 3);
  a.random(1);
  b.random(2);
  bias.random(3);
  run(this->reg, "tensor.add", {a.view(), b.view(), c.view()}, {{"alpha", "2"}, {"beta", "-0.5"}});
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 5; ++j)
      EXPECT_NEAR(c(i, j), 2.0L * a(i, j) - 0.5L * b(i, j), 4 * eps<T>());
  run(this->reg, "tensor.add", {a.view(), bias.view(), c.view()});
  for (std::int64_t i = 0; i < 6; ++i) {
    for (std::int64_t j = 0; j < 5; ++j) EXPECT_NEAR(c(i, j), (long double)a(i, j) + bias(0, j), 4 * eps<T>());
    EXPECT_EQ(c(i, 5), T(77));
  }
  run(this->reg, "tensor.add", {a.view(), bias.view(), a.view()});  // in place
  EXPECT_NEAR(a(5, 4), c(5, 4), 0);
}

TYPED_TEST(TensorTyped, Scale) {
  using T = TypeParam;
  Mat<T> x(4, 3, 2);
  x.random(5);
  const Mat<T> x0 = x;
  run(this->reg, "tensor.scale", {x.view()}, {{"alpha", "-3"}});
  for (std::int64_t i = 0; i < 4; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) EXPECT_EQ(x(i, j), T(-3) * x0(i, j));
    EXPECT_EQ(x(i, 3), T(77));
  }
}

TEST_F(Tensor, AddCheckMessages) {
  const DType f = DType::f32;
  EXPECT_EQ(check(reg, "tensor.add", {shape_view(f, 4, 5), shape_view(f, 1, 5), shape_view(f, 4, 5)}), "");
  EXPECT_EQ(check(reg, "tensor.add", {shape_view(f, 4, 5), shape_view(f, 3, 5), shape_view(f, 4, 5)}),
            "port 'b' is 3x5 but port 'a' is 4x5: 'b' must be 4x5 or a single row 1x5 (bias broadcast over rows)");
  EXPECT_EQ(check(reg, "tensor.add", {shape_view(f, 4, 5), shape_view(f, 4, 5), shape_view(f, 5, 4)}),
            "port 'c' is 5x4 but port 'a' is 4x5: shapes must match");
  EXPECT_EQ(check(reg, "tensor.add", {shape_view(f, 4, 5), shape_view(f, 4, 5), shape_view(DType::f64, 4, 5)}),
            "port 'c' has dtype f64 but port 'a' has dtype f32: dtypes must match");
}

// ---- transpose -------------------------------------------------------------------

template <class T> void check_transpose(const Registry& reg, std::int64_t m, std::int64_t n, DType dt) {
  Mat<T> x(m, n, 3, dt), y(n, m, 1, dt);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) x(i, j) = static_cast<T>((i * 131 + j * 7) % 100);
  run(reg, "tensor.transpose", {x.view(), y.view()});
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t i = 0; i < m; ++i) ASSERT_EQ(y(j, i), x(i, j)) << i << "," << j;
    ASSERT_EQ(y(j, m), T(77));
  }
}

TEST_F(Tensor, TransposeOddShapesAllSizes) {
  check_transpose<float>(reg, 37, 45, DType::f32);
  check_transpose<double>(reg, 1, 1, DType::f64);
  check_transpose<double>(reg, 1, 70, DType::f64);
  check_transpose<std::int8_t>(reg, 65, 3, DType::i8);
  check_transpose<u16>(reg, 33, 31, DType::bf16);
  check_transpose<std::int32_t>(reg, 64, 64, DType::i32);
  EXPECT_EQ(check(reg, "tensor.transpose", {shape_view(DType::f32, 2, 3), shape_view(DType::f32, 2, 3)}),
            "port 'y' is 2x3 but port 'x' is 2x3: 'y' must be 3x2");
}

// ---- norm / compare --------------------------------------------------------------

TEST_F(Tensor, NormFroAndMax) {
  Mat<float> x(7, 9, 2);
  x.random(9, -3, 3);
  long double s = 0, mx = 0;
  for (std::int64_t i = 0; i < 7; ++i)
    for (std::int64_t j = 0; j < 9; ++j) {
      s += (long double)x(i, j) * x(i, j);
      mx = std::max(mx, std::fabs((long double)x(i, j)));
    }
  x(0, 9) = 1e6f;  // padding must be ignored
  Mat<float> outf(1, 1);
  auto r = run(reg, "tensor.norm", {x.view(), outf.view()});
  EXPECT_NEAR(r.at("norm"), std::sqrt(s), 1e-12 * std::sqrt(s));
  EXPECT_EQ(outf(0, 0), static_cast<float>(r.at("norm")));
  Mat<double> outd(1, 1);
  r = run(reg, "tensor.norm", {x.view(), outd.view()}, {{"kind", "max"}});
  EXPECT_EQ(r.at("norm"), static_cast<double>(mx));
  EXPECT_EQ(outd(0, 0), static_cast<double>(mx));
  r = run(reg, "tensor.norm", {x.view(), TensorView{}});  // optional 'out' unbound
  EXPECT_NEAR(r.at("norm"), std::sqrt(s), 1e-12 * std::sqrt(s));
  Mat<u16> h(1, 2, 0, DType::f16);
  h(0, 0) = 0x4200;  // 3
  h(0, 1) = 0xC400;  // -4
  EXPECT_EQ(run(reg, "tensor.norm", {h.view(), TensorView{}}).at("norm"), 5.0);
  Mat<double> nan(1, 3);
  nan.buf = {1, std::nan(""), 2};
  EXPECT_TRUE(std::isnan(run(reg, "tensor.norm", {nan.view(), TensorView{}}, {{"kind", "max"}}).at("norm")));
  EXPECT_EQ(check(reg, "tensor.norm", {shape_view(DType::f32, 2, 3), shape_view(DType::f32, 1, 2)}),
            "port 'out' is 1x2: it must hold exactly 1 element");
  EXPECT_EQ(check(reg, "tensor.norm", {shape_view(DType::f32, 2, 3), TensorView{}}, {{"kind", "l7"}}),
            "param 'kind' is 'l7': expected one of 'fro', 'max'");
}

TEST_F(Tensor, CompareReportsAndTolerance) {
  Mat<double> a(3, 4, 1), b(3, 4, 2);
  b.random(1, -2, 2);
  b(1, 1) = -4;  // max |b|
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 4; ++j) a(i, j) = b(i, j);
  a(2, 3) += 0.01;
  auto r = run(reg, "tensor.compare", {a.view(), b.view()});
  EXPECT_NEAR(r.at("max_abs"), 0.01, 1e-15);
  EXPECT_NEAR(r.at("max_rel"), 0.01 / 4, 1e-15);
  EXPECT_NO_THROW(run(reg, "tensor.compare", {a.view(), b.view()}, {{"tol", "0.003"}}));
  try {
    run(reg, "tensor.compare", {a.view(), b.view()}, {{"tol", "0.001"}});
    FAIL() << "expected KernelError";
  } catch (const KernelError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("max_rel 0.0025"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tol 0.001"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_abs 0.01"), std::string::npos) << msg;
  }
  a(0, 0) = std::nan("");
  EXPECT_THROW(run(reg, "tensor.compare", {a.view(), b.view()}, {{"tol", "1"}}), KernelError);
  // mixed dtypes: an f16 result against an f32 reference
  Mat<u16> h(1, 2, 0, DType::f16);
  h.buf = {0x3C00, 0x3555};
  Mat<float> ref(1, 2);
  ref.buf = {1.0f, 1.0f / 3};
  r = run(reg, "tensor.compare", {h.view(), ref.view()}, {{"tol", "1e-3"}});
  EXPECT_NEAR(r.at("max_abs"), double(1.0f / 3) - 0.333251953125, 1e-12);
  // zero reference: max_rel divides by a tiny number, not by zero
  Mat<float> z(1, 1), z2(1, 1);
  z(0, 0) = 0;
  z2(0, 0) = 0;
  r = run(reg, "tensor.compare", {z.view(), z2.view()}, {{"tol", "0"}});
  EXPECT_EQ(r.at("max_rel"), 0.0);
}

}  // namespace
}  // namespace ymlopt::test
