// ElementProgram (components/op/element_program.hpp) against direct evaluation,
// its parse errors, and op.matmul with a general `mul` and a `map` against
// long-double references and against the fast kernels on a*b and a+b.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "op/element_program.hpp"
#include "op/op.hpp"
#include "op/semiring.hpp"

namespace {

using namespace ymlopt;
using op::ElementProgram;
using std::int64_t;

std::string compile_error(const std::string& text) {
  try {
    ElementProgram::compile(text, {"a", "b"});
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* text;
  std::function<long double(long double, long double)> f;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"max(a,b)", [](long double a, long double b) { return std::max(a, b); }},
      {"exp(a - b)", [](long double a, long double b) { return std::exp(a - b); }},
      {"a*relu(b)", [](long double a, long double b) { return a * (b > 0 ? b : 0); }},
      {"-a/2 + sqrt(abs(b))", [](long double a, long double b) { return -a / 2 + std::sqrt(std::abs(b)); }},
      {"0.5*a*(1 + erf(b*0.7071067811865476))",
       [](long double a, long double b) { return 0.5L * a * (1 + std::erf(b * 0.7071067811865476L)); }},
      {"min(a, 0.5) * tanh(b) - log(1 + a*a)",
       [](long double a, long double b) { return std::min(a, 0.5L) * std::tanh(b) - std::log(1 + a * a); }},
  };
  return c;
}

TEST(ElementProgram, EvaluatesOverBlocksAsDirectly) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<float> row(200);
  for (float& x : row) x = d(gen);
  const float a = 0.75f;
  for (const Case& c : cases()) {
    const ElementProgram p = ElementProgram::compile(c.text, {"a", "b"});
    EXPECT_EQ(p.canonical(), "") << c.text;
    for (int64_t len : {1, 17, 64}) {
      std::vector<float> scalar_out;
      for (op::Isa isa : {op::Isa::scalar, op::Isa::avx2, op::Isa::avx512}) {
        if ((isa == op::Isa::avx2 && !op::cpu_has_avx2()) || (isa == op::Isa::avx512 && !op::cpu_has_avx512())) continue;
        std::vector<float> out(static_cast<size_t>(len));
        const ElementProgram::Input in[2] = {{&a, 0}, {row.data() + 3, 2}};  // b strided
        p.run(in, out.data(), len, isa);
        for (int64_t l = 0; l < len; ++l) {
          const long double want = c.f(a, row[size_t(3 + 2 * l)]);
          ASSERT_NEAR(out[size_t(l)], double(want), 2e-6 * std::max(1.0, double(std::abs(want))))
              << c.text << " " << l << " isa " << int(isa);
        }
        // without exp, tanh or erf (polynomials on the vector paths) every ISA gives the scalar values
        const std::string t = c.text;
        const bool polynomial = t.find("exp") != std::string::npos || t.find("tanh") != std::string::npos ||
                                t.find("erf") != std::string::npos;
        if (isa == op::Isa::scalar) {
          scalar_out = out;
        } else if (!polynomial) {
          EXPECT_EQ(out, scalar_out) << c.text << " isa " << int(isa);
        }
      }
    }
  }
  EXPECT_EQ(ElementProgram::compile("b * a", {"a", "b"}).canonical(), "a*b");
  EXPECT_EQ(ElementProgram::compile(" a+b ", {"a", "b"}).canonical(), "a+b");
  EXPECT_EQ(ElementProgram::compile("a+a", {"a", "b"}).canonical(), "");
}

