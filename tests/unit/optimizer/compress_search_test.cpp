// The united compression search (optimizer/src/compress_search.cpp) on the
// tiny seeded GPT-2: recipe ladders, the Pareto front against a brute-force
// filter, evaluate() (cached (unit, recipe) results) against the original
// workflow run on weights the passes wrote (another path: file I/O, the
// unchanged graph, a long-double error), the cache against the passes run
// afresh, the search step's probe/accept/reject/adopt/lateral/crossover logic
// and its check messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <tuple>
#include <sstream>
#include <unistd.h>

#include "commands.hpp"
#include "tiny_gpt2.hpp"
#include "register_builtin.hpp"
#include "sequential.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/engine/perf_model.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/compress_search.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;

namespace {

const std::string kModel = std::string(YMLOPT_SOURCE_DIR) + "/workflows/models/gpt2.xml";

const TinyGpt2& tiny() {
  static const TinyGpt2 t("compress", 3, 37, 5);
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
  int remote_peers_at_work() const override { return remote; }
  std::map<std::string, double> reports;
  int remote = -1;  // co-methods at work on other MPI ranks (-1: none runs elsewhere)

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
  // order of the ParamSpecs: model, sets, eval_sets, err_bound, strategy, exchange, cache
  return {{0, kModel}, {0, tiny().set_line()}, {0, ""}, {bound, ""}, {0, strategy}, {exchange ? 1.0 : 0.0, ""}, {1.0, "true"}};
}

struct Fixture : ::testing::Test {
  ComponentRegistry reg;
  // one run directory per test: the co-methods of a run are those stepping in its directory
  std::string run_dir = (tiny().dir / ("run-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()))).string();
  void SetUp() override { opt::register_search_components(reg); }
  std::map<std::string, double> step(State& s, const std::string& strategy, double bound, bool exchange,
                                     bool gathered = false, int remote = -1) {
    const ComponentSpec* spec = reg.find("compress.search_step");
    Ctx ctx(*spec, s.views(gathered), step_args(strategy, bound, exchange), run_dir);
    ctx.remote = remote;
    const std::string msg = spec->check(TaskShape{ctx.ports(), ctx.args()});
    if (!msg.empty()) throw std::runtime_error(msg);
    spec->cpu(ctx);
    return ctx.reports;
  }
};

/// Bytes of a layer under a recipe, from the formats' definitions.
std::int32_t idx(const std::string& n) {
  for (std::size_t i = 0; i < opt::recipes().size(); ++i)
    if (opt::recipes()[i].name == n) return std::int32_t(i);
  throw std::logic_error("no recipe " + n);
}

double recipe_bytes(const std::string& recipe, double n, double k) {
  if (recipe == "f32") return 4 * n * k;
  if (recipe == "int8") return n * k + 4 * n;  // codes + one f32 scale per output channel
  throw std::logic_error(recipe);
}

}  // namespace

TEST(CompressRecipes, LaddersFollowNominalBits) {
  const auto* s = opt::find_strategy("nm24-int8");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(opt::next_recipe(*s, idx("f32")), idx("nm24"));
  EXPECT_EQ(opt::next_recipe(*s, idx("nm24")), idx("int8"));
  EXPECT_EQ(opt::next_recipe(*s, idx("int8")), -1);
  // a layer another strategy put at int8 goes on to int4 under int4-g128, not back up
  EXPECT_EQ(opt::next_recipe(*opt::find_strategy("int4-g128"), idx("int8")), idx("int4-g128"));
  EXPECT_EQ(opt::next_recipe(*opt::find_strategy("int8"), idx("int4-g128")), -1);
  EXPECT_EQ(opt::find_strategy("int9"), nullptr);
  EXPECT_EQ(opt::find_strategy("2"), opt::find_strategy("int4-g128"));
  EXPECT_EQ(opt::find_strategy("5"), nullptr);
  // GPTQ: per-channel int8 first, then int4 in groups of 128
  const auto& g = *opt::find_strategy("gptq");
  EXPECT_EQ(opt::find_strategy("3"), &g);
  EXPECT_EQ(opt::next_recipe(g, idx("f32")), idx("gptq-int8"));
  EXPECT_EQ(opt::next_recipe(g, idx("gptq-int8")), idx("gptq-int4-g128"));
  EXPECT_EQ(opt::next_recipe(g, idx("int8")), idx("gptq-int4-g128"));
  // tables: only table recipes, the family's own
  EXPECT_EQ(opt::next_recipe(*opt::find_strategy("int8"), idx("f32"), true), idx("emb-int8"));
  EXPECT_EQ(opt::next_recipe(*opt::find_strategy("int8"), idx("emb-int8"), true), -1);
  // the 4-bit table: first with a half, a quarter, then an eighth of its rows in int8, then none
  const auto& i4 = *opt::find_strategy("int4-g128");
  EXPECT_EQ(opt::next_recipe(i4, idx("f32"), true), idx("emb-int4-g32a-hot50"));
  EXPECT_EQ(opt::next_recipe(i4, idx("emb-int4-g32a-hot50"), true), idx("emb-int4-g32a-hot25"));
  EXPECT_EQ(opt::next_recipe(i4, idx("emb-int4-g32a-hot25"), true), idx("emb-int4-g32a-hot12"));
  EXPECT_EQ(opt::next_recipe(i4, idx("emb-int4-g32a-hot12"), true), idx("emb-int4-g32a"));
  EXPECT_EQ(opt::next_recipe(i4, idx("emb-int4-g32a"), true), -1);
  EXPECT_EQ(opt::next_recipe(g, idx("f32"), true), idx("emb-int8"));
  EXPECT_EQ(opt::next_recipe(g, idx("emb-int8"), true), idx("emb-int4-g32a-hot50"));
  const std::set<std::int32_t> tables = {idx("emb-int8"), idx("emb-int4-g32a"), idx("emb-int4-g32a-hot50"),
                                         idx("emb-int4-g32a-hot25"), idx("emb-int4-g32a-hot12")};
  for (std::int32_t r : g.family) EXPECT_EQ(opt::recipes()[std::size_t(r)].table, tables.count(r) > 0);
  // lateral: as many bits, another recipe of the family
  EXPECT_EQ(opt::lateral_recipe(g, idx("int8")), idx("gptq-int8"));
  EXPECT_EQ(opt::lateral_recipe(*opt::find_strategy("int8"), idx("gptq-int8")), idx("int8"));
  EXPECT_EQ(opt::lateral_recipe(*opt::find_strategy("int8"), idx("int8")), -1);
  EXPECT_EQ(opt::lateral_recipe(*opt::find_strategy("int4-g128"), idx("int8")), -1);
  EXPECT_EQ(opt::lateral_recipe(g, idx("int8"), false, idx("gptq-int8")), -1);  // none after it
  EXPECT_EQ(opt::lateral_recipe(g, idx("f32")), -1);
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

  // with the predicted time as a third objective
  for (auto& p : pts) p.predicted_s = d(rng);
  const auto front3 = opt::pareto_front(pts, true);
  std::set<std::tuple<double, double, double>> want3, got3;
  for (const auto& a : pts) {
    bool dom = false;
    for (const auto& b : pts)
      dom = dom || (b.bytes <= a.bytes && b.error <= a.error && b.predicted_s <= a.predicted_s &&
                    (b.bytes < a.bytes || b.error < a.error || b.predicted_s < a.predicted_s));
    if (!dom) want3.insert({a.bytes, a.error, a.predicted_s});
  }
  for (const auto& p : front3) got3.insert({p.bytes, p.error, p.predicted_s});
  EXPECT_EQ(got3, want3);
  EXPECT_EQ(front3.size(), want3.size());
  EXPECT_GT(front3.size(), want.size());  // a third objective keeps more points
  for (std::size_t i = 1; i < front3.size(); ++i) EXPECT_LE(front3[i - 1].bytes, front3[i].bytes);
}

TEST_F(Fixture, EvaluateMatchesTheOriginalWorkflowOnTheWrittenWeights) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  // 2 layers x (c_attn, attn c_proj, c_fc, mlp c_proj), then the embedding tables
  ASSERT_GT(L, 8u);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(m->is_table(l), l >= 8) << m->layers()[l];
  EXPECT_EQ(m->layers()[8], "wte.weight");
  const opt::Evaluation base = m->evaluate(std::vector<std::int32_t>(L, 0));
  EXPECT_EQ(base.error, 0.0);
  // layers 0 and 2 int8, layer 3 int4-g128 (k = 384), layer 5 GPTQ int8, the table
  // wte (tied to the logits' linear) int8 per row, the rest f32
  std::vector<std::int32_t> cfg(L, 0);
  cfg[0] = 2, cfg[2] = 2, cfg[3] = 3, cfg[5] = idx("gptq-int8"), cfg[8] = idx("emb-int8");
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
  auto compiled = [&](const std::string& weights) {
    std::vector<std::pair<std::string, std::string>> sets;
    std::istringstream words(tiny().set_line());
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      sets.emplace_back(w.substr(0, eq), w.substr(eq + 1));
      if (sets.back().first == "weights" && !weights.empty()) sets.back().second = weights;
    }
    Diagnostics diags;
    CompileResult cr = compile_workflow({kModel, sets}, inner, diags);
    EXPECT_TRUE(cr.ok) << diags.str();
    return cr;
  };
  auto outputs = [&](const std::string& weights) {
    CompileResult cr = compiled(weights);
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

  // the predicted time: the performance model on the workflow compiled from the
  // written weights (formats from their metadata), sequential, warm, same calibration
  const Calibration cal = load_calibration().value_or(builtin_calibration());
  EXPECT_EQ(m->time_calibrated(), cal.calibrated);
  auto predicted = [&](const std::string& weights) {
    const Prediction p = predict(compiled(weights).dag, cal, 1, "sequential");
    return p.makespan_s - p.first_touch_s;
  };
  const double pe = predicted((out / "m.opt.safetensors").string()), pb = predicted("");
  EXPECT_GT(pb, 0);
  EXPECT_NEAR(base.predicted_s, pb, 1e-12 + 1e-9 * pb);
  EXPECT_NEAR(e.predicted_s, pe, 1e-12 + 1e-9 * pe);
  EXPECT_NE(e.predicted_s, base.predicted_s);  // int8/int4 linears are priced at their kernels' rates
}

TEST_F(Fixture, CacheHitsGiveTheSameModelAsThePassesRunAfresh) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  // every kind of recipe: 2:4, int8, GPTQ int8 and int4 (k = 384 splits into groups
  // of 128), OBS + int4, and both table recipes (wte is tied to the logits' linear)
  std::vector<std::int32_t> cfg(L, 0);
  cfg[0] = idx("nm24"), cfg[1] = idx("int8"), cfg[2] = idx("gptq-int8"), cfg[3] = idx("gptq-int4-g128");
  cfg[7] = idx("obs50-int4-g128"), cfg[8] = idx("emb-int4-g32a");
  if (L > 9) cfg[9] = idx("emb-int8");
  const std::size_t used = std::size_t(std::count_if(cfg.begin(), cfg.end(), [](std::int32_t r) { return r != 0; }));
  const opt::CacheStats before = m->cache_stats();
  const opt::Evaluation fresh = m->measure(cfg, false);
  const opt::CacheStats mid = m->cache_stats();
  EXPECT_EQ(mid.misses, before.misses);  // the passes themselves, no cache
  EXPECT_EQ(mid.hits, before.hits);
  const opt::Evaluation first = m->measure(cfg, true);   // computes the (unit, recipe) results it lacks
  const opt::Evaluation again = m->measure(cfg, true);   // every one a hit now
  const opt::CacheStats after = m->cache_stats();
  EXPECT_EQ(after.uncacheable, 0);
  EXPECT_EQ(std::size_t(after.hits - mid.hits + after.misses - mid.misses), 2 * used * 1);  // one calibration run
  EXPECT_GE(std::size_t(after.hits - mid.hits), used);
  // identical tensors: the same bytes and bit for bit the same outputs
  EXPECT_GT(fresh.error, 1e-4);
  EXPECT_EQ(first.bytes, fresh.bytes);
  EXPECT_EQ(first.error, fresh.error);
  EXPECT_EQ(again.bytes, fresh.bytes);
  EXPECT_EQ(again.error, fresh.error);
  // one unit at a time too: each (unit, recipe) alone, cached vs afresh
  const double f32 = m->evaluate(std::vector<std::int32_t>(L, 0)).bytes;
  for (std::size_t l = 0; l < L; ++l) {
    if (cfg[l] == 0) continue;
    std::vector<std::int32_t> one(L, 0);
    one[l] = cfg[l];
    const opt::Evaluation a = m->measure(one, false), b = m->measure(one, true);
    EXPECT_EQ(a.bytes, b.bytes) << m->layers()[l];
    EXPECT_EQ(a.error, b.error) << m->layers()[l];
    EXPECT_LT(b.bytes, f32) << m->layers()[l];
  }
  // a recipe of the other kind is an error naming both
  std::vector<std::int32_t> bad(L, 0);
  bad[0] = idx("emb-int8");
  try {
    m->evaluate(bad);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), "recipe emb-int8 on layer '" + m->layers()[0] +
                                         "': it applies to embedding tables, the layer is a linear");
  }
  bad[0] = 0, bad[8] = idx("int8");
  try {
    m->evaluate(bad);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), "recipe int8 on layer 'wte.weight': it applies to linear layers, the layer is an embedding table");
  }
}

