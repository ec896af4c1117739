// The performance model: list-scheduling makespans against hand-computed ones,
// rate selection by component and weight format, memory equal to what the
// DataStore allocates and maps, and the calibration's JSON round trip.
#include "ymlopt/engine/perf_model.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "gemm/gemm.hpp"
#include "io/tensor_file.hpp"
#include "test_util.hpp"
#include "ymlopt/engine/analysis.hpp"
#include "ymlopt/scheduler/data_store.hpp"

using namespace ymlopt;
using test::compile_ok;

namespace {

/// A DAG of `n` tasks with the given predecessor lists (no components: only the
/// structure is simulated).
Dag hand_dag(const std::vector<std::vector<std::int32_t>>& preds) {
  Dag d;
  for (size_t i = 0; i < preds.size(); ++i) {
    TaskNode t;
    t.id = std::int32_t(i);
    t.preds = preds[i];
    d.tasks.push_back(t);
    d.topo_order.push_back(std::int32_t(i));
  }
  return d;
}

Calibration flat_calibration() {
  Calibration c;
  c.calibrated = true;
  c.kernels = {{"sgemm", {{128, 128, 128, 20}, {128, 256, 768, 100}, {1024, 1024, 1024, 150}}},
               {"dgemm", {{128, 256, 768, 50}}},
               {"int8", {{128, 256, 768, 200}}},
               {"int4", {{128, 256, 768, 120}}},
               {"csr", {{128, 256, 768, 30}}},
               {"nm24", {{128, 256, 768, 40}}}};
  c.components = {{"tensor.add", {10, 8, 5}}};  // 10 GFLOP/s, 8 GB/s, 5 us fixed latency
  c.read_gbs = 1000;  // high: these tasks are priced by their flops
  c.copy_gbs = 500;
  c.task_overhead_us = {{"sequential", 10}, {"starpu", 40}};
  return c;
}

const char* kLinears = R"(<workflow name="linears">
  <data name="x" shape="128,768" init="random" seed="1"/>
  <data name="xd" dtype="f64" shape="128,768" init="random" seed="1"/>
  <data name="w" shape="768,256" init="random" seed="2"/>
  <data name="wd" dtype="f64" shape="768,256" init="random" seed="2"/>
  <data name="q8" dtype="i8" shape="256,768" init="zeros"/>
  <data name="q4" dtype="i8" shape="256,384" init="zeros"/>
  <data name="s" shape="256" init="ones"/>
  <data name="nmv" shape="256,384" init="zeros"/>
  <data name="nmi" dtype="i8" shape="256,96" init="zeros"/>
  <data name="y" shape="128,256"/>
  <data name="yd" dtype="f64" shape="128,256"/>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="w"/><out port="y" data="y"/></task>
  <task component="nn.linear"><in port="x" data="xd"/><in port="w" data="wd"/><out port="y" data="yd"/></task>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="q8"/><in port="w_scale" data="s"/><out port="y" data="y"/>
    <arg name="format" value="int8"/></task>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="q4"/><in port="w_scale" data="s"/><out port="y" data="y"/>
    <arg name="format" value="int4"/></task>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="nmv"/><in port="w_index" data="nmi"/><out port="y" data="y"/>
    <arg name="format" value="nm24"/></task>
  <task component="tensor.add"><in port="a" data="y"/><in port="b" data="y"/><out port="c" data="y"/></task>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="q8"/><in port="w_scale" data="s"/><out port="y" data="y"/>
    <arg name="format" value="int8"/><arg name="activations" value="f32"/></task>
</workflow>
)";

}  // namespace

TEST(PerfModelSchedule, ChainIsTheSumOnAnyWorkerCount) {
  const Dag d = hand_dag({{}, {0}, {1}});
  for (int w : {1, 2, 4}) {
    const Schedule s = simulate_schedule(d, {1, 2, 3}, w);
    EXPECT_DOUBLE_EQ(s.makespan, 6) << w << " workers";
    EXPECT_DOUBLE_EQ(s.critical_path, 6);
    EXPECT_DOUBLE_EQ(s.start[2], 3);
  }
}

