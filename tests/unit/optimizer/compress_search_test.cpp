// The united compression search (optimizer/src/compress_search.cpp) on the
// tiny seeded GPT-2: recipe ladders, the Pareto front against a brute-force
// filter, evaluate() against the original workflow run on the written weights
// file (another path: file I/O, the unchanged graph, a long-double error), the
// search step's accept/reject/adopt logic and its check messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

#include "commands.hpp"
#include "register_builtin.hpp"
#include "sequential.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/data_store.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/compress_search.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;

namespace {

const std::string kModel = std::string(YMLOPT_SOURCE_DIR) + "/workflows/models/gpt2.xml";

/// A temp folder with the tiny GPT-2 (seed 3) and 16 token ids.
struct Tiny {
  fs::path dir;
  std::string sets;
  Tiny(const Tiny&) = delete;
  ~Tiny() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Tiny() {
    dir = fs::temp_directory_path() / ("ymlopt-compress-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string w = (dir / "g.safetensors").string();
    if (!fs::exists(w) && cli_main({"model", "init", "--arch", "gpt2", "--preset", "tiny", "--seed", "3", w}) != 0)
      throw std::runtime_error("model init failed");
    const std::string ids = (dir / "ids.npy").string();
    std::string hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (16,), }";
    hdr += std::string(63 - (10 + hdr.size()) % 64, ' ') + "\n";
    std::ofstream f(ids, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const std::uint16_t n = std::uint16_t(hdr.size());
    f.write(reinterpret_cast<const char*>(&n), 2);
    f << hdr;
    for (std::int32_t i = 0; i < 16; ++i) {
      const std::int32_t v = (i * 37 + 5) % 512;
      f.write(reinterpret_cast<const char*>(&v), 4);
    }
    sets = "weights=" + w + " ids=" + ids + " batch=1 seq=16 layers=2 width=96 heads=3 vocab=512 context=64 tile_n=32";
  }
};

const Tiny& tiny() {
  static const Tiny t;
  return t;
}

/// A kernel context with its own run directory.
class Ctx final : public KernelContext {
 public:
  Ctx(const ComponentSpec& spec, std::vector<TensorView> ports, std::vector<ArgValue> values, std::string dir)
      : ports_(std::move(ports)), args_(&spec.params, std::move(values)), dir_(std::move(dir)) {}
  std::span<const TensorView> ports() const override { return ports_; }
  const Args& args() const override { return args_; }
  void report(std::string key, double value) override { reports[std::move(key)] = value; }
  const std::string& run_dir() const override { return dir_; }
  std::map<std::string, double> reports;