TEST_F(Fixture, CachedResultsReplayOnEveryCalibrationRun) {
  // two calibration runs (the same one twice): each (unit, recipe) result is computed
  // once on run 0's model and replayed on run 1's; the error is the one-run error
  auto one = opt::search_model(kModel, tiny().set_line());
  auto two = opt::search_model(kModel, tiny().set_line() + ";" + tiny().set_line());
  const std::size_t L = two->layers().size();
  ASSERT_EQ(one->layers(), two->layers());
  std::vector<std::int32_t> cfg(L, 0);
  cfg[1] = idx("gptq-int8"), cfg[3] = idx("gptq-int4-g128"), cfg[6] = idx("int8"), cfg[8] = idx("emb-int8");
  const opt::CacheStats s0 = two->cache_stats();
  const opt::Evaluation cached = two->measure(cfg, true), fresh = two->measure(cfg, false);
  const opt::CacheStats s1 = two->cache_stats();
  EXPECT_EQ(s1.misses - s0.misses, 4);  // once per (unit, recipe), not per run
  EXPECT_EQ(s1.hits - s0.hits, 4);      // run 1 reuses run 0's
  EXPECT_EQ(cached.bytes, fresh.bytes);
  EXPECT_EQ(cached.error, fresh.error);
  const opt::Evaluation single = one->measure(cfg, false);
  EXPECT_EQ(cached.bytes, single.bytes);
  EXPECT_NEAR(cached.error, single.error, 1e-12);
}

