// nn.* components against long-double formulas.
#include "nn/nn.hpp"

#include <cmath>
#include <functional>
#include <limits>

#include "test_context.hpp"

namespace ymlopt::test {
namespace {

template <class T> class NnTyped : public ::testing::Test {
 protected:
  void SetUp() override { register_nn(reg); }
  TestRegistry reg;

  /// Runs `name` on a strided random input (also in place) and compares with `ref`.
  void expect_unary(const std::string& name, const std::function<long double(long double)>& ref,
                    const std::map<std::string, std::string>& args = {}) {
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {5, 17}, {3, 64}}) {
      Mat<T> x(m, n, 2), y(m, n, 1);
      x.random(std::uint32_t(m * n), -6, 6);
      x(0, 0) = T(0);
      run(reg, name, {x.view(), y.view()}, args);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          const long double r = ref(x(i, j));
          EXPECT_NEAR(y(i, j), r, 8 * eps<T>() * std::max(1.0L, std::fabs(r))) << name << " x=" << x(i, j);
        }
        EXPECT_EQ(y(i, n), T(77)) << "padding";
      }
      run(reg, name, {x.view(), x.view()}, args);  // in place
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) EXPECT_EQ(x(i, j), y(i, j)) << name << " in place";
    }
  }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NnTyped, FloatTypes);

TYPED_TEST(NnTyped, Relu) {
  this->expect_unary("nn.relu", [](long double x) { return x > 0 ? x : 0.0L; });
}

TYPED_TEST(NnTyped, GeluTanh) {
  this->expect_unary("nn.gelu", [](long double x) {
    const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
    return 0.5L * x * (1 + std::tanh(k * (x + 0.044715L * x * x * x)));
  });
}

TYPED_TEST(NnTyped, GeluErf) {
  this->expect_unary(
      "nn.gelu", [](long double x) { return 0.5L * x * (1 + std::erf(x / std::sqrt(2.0L))); },
      {{"approximate", "none"}});
}

TYPED_TEST(NnTyped, Silu) {
  this->expect_unary("nn.silu", [](long double x) { return x / (1 + std::exp(-x)); });
}

TYPED_TEST(NnTyped, SiluExtremes) {
  using T = TypeParam;
  Mat<T> x(1, 3), y(1, 3);
  x.buf = {T(-1e4), T(1e4), T(0)};
  run(this->reg, "nn.silu", {x.view(), y.view()});
  EXPECT_EQ(y(0, 0), T(0));
  EXPECT_EQ(y(0, 1), T(1e4));
  EXPECT_EQ(y(0, 2), T(0));
}

TYPED_TEST(NnTyped, SoftmaxRowsSumToOneAndMatchFormula) {
  using T = TypeParam;
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {4, 7}, {3, 129}}) {
    Mat<T> x(m, n, 3), y(m, n, 1);
    x.random(std::uint32_t(n), -5, 5);
    run(this->reg, "nn.softmax", {x.view(), y.view()});
    for (std::int64_t i = 0; i < m; ++i) {
      long double z = 0, sum = 0;
      for (std::int64_t j = 0; j < n; ++j) z += std::exp((long double)x(i, j));
      for (std::int64_t j = 0; j < n; ++j) {
        EXPECT_NEAR(y(i, j), std::exp((long double)x(i, j)) / z, 4 * eps<T>());
        sum += y(i, j);
      }
      EXPECT_NEAR(sum, 1.0L, 4 * n * eps<T>());
      EXPECT_EQ(y(i, n), T(77));
    }
  }
}

TYPED_TEST(NnTyped, SoftmaxIsStableForLargeInputs) {
  using T = TypeParam;
  Mat<T> x(2, 3), y(2, 3);
  x.buf = {T(1000), T(1001), T(1002), T(-1000), T(-1001), T(-1002)};
  run(this->reg, "nn.softmax", {x.view(), y.view()});
  const long double e1 = std::exp(-1.0L), e2 = std::exp(-2.0L), z = 1 + e1 + e2;
  EXPECT_NEAR(y(0, 2), 1 / z, 4 * eps<T>());
  EXPECT_NEAR(y(0, 0), e2 / z, 4 * eps<T>());
  EXPECT_NEAR(y(1, 0), 1 / z, 4 * eps<T>());
  run(this->reg, "nn.softmax", {x.view(), x.view()});  // in place
  EXPECT_EQ(x(1, 2), y(1, 2));
  Mat<T> ninf(1, 2), out(1, 2);
  ninf.buf = {-std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity()};
  run(this->reg, "nn.softmax", {ninf.view(), out.view()});  // fully masked row: NaN, no crash
  EXPECT_TRUE(std::isnan(out(0, 0)));
}

TEST(Nn, CheckMessages) {
  TestRegistry reg;
  register_nn(reg);
  EXPECT_EQ(check(reg, "nn.relu", {shape_view(DType::f32, 2, 3), shape_view(DType::f32, 2, 3)}), "");
  EXPECT_EQ(check(reg, "nn.softmax", {shape_view(DType::f32, 2, 3), shape_view(DType::f32, 3, 2)}),
            "port 'y' is 3x2 but port 'x' is 2x3: shapes must match");
  EXPECT_EQ(check(reg, "nn.silu", {shape_view(DType::f32, 2, 3), shape_view(DType::f64, 2, 3)}),
            "port 'y' has dtype f64 but port 'x' has dtype f32: dtypes must match");
  EXPECT_EQ(check(reg, "nn.gelu", {shape_view(DType::f32, 2, 3), shape_view(DType::f32, 2, 3)},
                  {{"approximate", "erf"}}),
            "param 'approximate' is 'erf': expected one of 'tanh', 'none'");
  TensorView x3 = shape_view(DType::f32, 6, 4);
  x3.shape = {2, 3, 4};
  EXPECT_EQ(check(reg, "nn.relu", {x3, shape_view(DType::f32, 4, 6)}),
            "port 'y' is 4x6 but port 'x' is 6x4 (shape 2x3x4): shapes must match");
}

}  // namespace
}  // namespace ymlopt::test
