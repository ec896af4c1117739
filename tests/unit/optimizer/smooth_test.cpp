// The pass `smooth` (optimizer/src/smooth.cpp): SmoothQuant / AWQ scales against a naive
// long-double reference; the scaled f32 model (before any quantizer) run through the
// unchanged workflow on the written weights file gives the original outputs (the 1/s
// folded into a LayerNorm and into a ReLU linear's rows and bias), on a small
// LayerNorm -> linear+ReLU -> linear model and on the tiny seeded GPT-2; the AWQ
// search's objective against a long-double recomputation; check messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include "io/tensor_file.hpp"
#include "register_builtin.hpp"
#include "sequential.hpp"
#include "tiny_gpt2.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/passes.hpp"
#include "ymlopt/optimizer/smooth.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;
using LD = long double;

namespace {

const std::string kGpt2 = std::string(YMLOPT_SOURCE_DIR) + "/workflows/models/gpt2.xml";

const TinyGpt2& tiny() {
  static const TinyGpt2 t("smooth", 7, 29, 11);
  return t;
}

TensorView view_of(std::vector<float>& v, std::vector<std::int64_t> shape) {
  TensorView t;
  t.data = v.data();
  t.dtype = DType::f32;
  t.cols = shape.back();
  t.rows = std::int64_t(v.size()) / t.cols;
  t.ld = t.cols;
  t.shape = Shape(shape);
  return t;
}

/// A pre-norm block: h = LN(x); f = relu(h W1 + b1); y = x + f W2 + b2 (d = 64, ffn = 128,
/// 8 tokens), with channel-varying gamma and weights, in a temporary folder.
struct Mini {
  fs::path dir;
  std::string xml, weights, x;
  static constexpr std::int64_t D = 64, F = 128, M = 8;
  Mini() {
    dir = fs::temp_directory_path() / ("ymlopt-smooth-mini-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    xml = (dir / "mini.xml").string(), weights = (dir / "w.safetensors").string(), x = (dir / "x.npy").string();
    std::ofstream(xml) << R"(<workflow name="mini">
  <param name="weights" type="string" default="w.safetensors"/>
  <param name="xin" type="string" default="x.npy"/>
  <param name="out" type="string" default="y.npy"/>
  <data name="x" shape="8,64" src="${xin}"/>
  <data name="g" shape="64" src="${weights}" key="ln.gamma"/>
  <data name="b" shape="64" src="${weights}" key="ln.beta"/>
  <data name="w1" shape="64,128" src="${weights}" key="fc1.w"/>
  <data name="b1" shape="128" src="${weights}" key="fc1.b"/>
  <data name="w2" shape="128,64" src="${weights}" key="fc2.w"/>
  <data name="b2" shape="64" src="${weights}" key="fc2.b"/>
  <data name="h" shape="8,64"/>
  <data name="f" shape="8,128"/>
  <data name="y" shape="8,64"/>
  <task component="nn.layernorm" name="ln">
    <in port="x" data="x"/><in port="gamma" data="g"/><in port="beta" data="b"/><out port="y" data="h"/>
  </task>
  <task component="nn.linear" name="fc1">
    <in port="x" data="h"/><in port="w" data="w1"/><in port="b" data="b1"/><out port="y" data="f"/>
    <arg name="activation" value="relu"/>
  </task>
  <task component="nn.linear" name="fc2">
    <in port="x" data="f"/><in port="w" data="w2"/><in port="b" data="b2"/><in port="r" data="x"/><out port="y" data="y"/>
  </task>
  <save data="y" to="${out}"/>
</workflow>
)";
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto fill = [&](std::size_t n, float sd, float mean = 0) {
      std::vector<float> v(n);
      for (float& e : v) e = mean + sd * nd(rng);
      return v;
    };
    g = fill(D, 0.5f, 1.0f), b = fill(D, 0.2f), w1 = fill(D * F, 0.15f), b1 = fill(F, 0.1f), w2 = fill(F * D, 0.1f),
    b2 = fill(D, 0.1f);
    for (std::int64_t j = 0; j < D; j += 9) g[std::size_t(j)] *= 8;  // outlier channels of h
    xs = fill(M * D, 1.0f);
    io::save_safetensors(weights, {{"ln.gamma", view_of(g, {D})}, {"ln.beta", view_of(b, {D})},
                                   {"fc1.w", view_of(w1, {D, F})}, {"fc1.b", view_of(b1, {F})},
                                   {"fc2.w", view_of(w2, {F, D})}, {"fc2.b", view_of(b2, {D})}});
    io::save_npy(x, view_of(xs, {M, D}));
  }
  ~Mini() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::vector<std::pair<std::string, std::string>> sets(const std::string& w = "") const {
    return {{"weights", w.empty() ? weights : w}, {"xin", x}};
  }
  std::vector<float> g, b, w1, b1, w2, b2, xs;
};

const Mini& mini() {
  static const Mini m;
  return m;
}

/// The model's saved outputs (io.save tasks), run on the sequential executor.
std::vector<double> outputs(const std::string& xml, const std::vector<std::pair<std::string, std::string>>& sets,
                            const fs::path& run) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  Diagnostics diags;
  CompileResult cr = compile_workflow({xml, sets}, reg, diags);
  EXPECT_TRUE(cr.ok) << diags.str();
  if (!cr.ok) return {};
  DataStore store(cr.dag);
  ExecOptions eo;
  eo.run_dir = run.string();
  fs::create_directories(eo.run_dir);
  Progress progress;
  const ExecResult r = make_sequential_executor()->execute(cr.dag, store, eo, progress);
  EXPECT_TRUE(r.ok) << r.error;
  std::vector<double> v;
  for (const TaskNode& t : cr.dag.tasks)
    if (t.comp->name == "io.save")
      for (double e : opt::output_values(store.view(t.bindings[0].ref))) v.push_back(e);
  return v;
}