TEST_F(Fixture, ErrorMeasuredOnTheEvaluationRunsWhenGiven) {
  // the same seed gives the same weights; other ids: the evaluation run
  static const TinyGpt2 other("compress-eval", 3, 101, 17);
  auto fitted = opt::search_model(kModel, tiny().set_line());
  auto held = opt::search_model(kModel, tiny().set_line(), other.set_line());
  auto other_only = opt::search_model(kModel, other.set_line());
  ASSERT_EQ(held->layers(), fitted->layers());
  const std::size_t L = held->layers().size();
  std::vector<std::int32_t> rtn(L), gptq(L);
  for (std::size_t l = 0; l < L; ++l) {
    rtn[l] = held->is_table(l) ? idx("emb-int8") : idx("int4-g128");
    gptq[l] = held->is_table(l) ? idx("emb-int8") : idx("gptq-int4-g128");
  }
  // round-to-nearest uses no calibration: measured on the evaluation run, it is that run's
  // error whatever the calibration run was
  const opt::Evaluation r = held->measure(rtn, true);
  EXPECT_NEAR(r.error, other_only->measure(rtn, true).error, 1e-12 * std::max(1.0, r.error));
  EXPECT_NE(r.error, fitted->measure(rtn, true).error);
  EXPECT_EQ(r.bytes, fitted->measure(rtn, true).bytes);
  // GPTQ fitted on 16 tokens of width 96 (a rank-deficient Hessian) looks better on those
  // tokens than on others
  const double on_calibration = fitted->measure(gptq, true).error, on_others = held->measure(gptq, true).error;
  EXPECT_GT(on_others, 1.5 * on_calibration) << on_calibration << " " << on_others;
}