TEST(ElementProgram, ParseErrorsNameThePosition) {
  EXPECT_EQ(compile_error("a +"), "expression 'a +' at column 4: expected a number, a variable, a function or '('");
  EXPECT_EQ(compile_error("max(a)"), "expression 'max(a)' at column 6: expected ',' (max takes two arguments)");
  EXPECT_EQ(compile_error("a * c"),
            "expression 'a * c' at column 5: expected a variable (a, b, or a function: exp log abs sqrt tanh erf relu "
            "max min), not 'c'");
  EXPECT_EQ(compile_error("(a + b"), "expression '(a + b' at column 7: expected ')'");
  EXPECT_EQ(compile_error("a b"), "expression 'a b' at column 3: expected an operator or the end");
  EXPECT_EQ(compile_error("((((((((((((((((a))))))))))))))))+b"), "");  // parentheses alone keep nothing pending
  EXPECT_EQ(compile_error("1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+a))))))))))))))))"),
            "expression '1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+(1+a))))))))))))))))' needs 18 pending values "
            "at once: at most 16");
}

TEST(OpMatmulProgram, GeneralMulEveryReductionAgainstLongDouble) {
  const int64_t m = 7, n = 70, k = 13;  // n: a full block of 64 and a tail of 6
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> d(-1.5f, 1.5f);
  std::vector<float> a(size_t(m * k)), b(size_t(k * n));
  for (float& x : a) x = d(gen);
  for (float& x : b) x = d(gen);
  for (const Case& cs : cases())
    for (op::Reduce r : {op::Reduce::sum, op::Reduce::max, op::Reduce::min, op::Reduce::logsumexp}) {
      if (std::string(cs.text).find("sqrt") != std::string::npos || std::string(cs.text).find("log") != std::string::npos)
        continue;  // keep the terms finite for every reduction below
      const ElementProgram p = ElementProgram::compile(cs.text, {"a", "b"});
      std::vector<float> c(size_t(m * n));
      op::matmul_program(p, r, false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n, false);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          long double acc = r == op::Reduce::sum ? 0 : r == op::Reduce::min ? INFINITY : -INFINITY, s = 0;
          std::vector<long double> terms;
          for (int64_t kk = 0; kk < k; ++kk) terms.push_back(cs.f(a[size_t(i * k + kk)], b[size_t(kk * n + j)]));
          for (long double x : terms)
            acc = r == op::Reduce::sum ? acc + x : r == op::Reduce::min ? std::min(acc, x) : std::max(acc, x);
          if (r == op::Reduce::logsumexp) {
            for (long double x : terms) s += std::exp(x - acc);
            acc += std::log(s);
          }
          ASSERT_NEAR(c[size_t(i * n + j)], double(acc), 1e-5 * std::max(1.0, double(std::abs(acc))))
              << cs.text << " reduce " << int(r) << " at " << i << "," << j;
        }
    }
}

TEST(OpMatmulProgram, TheGenericPathGivesTheFastKernelsValues) {
  // a+b through the program (spelled so it is not recognised) against the (max, +) and (min, +) kernels: exact.
  const int64_t m = 9, n = 45, k = 31;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> d(-3, 3);
  std::vector<float> a(size_t(m * k)), b(size_t(k * n));
  for (float& x : a) x = d(gen);
  for (float& x : b) x = d(gen);
  const ElementProgram p = ElementProgram::compile("(a) + (b) * 1", {"a", "b"});
  ASSERT_EQ(p.canonical(), "");
  for (op::Reduce r : {op::Reduce::max, op::Reduce::min}) {
    std::vector<float> slow(size_t(m * n)), fast(size_t(m * n));
    op::matmul_program(p, r, true, false, m, n, k, a.data(), m, b.data(), n, slow.data(), n, false);  // a as k x m
    op::matmul({op::Combine::add, r}, true, false, m, n, k, a.data(), m, b.data(), n, fast.data(), n, false);
    EXPECT_EQ(slow, fast);
  }
}