/// Synthetic calibration inputs for every nn.linear task: rows of N(0, 1) times a
/// per-channel scale exp(N(0, 1)) (outlier channels), non-negative after a ReLU.
opt::Calibration synthetic_calibration(const Dag& dag, const opt::ModelEditor& ed, std::int64_t m, unsigned seed) {
  opt::Calibration c;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const TaskNode& t : dag.tasks) {
    if (t.comp->name != "nn.linear") continue;
    const DataRef x = t.bindings[ed.port_index(t, "x")].ref;
    const std::int64_t k = dag.ref_shape(x).back();
    opt::Calibration::Input in;
    in.m = m, in.k = k;
    std::vector<float> ch(static_cast<std::size_t>(k));
    for (float& s : ch) s = std::exp(nd(rng));
    const bool relu = t.label == "fc2";
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < k; ++j) {
        const float v = nd(rng) * ch[std::size_t(j)];
        in.x.push_back(relu ? std::fabs(v) : v);
      }
    c.inputs[opt::ModelEditor::task_key(t)] = std::move(in);
  }
  return c;
}

struct Edited {
  ComponentRegistry reg;
  std::unique_ptr<opt::ModelEditor> ed;
  opt::Calibration calib;
  Edited(const std::string& xml, const std::vector<std::pair<std::string, std::string>>& sets, std::int64_t m = 48) {
    register_builtin_components(reg);
    Diagnostics diags;
    CompileResult cr = compile_workflow({xml, sets}, reg, diags);
    if (!cr.ok) throw std::runtime_error(diags.str());
    ed = std::make_unique<opt::ModelEditor>(std::move(cr.dag), reg);
    calib = synthetic_calibration(ed->dag(), *ed, m, 17);
  }
};

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  LD num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += LD(a[i] - b[i]) * LD(a[i] - b[i]), den += LD(a[i]) * LD(a[i]);
  return double(std::sqrt(num / den));
}

/// Q4_0 (quant.hpp's text, re-derived): per group, m = the signed value of largest magnitude,
/// d = m / -8, code = min(15, (int)(x / d + 8.5)), value (code - 8) d; in float steps.
void ref_q4(std::vector<LD>& w, std::int64_t n, std::int64_t k, std::int64_t g) {
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c0 = 0; c0 < k; c0 += g) {
      LD amax = 0;
      float m = 0;
      for (std::int64_t c = 0; c < g; ++c) {
        const float v = float(w[std::size_t(r * k + c0 + c)]);
        if (std::fabs(LD(v)) > amax) amax = std::fabs(LD(v)), m = v;
      }
      const float d = float(LD(m) / -8), inv = d != 0 ? float(1.0L / d) : 0.0f;
      for (std::int64_t c = 0; c < g; ++c) {
        const float v = float(w[std::size_t(r * k + c0 + c)]);
        const float t = float(LD(float(LD(v) * inv)) + 8.5L);
        const int q = std::min(15, static_cast<int>(std::truncl(t)));
        w[std::size_t(r * k + c0 + c)] = LD(float(LD(q - 8) * d));
      }
    }
}

}  // namespace