/// The configuration `strategy` compresses every unit to with its family's last recipe.
std::vector<std::int32_t> all_at(const opt::SearchModel& m, std::int32_t linear, std::int32_t table) {
  std::vector<std::int32_t> c(m.layers().size());
  for (std::size_t l = 0; l < c.size(); ++l) c[l] = m.is_table(l) ? table : linear;
  return c;
}

TEST_F(Fixture, StepProbesAcceptsWithinTheBoundRejectsBeyondAndStops) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  // a loose bound: int8 everywhere (emb-int8 on the tables), each unit first probed
  // (measured, not taken), then taken one per step, then done
  State s(L + 3);
  std::map<std::string, double> r;
  std::size_t probes = 0, accepts = 0, steps = 0;
  while (s.done[0] != 1.0 && steps < 4 * L) {
    const std::vector<std::int32_t> before(s.cfg.begin(), s.cfg.begin() + std::ptrdiff_t(L));
    r = step(s, "int8", 0.5, false);
    ++steps;
    if (r.count("probe") && r.at("probe") == 1.0) {
      ++probes;
      EXPECT_EQ(r.at("accepted"), 0.0);
      EXPECT_TRUE(std::equal(before.begin(), before.end(), s.cfg.begin()));  // a probe changes nothing
    }
    if (r.count("accepted") && r.at("accepted") == 1.0) ++accepts;
  }
  EXPECT_EQ(probes, L);
  EXPECT_EQ(accepts, L);
  const auto want = all_at(*m, idx("int8"), idx("emb-int8"));
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(s.cfg[l], want[l]) << l;
  for (std::size_t l = L; l < L + 3; ++l) EXPECT_EQ(s.cfg[l], -1);
  EXPECT_EQ(s.done[0], 1.0);
  EXPECT_EQ(r.at("done"), 1.0);
  const opt::Evaluation all8 = m->evaluate(want);
  EXPECT_EQ(s.bytes[0], all8.bytes);
  EXPECT_NEAR(s.err[0], all8.error, 1e-12);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(s.sens[l], -1.0);  // taken: the next recipe not measured

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
  for (std::size_t l = 0; l < L; ++l) {
    EXPECT_TRUE(m->rejected("int8", l, want[l], 1e-12)) << l;
    EXPECT_FALSE(m->rejected("int8", l, want[l], 0.5)) << l;  // rejected at the error it was measured at
  }

  // the same search under the loose bound again, in the same process: what the tight
  // bound rejected is tried again, and it ends where the first one did
  State u(L);
  for (std::size_t i = 0; i < 4 * L && u.done[0] != 1.0; ++i) step(u, "int8", 0.5, false);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(u.cfg[l], want[l]) << l;
  EXPECT_EQ(u.bytes[0], all8.bytes);
}