TEST(PerfModelSchedule, ForkJoinOnOneTwoAndThreeWorkers) {
  // A(1) -> B(2), C(3), D(4) -> E(1)
  const Dag d = hand_dag({{}, {0}, {0}, {0}, {1, 2, 3}});
  const std::vector<double> sec = {1, 2, 3, 4, 1};
  // 1 worker: everything in a row
  EXPECT_DOUBLE_EQ(simulate_schedule(d, sec, 1).makespan, 11);
  // 2 workers: B [1,3] and C [1,4] start together, D waits for B: [3,7], E [7,8]
  const Schedule s2 = simulate_schedule(d, sec, 2);
  EXPECT_DOUBLE_EQ(s2.makespan, 8);
  EXPECT_DOUBLE_EQ(s2.start[3], 3);
  EXPECT_DOUBLE_EQ(s2.start[4], 7);
  EXPECT_DOUBLE_EQ(s2.critical_path, 6);  // A, D, E
  // 3 workers reach the critical path
  EXPECT_DOUBLE_EQ(simulate_schedule(d, sec, 3).makespan, 6);
}

TEST(PerfModelSchedule, IndependentTasksFillFreeWorkersGreedily) {
  // 3, 1, 1, 1 on two workers: the long task on one, the three short ones in a row on the other
  const Dag d = hand_dag({{}, {}, {}, {}});
  const Schedule s = simulate_schedule(d, {3, 1, 1, 1}, 2);
  EXPECT_DOUBLE_EQ(s.makespan, 3);
  EXPECT_DOUBLE_EQ(s.start[3], 2);
  EXPECT_DOUBLE_EQ(s.critical_path, 3);
}

TEST(PerfModelSchedule, RejectsBadArguments) {
  const Dag d = hand_dag({{}, {0}});
  EXPECT_THROW(simulate_schedule(d, {1}, 2), std::invalid_argument);
  EXPECT_THROW(simulate_schedule(d, {1, 1}, 0), std::invalid_argument);
  const Dag cyc = hand_dag({{1}, {0}});
  EXPECT_THROW(simulate_schedule(cyc, {1, 1}, 1), std::runtime_error);
}

TEST(PerfModelRates, SelectedByComponentDtypeAndFormat) {
  const Dag dag = compile_ok(kLinears);
  ASSERT_EQ(dag.tasks.size(), 7u);
  // (the last: weight-only int8, an f32 GEMM on rows dequantized in cache)
  const std::vector<std::pair<RateKind, std::string>> want = {
      {RateKind::gemm, "sgemm"},    {RateKind::gemm, "dgemm"},  {RateKind::kernel, "int8"},
      {RateKind::kernel, "int4"},   {RateKind::kernel, "nm24"}, {RateKind::component, "tensor.add"},
      {RateKind::gemm, "sgemm"}};
  for (size_t i = 0; i < want.size(); ++i) {
    const TaskRate r = task_rate(dag.tasks[i], dag);
    EXPECT_EQ(r.kind, want[i].first) << i;
    EXPECT_EQ(r.name, want[i].second) << i;
    if (i != 5) {
      EXPECT_EQ(r.m, 128) << i;
      EXPECT_EQ(r.n, 256) << i;
      EXPECT_EQ(r.k, 768) << i;
    }
  }
  // times: the task's flops (its cost function) at the selected rate
  const Calibration c = flat_calibration();
  const std::vector<double> gflops = {100, 50, 200, 120, 40};
  for (size_t i = 0; i < gflops.size(); ++i) {
    const TaskNode& t = dag.tasks[i];
    ASSERT_GT(t.cost.flops, 0);
    EXPECT_NEAR(predict_task_seconds(t, dag, c), t.cost.flops / (gflops[i] * 1e9), 1e-12) << i;
  }
  EXPECT_NEAR(predict_task_seconds(dag.tasks[6], dag, c), dag.tasks[6].cost.flops / 100e9, 1e-12);
  // 2:4 counts the kept products only: half the dense flops
  EXPECT_NEAR(dag.tasks[4].cost.flops, 128.0 * 256 * 768, 128.0 * 256 * 2);
  // a component priced by its calibrated bandwidth (its flops rate would be less), plus its latency
  const TaskNode& add = dag.tasks[5];
  ASSERT_GT(add.cost.bytes / 8e9, add.cost.flops / 10e9);
  EXPECT_NEAR(predict_task_seconds(add, dag, c), 5e-6 + add.cost.bytes / 8e9, 1e-12);
}

