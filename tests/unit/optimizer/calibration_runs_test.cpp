// CalibrationRuns (optimizer/src/calibration_runs.cpp): the calibration runs kept
// to capture again after a pass compressed some layers. On the unchanged model a
// capture stacks the runs exactly as separate captures do; after a replacement
// mirrored by name, the captured inputs of the layers after it change and those
// before it do not; a weight name no run has is an error; quant.gptq:correct=true
// needs the runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "tiny_gpt2.hpp"
#include "register_builtin.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/passes.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;

namespace {

const std::string kModel = std::string(YMLOPT_SOURCE_DIR) + "/workflows/models/gpt2.xml";

const TinyGpt2& tiny_a() {
  static const TinyGpt2 t("calib-runs-a", 9, 41, 3);
  return t;
}
const TinyGpt2& tiny_b() {
  static const TinyGpt2 t("calib-runs-b", 9, 29, 7);  // same weights (seed), other ids
  return t;
}

Dag compile(const ComponentRegistry& reg, const TinyGpt2& t) {
  Diagnostics diags;
  auto sets = t.set_pairs();
  for (auto& [k, v] : sets)
    if (k == "weights") v = tiny_a().weights;  // one model, two inputs
  CompileResult cr = compile_workflow({kModel, sets}, reg, diags);
  if (!cr.ok) throw std::runtime_error(diags.str());
  return std::move(cr.dag);
}

std::string scratch() { return (fs::temp_directory_path() / ("ymlopt-calib-runs-" + std::to_string(::getpid()))).string(); }

TEST(CalibrationRunsTest, CaptureStacksTheRunsLikeSeparateCaptures) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  const opt::Calibration a = opt::capture_linear_inputs(compile(reg, tiny_a()), scratch());
  const opt::Calibration b = opt::capture_linear_inputs(compile(reg, tiny_b()), scratch());
  std::vector<Dag> dags;
  dags.push_back(compile(reg, tiny_a()));
  dags.push_back(compile(reg, tiny_b()));
  opt::CalibrationRuns runs(std::move(dags), reg, scratch());
  const opt::Calibration both = runs.capture();
  ASSERT_FALSE(a.inputs.empty());
  ASSERT_EQ(both.inputs.size(), a.inputs.size());
  for (const auto& [key, in] : both.inputs) {
    const auto& x = a.inputs.at(key);
    const auto& y = b.inputs.at(key);
    ASSERT_EQ(in.m, x.m + y.m) << key;
    ASSERT_EQ(in.k, x.k) << key;
    std::vector<float> want = x.x;
    want.insert(want.end(), y.x.begin(), y.x.end());
    EXPECT_EQ(in.x, want) << key;  // bit-identical: the same kernels on the same inputs
  }
  fs::remove_all(scratch());
}

TEST(CalibrationRunsTest, AReplacementChangesTheInputsAfterItOnly) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  std::vector<Dag> dags;
  dags.push_back(compile(reg, tiny_a()));
  dags.push_back(compile(reg, tiny_b()));
  opt::CalibrationRuns runs(std::move(dags), reg, scratch());
  const opt::Calibration before = runs.capture();

  // the main model: quant.int8 on layer 1's MLP output projection only, mirrored in the runs
  const Dag plain = compile(reg, tiny_a());
  opt::ModelEditor ed(compile(reg, tiny_a()), reg);
  opt::PassContext ctx{ed};
  opt::run_pass(ctx, opt::parse_pass_list("quant.int8:match=^h\\.1\\.mlp\\.c_fc")[0]);
  ASSERT_EQ(ctx.log.size(), 1u);
  const std::string name = "h.1.mlp.c_fc.weight";
  std::vector<opt::NewTensor> ts;
  std::map<std::string, std::string> args;
  std::size_t task = 0;
  bool found = false;
  for (std::size_t i = 0; i < ed.dag().tasks.size() && !found; ++i) {
    const TaskNode& t = ed.dag().tasks[i];
    if (t.comp->name != "nn.linear") continue;
    for (const auto& [role, port] : std::vector<std::pair<std::string, std::string>>{{"w", "w"}, {"w_scale", "w_scale"}}) {
      const DataRef r = t.bindings[ed.port_index(t, port)].ref;
      if (r.data < 0 || ed.dag().data[std::size_t(r.data)].name.rfind(name, 0) != 0) break;
      const DataDecl& d = ed.dag().data[std::size_t(r.data)];
      ts.push_back({role, d.dtype, d.shape, ed.tensor_bytes(r.data), true});
    }
    if (ts.size() != 2) {
      ts.clear();
      continue;
    }
    found = true, task = i;
    const auto& now = t.args.values();
    const auto& was = plain.tasks[i].args.values();  // the same task before the pass
    for (std::size_t a = 0; a < now.size() && a < was.size(); ++a)
      if (now[a].text != was[a].text) args[t.comp->params[a].name] = now[a].text;
  }
  ASSERT_TRUE(found) << "no int8 reader of " << name;
  runs.replace(name, ts, args);
  const opt::Calibration after = runs.capture();
  int same = 0, changed = 0, earlier = 0;
  for (const auto& [key, in] : after.inputs) {
    const bool equal = in.x == before.inputs.at(key).x;
    (equal ? same : changed) += 1;
    // task keys "c_fc(layer,tile)": every linear up to layer 1's c_fc reads what it read before
    if (key.rfind("c_attn(", 0) == 0 || key.rfind("c_proj(", 0) == 0 || key.rfind("c_fc(", 0) == 0 ||
        key.rfind("mlp_proj(0,", 0) == 0) {
      EXPECT_TRUE(equal) << key << " comes before the replaced layer";
      ++earlier;
    }
  }
  EXPECT_GT(earlier, 0) << "no task key names a layer before the replaced one";
  for (const auto& [key, in] : after.inputs) {
    if (key.rfind("mlp_proj(1,", 0) != 0) continue;
    EXPECT_NE(in.x, before.inputs.at(key).x) << key << " reads the replaced layer";
  }
  EXPECT_FALSE(args.empty());
  EXPECT_GT(same, 0);
  EXPECT_GT(changed, 0) << "the layers after " << name << " (task " << task << ") see other inputs";
  EXPECT_THROW(runs.replace("no.such.weight", ts, args), std::runtime_error);
  fs::remove_all(scratch());
}

TEST(CalibrationRunsTest, GptqCorrectNeedsTheRuns) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  opt::ModelEditor ed(compile(reg, tiny_a()), reg);
  const opt::Calibration c = opt::capture_linear_inputs(ed.dag(), scratch());
  opt::PassContext ctx{ed, &c};
  try {
    opt::run_pass(ctx, opt::parse_pass_list("quant.gptq:bits=8:group=0:correct=true")[0]);
    FAIL() << "no error";
  } catch (const opt::PassError& e) {
    EXPECT_NE(std::string(e.what()).find("needs the calibration runs themselves"), std::string::npos) << e.what();
  }
  fs::remove_all(scratch());
}

}  // namespace