TEST_F(Fixture, StepTakesTheLowestErrorPerByteFirst) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  State s(L);
  std::map<std::string, double> r;
  for (std::size_t i = 0; i < 4 * L && !(r.count("accepted") && r.at("accepted") == 1.0); ++i) r = step(s, "int4-g128", 0.5, false);
  ASSERT_EQ(r.at("accepted"), 1.0);
  // the unit taken has the lowest error increase per byte saved of every unit's
  // recipe measured alone (all probes start from f32), within the bound
  const std::size_t taken = std::size_t(r.at("layer"));
  std::vector<std::int32_t> one(L, 0);
  one[taken] = s.cfg[taken];
  const opt::Evaluation e1 = m->evaluate(one), base = m->evaluate(std::vector<std::int32_t>(L, 0));
  const double eff = e1.error / (base.bytes - e1.bytes);
  for (std::size_t l = 0; l < L; ++l) {
    if (l == taken) continue;
    std::vector<std::int32_t> o(L, 0);
    o[l] = m->is_table(l) ? idx("emb-int4-g32a") : idx("int4-g128");
    opt::Evaluation e;
    try {
      e = m->evaluate(o);
    } catch (const std::exception&) {
      continue;
    }
    if (e.bytes < base.bytes && e.error <= 0.5) {
      EXPECT_LE(eff, e.error / (base.bytes - e.bytes) * (1 + 1e-9)) << m->layers()[l];
    }
  }
}

TEST_F(Fixture, ALayersLadderSkipsARecipeRejectedThere) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  // nm24 (index 1) rejected on every layer: nm24-int8 goes from f32 straight to int8 (2)
  for (std::size_t l = 0; l < L; ++l) m->reject("nm24-int8", l, 1);
  State s(L);
  std::map<std::string, double> r;
  for (std::size_t i = 0; i < 2 * L && !(r.count("accepted") && r.at("accepted") == 1.0); ++i) {
    r = step(s, "nm24-int8", 0.5, false);
    ASSERT_EQ(s.cfg[std::size_t(r.at("layer"))] == 1, false);
  }
  EXPECT_EQ(r.at("accepted"), 1.0);
  const std::size_t l = std::size_t(r.at("layer"));
  for (std::size_t i = 0; i < L; ++i) EXPECT_EQ(s.cfg[i], i == l ? (m->is_table(i) ? idx("emb-int8") : 2) : 0) << i;
}

