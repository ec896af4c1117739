// The pass sparse.propagate (optimizer/src/zeros.cpp) on small workflows: what
// it drops, fills and keeps, rule by rule, and that it leaves runtime loops alone.
// The end-to-end check on a pruned GPT-2 is tests/e2e/cli_ops_models.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "register_builtin.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/model_editor.hpp"
#include "ymlopt/optimizer/passes.hpp"

using namespace ymlopt;

namespace {

struct Result {
  std::set<std::string> tasks;  // labels left
  nlohmann::json log;
};

Result propagate(const std::string& body) {
  static const ComponentRegistry reg = [] {
    ComponentRegistry r;
    register_builtin_components(r);
    return r;
  }();
  Diagnostics diags;
  CompileResult cr = compile_workflow_text("z.xml", "<workflow name=\"z\">" + body + "</workflow>", {}, reg, diags);
  EXPECT_TRUE(cr.ok) << diags.str();
  opt::ModelEditor ed(std::move(cr.dag), reg);
  opt::PassContext ctx{ed};
  opt::run_pass(ctx, opt::parse_pass_list("sparse.propagate")[0]);
  Result r;
  for (const TaskNode& t : ed.dag().tasks)
    if (t.comp->name != "io.save") r.tasks.insert(opt::ModelEditor::task_key(t));
  r.log = ctx.log.back();
  return r;
}

const char* kData = R"wf(
  <data name="x" shape="4,8" init="random" seed="1"/>
  <data name="w0" shape="8,6" init="zeros"/>
  <data name="w1" shape="8,6" init="random" seed="2"/>
  <data name="ones" shape="4,1" init="ones"/>
  <data name="brow" shape="1,6" init="random" seed="3"/>
  <data name="y" shape="4,6" init="zeros"/>
  <data name="t" shape="4,6" init="zeros"/>
  <data name="u" shape="4,6" init="zeros"/>
)wf";

TEST(SparsePropagate, DropsWhatChangesNothingFillsZerosOverValuesKeepsTheRest) {
  const Result r = propagate(std::string(kData) + R"wf(
  <task component="op.matmul" name="first"><in port="a" data="x"/><in port="b" data="w1"/><inout port="c" data="y"/></task>
  <task component="op.matmul" name="acc_zero"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="y"/>
    <arg name="accumulate" value="true"/></task>
  <task component="op.matmul" name="zero_over_values"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="y"/>
    <arg name="map" value="2*c"/></task>
  <task component="op.matmul" name="acc_zero_map"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="y"/>
    <arg name="accumulate" value="true"/><arg name="map" value="relu(c)"/></task>
  <task component="op.matmul" name="bias"><in port="a" data="ones"/><in port="b" data="brow"/><inout port="c" data="y"/>
    <arg name="accumulate" value="true"/></task>
  <task component="op.matmul" name="over_zero"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="t"/></task>
  <task component="nn.relu" name="relu_of_zero"><in port="x" data="t"/><out port="y" data="u"/></task>
  <task component="op.matmul" name="exp_map"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="u"/>
    <arg name="map" value="exp(c)"/></task>
  <save data="y" to="y.npy"/>
  <save data="u" to="u.npy"/>
)wf");
  // acc_zero adds nothing; acc_zero_map, over_zero and relu_of_zero write zeros over zeros; zero_over_values
  // writes zeros over first's values, which nothing reads any more; exp(0) is not 0
  EXPECT_EQ(r.tasks, (std::set<std::string>{"zero_over_values.zeros", "bias", "exp_map"})) << r.log.dump();
  EXPECT_EQ(r.log["dropped_no_effect"], 4);
  EXPECT_EQ(r.log["dropped_unread"], 1);
  EXPECT_EQ(r.log["filled"], 1);
  EXPECT_EQ(r.log["fills"], nlohmann::json::array({"zero_over_values"}));
  EXPECT_GT(double(r.log["flops_removed"]), 0.0);
}

TEST(SparsePropagate, MaskedMinusInfinityAndOtherReductionsAreNotZero) {
  const Result r = propagate(std::string(kData) + R"wf(
  <data name="m" dtype="i8" shape="4,6" init="ones"/>
  <task component="op.matmul" name="masked"><in port="a" data="x"/><in port="b" data="w0"/><in port="mask" data="m"/>
    <inout port="c" data="y"/><arg name="masked" value="-inf"/></task>
  <task component="op.matmul" name="tropical"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="t"/>
    <arg name="mul" value="a+b"/><arg name="add" value="max"/></task>
  <task component="op.matmul" name="generic"><in port="a" data="x"/><in port="b" data="w0"/><inout port="c" data="u"/>
    <arg name="mul" value="a*b + 1"/></task>
  <save data="y" to="y.npy"/><save data="t" to="t.npy"/><save data="u" to="u.npy"/>
)wf");
  EXPECT_EQ(r.log["tasks_after"], r.log["tasks_before"]) << r.log.dump();
}

TEST(SparsePropagate, AProductWhoseMaskIsZeroGivesTheIdentity) {
  const Result r = propagate(std::string(kData) + R"wf(
  <data name="none" dtype="i8" shape="4,6" init="zeros"/>
  <task component="op.matmul" name="first"><in port="a" data="x"/><in port="b" data="w1"/><inout port="c" data="y"/></task>
  <task component="op.matmul" name="masked_acc"><in port="a" data="x"/><in port="b" data="w1"/><in port="mask" data="none"/>
    <inout port="c" data="y"/><arg name="accumulate" value="true"/></task>
  <task component="op.matmul" name="masked_max"><in port="a" data="x"/><in port="b" data="w1"/><in port="mask" data="none"/>
    <inout port="c" data="t"/><arg name="mul" value="a+b"/><arg name="add" value="max"/></task>
  <task component="op.matmul" name="masked_sum"><in port="a" data="x"/><in port="b" data="w1"/><in port="mask" data="none"/>
    <inout port="c" data="u"/></task>
  <save data="y" to="y.npy"/><save data="t" to="t.npy"/><save data="u" to="u.npy"/>
)wf");
  // masked_acc keeps y; masked_sum writes 0 over 0; masked_max writes -inf, kept
  EXPECT_EQ(r.tasks, (std::set<std::string>{"first", "masked_max"})) << r.log.dump();
}

TEST(SparsePropagate, RuntimeLoopsAreLeftAlone) {
  const Result r = propagate(R"wf(
  <data name="n" shape="1" init="zeros"/>
  <data name="w0" shape="1,1" init="zeros"/>
  <until cond="n ge 3" max="5">
    <task component="op.matmul" name="zero_acc"><in port="a" data="n"/><in port="b" data="w0"/><inout port="c" data="n"/>
      <arg name="accumulate" value="true"/></task>
  </until>
)wf");
  EXPECT_TRUE(r.log.contains("skipped")) << r.log.dump();
  EXPECT_EQ(r.tasks.size(), 1u);
}

}  // namespace
