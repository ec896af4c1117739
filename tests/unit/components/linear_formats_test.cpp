// nn.linear on compressed weights: every format against the dense product on
// the same (dequantized or sparse) weight, the epilogue (bias, activation,
// residual) on the compressed path, and the check / run-time errors.
#include "nn/linear_formats.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>
#include <ymlopt/half.hpp>

#include "nn/nn.hpp"
#include "quant/qlinear.hpp"
#include "quant/quant.hpp"
#include "sparse/sparse_linear.hpp"
#include "test_context.hpp"

namespace ymlopt::test {
namespace {

constexpr std::int64_t M = 5, K = 64, N = 12;

TensorView view(void* data, DType dt, std::int64_t rows, std::int64_t cols, bool vector = false) {
  TensorView v;
  v.data = data;
  v.dtype = dt;
  v.rows = rows;
  v.cols = cols;
  v.ld = cols;
  v.shape = vector ? Shape{cols} : Shape{rows, cols};
  return v;
}

struct Fixture {
  TestRegistry reg;
  Mat<float> x{M, K}, w{N, K};
  std::vector<float> bias = std::vector<float>(N);
  Fixture() {
    register_nn(reg);
    x.random(1);
    w.random(2);
    std::mt19937 g(3);
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& b : bias) b = d(g);
  }
  /// Dense nn.linear with W [n, k] (transpose_w) on `wd`.
  std::vector<float> dense(const std::vector<float>& wd, const std::map<std::string, std::string>& extra = {}) {
    std::vector<float> y(M * N);
    std::map<std::string, std::string> args = extra;
    args["transpose_w"] = "true";
    run(reg, "nn.linear",
        {x.view(), view(const_cast<float*>(wd.data()), DType::f32, N, K), TensorView{}, view(y.data(), DType::f32, M, N)},
        args);
    return y;
  }
  std::vector<float> dense_w() const {
    std::vector<float> v(N * K);
    for (std::int64_t r = 0; r < N; ++r)
      for (std::int64_t c = 0; c < K; ++c) v[std::size_t(r * K + c)] = w(r, c);
    return v;
  }
};

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += double(a[i] - b[i]) * (a[i] - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / den);
}

/// The compressed nn.linear call for a quantized weight.
std::vector<float> run_quant(Fixture& f, const quant::QuantizedWeight& qw, const std::string& format,
                             std::map<std::string, std::string> args = {}, TensorView bias = {}, TensorView r = {}) {
  std::vector<float> y(M * N, 7.0f);
  const std::int64_t g = qw.groups();
  const bool per_row = qw.group == 0;
  void* scale = qw.scale_dtype == DType::f16 ? static_cast<void*>(const_cast<std::uint16_t*>(qw.scale_f16.data()))
                                             : static_cast<void*>(const_cast<float*>(qw.scale_f32.data()));
  TensorView sv = per_row ? view(scale, qw.scale_dtype, 1, N, true) : view(scale, qw.scale_dtype, N, g);
  // f16 scales: the zeros are bound as f16 too (quant:: keeps them as f16-exact floats)
  std::vector<std::uint16_t> z16;
  if (qw.scale_dtype == DType::f16)
    for (float z : qw.zero) z16.push_back(half::f16_bits_from_double(z));
  void* zp = z16.empty() ? static_cast<void*>(const_cast<float*>(qw.zero.data())) : static_cast<void*>(z16.data());
  const DType zd = z16.empty() ? DType::f32 : DType::f16;
  TensorView zv;
  if (!qw.zero.empty()) zv = per_row ? view(zp, zd, 1, N, true) : view(zp, zd, N, g);
  args["format"] = format;
  args["group"] = std::to_string(qw.group);
  run(f.reg, "nn.linear",
      {f.x.view(), view(const_cast<std::int8_t*>(qw.q.data()), DType::i8, N, qw.q_ld), bias,
       view(y.data(), DType::f32, M, N), r, sv, zv, TensorView{}, TensorView{}},
      args);
  return y;
}

std::vector<float> dequantized(const quant::QuantizedWeight& qw) {
  std::vector<float> d(N * K);
  quant::dequantize(qw.view(), d.data(), K);
  return d;
}