TEST_F(Fixture, StepAdoptsADominatingGatheredConfigurationOnceItsOwnChainEnds) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  // own: int4 RTN on layer 3 (k = 384); gathered: GPTQ int4 there, as many bytes, less error
  std::vector<std::int32_t> own(L, 0), gptq(L, 0);
  own[3] = idx("int4-g128"), gptq[3] = idx("gptq-int4-g128");
  const opt::Evaluation eo = m->evaluate(own), eg = m->evaluate(gptq);
  ASSERT_EQ(eg.bytes, eo.bytes);
  ASSERT_LT(eg.error, eo.error);
  auto state = [&](const std::vector<std::int32_t>& gathered, double gbytes) {
    State s(L);
    std::copy(own.begin(), own.end(), s.cfg.begin());
    s.bytes[0] = eo.bytes, s.err[0] = eo.error;
    std::copy(gathered.begin(), gathered.end(), s.gcfg.begin());
    s.gbytes[0] = gbytes;
    return s;
  };
  // runs steps until the co-method is done (or `until` is reported); every report
  auto chain = [&](State& s, double bound, bool exchange, const char* until = nullptr) {
    std::vector<std::map<std::string, double>> rs;
    for (std::size_t i = 0; i < 4 * L; ++i) {
      rs.push_back(step(s, "int4-g128", bound, exchange, true));
      if (s.done[0] == 1.0 || (until && rs.back().count(until))) break;
    }
    return rs;
  };
  // a bound at its own error: every further int4 move breaks it, so the family's
  // chain ends once each unit is probed; only then does it take the gathered one
  State s = state(gptq, eg.bytes);
  auto rs = chain(s, eo.error, true, "adopted");
  ASSERT_EQ(rs.back().count("adopted"), 1u) << rs.size() << " steps";
  EXPECT_GT(rs.size(), 1u);
  for (std::size_t i = 0; i + 1 < rs.size(); ++i) EXPECT_EQ(rs[i].count("adopted"), 0u) << "step " << i;
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(s.cfg[l], gptq[l]) << l;
  EXPECT_EQ(s.bytes[0], eg.bytes);
  EXPECT_EQ(s.err[0], eg.error);
  EXPECT_EQ(s.done[0], 0.0);  // it goes on from there
  // the next step tries int4 RTN back on layer 3 (a lateral move: as many bits) and
  // does not keep it (the error would rise): the gathered configuration stays
  auto r = step(s, "int4-g128", eo.error, true, true);
  EXPECT_EQ(r.at("lateral"), 0.0);
  EXPECT_EQ(r.at("layer"), 3.0);
  EXPECT_EQ(s.cfg[3], gptq[3]);
  // exchange=false: the chain ends on its own configuration
  State off = state(gptq, eg.bytes);
  for (const auto& x : chain(off, eo.error, false)) EXPECT_EQ(x.count("adopted"), 0u);
  EXPECT_EQ(off.done[0], 1.0);
  EXPECT_EQ(off.cfg[3], own[3]);
  // larger (f32 everywhere, no error): not adopted
  State u = state(std::vector<std::int32_t>(L, 0), m->evaluate(std::vector<std::int32_t>(L, 0)).bytes);
  for (const auto& x : chain(u, eo.error, true)) EXPECT_EQ(x.count("adopted"), 0u);
  EXPECT_EQ(u.done[0], 1.0);
  EXPECT_EQ(u.cfg[3], own[3]);
  // smaller but of more error (its own plus int8 on layer 0): never adopted whole, but
  // its layer 0 is a crossover: int8 there (fewer bits than f32) is tried once the own
  // chain ends, kept within the bound
  std::vector<std::int32_t> g8 = own;
  g8[0] = idx("int8");
  const opt::Evaluation e8 = m->evaluate(g8);
  ASSERT_LT(e8.bytes, eo.bytes);
  ASSERT_GT(e8.error, eo.error);
  auto crossovers = [](const std::vector<std::map<std::string, double>>& rs) {
    std::vector<std::pair<double, double>> c;  // (layer, kept)
    for (const auto& x : rs) {
      EXPECT_EQ(x.count("adopted"), 0u);
      if (x.count("crossover")) c.push_back({x.at("layer"), x.at("crossover")});
    }
    return c;
  };
  State t = state(g8, e8.bytes);
  const auto kept = crossovers(chain(t, e8.error, true));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0], std::make_pair(0.0, 1.0));
  EXPECT_EQ(t.cfg[0], idx("int8"));
  EXPECT_LE(t.err[0], e8.error);
  EXPECT_LE(t.bytes[0], e8.bytes);
  EXPECT_EQ(t.done[0], 1.0);
  // gathered: int8 on layer 0 alone, within a bound that its own configuration meets too;
  // the crossover (both together) breaks it: tried once, not kept
  std::vector<std::int32_t> g0(L, 0);
  g0[0] = idx("int8");
  const opt::Evaluation e0 = m->evaluate(g0);
  const double both = std::max(eo.error, e0.error);
  ASSERT_GT(e8.error, both);
  State b = state(g0, e0.bytes);
  const auto tried = crossovers(chain(b, both, true));
  ASSERT_GE(tried.size(), 1u);
  EXPECT_EQ(tried[0], std::make_pair(0.0, 0.0));
  // then the next recipe up a ladder that holds int8 (nm24, of nm24-int8), kept only within the bound
  for (std::size_t i = 1; i < tried.size(); ++i) EXPECT_EQ(tried[i].first, 0.0);
  EXPECT_NE(b.cfg[0], idx("int8"));
  EXPECT_LE(b.err[0], both);
  EXPECT_EQ(b.done[0], 1.0);
}