TEST(SmoothTest, ScalesEqualANaiveLongDoubleReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.01, 20.0);
  std::vector<double> act(97), w(97);
  for (double& v : act) v = u(rng);
  for (double& v : w) v = u(rng) / 10;
  act[5] = 0, w[11] = 0, act[40] = 0;  // dead channels / an empty weight column: s = 1
  for (double alpha : {0.0, 0.25, 0.5, 0.85, 1.0}) {
    SCOPED_TRACE(alpha);
    const auto s = opt::smooth_scales(act, w, alpha);
    const auto a = opt::awq_scales(act, alpha);
    LD hi = 0, lo = 1e300L;
    for (std::size_t j = 0; j < act.size(); ++j) {
      if (act[j] > 0) hi = std::max(hi, std::pow(LD(act[j]), LD(alpha))), lo = std::min(lo, std::pow(LD(act[j]), LD(alpha)));
    }
    for (std::size_t j = 0; j < act.size(); ++j) {
      const LD ref = act[j] == 0 || w[j] == 0 ? 1.0L : std::pow(LD(act[j]), LD(alpha)) / std::pow(LD(w[j]), 1 - LD(alpha));
      EXPECT_NEAR(s[j], double(ref), 1e-12 * double(ref)) << j;
      const LD aref = act[j] == 0 ? 1.0L : std::pow(LD(act[j]), LD(alpha)) / std::sqrt(hi * lo);
      EXPECT_NEAR(a[j], double(aref), 1e-12 * double(aref)) << j;
    }
  }
  // alpha 0.5: max|X/s| = max|W s| per channel (the difficulty split evenly)
  const auto s = opt::smooth_scales(act, w, 0.5);
  for (std::size_t j = 0; j < act.size(); ++j) {
    if (act[j] > 0 && w[j] > 0) {
      EXPECT_NEAR(act[j] / s[j], w[j] * s[j], 1e-12 * act[j] / s[j]);
    }
  }
}

TEST(SmoothTest, FakeQuantizeFollowsTheQ4_0RuleOfTheReference) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::int64_t n = 6, k = 256;
  std::vector<float> w(std::size_t(n * k));
  for (float& v : w) v = nd(rng);
  std::vector<LD> ref(w.begin(), w.end());
  ref_q4(ref, n, k, 128);
  opt::fake_quantize(w, n, k, 4, 128, true);
  for (std::size_t i = 0; i < w.size(); ++i) ASSERT_EQ(LD(w[i]), ref[i]) << i;
}

TEST(SmoothTest, ScaledF32MiniModelGivesTheOriginalOutputs) {
  const Mini& m = mini();
  const auto base = outputs(m.xml, m.sets(), m.dir / "run0");
  ASSERT_EQ(base.size(), std::size_t(Mini::M * Mini::D));
  for (const std::string passes : {"smooth", "smooth:alpha=0.85", "smooth:alpha=search:grid=10", "smooth:mode=awq:group=32",
                                   "smooth:mode=awq:bits=8:group=0"}) {
    SCOPED_TRACE(passes);
    Edited e(m.xml, m.sets());
    opt::PassContext ctx{*e.ed, &e.calib};
    const auto before = e.calib.inputs.at("fc2").x;
    opt::run_pass(ctx, opt::parse_pass_list(passes)[0]);
    const auto& log = ctx.log.at(0);
    EXPECT_EQ(log.at("scaled").get<int>(), 2) << log.dump();  // fc1 (LayerNorm fold) and fc2 (ReLU fold)
    ASSERT_EQ(log.at("layers").size(), 2u) << log.dump();
    EXPECT_EQ(log.at("layers")[0].at("producer"), "ln");
    EXPECT_EQ(log.at("layers")[1].at("producer"), "fc1");
    if (passes == "smooth:alpha=search:grid=10") {
      for (const auto& l : log.at("layers")) {
        EXPECT_LE(l.at("loss").get<double>(), l.at("loss_alpha0").get<double>()) << l.dump();
        EXPECT_LE(l.at("loss").get<double>(), l.at("loss_unscaled").get<double>()) << l.dump();
        EXPECT_FALSE(l.at("kept_unscaled").get<bool>()) << "outlier channels: scaling pays here";
        std::printf("    SmoothQuant alpha search: %s alpha %.1f, W8A8 calibration error %.4g (unscaled %.4g)\n",
                    l.at("layers")[0].get<std::string>().c_str(), l.at("alpha").get<double>(), l.at("loss").get<double>(),
                    l.at("loss_unscaled").get<double>());
      }
    }
    for (const auto& l : log.at("layers")) {
      if (l.at("alpha").get<double>() > 0) {
        EXPECT_GT(l.at("scale_max").get<double>(), 1.5 * l.at("scale_min").get<double>());
      }
    }
    // the later passes see fc2's inputs of the scaled model (x / s), in the context's
    // own copy: the caller's calibration is unchanged
    const auto& after = ctx.calib->inputs.at("fc2").x;
    ASSERT_EQ(after.size(), before.size());
    EXPECT_NE(after, before);
    EXPECT_EQ(ctx.calib, ctx.own_calib.get());
    EXPECT_EQ(e.calib.inputs.at("fc2").x, before);
    const fs::path out = m.dir / ("o-" + std::to_string(ctx.log.size()) + passes.substr(passes.size() - 2));
    fs::create_directories(out);
    e.ed->write((out / "mini.opt.xml").string(), (out / "mini.opt.safetensors").string());
    // the unchanged workflow on the written file, and the written workflow
    const auto y1 = outputs(m.xml, m.sets((out / "mini.opt.safetensors").string()), out / "run1");
    const auto y2 = outputs((out / "mini.opt.xml").string(), {}, out / "run2");
    ASSERT_EQ(y1.size(), base.size());
    ASSERT_EQ(y2.size(), base.size());
    EXPECT_LT(rel_diff(base, y1), 2e-6);
    EXPECT_LT(rel_diff(base, y2), 2e-6);
    // and it did change the stored values: LayerNorm gamma / s differs from gamma
    const auto g = io::load_tensor((out / "mini.opt.safetensors").string(), "ln.gamma");
    std::vector<float> gv(g.bytes.size() / 4);
    std::memcpy(gv.data(), g.bytes.data(), g.bytes.size());
    ASSERT_EQ(gv.size(), m.g.size());
    EXPECT_NE(gv, m.g);
  }
}

