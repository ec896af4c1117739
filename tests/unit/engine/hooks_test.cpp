// The ComponentSpec hooks the engine calls for a component it knows nothing
// about: `rate` prices its tasks in the performance model, `compressed` binds
// the companion tensors of a weight stored compressed to its ports.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/tensor_file.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/perf_model.hpp"
#include "ymlopt/engine/registry.hpp"

using namespace ymlopt;

namespace {

void no_kernel(KernelContext&) {}

/// "my.mv": y[m, n] = x[m, k] W, W stored [n, k] as int8 codes with a scale per
/// row (companions "w" and "w_scale"), priced at the "int8" kernel's rate with an
/// epilogue; "my.copy" reads anything and has neither hook.
ComponentRegistry hooked_registry(bool throwing_rate = false) {
  ComponentRegistry reg;
  ComponentSpec mv;
  mv.name = "my.mv";
  mv.ports = {{"x", Access::read, {}, false, 8, ""},
              {"w", Access::read, {}, false, 8, ""},
              {"y", Access::write, {}, false, 8, ""},
              {"w_scale", Access::read, {DType::f32}, true, 8, ""}};
  mv.params = {{"format", ParamType::string_, "dense", false, ""}, {"group", ParamType::int_, "0", false, ""}};
  mv.cpu = no_kernel;
  mv.cost = [](const TaskShape& t) {
    Cost c;
    c.flops = 2.0 * double(t.ports[0].rows) * double(t.ports[0].cols) * double(t.ports[2].cols);
    return c;
  };
  if (throwing_rate) {
    mv.rate = [](const TaskShape&) -> TaskRate { throw std::runtime_error("no rate"); };
  } else {
    mv.rate = [](const TaskShape& t) {
      return TaskRate{RateKind::kernel, "int8", t.ports[2].rows, t.ports[2].cols, t.ports[0].cols, "my.mv.act",
                      double(t.ports[2].size())};
    };
  }
  mv.compressed.port = "w";
  mv.compressed.roles = {"w", "w_scale"};
  mv.compressed.bind = [](const CompressedWeight& w, CompanionBinding& out) -> std::string {
    if (const ArgValue* f = w.given("format"); f && f->text != "dense") return "leave format out";
    if (!w.nk) return "'" + w.name + "' must be [n, k]";
    for (const std::string& role : w.roles) out.ports.emplace_back(role, role);
    out.args.emplace_back("format", ArgValue{0, w.format});
    out.args.emplace_back("group", ArgValue{double(w.group), std::to_string(w.group)});
    return "";
  };
  reg.add(std::move(mv));
  ComponentSpec copy;
  copy.name = "my.copy";
  copy.ports = {{"x", Access::read, {}, false, 8, ""}, {"y", Access::write, {}, false, 8, ""}};
  copy.cpu = no_kernel;
  reg.add(std::move(copy));
  return reg;
}

/// A weights file holding W [4, 8] stored "q8" (int8 codes and a scale per row).
std::string compressed_file() {
  const std::string dir = testing::TempDir() + "/ymlopt-hooks";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/w.safetensors";
  std::vector<std::int8_t> codes(4 * 8, 1);
  std::vector<float> scales(4, 0.5f);
  io::save_safetensors(file,
                       {{"W.w", {codes.data(), DType::i8, 4, 8, 8, Shape{4, 8}}},
                        {"W.w_scale", {scales.data(), DType::f32, 1, 4, 4, Shape{4}}}},
                       {{"ymlopt.format.W", "q8 group=2 block=0 layout=nk n=4 k=8"}});
  return file;
}

CompileResult compile(const ComponentRegistry& reg, const std::string& body, Diagnostics& diags) {
  const std::string xml = R"(<workflow name="hooks">
    <data name="x" shape="3,8" init="random" seed="1"/>
    <data name="W" shape="4,8" src=")" + compressed_file() + R"(" key="W"/>
    <data name="y" shape="3,4"/>
    )" + body + "</workflow>";
  return compile_workflow_text("hooks.xml", xml, CompileOptions{}, reg, diags);
}

}  // namespace