TEST_F(Fixture, AnIdleCoMethodStaysWhileAnotherIsAtWorkThenStops) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  const double f32 = m->evaluate(std::vector<std::int32_t>(L, 0)).bytes;
  // B: a co-method at work (its first step measured its starting configuration and
  // probed a unit). Rejections are kept per strategy in the process-wide model: B is a
  // strategy no other test steps
  State b(L);
  step(b, "obs50-int4", 0.5, false);
  ASSERT_EQ(b.done[0], 0.0);
  // A: under this bound no recipe of its own fits, and what it gathered (f32
  // everywhere, as its own) gives no crossover: nothing left to try
  State a(L);
  a.gbytes[0] = f32;
  std::map<std::string, double> r;
  for (std::size_t i = 0; i < 4 * L && !r.count("idle") && a.done[0] != 1.0; ++i) r = step(a, "int4-g128", 1e-12, true, true);
  ASSERT_EQ(r.count("idle"), 1u) << "A stopped while B was at work";
  EXPECT_EQ(a.done[0], 0.0);
  for (std::size_t l = 0; l < L; ++l) EXPECT_EQ(a.cfg[l], 0) << l;
  r = step(a, "int4-g128", 1e-12, true, true);  // B still at work: A stays
  EXPECT_EQ(r.count("idle"), 1u);
  EXPECT_EQ(a.done[0], 0.0);
  // B ends its chain; it does not wait (exchange=false)
  for (std::size_t i = 0; i < 8 * L && b.done[0] != 1.0; ++i) r = step(b, "obs50-int4", 0.5, false);
  ASSERT_EQ(b.done[0], 1.0);
  EXPECT_EQ(r.count("idle"), 0u);
  // A: one more look (its next gather sees B's last publish), then it stops
  r = step(a, "int4-g128", 1e-12, true, true);
  EXPECT_EQ(r.count("idle"), 1u);
  EXPECT_EQ(a.done[0], 0.0);
  r = step(a, "int4-g128", 1e-12, true, true);
  EXPECT_EQ(r.count("idle"), 0u);
  EXPECT_EQ(a.done[0], 1.0);
  // a co-method alone in its run takes the one look and stops
  run_dir += "-alone";
  State c(L);
  c.gbytes[0] = f32;
  std::size_t idle = 0, steps = 0;
  for (; steps < 4 * L && c.done[0] != 1.0; ++steps) idle += step(c, "int4-g128", 1e-12, true, true).count("idle");
  EXPECT_EQ(c.done[0], 1.0);
  EXPECT_EQ(idle, 1u);
  // alone in its process, with a co-method at work on another MPI rank (the
  // engine's count, KernelContext::remote_peers_at_work): it stays; once that
  // one is idle or done, one more look and it stops
  run_dir += "-remote";
  State e(L);
  e.gbytes[0] = f32;
  r.clear();
  for (std::size_t i = 0; i < 4 * L && !r.count("idle") && e.done[0] != 1.0; ++i) r = step(e, "int4-g128", 1e-12, true, true, 1);
  ASSERT_EQ(r.count("idle"), 1u) << "it stopped while a co-method on another rank was at work";
  r = step(e, "int4-g128", 1e-12, true, true, 1);
  EXPECT_EQ(r.count("idle"), 1u);
  EXPECT_EQ(e.done[0], 0.0);
  r = step(e, "int4-g128", 1e-12, true, true, 0);  // the last look
  EXPECT_EQ(r.count("idle"), 1u);
  EXPECT_EQ(e.done[0], 0.0);
  r = step(e, "int4-g128", 1e-12, true, true, 0);
  EXPECT_EQ(r.count("idle"), 0u);
  EXPECT_EQ(e.done[0], 1.0);
}

