// Every built-in compute component is complete: cpu kernel, check and cost
// hooks, documented ports and params whose defaults parse, and a check that
// accepts a valid task.
#include <set>

#include "blas/blas.hpp"
#include "nn/nn.hpp"
#include "tensor/tensor.hpp"
#include "test_context.hpp"

namespace ymlopt::test {
namespace {

TestRegistry all() {
  TestRegistry reg;
  register_blas(reg);
  register_tensor(reg);
  register_nn(reg);
  return reg;
}

TEST(ComponentRegistry, NamesAreRegistered) {
  const TestRegistry reg = all();
  std::set<std::string> names;
  for (const auto& [name, spec] : reg.specs) names.insert(name);
  const std::set<std::string> expected = {
      "blas.gemm",   "blas.axpy",   "blas.potrf",  "blas.getrf",  "blas.getri",  "blas.trsm",        "blas.syrk",     "tensor.fill",
      "tensor.copy", "tensor.add",  "tensor.scale", "tensor.transpose", "tensor.norm",   "tensor.compare",
      "nn.relu",     "nn.gelu",     "nn.silu",     "nn.softmax",       "nn.embedding",  "nn.layernorm",
      "nn.rmsnorm",  "nn.linear",   "nn.attention", "nn.rope",         "nn.sinusoidal_positions",
      "nn.swiglu",   "nn.tanh",     "nn.l2normalize", "nn.pool",   "nn.positions", "nn.kv_append",
      "nn.kv_attention", "nn.kv_blocks", "nn.sample"};
  EXPECT_EQ(names, expected);
}

TEST(ComponentRegistry, RegisteringTwiceIsRejected) {
  TestRegistry reg;
  register_blas(reg);
  EXPECT_THROW(register_blas(reg), std::invalid_argument);
}

TEST(ComponentRegistry, EverySpecIsComplete) {
  const TestRegistry reg = all();
  for (const auto& [name, s] : reg.specs) {
    SCOPED_TRACE(name);
    EXPECT_NE(s.cpu, nullptr);
    EXPECT_TRUE(static_cast<bool>(s.check));
    EXPECT_TRUE(static_cast<bool>(s.cost));
    EXPECT_FALSE(s.doc.empty());
    EXPECT_FALSE(s.host_only);
    EXPECT_FALSE(s.ports.empty());
    std::set<std::string> seen;
    for (const PortSpec& p : s.ports) {
      EXPECT_TRUE(seen.insert(p.name).second) << "duplicate port " << p.name;
      EXPECT_FALSE(p.doc.empty()) << p.name;
    }
    for (const ParamSpec& p : s.params) {
      EXPECT_TRUE(seen.insert(p.name).second) << "duplicate name " << p.name;
      EXPECT_FALSE(p.doc.empty()) << p.name;
      if (p.required) {
        EXPECT_TRUE(p.default_value.empty()) << p.name << ": a required param has no default";
        continue;
      }
      if (p.type == ParamType::float_ || p.type == ParamType::int_) {
        EXPECT_NO_THROW((void)std::stod(p.default_value));
      }
      if (p.type == ParamType::bool_) {
        EXPECT_TRUE(p.default_value == "true" || p.default_value == "false");
      }
    }
  }
}

/// A valid task for every component (shape-only views, f64).
TEST(ComponentRegistry, ValidShapesPassCheckAndCostIsPositive) {
  const TestRegistry reg = all();
  const DType d = DType::f64;
  TensorView vec3 = shape_view(d, 1, 3);
  vec3.shape = {3};
  TensorView ids = shape_view(DType::i32, 4, 1);
  const std::map<std::string, std::vector<TensorView>> valid = {
      {"blas.gemm", {shape_view(d, 4, 3), shape_view(d, 3, 5), shape_view(d, 4, 5)}},
      {"blas.axpy", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"blas.potrf", {shape_view(d, 4, 4)}},
      {"blas.getrf", {shape_view(d, 4, 4)}},
      {"blas.getri", {shape_view(d, 4, 4)}},
      {"blas.trsm", {shape_view(d, 4, 4), shape_view(d, 6, 4)}},
      {"blas.syrk", {shape_view(d, 4, 3), shape_view(d, 4, 4)}},
      {"tensor.fill", {shape_view(DType::bf16, 4, 3)}},
      {"tensor.copy", {shape_view(DType::i8, 4, 3), shape_view(DType::f16, 4, 3)}},
      {"tensor.add", {shape_view(d, 4, 3), shape_view(d, 1, 3), shape_view(d, 4, 3)}},
      {"tensor.scale", {shape_view(d, 4, 3)}},
      {"tensor.transpose", {shape_view(d, 4, 3), shape_view(d, 3, 4)}},
      {"tensor.norm", {shape_view(d, 4, 3), TensorView{}}},
      {"tensor.compare", {shape_view(d, 4, 3), shape_view(DType::f32, 4, 3)}},
      {"nn.relu", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.gelu", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.silu", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.softmax", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.embedding", {ids, shape_view(d, 10, 3), shape_view(d, 4, 3), {}, {}, {}, {}}},  // compressed-table ports unbound
      {"nn.layernorm", {shape_view(d, 4, 3), vec3, vec3, shape_view(d, 4, 3)}},
      {"nn.rmsnorm", {shape_view(d, 4, 3), vec3, shape_view(d, 4, 3)}},
      {"nn.linear", {shape_view(d, 4, 5), shape_view(d, 5, 3), vec3, shape_view(d, 4, 3), shape_view(d, 4, 3), {}, {}, {}, {}}},
      {"nn.attention", {shape_view(d, 4, 6), shape_view(d, 4, 6), shape_view(d, 4, 6), shape_view(d, 4, 6)}},
      {"nn.rope", {shape_view(d, 4, 6), ids}},
      {"nn.sinusoidal_positions", {shape_view(d, 4, 6)}},
      {"nn.swiglu", {shape_view(d, 4, 3), shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.tanh", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.l2normalize", {shape_view(d, 4, 3), shape_view(d, 4, 3)}},
      {"nn.pool", {shape_view(d, 4, 3), shape_view(d, 1, 3)}},
      {"nn.positions", {shape_view(DType::i32, 1, 1), ids, {}, {}, {}}},
      {"nn.kv_append", {shape_view(d, 4, 6), ids, shape_view(d, 9, 6), {}, {}, {}}},
      {"nn.kv_attention", {shape_view(d, 4, 6), shape_view(d, 9, 6), shape_view(d, 9, 6), ids, shape_view(d, 4, 6), {}, {}, {}, {}}},
      {"nn.kv_blocks", {ids, ids, shape_view(DType::i32, 2, 1), shape_view(DType::i32, 2, 3), shape_view(DType::i32, 1, 8)}},
      {"nn.sample", {shape_view(d, 4, 10), shape_view(DType::i32, 1, 1), shape_view(DType::i32, 1, 5),
                     shape_view(DType::i32, 1, 1), shape_view(DType::i32, 1, 1), {}}},
  };
  // required params (no default) of the components that have some
  const std::map<std::string, std::map<std::string, std::string>> args = {
      {"nn.attention", {{"heads", "2"}}},
      {"nn.rope", {{"heads", "3"}}},
      {"nn.kv_attention", {{"heads", "2"}}},
      {"nn.kv_blocks", {{"block", "4"}}},
  };
  for (const auto& [name, s] : reg.specs) {
    SCOPED_TRACE(name);
    auto it = valid.find(name);
    ASSERT_NE(it, valid.end()) << "no valid case for " << name;
    const auto a = args.count(name) ? args.at(name) : std::map<std::string, std::string>{};
    TestContext ctx(s, it->second, a);
    EXPECT_EQ(ctx.check(), "");
    const Cost c = ctx.cost();
    EXPECT_GT(c.bytes, 0);
    EXPECT_GE(c.flops, 0);
    // a port missing is reported, not a crash
    std::vector<TensorView> fewer(it->second.begin(), it->second.end() - 1);
    EXPECT_NE(TestContext(s, fewer, a).check(), "");
    EXPECT_EQ(TestContext(s, fewer, a).cost().flops, 0);
  }
}

}  // namespace
}  // namespace ymlopt::test