 private:
  std::vector<TensorView> ports_;
  Args args_;
  std::string dir_;
};

template <class T> TensorView vec_view(std::vector<T>& v, DType dt) {
  TensorView t;
  t.data = v.data();
  t.dtype = dt;
  t.rows = 1;
  t.cols = std::int64_t(v.size());
  t.ld = t.cols;
  t.shape = Shape{t.cols};
  return t;
}

/// The state of one co-method: the search step's ports.
struct State {
  std::vector<std::int32_t> cfg, gcfg;
  std::vector<double> sens, gsens, bytes{0}, err{0}, done{0}, gbytes{0};
  explicit State(std::size_t n) : cfg(n, 0), gcfg(n, 0), sens(n, 0), gsens(n, 0) {}
  std::vector<TensorView> views(bool gathered) {
    std::vector<TensorView> v = {vec_view(cfg, DType::i32), vec_view(sens, DType::f64), vec_view(bytes, DType::f64),
                                 vec_view(err, DType::f64), vec_view(done, DType::f64)};
    if (gathered) {
      v.push_back(vec_view(gcfg, DType::i32));
      v.push_back(vec_view(gsens, DType::f64));
      v.push_back(vec_view(gbytes, DType::f64));
    } else {
      v.resize(8);
    }
    return v;
  }
};

std::vector<ArgValue> step_args(const std::string& strategy, double bound, bool exchange) {
  // order of the ParamSpecs: model, sets, err_bound, strategy, exchange
  return {{0, kModel}, {0, tiny().sets}, {bound, ""}, {0, strategy}, {exchange ? 1.0 : 0.0, ""}};
}

struct Fixture : ::testing::Test {
  ComponentRegistry reg;
  void SetUp() override { opt::register_search_components(reg); }
  std::map<std::string, double> step(State& s, const std::string& strategy, double bound, bool exchange,
                                     bool gathered = false) {
    const ComponentSpec* spec = reg.find("compress.search_step");
    Ctx ctx(*spec, s.views(gathered), step_args(strategy, bound, exchange), (tiny().dir / "run").string());
    const std::string msg = spec->check(TaskShape{ctx.ports(), ctx.args()});
    if (!msg.empty()) throw std::runtime_error(msg);
    spec->cpu(ctx);
    return ctx.reports;
  }
};

/// Bytes of a layer under a recipe, from the formats' definitions.
double recipe_bytes(const std::string& recipe, double n, double k) {
  if (recipe == "f32") return 4 * n * k;
  if (recipe == "int8") return n * k + 4 * n;  // codes + one f32 scale per output channel
  throw std::logic_error(recipe);
}

}  // namespace

TEST(CompressRecipes, LaddersFollowNominalBits) {
  const auto* s = opt::find_strategy("nm24-int8");
  ASSERT_NE(s, nullptr);
  auto idx = [](const std::string& n) {
    for (std::size_t i = 0; i < opt::recipes().size(); ++i)
      if (opt::recipes()[i].name == n) return std::int32_t(i);
    return std::int32_t(-1);
  };
  EXPECT_EQ(opt::next_recipe(*s, idx("f32")), idx("nm24"));
  EXPECT_EQ(opt::next_recipe(*s, idx("nm24")), idx("int8"));
  EXPECT_EQ(opt::next_recipe(*s, idx("int8")), -1);
  // a layer another strategy put at int8 goes on to int4 under int4-g128, not back up
  EXPECT_EQ(opt::next_recipe(*opt::find_strategy("int4-g128"), idx("int8")), idx("int4-g128"));
  EXPECT_EQ(opt::next_recipe(*opt::find_strategy("int8"), idx("int4-g128")), -1);
  EXPECT_EQ(opt::find_strategy("int9"), nullptr);
  EXPECT_EQ(opt::find_strategy("2"), opt::find_strategy("int4-g128"));
  EXPECT_EQ(opt::find_strategy("5"), nullptr);
}

TEST(CompressRecipes, ParetoFrontMatchesBruteForce) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(0, 20);
  std::vector<opt::SearchPoint> pts(60);
  for (auto& p : pts) p.bytes = d(rng), p.error = d(rng);
  const auto front = opt::pareto_front(pts);
  // brute force: the points no other point is <= in both and < in one; one per (bytes, error) value
  std::set<std::pair<double, double>> want;
  for (const auto& a : pts) {
    bool dom = false;
    for (const auto& b : pts) dom = dom || (b.bytes <= a.bytes && b.error <= a.error && (b.bytes < a.bytes || b.error < a.error));
    if (!dom) want.insert({a.bytes, a.error});
  }
  std::set<std::pair<double, double>> got;
  for (const auto& p : front) got.insert({p.bytes, p.error});
  EXPECT_EQ(got, want);
  EXPECT_EQ(front.size(), want.size());
  for (std::size_t i = 1; i < front.size(); ++i) EXPECT_LT(front[i - 1].bytes, front[i].bytes);
}