TEST(SmoothTest, ScaledF32Gpt2GivesTheOriginalOutputsAndSkipsWhatHasNoFold) {
  const auto base = outputs(kGpt2, tiny().set_pairs(), tiny().dir / "run0");
  ASSERT_FALSE(base.empty());
  for (const std::string passes : {"smooth:alpha=0.5", "smooth:mode=awq:group=32"}) {
    SCOPED_TRACE(passes);
    Edited e(kGpt2, tiny().set_pairs());
    opt::PassContext ctx{*e.ed, &e.calib};
    opt::run_pass(ctx, opt::parse_pass_list(passes)[0]);
    const auto& log = ctx.log.at(0);
    // per block: ln_1 -> c_attn and ln_2 -> c_fc; attention c_proj (attention output) and
    // mlp c_proj (after GELU) have no exact fold
    EXPECT_EQ(log.at("scaled").get<int>(), 4) << log.dump();
    EXPECT_EQ(log.at("skipped").size(), 4u) << log.dump();
    const fs::path out = tiny().dir / ("o" + passes.substr(passes.size() - 2));
    fs::create_directories(out);
    e.ed->write((out / "g.opt.xml").string(), (out / "g.opt.safetensors").string());
    auto sets = tiny().set_pairs();
    for (auto& [k, v] : sets)
      if (k == "weights") v = (out / "g.opt.safetensors").string();
    const auto y = outputs(kGpt2, sets, out / "run1");
    ASSERT_EQ(y.size(), base.size());
    EXPECT_LT(rel_diff(base, y), 1e-5);
  }
}

TEST(SmoothTest, AwqSkipsLayersWhoseWidthDoesNotSplitIntoGroups) {
  Edited e(kGpt2, tiny().set_pairs());  // width 96: no groups of 128 (the quantizer skips them too)
  opt::PassContext ctx{*e.ed, &e.calib};
  opt::run_pass(ctx, opt::parse_pass_list("smooth:mode=awq:group=128")[0]);
  const auto& log = ctx.log.at(0);
  EXPECT_EQ(log.at("scaled").get<int>(), 0) << log.dump();
  int groups = 0;
  for (const auto& sk : log.at("skipped")) groups += sk.get<std::string>().find("does not split into groups of 128") != std::string::npos;
  EXPECT_EQ(groups, 4) << log.dump();  // c_attn and c_fc of both blocks
}