TEST(OpMatmulProgram, ComponentMapAndMessages) {
  test::TestRegistry reg;
  register_op(reg);
  test::Mat<float> a(3, 4), b(4, 5), c(3, 5);
  a.random(1);
  b.random(2);
  test::run(reg, "op.matmul", {a.view(), b.view(), c.view()},
            {{"mul", "exp(a - b)"}, {"add", "sum"}, {"map", "log(c)"}});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      long double s = 0;
      for (int64_t kk = 0; kk < 4; ++kk) s += std::exp((long double)a(i, kk) - b(kk, j));
      EXPECT_NEAR(c(i, j), double(std::log(s)), 1e-5);
    }
  auto sv = [](int64_t r, int64_t cc, DType dt = DType::f32) { return test::shape_view(dt, r, cc); };
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 4), sv(4, 5), sv(3, 5)}, {{"mul", "max(a)"}}),
            "param 'mul': expression 'max(a)' at column 6: expected ',' (max takes two arguments)");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 4), sv(4, 5), sv(3, 5)}, {{"map", "relu(a)"}}),
            "param 'map': expression 'relu(a)' at column 6: expected a variable (c, or a function: exp log abs sqrt "
            "tanh erf relu max min), not 'a'");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 4, DType::f64), sv(4, 5, DType::f64), sv(3, 5, DType::f64)},
                        {{"mul", "max(a,b)"}}),
            "param 'mul' is 'max(a,b)': expressions other than a*b and a+b, and map, run on f32 data (this product "
            "is f64)");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 4), sv(4, 5), sv(3, 5), sv(3, 5, DType::i32)},
                        {{"mul", "max(a,b)"}, {"add", "max"}}),
            "param 'mul' is 'max(a,b)': ports arg and mask, and skip_zeros, go with mul a*b or a+b");
}

TEST(OpMatmulProgram, TwoFourSparseBSkipsItsZeros) {
  // B pruned to 2:4 along k (the two largest of each 4), as B [k, n] and as Bᵀ [n, k]: the 2:4 kernel's product
  // equals the dense one on the same B, overwriting and accumulating; portable and AVX-512 paths alike
  test::TestRegistry reg;
  register_op(reg);
  const int64_t m = 37, k = 64, n = 29;
  test::Mat<float> a(m, k), b(k, n), bt(n, k);
  a.random(5);
  b.random(6);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t g = 0; g < k / 4; ++g) {
      int keep[2] = {0, 1};  // the two largest |b| of the group
      for (int i = 2; i < 4; ++i) {
        const int lo = std::abs(b(4 * g + keep[0], j)) < std::abs(b(4 * g + keep[1], j)) ? 0 : 1;
        if (std::abs(b(4 * g + i, j)) > std::abs(b(4 * g + keep[lo], j))) keep[lo] = i;
      }
      for (int i = 0; i < 4; ++i)
        if (i != keep[0] && i != keep[1]) b(4 * g + i, j) = 0;
    }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < k; ++kk) bt(j, kk) = b(kk, j);
  for (bool acc : {false, true}) {
    test::Mat<float> dense(m, n), c1(m, n), c2(m, n);
    for (auto* c : {&dense, &c1, &c2})
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) (*c)(i, j) = 0.5f;
    const std::string accs = acc ? "true" : "false";
    test::run(reg, "op.matmul", {a.view(), b.view(), dense.view()}, {{"accumulate", accs}});
    test::run(reg, "op.matmul", {a.view(), b.view(), c1.view()}, {{"sparse_b", "2:4"}, {"accumulate", accs}});
    test::run(reg, "op.matmul", {a.view(), bt.view(), c2.view()},
              {{"sparse_b", "2:4"}, {"transb", "true"}, {"accumulate", accs}});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_NEAR(c1(i, j), dense(i, j), 1e-5) << i << "," << j;
        ASSERT_NEAR(c2(i, j), dense(i, j), 1e-5) << i << "," << j;
      }
  }
  b(1, 3) = 1, b(2, 3) = 1, b(3, 3) = 1;  // three nonzeros in group 0 of column 3
  test::Mat<float> c(m, n);
  EXPECT_NE(test::run_error(reg, "op.matmul", {a.view(), b.view(), c.view()}, {{"sparse_b", "2:4"}})
                .find("port 'b' is not 2:4 along k (sparse_b): to_nm24: row 3, group 0"),
            std::string::npos);
  auto sv = [](int64_t r, int64_t cc) { return test::shape_view(DType::f32, r, cc); };
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 12), sv(12, 5), sv(3, 5)}, {{"sparse_b", "2:4"}}),
            "param 'sparse_b': the inner dimension 12 is not a multiple of 8 (2:4 packs two groups of 4 per index byte)");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 16), sv(16, 5), sv(3, 5)}, {{"sparse_b", "2:4"}, {"add", "max"}}),
            "param 'sparse_b' is for f32 mul=a*b add=sum without transa, arg, mask or skip_zeros");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 16), sv(16, 5), sv(3, 5)}, {{"sparse_b", "1:4"}}),
            "param 'sparse_b' is '1:4': 2:4 is the pattern with a kernel (or empty: dense)");
}