TEST_F(Fixture, EvaluateMatchesTheOriginalWorkflowOnTheWrittenWeights) {
  auto m = opt::search_model(kModel, tiny().sets);
  const std::size_t L = m->layers().size();
  ASSERT_EQ(L, 8u);  // 2 layers x (c_attn, attn c_proj, c_fc, mlp c_proj)
  const opt::Evaluation base = m->evaluate(std::vector<std::int32_t>(L, 0));
  EXPECT_EQ(base.error, 0.0);
  // layers 0 and 2 int8, layer 3 int4-g128 (k = 384), the rest f32
  std::vector<std::int32_t> cfg(L, 0);
  cfg[0] = 2, cfg[2] = 2, cfg[3] = 3;
  const opt::Evaluation e = m->evaluate(cfg);
  EXPECT_GT(e.error, 1e-5);
  EXPECT_LT(e.error, 0.2);
  EXPECT_LT(e.bytes, base.bytes);
  // bytes: int8 layers exactly as the format defines them
  std::vector<std::int32_t> only8(L, 0);
  only8[0] = 2;
  const double n0 = 3 * 96, k0 = 96;  // c_attn: 96 -> 288
  EXPECT_EQ(m->evaluate(only8).bytes, base.bytes - recipe_bytes("f32", n0, k0) + recipe_bytes("int8", n0, k0));

  // the same configuration through the written file and the unchanged workflow
  const fs::path out = tiny().dir / "w";
  m->write(cfg, (out / "m.opt.xml").string(), (out / "m.opt.safetensors").string());
  ComponentRegistry inner;
  register_builtin_components(inner);
  auto outputs = [&](const std::string& weights) {
    std::vector<std::pair<std::string, std::string>> sets;
    std::istringstream words(tiny().sets);
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      sets.emplace_back(w.substr(0, eq), w.substr(eq + 1));
      if (sets.back().first == "weights" && !weights.empty()) sets.back().second = weights;
    }
    Diagnostics diags;
    CompileResult cr = compile_workflow({kModel, sets}, inner, diags);
    EXPECT_TRUE(cr.ok) << diags.str();
    DataStore store(cr.dag);
    ExecOptions eo;
    eo.run_dir = (out / "run").string();
    fs::create_directories(eo.run_dir);
    Progress progress;
    const ExecResult r = make_sequential_executor()->execute(cr.dag, store, eo, progress);
    EXPECT_TRUE(r.ok) << r.error;
    std::vector<long double> v;
    for (const TaskNode& t : cr.dag.tasks)
      if (t.comp->name == "io.save") {
        const TensorView x = store.view(t.bindings[0].ref);
        for (std::int64_t i = 0; i < x.rows; ++i)
          for (std::int64_t j = 0; j < x.cols; ++j) v.push_back(static_cast<const float*>(x.data)[i * x.ld + j]);
      }
    return v;
  };
  const auto a = outputs(""), b = outputs((out / "m.opt.safetensors").string());
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += a[i] * a[i];
  EXPECT_NEAR(e.error, double(std::sqrt(num / den)), 1e-6 + 1e-4 * e.error);
}

TEST_F(Fixture, StepAcceptsWithinTheBoundRejectsBeyondAndStops) {
  const std::size_t L = opt::search_model(kModel, tiny().sets)->layers().size();
  // a loose bound: int8 everywhere, one layer per step, then done
  State s(L + 3);
  for (std::size_t i = 0; i < L + 1; ++i) step(s, "int8", 0.5, false);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(s.cfg[l], 2) << l;
  for (std::size_t l = L; l < L + 3; ++l) EXPECT_EQ(s.cfg[l], -1);
  auto r = step(s, "int8", 0.5, false);
  EXPECT_EQ(s.done[0], 1.0);
  EXPECT_EQ(r.at("done"), 1.0);
  const opt::Evaluation all8 = opt::search_model(kModel, tiny().sets)->evaluate(std::vector<std::int32_t>(L, 2));
  EXPECT_EQ(s.bytes[0], all8.bytes);
  EXPECT_NEAR(s.err[0], all8.error, 1e-12);
  for (std::size_t l = 0; l < L; ++l) EXPECT_GT(s.sens[l], 0.0);

  // a bound below any quantization error: every step is rejected, the config stays f32
  State t(L);
  for (std::size_t i = 0; i < L + 1; ++i) {
    r = step(t, "int8", 1e-12, false);
    if (t.done[0] == 1.0) break;
    EXPECT_EQ(r.at("accepted"), 0.0);
  }
  EXPECT_EQ(t.done[0], 1.0);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(t.cfg[l], 0);
  EXPECT_EQ(t.err[0], 0.0);
}