TEST(LinearFormats, QuantizedFormatsMatchTheKernelAndTheDenseProduct) {
  Fixture f;
  const auto wd = f.dense_w();
  struct Case {
    const char* what;
    quant::QuantizedWeight qw;
    const char* format;
    double tol;
  };
  std::vector<Case> cases;
  cases.push_back({"int8 per channel", quant::quantize_int8(wd.data(), N, K, K), "int8", 0.02});
  cases.push_back({"int8 g32 asym", quant::quantize_group(wd.data(), N, K, K, 8, 32, false), "int8", 0.02});
  cases.push_back({"int4 g32 sym", quant::quantize_group(wd.data(), N, K, K, 4, 32, true), "int4", 0.15});
  cases.push_back({"int4 g64 asym", quant::quantize_group(wd.data(), N, K, K, 4, 64, false), "int4", 0.15});
  cases.push_back({"q8_0", quant::quantize_q8_0(wd.data(), N, K, K), "int8", 0.02});
  cases.push_back({"q4_0", quant::quantize_q4_0(wd.data(), N, K, K), "int4", 0.15});
  // f16 scales and f16 zero points (codes against the stored values)
  cases.push_back({"int8 per channel f16", quant::quantize_int8(wd.data(), N, K, K, DType::f16), "int8", 0.02});
  cases.push_back({"int8 g32 asym f16", quant::quantize_group(wd.data(), N, K, K, 8, 32, false, DType::f16), "int8", 0.02});
  cases.push_back({"int4 g32 asym f16", quant::quantize_group(wd.data(), N, K, K, 4, 32, false, DType::f16), "int4", 0.15});
  cases.push_back({"int4 g64 sym f16", quant::quantize_group(wd.data(), N, K, K, 4, 64, true, DType::f16), "int4", 0.15});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<float> y = run_quant(f, c.qw, c.format);
    // exactly the kernel's result
    std::vector<float> ref(M * N);
    quant::linear(f.x.buf.data(), M, f.x.ld, c.qw.view(), ref.data(), N);
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], ref[i]) << i;
    // and close to the dense product with the dequantized weight (activation quantization only)
    EXPECT_LT(rel_err(y, f.dense(dequantized(c.qw))), 0.02);
    // and to the original weight within the weight quantization error
    EXPECT_LT(rel_err(y, f.dense(wd)), c.tol);
    // activations=f32 (weight-only): the dense product with the dequantized weight,
    // to f32 rounding, through quant::linear_weight_only
    const std::vector<float> wo = run_quant(f, c.qw, c.format, {{"activations", "f32"}});
    std::vector<float> wo_ref(M * N);
    quant::linear_weight_only(f.x.buf.data(), M, f.x.ld, c.qw.view(), wo_ref.data(), N);
    for (std::size_t i = 0; i < wo.size(); ++i) ASSERT_EQ(wo[i], wo_ref[i]) << i;
    EXPECT_LT(rel_err(wo, f.dense(dequantized(c.qw))), 1e-5);
  }
}

TEST(LinearFormats, ActivationsArgIsChecked) {
  Fixture f;
  const auto wd = f.dense_w();
  const auto qw = quant::quantize_int8(wd.data(), N, K, K);
  try {
    run_quant(f, qw, "int8", {{"activations", "f16"}});
    ADD_FAILURE() << "activations=f16 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("activations"), std::string::npos) << e.what();
  }
}

TEST(LinearFormats, EpilogueOnTheCompressedPath) {
  Fixture f;
  const auto wd = f.dense_w();
  const auto qw = quant::quantize_int8(wd.data(), N, K, K);
  const std::vector<float> plain = run_quant(f, qw, "int8");
  Mat<float> r(M, N);
  r.random(9);
  const std::vector<float> y =
      run_quant(f, qw, "int8", {{"activation", "relu"}}, view(f.bias.data(), DType::f32, 1, N, true), r.view());
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      const float z = plain[std::size_t(i * N + j)] + f.bias[std::size_t(j)];
      EXPECT_NEAR(y[std::size_t(i * N + j)], r(i, j) + std::max(z, 0.0f), 1e-5) << i << "," << j;
    }
}