TEST(PerfModelRates, LinearActivationAtItsEpilogueRate) {
  const Dag dag = compile_ok(R"(<workflow name="act">
    <data name="x" shape="128,768" init="random" seed="1"/>
    <data name="w" shape="768,256" init="random" seed="2"/>
    <data name="y" shape="128,256"/>
    <task component="nn.linear"><in port="x" data="x"/><in port="w" data="w"/><out port="y" data="y"/>
      <arg name="activation" value="gelu_tanh"/></task>
    <task component="nn.linear"><in port="x" data="x"/><in port="w" data="w"/><out port="y" data="y"/>
      <arg name="activation" value="silu"/></task>
  </workflow>)");
  Calibration c = flat_calibration();
  c.components["nn.linear.gelu"] = {2, 0, 0};
  c.components["nn.linear.silu"] = {4, 0, 0};
  const double mn = 128.0 * 256;
  EXPECT_NEAR(predict_task_seconds(dag.tasks[0], dag, c), dag.tasks[0].cost.flops / 100e9 + 8 * mn / 2e9, 1e-12);
  EXPECT_NEAR(predict_task_seconds(dag.tasks[1], dag, c), dag.tasks[1].cost.flops / 100e9 + 4 * mn / 4e9, 1e-12);
  c.components.erase("nn.linear.gelu");  // uncalibrated epilogue: only the flops at the GEMM rate
  EXPECT_NEAR(predict_task_seconds(dag.tasks[0], dag, c), dag.tasks[0].cost.flops / 100e9, 1e-12);
}

TEST(PerfModelRates, NearestShapeInLogSpace) {
  const Calibration c = flat_calibration();
  EXPECT_EQ(kernel_gflops(c, "sgemm", 128, 256, 768), 100);
  EXPECT_EQ(kernel_gflops(c, "sgemm", 100, 100, 100), 20);
  EXPECT_EQ(kernel_gflops(c, "sgemm", 2048, 2048, 1024), 150);
  EXPECT_EQ(kernel_gflops(c, "bsr", 128, 256, 768), 0);  // not calibrated
}

TEST(PerfModelPredict, OverheadPerTaskAndWorkers) {
  const Dag dag = compile_ok(kLinears);
  const Calibration c = flat_calibration();
  double kernels = 0;
  for (const TaskNode& t : dag.tasks) kernels += predict_task_seconds(t, dag, c);
  // sequential: one worker, the sum of kernels and overheads
  const Prediction seq = predict(dag, c, 4, "sequential");
  EXPECT_EQ(seq.workers, 1);
  EXPECT_NEAR(seq.makespan_s, kernels + 7 * 10e-6, 1e-12);
  // 2 workers: the f64 linear (task 1) touches only its own data and runs beside
  // the chain of the six tasks writing y, which is longer
  const Prediction sp = predict(dag, c, 2, "starpu");
  EXPECT_EQ(sp.workers, 2);
  EXPECT_NEAR(sp.work_s, kernels + 7 * 40e-6, 1e-12);
  EXPECT_NEAR(sp.overhead_s, 7 * 40e-6, 1e-15);
  ASSERT_GT(sp.work_s - sp.task_s[1], sp.task_s[1]);
  EXPECT_NEAR(sp.makespan_s, sp.work_s - sp.task_s[1], 1e-12);
  EXPECT_NEAR(sp.critical_path_s, sp.makespan_s, 1e-12);
  EXPECT_TRUE(sp.calibrated);
  const nlohmann::json j = to_json(sp);
  EXPECT_DOUBLE_EQ(j["makespan_us"].get<double>(), sp.makespan_s * 1e6);
}