TEST_F(Fixture, ALayersLadderSkipsARecipeRejectedThere) {
  auto m = opt::search_model(kModel, tiny().sets);
  const std::size_t L = m->layers().size();
  // nm24 (index 1) rejected on every layer: nm24-int8 goes from f32 straight to int8 (2)
  for (std::size_t l = 0; l < L; ++l) m->reject("nm24-int8", l, 1);
  State s(L);
  auto r = step(s, "nm24-int8", 0.5, false);
  EXPECT_EQ(r.at("accepted"), 1.0);
  const std::size_t l = std::size_t(r.at("layer"));
  for (std::size_t i = 0; i < L; ++i) EXPECT_EQ(s.cfg[i], i == l ? 2 : 0) << i;
}

TEST_F(Fixture, StepAdoptsASmallerGatheredConfigurationOnlyWithExchange) {
  const std::size_t L = opt::search_model(kModel, tiny().sets)->layers().size();
  State s(L);
  step(s, "int4-g128", 0.5, true);  // first step: measures f32, compresses one layer
  const double own = s.bytes[0];
  // gathered: every layer int8 (smaller than one int4 layer here) within the bound
  const opt::Evaluation g = opt::search_model(kModel, tiny().sets)->evaluate(std::vector<std::int32_t>(L, 2));
  ASSERT_LT(g.bytes, own);
  State off = s;
  std::fill(s.gcfg.begin(), s.gcfg.end(), 2);
  s.gbytes[0] = g.bytes;
  off.gcfg = s.gcfg, off.gbytes = s.gbytes;
  auto r = step(s, "int4-g128", 0.5, true, true);
  EXPECT_EQ(r.at("adopted"), 1.0);
  // it went on from the gathered configuration: int8 everywhere but the layer it tried
  std::size_t int8 = 0;
  for (std::size_t l = 0; l < L; ++l) int8 += s.cfg[l] == 2;
  EXPECT_GE(int8, L - 1);
  EXPECT_LE(s.bytes[0], g.bytes);
  // exchange=false: the gathered configuration is ignored
  r = step(off, "int4-g128", 0.5, false, true);
  EXPECT_EQ(r.count("adopted"), 0u);
  for (std::size_t l = 0; l < L; ++l) EXPECT_NE(off.cfg[l], 2);
}

TEST_F(Fixture, CheckMessages) {
  const ComponentSpec* spec = reg.find("compress.search_step");
  State s(8);
  auto check = [&](std::vector<TensorView> v, const std::string& strategy, double bound) {
    Ctx ctx(*spec, std::move(v), step_args(strategy, bound, true), ".");
    return spec->check(TaskShape{ctx.ports(), ctx.args()});
  };
  EXPECT_EQ(check(s.views(false), "int8", 0.01), "");
  EXPECT_EQ(check(s.views(false), "int3", 0.01),
            "compress.search_step: unknown strategy 'int3' (a name or an index: 0 int8, 1 nm24-int8, 2 int4-g128, "
            "3 gptq-int4, 4 obs50-int4)");
  EXPECT_EQ(check(s.views(false), "2", 0.01), "");  // by index: int4-g128
  EXPECT_NE(check(s.views(false), "5", 0.01), "");
  EXPECT_EQ(check(s.views(false), "int8", 0), "compress.search_step: err_bound must be > 0");
  auto v = s.views(false);
  v[1].cols = 7;
  v[1].shape = Shape{7};
  EXPECT_EQ(check(v, "int8", 0.01), "compress.search_step: port 'sensitivity' must be f64 [8] like config, got [7] f64");
  v = s.views(false);
  v[0].dtype = DType::f32;
  EXPECT_EQ(check(v, "int8", 0.01), "compress.search_step: port 'config' must be a 1-D i32 vector, got [8] f32");
  // a config shorter than the model's linears is a run-time error naming both counts
  State small(3);
  try {
    step(small, "int8", 0.5, false);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              "compress.search_step: config holds 3 entries, the model has 8 compressible linears (raise max_layers)");
  }
}