TEST(LinearFormats, SparseFormatsEqualTheDenseProduct) {
  Fixture f;
  std::vector<float> wd = f.dense_w();
  // 2:4 pattern (keeps the first two of every group), which is also ~50% sparse for CSR and BSR
  for (std::size_t i = 0; i < wd.size(); ++i)
    if (i % 4 >= 2) wd[i] = 0;
  // and whole zero 4x4 blocks for BSR
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t c = 0; c < K; ++c) wd[std::size_t(r * K + c)] = 0;
  const std::vector<float> ref = f.dense(wd);
  std::vector<float> y(M * N);
  auto yv = [&] { return view(y.data(), DType::f32, M, N); };

  sparse::Csr c = sparse::to_csr(wd.data(), N, K, K);
  run(f.reg, "nn.linear",
      {f.x.view(), view(c.values.data(), DType::f32, 1, std::int64_t(c.values.size()), true), TensorView{}, yv(),
       TensorView{}, TensorView{}, TensorView{}, view(c.col.data(), DType::i32, 1, std::int64_t(c.col.size()), true),
       view(c.row_ptr.data(), DType::i32, 1, N + 1, true)},
      {{"format", "csr"}});
  EXPECT_LT(rel_err(y, ref), 1e-6);

  sparse::Bsr b = sparse::to_bsr(wd.data(), N, K, K, 4);
  const std::int64_t nb = std::int64_t(b.block_col.size());
  run(f.reg, "nn.linear",
      {f.x.view(), view(b.values.data(), DType::f32, nb, 16), TensorView{}, yv(), TensorView{}, TensorView{},
       TensorView{}, view(b.block_col.data(), DType::i32, 1, nb, true),
       view(b.block_row_ptr.data(), DType::i32, 1, N / 4 + 1, true)},
      {{"format", "bsr"}, {"block", "4"}});
  EXPECT_LT(rel_err(y, ref), 1e-6);

  sparse::Nm24 s = sparse::to_nm24(wd.data(), N, K, K);
  run(f.reg, "nn.linear",
      {f.x.view(), view(s.values.data(), DType::f32, N, K / 2), TensorView{}, yv(), TensorView{}, TensorView{},
       TensorView{}, view(s.index.data(), DType::i8, N, K / 8), TensorView{}},
      {{"format", "nm24"}});
  EXPECT_LT(rel_err(y, ref), 1e-6);

  // a lying row pointer array is an error, not a wild read
  std::vector<std::int32_t> bad = c.row_ptr;
  bad[3] = bad[4] + 1;
  try {
    run(f.reg, "nn.linear",
        {f.x.view(), view(c.values.data(), DType::f32, 1, std::int64_t(c.values.size()), true), TensorView{}, yv(),
         TensorView{}, TensorView{}, TensorView{}, view(c.col.data(), DType::i32, 1, std::int64_t(c.col.size()), true),
         view(bad.data(), DType::i32, 1, N + 1, true)},
        {{"format", "csr"}});
    ADD_FAILURE() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("w_ptr decreases at row 3"), std::string::npos) << e.what();
  }
  std::vector<std::int32_t> bad_col = c.col;
  bad_col[0] = K;
  EXPECT_THROW(run(f.reg, "nn.linear",
                   {f.x.view(), view(c.values.data(), DType::f32, 1, std::int64_t(c.values.size()), true), TensorView{},
                    yv(), TensorView{}, TensorView{}, TensorView{},
                    view(bad_col.data(), DType::i32, 1, std::int64_t(c.col.size()), true),
                    view(c.row_ptr.data(), DType::i32, 1, N + 1, true)},
                   {{"format", "csr"}}),
               KernelError);
}