TEST(SmoothTest, AwqSearchObjectiveEqualsALongDoubleRecomputation) {
  const Mini& m = mini();
  Edited e(m.xml, m.sets(), 40);
  const opt::Calibration orig = e.calib;
  opt::PassContext ctx{*e.ed, &e.calib};
  opt::run_pass(ctx, opt::parse_pass_list("smooth:mode=awq:group=32:grid=10")[0]);
  const auto& layers = ctx.log.at(0).at("layers");
  ASSERT_EQ(layers.size(), 2u);
  // fc1: W [n=128, k=64] from the file ([k, n] there), X the original calibration input
  struct L {
    const char* task;
    const std::vector<float>* w;
    std::int64_t k, n;
  };
  const L ls[] = {{"fc1", &m.w1, Mini::D, Mini::F}, {"fc2", &m.w2, Mini::F, Mini::D}};
  for (int li = 0; li < 2; ++li) {
    SCOPED_TRACE(ls[li].task);
    const auto& rec = layers[std::size_t(li)];
    const auto& in = orig.inputs.at(ls[li].task);
    const std::int64_t k = ls[li].k, n = ls[li].n;
    std::vector<LD> mean(std::size_t(k), 0);
    for (std::int64_t r = 0; r < in.m; ++r)
      for (std::int64_t j = 0; j < k; ++j) mean[std::size_t(j)] += std::fabs(LD(in.x[std::size_t(r * k + j)])) / in.m;
    auto loss = [&](double alpha) {
      std::vector<LD> s(static_cast<std::size_t>(k));
      LD hi = 0, lo = 1e300L;
      for (std::int64_t j = 0; j < k; ++j) {
        s[std::size_t(j)] = std::pow(mean[std::size_t(j)], LD(alpha));
        hi = std::max(hi, s[std::size_t(j)]), lo = std::min(lo, s[std::size_t(j)]);
      }
      for (LD& v : s) v /= std::sqrt(hi * lo);
      std::vector<LD> ws(std::size_t(n * k));
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t j = 0; j < k; ++j)
          ws[std::size_t(r * k + j)] = LD(float(LD((*ls[li].w)[std::size_t(j * n + r)]) * s[std::size_t(j)]));
      ref_q4(ws, n, k, 32);
      LD total = 0;
      for (std::int64_t t = 0; t < in.m; ++t)
        for (std::int64_t r = 0; r < n; ++r) {
          LD e = 0;
          for (std::int64_t j = 0; j < k; ++j)
            e += LD(in.x[std::size_t(t * k + j)]) *
                 (ws[std::size_t(r * k + j)] / s[std::size_t(j)] - LD((*ls[li].w)[std::size_t(j * n + r)]));
          total += e * e;
        }
      return double(total / in.m);
    };
    const double a = rec.at("alpha").get<double>();
    EXPECT_NEAR(rec.at("loss").get<double>(), loss(a), 1e-6 * loss(a));
    EXPECT_NEAR(rec.at("loss_alpha0").get<double>(), loss(0), 1e-6 * loss(0));
    double best = loss(0);
    for (int i = 1; i <= 10; ++i) best = std::min(best, loss(i / 10.0));
    EXPECT_NEAR(rec.at("loss").get<double>(), best, 1e-6 * best) << "the grid's least loss";
    std::printf("    %s: alpha %.1f, calibration output error %.4g vs %.4g at alpha 0 (s = 1: round to nearest)\n",
                ls[li].task, a, rec.at("loss").get<double>(), rec.at("loss_alpha0").get<double>());
  }
}

TEST(SmoothTest, BadOptionsAreClearErrors) {
  const Mini& m = mini();
  Edited e(m.xml, m.sets());
  opt::PassContext no_calib{*e.ed};
  auto message = [&](const std::string& passes) -> std::string {
    try {
      opt::run_pass(no_calib, opt::parse_pass_list(passes)[0]);
    } catch (const opt::PassError& err) {
      return err.what();
    }
    return "";
  };
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: '" << msg << "', expected to contain '" << part << "'";
  };
  has(message("smooth:mode=gptq"), "option 'mode' of smooth must be smooth or awq, not 'gptq'");
  has(message("smooth:alpha=1.5"), "option 'alpha' of smooth must be in [0, 1] or search");
  has(message("smooth:alpha=x"), "alpha");
  has(message("smooth:mode=awq:grid=0"), "option 'grid' of smooth must be an integer in [1, 1000]");
  has(message("smooth:mode=awq:bits=3"), "option 'bits' of smooth must be 4 or 8");
  has(message("smooth:mode=awq:group=16"), "option 'group' of smooth must be 0 (per channel), 32, 64 or 128");
  has(message("smooth:mode=awq:group=0"), "4-bit weights need a group");
  has(message("smooth:mode=awq:symmetric=no"), "option 'symmetric' of smooth must be true or false");
  has(message("smooth"), "smooth needs calibration activations");
  EXPECT_THROW(opt::parse_pass_list("smooth:alpah=0.5"), opt::PassError);
  EXPECT_TRUE(no_calib.log.empty());
}