TEST(PerfModelPredict, MemoryIsExactlyWhatTheDataStoreHolds) {
  const std::string dir = testing::TempDir() + "/ymlopt-perf-model";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/w.safetensors";
  std::vector<float> a(24 * 40, 0.5f), b(7, 1.0f);
  io::save_safetensors(file, {{"a", {a.data(), DType::f32, 24, 40, 40, Shape{24, 40}}},
                              {"b", {b.data(), DType::f32, 1, 7, 7, Shape{7}}}});
  // parameters (one declared twice: loaded once for both names), a padded-row activation
  // (1024 columns -> ld 1040), an odd i8 tensor rounded to 64 bytes, a tiled one
  const std::string xml = R"(<workflow name="mem">
    <data name="a" shape="24,40" src=")" + file + R"(" key="a"/>
    <data name="a2" shape="24,40" src=")" + file + R"(" key="a"/>
    <data name="b" shape="7" src=")" + file + R"(" key="b"/>
    <data name="big" shape="8,1024" init="zeros"/>
    <data name="odd" dtype="i8" shape="3,5" init="zeros"/>
    <data name="t" shape="24,40" tile="8,8"/>
    <task component="tensor.add"><in port="a" data="a"/><in port="b" data="a2"/><out port="c" data="t"/></task>
    <task component="tensor.scale"><inout port="x" data="big"/></task>
  </workflow>)";
  const Dag dag = compile_ok(xml);
  const Prediction p = predict(dag, builtin_calibration(), 1);
  DataStore store(dag);
  EXPECT_EQ(std::size_t(p.parameter_bytes + p.activation_bytes), store.total_bytes() + store.mapped_bytes());
  EXPECT_EQ(p.parameter_bytes, analyze(dag).parameter_total);
  EXPECT_EQ(p.parameter_bytes, (24 * 40 + 7) * 4);
  EXPECT_EQ(p.activation_bytes, 8 * 1040 * 4 + 64 + 24 * 40 * 4);
  EXPECT_FALSE(p.calibrated);
  // first touch of the mapped parameters the tasks read (a, read as a and a2; b is never read)
  const Calibration c = builtin_calibration();
  EXPECT_NEAR(p.first_touch_s, 24.0 * 40 * 4 / (c.mapped_gbs * 1e9), 1e-15);
}

// blas.gemm keeps f64 operands packed once per content (Cost::kept_ports): the
// model counts every tile of A and B once, however many tasks read it, and
// nothing for f32 (oneDNN packs per call) or below the packing threshold.
TEST(PerfModelPredict, KeptPanelsCountedOncePerContent) {
  auto gemm_dag = [](const char* dtype, int n, int bs) {
    Diagnostics diags;
    CompileResult r = test::compile(R"(<workflow name="g">
  <param name="n" type="int" default="256"/><param name="bs" type="int" default="128"/>
  <param name="dtype" type="string" default="f64"/>
  <data name="A" dtype="${dtype}" shape="${n},${n}" tile="${bs},${bs}" init="random" seed="1"/>
  <data name="B" dtype="${dtype}" shape="${n},${n}" tile="${bs},${bs}" init="random" seed="2"/>
  <data name="C" dtype="${dtype}" shape="${n},${n}" tile="${bs},${bs}" init="zeros"/>
  <par var="i" from="0" to="${n / bs}"><par var="j" from="0" to="${n / bs}"><seq var="k" from="0" to="${n / bs}">
    <task component="blas.gemm"><in port="a" data="A[${i},${k}]"/><in port="b" data="B[${k},${j}]"/>
      <inout port="c" data="C[${i},${j}]"/><arg name="beta" value="1"/></task>
  </seq></par></par>
</workflow>)",
                                    diags, {{"n", std::to_string(n)}, {"bs", std::to_string(bs)}, {"dtype", dtype}});
    EXPECT_TRUE(r.ok) << diags.str();
    return std::move(r.dag);
  };
  const Dag f64 = gemm_dag("f64", 256, 128);
  ASSERT_EQ(f64.tasks.size(), 8u);
  const Prediction p = predict(f64, builtin_calibration(), 2);
  if (gemm::keeps_panels(128, 128, 128, 1.0))
    EXPECT_EQ(p.kept_bytes, 2 * 256 * 256 * 8) << "each tile of A and B once";
  else
    EXPECT_EQ(p.kept_bytes, 0) << gemm::dgemm_library();
  EXPECT_EQ(p.total_bytes(), p.parameter_bytes + p.activation_bytes + p.workspace_bytes + p.kept_bytes);
  EXPECT_EQ(predict(gemm_dag("f32", 256, 128), builtin_calibration(), 2).kept_bytes, 0);
  EXPECT_EQ(predict(gemm_dag("f64", 64, 32), builtin_calibration(), 2).kept_bytes, 0) << "32-tiles: packed per call";
}