TEST(CompressSearch, CrossoverRecipeFallsBackUpTheGatheredLadder) {
  std::set<std::int32_t> no;
  auto rej = [&](std::int32_t r) { return no.count(r) > 0; };
  auto x = [&](const char* current, const char* gathered, bool table = false) {
    return opt::crossover_recipe(idx(current), gathered ? idx(gathered) : 999, table, rej);
  };
  EXPECT_EQ(x("f32", "gptq-int4-g128"), idx("gptq-int4-g128"));
  no = {idx("gptq-int4-g128")};
  EXPECT_EQ(x("f32", "gptq-int4-g128"), idx("gptq-int8"));  // gptq's ladder, one up
  no = {idx("gptq-int4-g128"), idx("gptq-int8")};
  EXPECT_EQ(x("f32", "gptq-int4-g128"), -1);
  no = {idx("gptq-int4-g128")};
  EXPECT_EQ(x("int8", "gptq-int4-g128"), -1);  // gptq-int8 has as many bits as int8: no gain
  no = {idx("int8")};
  EXPECT_EQ(x("f32", "int8"), idx("nm24"));  // nm24-int8's ladder holds int8 too
  no = {};
  EXPECT_EQ(x("int8", "f32"), -1);            // more bits
  EXPECT_EQ(x("int8", "int8"), -1);           // the same
  EXPECT_EQ(x("f32", nullptr), -1);           // not a recipe
  EXPECT_EQ(x("f32", "emb-int8"), -1);        // a table recipe for a linear
  // a table: f32 (recipe 0 serves both kinds) to the gathered 4-bit table; then int8 rows
  EXPECT_EQ(x("f32", "emb-int4-g32a", true), idx("emb-int4-g32a"));
  no = {idx("emb-int4-g32a")};
  EXPECT_EQ(x("f32", "emb-int4-g32a", true), idx("emb-int4-g32a-hot12"));  // one up: an eighth of the rows in int8
  EXPECT_EQ(x("emb-int8", "emb-int4-g32a", true), idx("emb-int4-g32a-hot12"));
  no = {idx("emb-int4-g32a"), idx("emb-int4-g32a-hot12"), idx("emb-int4-g32a-hot25"), idx("emb-int4-g32a-hot50")};
  EXPECT_EQ(x("f32", "emb-int4-g32a", true), idx("emb-int8"));  // gptq's ladder holds them all
  EXPECT_EQ(x("emb-int8", "emb-int4-g32a", true), -1);
  EXPECT_EQ(x("f32", "int8", true), -1);  // a linear recipe for a table
}

TEST_F(Fixture, LateralMoveIsKeptOnlyWhenTheErrorDrops) {
  auto m = opt::search_model(kModel, tiny().set_line());
  const std::size_t L = m->layers().size();
  // the GPTQ co-method holding int8 (RTN) everywhere, as if adopted from the int8 one
  State s(L);
  const auto g8 = all_at(*m, idx("int8"), idx("emb-int8"));
  std::copy(g8.begin(), g8.end(), s.cfg.begin());
  const opt::Evaluation e8 = m->evaluate(g8);
  s.bytes[0] = e8.bytes, s.err[0] = e8.error;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    const std::vector<std::int32_t> before(s.cfg.begin(), s.cfg.end());
    const double eb = s.err[0], bb = s.bytes[0];
    auto r = step(s, "gptq", 0.5, false);
    ASSERT_EQ(r.at("lateral"), r.at("accepted"));
    const std::size_t l = std::size_t(r.at("layer"));
    ASSERT_EQ(before[l], idx("int8"));
    std::vector<std::int32_t> trial = before;
    trial[l] = idx("gptq-int8");
    const opt::Evaluation e = m->evaluate(trial);
    if (r.at("accepted") == 1.0) {
      ++kept;
      EXPECT_EQ(s.cfg[l], idx("gptq-int8"));
      EXPECT_LT(s.err[0], eb);
      EXPECT_EQ(s.bytes[0], bb);
      EXPECT_EQ(s.err[0], e.error);
    } else {
      EXPECT_EQ(s.cfg, before);
      EXPECT_GE(e.error, eb);  // not kept: it did not lower the error
      EXPECT_TRUE(m->rejected("gptq", l, idx("gptq-int8")));
    }
  }
  // GPTQ int8 minimises each layer's output error on the calibration inputs it is measured on
  EXPECT_GE(kept, 1u);
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
            "3 gptq, 4 obs50-int4)");
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
              "compress.search_step: config holds 3 entries, the model has " +
                  std::to_string(opt::search_model(kModel, tiny().set_line())->layers().size()) +
                  " compressible units (linears and embedding tables; raise max_layers)");
  }
}