TEST(OpMatmulProgram, CausalSoftmaxAsProducts) {
  // gpt2's attention in workflows/ops: s = q kᵀ/sqrt(d) under op.mask (masked -inf), n = -logsumexp_k s[i,k],
  // p = exp(s + n 1ᵀ): rows of a causal softmax, against long double.
  test::TestRegistry reg;
  register_op(reg);
  const int64_t t = 150, d = 8;  // 150: a 128-block edge, masked blocks skipped
  test::Mat<float> q(t, d), k(t, d), s(t, t), nl(t, 1), zeros(t, 1), ones(1, t);
  test::Mat<std::int8_t> mask(t, t, 0, DType::i8);
  q.random(3);
  k.random(4);
  for (int64_t j = 0; j < t; ++j) ones(0, j) = 1, zeros(j, 0) = 0;
  test::run(reg, "op.mask", {mask.view()}, {{"pattern", "causal"}});
  test::run(reg, "op.matmul", {q.view(), k.view(), s.view(), {}, mask.view()},
            {{"transb", "true"}, {"masked", "-inf"}, {"map", "c/sqrt(8)"}});
  test::run(reg, "op.matmul", {s.view(), zeros.view(), nl.view()}, {{"mul", "a+b"}, {"add", "logsumexp"}, {"map", "-c"}});
  test::run(reg, "op.matmul", {nl.view(), ones.view(), s.view()}, {{"accumulate", "true"}, {"map", "exp(c)"}});
  for (int64_t i = 0; i < t; ++i) {
    std::vector<long double> e(size_t(i + 1));
    long double z = 0;
    for (int64_t j = 0; j <= i; ++j) {
      long double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += (long double)q(i, c) * k(j, c);
      e[size_t(j)] = std::exp(dot / std::sqrt(8.0L));
      z += e[size_t(j)];
    }
    for (int64_t j = 0; j < t; ++j) {
      ASSERT_EQ(mask(i, j), j <= i ? 1 : 0);
      if (j > i) ASSERT_EQ(s(i, j), 0.0f) << i << "," << j;
      else ASSERT_NEAR(s(i, j), double(e[size_t(j)] / z), 1e-6) << i << "," << j;
    }
  }
  test::run(reg, "op.mask", {mask.view()}, {{"pattern", "band"}, {"width", "2"}, {"offset", "1"}});
  EXPECT_EQ(mask(0, 3), 1);
  EXPECT_EQ(mask(0, 4), 0);
  EXPECT_EQ(mask(5, 4), 1);
  EXPECT_EQ(mask(5, 3), 0);
  auto sv = [](int64_t r, int64_t cc, DType dt = DType::f32) { return test::shape_view(dt, r, cc); };
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 4), sv(4, 5), sv(3, 5)}, {{"masked", "-inf"}}),
            "param 'masked' goes with port 'mask'");
  EXPECT_EQ(test::check(reg, "op.matmul", {sv(3, 4), sv(4, 5), sv(3, 5), {}, sv(3, 5, DType::i8)}, {{"masked", "-1e"}}),
            "param 'masked' is '-1e': a number, inf or -inf (or empty: the reduction's identity)");
  EXPECT_EQ(test::check(reg, "op.mask", {sv(3, 5, DType::i8)}, {{"pattern", "band"}, {"width", "-1"}}),
            "param 'width' is -1: the band's half-width is >= 0");
}

}  // namespace