// format=bf16: the product of x and W rounded to bf16 (long-double reference of
// the rounded operands), with bias, activation and residual on the same path.
TEST(LinearFormats, Bf16IsTheProductOfTheRoundedOperands) {
  Fixture f;
  const std::vector<float> wd = f.dense_w();
  std::vector<std::uint16_t> wb(wd.size());
  std::vector<float> wr(wd.size()), xr(std::size_t(M * K));
  for (std::size_t i = 0; i < wd.size(); ++i) {
    wb[i] = half::bf16_bits_from_float(wd[i]);
    wr[i] = half::bf16_bits_to_float(wb[i]);
  }
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t c = 0; c < K; ++c)
      xr[std::size_t(r * K + c)] = half::bf16_bits_to_float(half::bf16_bits_from_float(f.x(r, c)));
  std::vector<float> y(M * N), res(M * N, 0.5f);
  auto yv = [&] { return view(y.data(), DType::f32, M, N); };
  run(f.reg, "nn.linear", {f.x.view(), view(wb.data(), DType::bf16, N, K), TensorView{}, yv()}, {{"format", "bf16"}});
  double worst = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      long double ref = 0;
      for (std::int64_t c = 0; c < K; ++c)
        ref += static_cast<long double>(xr[std::size_t(i * K + c)]) * wr[std::size_t(j * K + c)];
      worst = std::max(worst, double(std::fabs(ref - y[std::size_t(i * N + j)])));
    }
  EXPECT_LT(worst, 1e-5);
  // against f32 weights: the bf16 rounding error, 2^-9 relative per operand
  EXPECT_LT(rel_err(y, f.dense(wd)), 1e-2);
  EXPECT_GT(rel_err(y, f.dense(wd)), 0.0);

  // bias, gelu and the residual: the dense epilogue on the bf16 product
  std::vector<float> yd = res;
  Mat<float> xm{M, K};
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t c = 0; c < K; ++c) xm(r, c) = xr[std::size_t(r * K + c)];
  run(f.reg, "nn.linear",
      {xm.view(), view(wr.data(), DType::f32, N, K), view(f.bias.data(), DType::f32, 1, N, true),
       view(yd.data(), DType::f32, M, N), view(yd.data(), DType::f32, M, N)},
      {{"transpose_w", "true"}, {"activation", "gelu"}});
  y = res;
  run(f.reg, "nn.linear",
      {f.x.view(), view(wb.data(), DType::bf16, N, K), view(f.bias.data(), DType::f32, 1, N, true), yv(), yv()},
      {{"format", "bf16"}, {"activation", "gelu"}});
  EXPECT_LT(rel_err(y, yd), 1e-5);
}

// CSR at m < 8 with named arrays (content ids) runs on a GEMV plan built once
// per contents, validated when built; unnamed arrays take the plain GEMV.
TEST(LinearFormats, CsrGemvPlanKeptPerContent) {
  Fixture f;
  std::vector<float> wd = f.dense_w();
  for (std::size_t i = 0; i < wd.size(); ++i)
    if (i % 5 != 0) wd[i] = 0;
  const std::vector<float> ref = f.dense(wd);
  sparse::Csr c = sparse::to_csr(wd.data(), N, K, K);
  constexpr std::uint64_t kEpoch = 1u << 30;  // newer than any run's epoch in this process
  constexpr std::int64_t m = M;               // 5, fewer than sparse::kCsrPlanMaxM rows: a pass of 4, then 1
  std::vector<float> y(m * N);
  auto call = [&](std::int32_t* ptr, std::uint64_t epoch, std::uint64_t id) {
    TensorView x = f.x.view();
    x.rows = m;
    x.shape = Shape{m, K};
    TensorView w = view(c.values.data(), DType::f32, 1, std::int64_t(c.values.size()), true);
    TensorView col = view(c.col.data(), DType::i32, 1, std::int64_t(c.col.size()), true);
    TensorView rp = view(ptr, DType::i32, 1, N + 1, true);
    if (id)
      w.content_id = epoch << 32 | id, col.content_id = epoch << 32 | (id + 1), rp.content_id = epoch << 32 | (id + 2);
    std::fill(y.begin(), y.end(), 7.0f);
    run(f.reg, "nn.linear",
        {x, w, TensorView{}, view(y.data(), DType::f32, m, N), TensorView{}, TensorView{}, TensorView{}, col, rp},
        {{"format", "csr"}});
  };
  auto expect_ref = [&] {
    for (std::int64_t i = 0; i < m * N; ++i) EXPECT_NEAR(y[std::size_t(i)], ref[std::size_t(i)], 1e-5) << i;
  };
  const ContentCacheStats s0 = nn::csr_plan_cache_stats();
  ASSERT_TRUE(nn::keeps_csr_plan(m));
  EXPECT_FALSE(nn::keeps_csr_plan(sparse::kCsrPlanMaxM));
  call(c.row_ptr.data(), kEpoch, 0);  // unnamed: no plan
  expect_ref();
  EXPECT_EQ(nn::csr_plan_cache_stats().misses, s0.misses);
  call(c.row_ptr.data(), kEpoch, 1);  // built
  expect_ref();
  call(c.row_ptr.data(), kEpoch, 1);  // reused
  expect_ref();
  const ContentCacheStats s1 = nn::csr_plan_cache_stats();
  EXPECT_EQ(s1.misses, s0.misses + 1);
  EXPECT_EQ(s1.hits, s0.hits + 1);
  EXPECT_EQ(s1.bytes, sparse::plan_gemv_bytes(c.view()));  // epoch 2^30 dropped any older plan
  // Other contents that lie are caught when their plan would be built.
  std::vector<std::int32_t> bad = c.row_ptr;
  bad[3] = bad[4] + 1;
  try {
    call(bad.data(), kEpoch, 10);
    ADD_FAILURE() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("w_ptr decreases at row 3"), std::string::npos) << e.what();
  }
  // A newer run's ids drop the older plans.
  call(c.row_ptr.data(), kEpoch + 1, 1);
  expect_ref();
  const ContentCacheStats s2 = nn::csr_plan_cache_stats();
  EXPECT_EQ(s2.misses, s1.misses + 1);
  EXPECT_GE(s2.evictions, s1.evictions + 1);
  EXPECT_EQ(s2.bytes, sparse::plan_gemv_bytes(c.view()));
}