TEST(ComponentHooks, RatePricesTheTaskWithItsEpilogue) {
  const ComponentRegistry reg = hooked_registry();
  Diagnostics diags;
  const CompileResult r = compile(reg, R"(<data name="a" shape="3,8" init="random" seed="2"/>
    <data name="b" shape="3,8"/>
    <task component="my.mv"><in port="x" data="x"/><in port="w" data="a"/><out port="y" data="y"/></task>
    <task component="my.copy"><in port="x" data="a"/><out port="y" data="b"/></task>)", diags);
  ASSERT_TRUE(r.ok) << diags.str();
  const TaskRate mv = task_rate(r.dag.tasks[0], r.dag);
  EXPECT_EQ(mv.kind, RateKind::kernel);
  EXPECT_EQ(mv.name, "int8");
  EXPECT_EQ(mv.m, 3);
  EXPECT_EQ(mv.n, 4);
  EXPECT_EQ(mv.k, 8);
  // no hook: the component's own rates, under its name
  const TaskRate copy = task_rate(r.dag.tasks[1], r.dag);
  EXPECT_EQ(copy.kind, RateKind::component);
  EXPECT_EQ(copy.name, "my.copy");
  Calibration c;
  c.kernels = {{"int8", {{3, 4, 8, 2}}}};
  c.read_gbs = 1e6;
  const double flops = r.dag.tasks[0].cost.flops;
  EXPECT_DOUBLE_EQ(predict_task_seconds(r.dag.tasks[0], r.dag, c), flops / 2e9);
  c.components["my.mv.act"] = {0.5, 0, 0};  // the epilogue, once calibrated: 12 flops at 0.5 GFLOP/s
  EXPECT_DOUBLE_EQ(predict_task_seconds(r.dag.tasks[0], r.dag, c), flops / 2e9 + 12 / 0.5e9);
}

TEST(ComponentHooks, ARateThatThrowsFallsBackToTheComponentsRates) {
  const ComponentRegistry reg = hooked_registry(/*throwing_rate=*/true);
  Diagnostics diags;
  const CompileResult r = compile(reg, R"(<data name="a" shape="3,8" init="random" seed="2"/>
    <task component="my.mv"><in port="x" data="x"/><in port="w" data="a"/><out port="y" data="y"/></task>)", diags);
  ASSERT_TRUE(r.ok) << diags.str();
  const TaskRate rate = task_rate(r.dag.tasks[0], r.dag);
  EXPECT_EQ(rate.kind, RateKind::component);
  EXPECT_EQ(rate.name, "my.mv");
}

TEST(ComponentHooks, CompressedReaderBindsTheCompanions) {
  const ComponentRegistry reg = hooked_registry();
  Diagnostics diags;
  const CompileResult r = compile(
      reg, R"(<task component="my.mv"><in port="x" data="x"/><in port="w" data="W"/><out port="y" data="y"/></task>)",
      diags);
  ASSERT_TRUE(r.ok) << diags.str();
  const DataDecl& w = r.dag.data[1];
  EXPECT_EQ(w.format, "q8");
  ASSERT_EQ(w.companions.size(), 2u);
  EXPECT_EQ(w.companions[0].first, "w");
  EXPECT_EQ(w.companions[1].first, "w_scale");
  const TaskNode& t = r.dag.tasks[0];
  EXPECT_EQ(r.dag.data[size_t(t.bindings[1].ref.data)].name, "W.w");
  EXPECT_EQ(r.dag.data[size_t(t.bindings[3].ref.data)].name, "W.w_scale");
  EXPECT_EQ(t.args.get_string("format"), "q8");
  EXPECT_EQ(t.args.get_int("group"), 2);
}

TEST(ComponentHooks, CompressedReaderErrorsAndOtherReaders) {
  const ComponentRegistry reg = hooked_registry();
  Diagnostics diags;
  EXPECT_FALSE(compile(reg, R"(<task component="my.mv"><in port="x" data="x"/><in port="w" data="W"/>
      <out port="y" data="y"/><arg name="format" value="int8"/></task>)",
                       diags)
                   .ok);
  EXPECT_NE(diags.str().find("task 'my.mv': leave format out"), std::string::npos) << diags.str();
  Diagnostics other;
  EXPECT_FALSE(compile(reg, R"(<data name="c" shape="4,8"/>
      <task component="my.copy"><in port="x" data="W"/><out port="y" data="c"/></task>)",
                       other)
                   .ok);
  EXPECT_NE(other.str().find("task 'my.copy': 'W' is stored compressed (q8) in "), std::string::npos) << other.str();
  EXPECT_NE(other.str().find(": only my.mv's port 'w' can read it"), std::string::npos) << other.str();
}