TEST(PerfModelCalibration, JsonRoundTrip) {
  Calibration c = flat_calibration();
  c.host = "node1";
  c.cpu_model = "Some CPU";
  c.blas_core = "SkylakeX";
  c.created = "2026-01-01T00:00:00Z";
  c.hardware_threads = 2;
  c.starpu_workers = 2;
  const Calibration d = calibration_from_json(nlohmann::json::parse(to_json(c).dump()));
  EXPECT_EQ(to_json(d), to_json(c));
  EXPECT_EQ(d.host, "node1");
  EXPECT_EQ(d.starpu_workers, 2);
  ASSERT_EQ(d.kernels.at("sgemm").size(), 3u);
  EXPECT_EQ(d.kernels.at("sgemm")[1].n, 256);
  EXPECT_DOUBLE_EQ(d.kernels.at("sgemm")[1].gflops, 100);
  EXPECT_DOUBLE_EQ(d.components.at("tensor.add").gbs, 8);
  EXPECT_DOUBLE_EQ(d.components.at("tensor.add").latency_us, 5);
  EXPECT_DOUBLE_EQ(d.task_overhead_us.at("starpu"), 40);
}

TEST(PerfModelCalibration, MalformedAndMissingFiles) {
  try {
    calibration_from_json({{"format", "other"}});
    ADD_FAILURE() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a ymlopt calibration"), std::string::npos) << e.what();
  }
  nlohmann::json j = to_json(flat_calibration());
  j.erase("read_gbs");
  try {
    calibration_from_json(j);
    ADD_FAILURE() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("malformed calibration"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(load_calibration(testing::TempDir() + "/no-such-calibration.json").has_value());
  EXPECT_FALSE(builtin_calibration().calibrated);
}

TEST(PerfModelCalibration, PathHonoursXdgCacheHome) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string keep = old ? old : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  const std::string p = calibration_path();
  EXPECT_EQ(p.rfind("/tmp/xdg-test/ymlopt/calibration-", 0), 0u) << p;
  EXPECT_EQ(p.substr(p.size() - 5), ".json");
  if (old) setenv("XDG_CACHE_HOME", keep.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}

TEST(PerfModelHistory, FootprintsSeparateShapesAndArgs) {
  const Dag dag = compile_ok(kLinears);
  std::set<std::string> prints;
  for (const TaskNode& t : dag.tasks) prints.insert(task_footprint(t, dag));
  EXPECT_GT(prints.size(), 1u);
  const std::string f = task_footprint(dag.tasks[0], dag);
  EXPECT_EQ(f.rfind(dag.tasks[0].comp->name + "|", 0), 0u) << f;
  EXPECT_NE(f.find("f32["), std::string::npos) << f;
}

TEST(PerfModelHistory, KnownTasksTakeTheirMedianOthersAreScaled) {
  const Dag dag = compile_ok(kLinears);
  const Calibration c = flat_calibration();
  const Prediction rates = predict(dag, c, 1, "sequential");
  // task 0 was measured three times at 3x, 5x, 100x its rate-based time: median 5x
  History h;
  const double r0 = predict_task_seconds(dag.tasks[0], dag, c);
  ASSERT_GT(r0, 0);
  std::vector<double> run(dag.tasks.size(), -1.0);
  for (double f : {3.0, 100.0, 5.0}) {
    run[0] = f * r0;
    record_history(h, dag, run);
  }
  EXPECT_DOUBLE_EQ(h.median(task_footprint(dag.tasks[0], dag)), 5 * r0);
  EXPECT_EQ(h.median("no such task"), -1);
  const Prediction p = predict(dag, c, 1, "sequential", &h);
  // every task with task 0's footprint is known; the others are priced 5x their rates
  std::int64_t same = 0;
  for (const TaskNode& t : dag.tasks) same += task_footprint(t, dag) == task_footprint(dag.tasks[0], dag);
  EXPECT_EQ(p.history_tasks, same);
  EXPECT_NEAR(p.rate_scale, 5.0, 1e-9);
  EXPECT_NEAR(p.work_s - p.overhead_s, 5 * (rates.work_s - rates.overhead_s), 1e-9);
  // samples beyond kHistorySamples drop the oldest
  for (int i = 0; i < 20; ++i) {
    run[0] = 1.0;
    record_history(h, dag, run);
  }
  EXPECT_EQ(h.seconds[task_footprint(dag.tasks[0], dag)].size(), History::kHistorySamples);
  EXPECT_DOUBLE_EQ(h.median(task_footprint(dag.tasks[0], dag)), 1.0);
}

// A task priced at microseconds measured far slower (latency: an fsync'd save)
// says nothing about the machine's rates and leaves the scale alone.
TEST(PerfModelHistory, LatencyBoundTasksDoNotSetTheScale) {
  const Dag dag = compile_ok(kLinears);
  const Calibration c = flat_calibration();
  const double add = predict_task_seconds(dag.tasks[5], dag, c), gemm = predict_task_seconds(dag.tasks[0], dag, c);
  ASSERT_EQ(dag.tasks[5].comp->name, "tensor.add");
  ASSERT_LT(add, 100e-6);
  ASSERT_GT(gemm, 100e-6);
  History h;
  std::vector<double> run(dag.tasks.size(), -1.0);
  run[5] = 1000 * add;
  record_history(h, dag, run);
  Prediction p = predict(dag, c, 1, "sequential", &h);
  EXPECT_EQ(p.history_tasks, 1);
  EXPECT_EQ(p.rate_scale, 1.0);
  run[0] = 5 * gemm;
  record_history(h, dag, run);
  p = predict(dag, c, 1, "sequential", &h);
  EXPECT_NEAR(p.rate_scale, 5.0, 1e-9);  // from the GEMMs only
}

TEST(PerfModelHistory, SavedAndLoadedAtomically) {
  const std::string dir = testing::TempDir() + "/ymlopt-history";
  std::filesystem::remove_all(dir);
  History h;
  h.seconds["a|b|c"] = {1.5, 2.5};
  save_history(h, dir + "/h.json");
  EXPECT_EQ(load_history(dir + "/h.json").seconds, h.seconds);
  EXPECT_FALSE(std::filesystem::exists(dir + "/h.json.tmp"));
  {
    std::ofstream bad(dir + "/bad.json");
    bad << "{not json";
  }
  EXPECT_TRUE(load_history(dir + "/bad.json").seconds.empty());
  EXPECT_TRUE(load_history(dir + "/none.json").seconds.empty());
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string keep = old ? old : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(history_path().rfind("/tmp/xdg-test/ymlopt/history-", 0), 0u) << history_path();
  if (old) setenv("XDG_CACHE_HOME", keep.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}