TEST(LinearFormats, CheckMessages) {
  Fixture f;
  auto sv = [](DType d, std::int64_t r, std::int64_t c) { return shape_view(d, r, c); };
  const TensorView x = sv(DType::f32, M, K), y = sv(DType::f32, M, N), none{};
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K), none, y, none, sv(DType::f32, 1, N)}, {{"format", "int8"}}), "");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::f32, N, K), none, y, none, sv(DType::f32, 1, N)}, {{"format", "int8"}}),
            "port 'w' has dtype f32 but format needs i8 (int8 codes)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K), none, y}, {{"format", "int8"}}),
            "port 'w_scale' is not bound: format=int8 needs it");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K / 2), none, y, none, sv(DType::f16, N, 2), sv(DType::f16, N, 2)},
                  {{"format", "int4"}, {"group", "32"}}),
            "");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K / 2), none, y, none, sv(DType::f16, N, 2), sv(DType::bf16, N, 2)},
                  {{"format", "int4"}, {"group", "32"}}),
            "port 'w_zero' has dtype bf16: expected f32 or f16 (zero points)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K), none, y, none, sv(DType::f32, N, 3)},
                  {{"format", "int8"}, {"group", "32"}}),
            "port 'w_scale' is 12x3 but expected 12x2 (one scale per row and group)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K), none, y, none, sv(DType::f32, 1, N)},
                  {{"format", "int8"}, {"group", "48"}}),
            "param 'group' is 48 but x has 64 columns: groups must tile the rows of w");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::i8, N, K), none, y, none, sv(DType::f32, 1, N)}, {{"format", "int4"}}),
            "port 'w' is 12x64 but expected 12x32 (format=int4: w is [n, k/2] with n = y columns, k = x columns)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::f32, K, N), none, y, none, sv(DType::f32, 1, N)}),
            "port 'w_scale' is bound but format=dense does not use it");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::f32, K, N), none, y}, {{"format", "int3"}}),
            "param 'format' is 'int3': expected one of 'dense', 'int8', 'int4', 'csr', 'bsr', 'nm24', 'bf16'");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::bf16, K, N), none, y}, {{"format", "bf16"}}),
            "port 'w' is 64x12 but expected 12x64 (format=bf16: w is [n, k] with n = y columns, k = x columns)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::f32, N, K), none, y}, {{"format", "bf16"}}),
            "port 'w' has dtype f32 but format needs bf16 (bf16 weights)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::bf16, N, K), none, y}, {{"transpose_w", "true"}}),
            "port 'w' is bf16 but x is f32: format=\"bf16\" computes with bf16 weights ([n, k], f32 x and y)");
  EXPECT_EQ(check(f.reg, "nn.linear", {sv(DType::f64, M, K), sv(DType::i8, N, K), none, sv(DType::f64, M, N), none,
                                       sv(DType::f32, 1, N)},
                  {{"format", "int8"}}),
            "port 'x' has dtype f64: format=int8 needs f32 activations");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::f32, 1, 40), none, y, none, none, none, sv(DType::i32, 1, 40),
                                       sv(DType::i32, 1, N)},
                  {{"format", "csr"}}),
            "port 'w_ptr' is 1x12 but expected 1x13 (n + 1 row pointers, n = y columns)");
  EXPECT_EQ(check(f.reg, "nn.linear", {x, sv(DType::f32, N, K / 2), none, y, none, none, none, sv(DType::i8, N, K / 4)},
                  {{"format", "nm24"}}),
            "port 'w_index' is 12x16 but expected 12x8 (two 4-bit group descriptors per byte)");
}

}  // namespace
}  // namespace ymlopt::test
