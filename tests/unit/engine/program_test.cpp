// Runtime control flow (run_program): <until>/<while> loops, <unite> of
// co-methods with publish/gather, exit policies, failures of one co-method.
// Every case runs on both backends; the StarPU one also with one scheduling
// context per co-method.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "io/tensor_file.hpp"
#include "register_builtin.hpp"
#include "sequential.hpp"
#include "starpu_backend.hpp"
#include "test_util.hpp"

using namespace ymlopt;

namespace {

void throwing_kernel(KernelContext&) { throw KernelError("deliberate failure"); }

// Keeps its worker busy for `us` microseconds of wall time, then adds 1 to x.
void busy_kernel(KernelContext& ctx) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(ctx.arg_int("us"));
  while (std::chrono::steady_clock::now() < end) {
  }
  *static_cast<double*>(ctx.port(0).data) += 1;
  if (ctx.arg_bool("idle")) ctx.report("idle", 1);
}

const ComponentRegistry& registry() {
  static const ComponentRegistry reg = [] {
    ComponentRegistry r;
    register_builtin_components(r);
    ComponentSpec s;
    s.name = "test.throw";
    PortSpec x;
    x.name = "x";
    x.access = Access::read_write;
    x.dtypes = {DType::f32, DType::f64};
    s.ports = {x};
    s.cpu = throwing_kernel;
    r.add(s);
    s.name = "test.busy";
    s.params = {{"us", ParamType::int_, "1000", false, "microseconds"},
                {"idle", ParamType::bool_, "false", false, "report idle = 1 (a co-method waiting for the others)"}};
    s.cpu = busy_kernel;
    r.add(s);
    return r;
  }();
  return reg;
}

struct ProgramRun {
  Dag dag;
  ExecResult result;
  std::unique_ptr<DataStore> store;
  double scalar(const std::string& name) const {
    for (size_t i = 0; i < dag.data.size(); ++i)
      if (dag.data[i].name == name) return *static_cast<const double*>(store->base(std::int32_t(i)));
    ADD_FAILURE() << "no data " << name;
    return NAN;
  }
  const CoMethodRecord* comethod(const std::string& name) const {
    for (const auto& u : result.unites)
      for (const auto& c : u.comethods)
        if (c.name == name) return &c;
    ADD_FAILURE() << "no co-method " << name;
    return nullptr;
  }
  std::int64_t runs(std::int32_t task) const {
    std::int64_t n = result.records[size_t(task)].ran ? 1 : 0;
    for (const auto& r : result.repeats) n += r.task == task && r.ran;
    return n;
  }
};

// backend 0: sequential, 1: StarPU
ProgramRun run(const std::string& xml, int backend, std::vector<std::pair<std::string, std::string>> sets = {},
               int warmup = 0) {
  ProgramRun r;
  Diagnostics d;
  CompileOptions co;
  co.sets = std::move(sets);
  auto c = compile_workflow_text("prog.xml", xml, co, registry(), d);
  EXPECT_TRUE(c.ok) << d.str();
  r.dag = std::move(c.dag);
  r.store = std::make_unique<DataStore>(r.dag);
  ExecOptions o;
  o.run_dir = testing::TempDir() + "/ymlopt-program";
  std::filesystem::create_directories(o.run_dir);
  o.sched = "eager";
  o.warmup = warmup;
  Progress p;
  auto ex = backend ? make_starpu_executor() : make_sequential_executor();
  r.result = run_program(*ex, r.dag, *r.store, o, p);
  return r;
}

std::string diagnostics(const std::string& xml) {
  Diagnostics d;
  auto c = compile_workflow_text("prog.xml", xml, {}, registry(), d);
  EXPECT_FALSE(c.ok);
  return d.str();
}

// c += 1 (blas.axpy with a ones vector)
const char* kIncrement = R"(<task component="blas.axpy"><in port="x" data="one"/><inout port="y" data="%s"/></task>)";
std::string inc(const std::string& data) {
  char buf[256];
  std::snprintf(buf, sizeof buf, kIncrement, data.c_str());
  return buf;
}

class Program : public testing::TestWithParam<int> {};

TEST_P(Program, UntilRunsItsBodyUntilTheConditionHolds) {
  const ProgramRun r = run(R"(<workflow name="u">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="c" dtype="f64" shape="1" init="zeros"/>
  <data name="d" dtype="f64" shape="1" init="zeros"/>
  <until cond="c ge 5" max="100">)" + inc("c") + R"(</until>
  )" + inc("d") + R"(
</workflow>)",
                    GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.scalar("c"), 5.0);
  EXPECT_EQ(r.scalar("d"), 1.0);
  EXPECT_EQ(r.runs(0), 5);
  EXPECT_EQ(r.runs(1), 1);
  ASSERT_EQ(r.result.loop_iterations.size(), 1u);
  EXPECT_EQ(r.result.loop_iterations[0].second, 5);
}

// c = one + one, then c += one: a run again starts from 2, so c ends at 3
const char* kTwoSteps = R"(<workflow name="w">
  <data name="one" dtype="f64" shape="2,2" init="ones"/>
  <data name="c" dtype="f64" shape="2,2"/>
  <task component="tensor.add"><in port="a" data="one"/><in port="b" data="one"/><out port="c" data="c"/></task>
  <task component="blas.axpy"><in port="x" data="one"/><inout port="y" data="c"/></task>
</workflow>)";

TEST_P(Program, WarmupRunsTheDagAgainAndReportsTheLastRun) {
  const ProgramRun r = run(kTwoSteps, GetParam(), {}, 2);
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.scalar("c"), 3.0);
  ASSERT_EQ(r.result.warmup_us.size(), 2u);
  for (double w : r.result.warmup_us) EXPECT_GT(w, 0);
  EXPECT_TRUE(r.result.repeats.empty());  // the warm-up runs leave no records
  for (const auto& rec : r.result.records) {
    EXPECT_TRUE(rec.ran);
    EXPECT_EQ(rec.iteration, 0);
    EXPECT_LE(rec.end_us, r.result.makespan_us);  // timed from the last run's start
  }
  const ProgramRun once = run(kTwoSteps, GetParam());
  ASSERT_TRUE(once.result.ok) << once.result.error;
  EXPECT_TRUE(once.result.warmup_us.empty());
  EXPECT_EQ(once.scalar("c"), 3.0);
}

// c starts at zeros and the task adds one: each warm-up run starts from zeros again
TEST_P(Program, WarmupStartsEachRunFromTheInitValues) {
  const ProgramRun r = run(R"(<workflow name="acc">
  <data name="one" dtype="f64" shape="4,4" tile="2,2" init="ones"/>
  <data name="c" dtype="f64" shape="4,4" tile="2,2" init="zeros"/>
  <par var="i" from="0" to="2"><par var="j" from="0" to="2">
  <task component="blas.axpy"><in port="x" data="one[${i},${j}]"/><inout port="y" data="c[${i},${j}]"/></task>
  </par></par>
</workflow>)",
                           GetParam(), {}, 3);
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.result.warmup_us.size(), 3u);
  const auto* c = static_cast<const double*>(r.store->base(1));
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_EQ(c[i * r.dag.data[1].ld + j], 1.0) << i << "," << j;
}

TEST(ProgramWarmup, RefusesWhatCannotRunAgain) {
  auto compile = [](const std::string& xml) {
    Diagnostics d;
    auto c = compile_workflow_text("prog.xml", xml, {}, registry(), d);
    EXPECT_TRUE(c.ok) << d.str();
    return std::move(c.dag);
  };
  EXPECT_EQ(warmup_refusal(compile(kTwoSteps)), "");
  // a task writes a tensor mapped from a file: a second run would start from the first one's result
  const std::string npy = testing::TempDir() + "/ymlopt-warmup-c.npy";
  std::vector<double> zeros(4, 0.0);
  io::save_npy(npy, {zeros.data(), DType::f64, 1, 4, 4, Shape{4}});
  const Dag in_place = compile(R"(<workflow name="acc">
  <data name="one" dtype="f64" shape="4" init="ones"/>
  <data name="c" dtype="f64" shape="4" src=")" + npy + R"("/>
  )" + inc("c") + R"(
</workflow>)");
  const std::string why = warmup_refusal(in_place);
  EXPECT_NE(why.find("writes 'c', which the run maps from " + npy), std::string::npos) << why;
  EXPECT_NE(why.find("prog.xml:4"), std::string::npos) << why;
  DataStore store(in_place);
  ExecOptions o;
  o.warmup = 1;
  Progress p;
  auto ex = make_sequential_executor();
  EXPECT_THROW(run_program(*ex, in_place, store, o, p), std::invalid_argument);
  EXPECT_EQ(*static_cast<const double*>(store.base(1)), 0.0);  // nothing ran
  const Dag loops = compile(R"(<workflow name="u">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="c" dtype="f64" shape="1"/>
  <task component="tensor.add"><in port="a" data="one"/><in port="b" data="one"/><out port="c" data="c"/></task>
  <until cond="c ge 5" max="100">)" + inc("c") + R"(</until>
</workflow>)");
  EXPECT_NE(warmup_refusal(loops).find("runtime loops"), std::string::npos) << warmup_refusal(loops);
  DataStore loop_store(loops);
  EXPECT_THROW(run_program(*ex, loops, loop_store, o, p), std::invalid_argument);
}

TEST_P(Program, WhileTestsFirstAndMaxBoundsALoop) {
  const ProgramRun r = run(R"(<workflow name="w">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="c" dtype="f64" shape="1" init="zeros"/>
  <data name="d" dtype="f64" shape="1" init="zeros"/>
  <while cond="c lt 0">)" + inc("c") + R"(</while>
  <until cond="d &gt;= 1000 || c != 0" max="3">)" + inc("d") + R"(</until>
</workflow>)",
                    GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.scalar("c"), 0.0);  // the while body never ran
  EXPECT_EQ(r.scalar("d"), 3.0);  // stopped by max
  ASSERT_EQ(r.result.loop_iterations.size(), 2u);
  EXPECT_EQ(r.result.loop_iterations[0].second, 0);
  EXPECT_EQ(r.result.loop_iterations[1].second, 3);
}

// Co-method 'fast' converges after 3 iterations; 'slow' would need a million:
// exit="first" stops it, and save_exit takes the winner's tensor.
const char* kRace = R"(<workflow name="race">
  <param name="mapping" type="string" default="shared"/>
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="result" dtype="f64" shape="1" init="zeros"/>
  <unite name="u" exit="first" save_exit="result" mapping="${mapping}">
    <comethod name="fast" keep="x">
      <data name="x" dtype="f64" shape="1" init="zeros"/>
      <until cond="x ge 3" max="100">%s</until>
    </comethod>
    <comethod name="slow" keep="y">
      <data name="y" dtype="f64" shape="1" init="value" value="100"/>
      <until cond="y ge 1000000" max="1000000">%s</until>
    </comethod>
  </unite>
</workflow>)";

TEST_P(Program, ExitFirstStopsTheOthersAndSavesTheWinnersData) {
  for (const char* mapping : {"shared", "contexts", "fair"}) {
    char xml[2048];
    std::snprintf(xml, sizeof xml, kRace, inc("x").c_str(), inc("y").c_str());
    const ProgramRun r = run(xml, GetParam(), {{"mapping", mapping}});
    ASSERT_TRUE(r.result.ok) << r.result.error;
    ASSERT_EQ(r.result.unites.size(), 1u);
    EXPECT_EQ(r.result.unites[0].winner, "fast") << mapping;
    EXPECT_EQ(r.scalar("result"), 3.0);
    const CoMethodRecord* slow = r.comethod("slow");
    const CoMethodRecord* fast = r.comethod("fast");
    ASSERT_TRUE(slow && fast);
    EXPECT_TRUE(fast->converged && fast->winner);
    EXPECT_EQ(fast->iterations, 3);
    EXPECT_TRUE(slow->stopped);
    EXPECT_LT(slow->iterations, 1000000);
    EXPECT_EQ(r.scalar("y"), 100.0 + double(slow->iterations));
    if (GetParam() == 1 && std::string(mapping) == "contexts") {
      EXPECT_FALSE(fast->context_workers.empty());
    }
  }
}

// Worker time of each co-method of a unite run for 0.6 s on one worker: c1's
// tasks take 4 ms, the others' 0.5 ms; with `idle`, c2's tasks report idle = 1.
// On a host so loaded that the worker ran less than 40% of the budget (a few
// dozen tasks: too few for shares), again for 1.5 s, then 3 s.
static std::vector<double> worker_shares(const std::string& comethods, const std::string& mapping, bool idle,
                                         double budget = 0.6) {
  const std::string xml = R"(<workflow name="fair">
  <param name="mapping" type="string" default="shared"/>
  <param name="comethods" type="string" default="1,2"/>
  <param name="idle" type="bool" default="false"/>
  <param name="budget" type="float" default="0.6"/>
  <unite name="u" exit="budget" budget_s="${budget}" mapping="${mapping}">
    <par var="k" values="${comethods}">
      <comethod name="c${k}">
        <data name="x${k}" dtype="f64" shape="1" init="zeros"/>
        <until cond="x${k} ge 1000000" max="1000000">
          <task component="test.busy"><inout port="x" data="x${k}"/>
            <arg name="us" value="${k == 1 ? 4000 : 500}"/><arg name="idle" value="${k == 2 ? idle : false}"/></task>
        </until>
      </comethod>
    </par>
  </unite>
</workflow>)";
  Diagnostics d;
  CompileOptions co;
  co.sets = {{"mapping", mapping}, {"comethods", comethods}, {"idle", idle ? "true" : "false"},
             {"budget", std::to_string(budget)}};
  auto c = compile_workflow_text("fair.xml", xml, co, registry(), d);
  if (!c.ok) {
    ADD_FAILURE() << d.str();
    return {};
  }
  DataStore store(c.dag);
  ExecOptions o;
  o.run_dir = testing::TempDir() + "/ymlopt-fair";
  std::filesystem::create_directories(o.run_dir);
  o.sched = "eager";
  o.ncpu = 1;
  Progress p;
  auto ex = make_starpu_executor();
  const ExecResult r = run_program(*ex, c.dag, store, o, p);
  if (!r.ok || r.unites.size() != 1) {
    ADD_FAILURE() << mapping << ": " << r.error;
    return {};
  }
  std::vector<double> share;
  double served = 0;
  for (const auto& cm : r.unites[0].comethods) share.push_back(cm.worker_s), served += cm.worker_s;
  if (served < 0.4 * budget && budget < 3) return worker_shares(comethods, mapping, idle, budget < 1 ? 1.5 : 3.0);
  for (size_t i = 0; i < share.size(); ++i) EXPECT_GT(share[i], 0.0) << mapping << " c" << i + 1;
  return share;
}

// mapping="fair": three, then two co-methods on one worker, one with tasks 8x
// longer. Shared, the worker serves their tasks in turn, so the long one gets
// most of its time; fair, each gets an equal share. With three, priorities
// pick among the two parts waiting; with two, only one part ever waits, so
// the one ahead in worker time holds its next part back (FairShare::wait_turn).
TEST(ProgramFair, EqualWorkerTimeWhateverTheTaskSizes) {
  for (const char* comethods : {"1,2,3", "1,2"}) {
    const std::vector<double> sh = worker_shares(comethods, "shared", false), fa = worker_shares(comethods, "fair", false);
    const std::size_t n = std::string(comethods) == "1,2" ? 2 : 3;
    ASSERT_EQ(sh.size(), n);
    ASSERT_EQ(fa.size(), n);
    EXPECT_GT(sh[0], 3 * sh[1]) << comethods << " shared: c1 " << sh[0] << " s, c2 " << sh[1] << " s";
    for (size_t i = 1; i < fa.size(); ++i) {
      EXPECT_LT(fa[0], 1.6 * fa[i]) << comethods << " fair: c1 " << fa[0] << " s, c" << i + 1 << " " << fa[i] << " s";
      EXPECT_GT(fa[0], 0.6 * fa[i]) << comethods << " fair: c1 " << fa[0] << " s, c" << i + 1 << " " << fa[i] << " s";
    }
  }
}

// mapping="fair" with a co-method that reports itself idle (it only waits for
// the others' results): it holds no one back, so the other gets the worker as
// if shared (the idle one's tasks are 8x shorter: ~8/9 of the time), not half.
TEST(ProgramFair, AnIdleCoMethodHoldsNoOneBack) {
  const std::vector<double> busy = worker_shares("1,2", "fair", false), idle = worker_shares("1,2", "fair", true);
  ASSERT_EQ(busy.size(), 2u);
  ASSERT_EQ(idle.size(), 2u);
  EXPECT_LT(busy[0], 1.6 * busy[1]) << "fair, both at work: c1 " << busy[0] << " s, c2 " << busy[1] << " s";
  EXPECT_GT(idle[0], 3 * idle[1]) << "fair, c2 idle: c1 " << idle[0] << " s, c2 " << idle[1] << " s";
}

// Publish/gather: 'b' gathers the lowest score published; it never waits
// for the publishers, it loops until the entry it wants is on the board.
TEST_P(Program, GatherTakesTheBestPublishedEntryWithoutWaiting) {
  const ProgramRun r = run(R"(<workflow name="x">
  <unite name="u" exit="all">
    <comethod name="a">
      <data name="xa" dtype="f64" shape="2" init="value" value="7"/>
      <data name="sa" dtype="f64" shape="1" init="value" value="3"/>
      <publish name="ch" data="xa" score="sa"/>
    </comethod>
    <comethod name="b">
      <data name="xb" dtype="f64" shape="2" init="value" value="5"/>
      <data name="sb" dtype="f64" shape="1" init="value" value="1"/>
      <publish name="ch" data="xb" score="sb"/>
    </comethod>
    <comethod name="c">
      <data name="g" dtype="f64" shape="2" init="zeros"/>
      <data name="gs" dtype="f64" shape="1" init="value" value="100"/>
      <until cond="gs le 1" max="100000000"><gather name="ch" into="g" score="gs" better="min"/></until>
    </comethod>
    <comethod name="d">
      <data name="h" dtype="f64" shape="2" init="zeros"/>
      <data name="hs" dtype="f64" shape="1" init="zeros"/>
      <until cond="hs ge 3" max="100000000"><gather name="ch" into="h" score="hs" better="max"/></until>
    </comethod>
  </unite>
</workflow>)",
                    GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.scalar("g"), 5.0);  // b's, score 1
  EXPECT_EQ(r.scalar("gs"), 1.0);
  EXPECT_EQ(r.scalar("h"), 7.0);  // a's, score 3
  const CoMethodRecord* c = r.comethod("c");
  ASSERT_TRUE(c);
  ASSERT_FALSE(c->exchanges.empty());
  EXPECT_EQ(c->exchanges.back().source, "b");
  EXPECT_FALSE(c->exchanges.back().publish);
  EXPECT_GE(c->adopted, 1);
  EXPECT_EQ(r.comethod("a")->publishes, 1);
}

TEST_P(Program, AFailingCoMethodFailsAloneUnlessAllFail) {
  const std::string one_fails = R"(<workflow name="f">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="out" dtype="f64" shape="1" init="zeros"/>
  <unite name="u" exit="all" save_exit="out">
    <comethod name="bad" keep="p">
      <data name="p" dtype="f64" shape="1" init="zeros"/>
      <until cond="p ge 2" max="10"><task name="boom" component="test.throw"><inout port="x" data="p"/></task></until>
    </comethod>
    <comethod name="good" keep="q">
      <data name="q" dtype="f64" shape="1" init="zeros"/>
      <until cond="q ge 4" max="10">)" + inc("q") + R"(</until>
    </comethod>
  </unite>
  )" + inc("out") + R"(
</workflow>)";
  const ProgramRun r = run(one_fails, GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.scalar("out"), 5.0);  // the good co-method's 4, then the step after the unite
  const CoMethodRecord* bad = r.comethod("bad");
  ASSERT_TRUE(bad);
  EXPECT_TRUE(bad->failed);
  EXPECT_EQ(bad->error, "prog.xml:7:37: error: task 'boom' (component test.throw) failed: deliberate failure");
  EXPECT_EQ(r.result.unites[0].winner, "good");

  const ProgramRun all = run(R"(<workflow name="f">
  <unite name="u">
    <comethod name="b1"><data name="p" dtype="f64" shape="1" init="zeros"/><task component="test.throw"><inout port="x" data="p"/></task></comethod>
    <comethod name="b2"><data name="q" dtype="f64" shape="1" init="zeros"/><task component="test.throw"><inout port="x" data="q"/></task></comethod>
  </unite>
</workflow>)",
                      GetParam());
  EXPECT_FALSE(all.result.ok);
  EXPECT_NE(all.result.error.find("prog.xml:2:3: error: every co-method of unite 'u' failed:"), std::string::npos)
      << all.result.error;
  EXPECT_NE(all.result.error.find("co-method 'b2': prog.xml:4:"), std::string::npos) << all.result.error;
}

// exit="budget": every co-method stops after budget_iters iterations; the
// winner has the best score it published.
TEST_P(Program, BudgetStopsEveryoneAndTheBestScoreWins) {
  const ProgramRun r = run(R"(<workflow name="b">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="best" dtype="f64" shape="1" init="zeros"/>
  <unite name="u" exit="budget" budget_iters="4" better="max" save_exit="best">
    <par var="i" values="1,2,3">
      <comethod name="m${i}" keep="s${i}">
        <data name="s${i}" dtype="f64" shape="1" init="value" value="${i * 10}"/>
        <until cond="s${i} lt 0" max="1000">)" + inc("s${i}") + R"(<publish name="score" data="s${i}" score="s${i}"/></until>
      </comethod>
    </par>
  </unite>
</workflow>)",
                    GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  for (const char* m : {"m1", "m2", "m3"}) {
    const CoMethodRecord* c = r.comethod(m);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->stopped) << m;
    EXPECT_EQ(c->iterations, 4) << m;
  }
  EXPECT_EQ(r.result.unites[0].winner, "m3");
  EXPECT_EQ(r.scalar("best"), 34.0);
}

// Vector scores: better="pareto" takes a non-dominated entry (the one nearest
// the ideal point over the scores' ranges); min/max go by the first score.
TEST_P(Program, ParetoGatherTakesANonDominatedEntry) {
  const ProgramRun r = run(R"(<workflow name="p">
  <unite name="search" exit="all">
    <par var="i" values="1,2,3">
      <comethod name="s${i}">
        <data name="x${i}" dtype="f64" shape="2" init="value" value="${i}"/>
        <data name="bytes${i}" dtype="f64" shape="1" init="value" value="${i == 1 ? 1 : i == 2 ? 2 : 4}"/>
        <data name="err${i}" dtype="f32" shape="1" init="value" value="${i == 1 ? 5 : i == 2 ? 2 : 4}"/>
        <publish name="points" data="x${i}" score="bytes${i},err${i}"/>
      </comethod>
    </par>
  </unite>
  <data name="g" dtype="f64" shape="2" init="zeros"/>
  <data name="gb" dtype="f64" shape="1" init="zeros"/>
  <data name="ge" dtype="f64" shape="1" init="zeros"/>
  <gather name="points" into="g" score="gb,ge" better="pareto"/>
  <data name="h" dtype="f64" shape="2" init="zeros"/>
  <data name="hb" dtype="f64" shape="1" init="zeros"/>
  <data name="he" dtype="f64" shape="1" init="zeros"/>
  <gather name="points" into="h" score="hb,he" better="min"/>
</workflow>)",
                           GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  EXPECT_EQ(r.scalar("g"), 2.0);  // (2, 2): (4, 4) is dominated, (1, 5) farther from (1, 2)
  EXPECT_EQ(r.scalar("gb"), 2.0);
  EXPECT_EQ(r.scalar("ge"), 2.0);
  EXPECT_EQ(r.scalar("h"), 1.0);  // the fewest bytes
  EXPECT_EQ(r.scalar("he"), 5.0);
}

// Nested unites: each co-method of the outer unite runs a unite of its own
// (the fast/slow race of kRace, with a start value per outer co-method), then
// steps on the inner winner's tensor and publishes it to the outer channel.
// The inner co-methods are named after their outer one ("m1/fast"), the inner
// unites record which co-method ran them, and a gather takes the best.
const char* kNested = R"(<workflow name="nested">
  <param name="mapping" type="string" default="shared"/>
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="result" dtype="f64" shape="1" init="zeros"/>
  <data name="best" dtype="f64" shape="1" init="zeros"/>
  <unite name="outer" exit="all" mapping="${mapping}">
    <par var="k" values="1,2">
      <comethod name="m${k}">
        <data name="r${k}" dtype="f64" shape="1" init="zeros"/>
        <unite name="inner${k}" exit="first" save_exit="r${k}" mapping="${mapping}">
          <comethod name="fast" keep="x${k}">
            <data name="x${k}" dtype="f64" shape="1" init="value" value="${k * 10}"/>
            <until cond="x${k} ge ${k * 10 + 3}" max="100">%s</until>
          </comethod>
          <comethod name="slow" keep="y${k}">
            <data name="y${k}" dtype="f64" shape="1" init="zeros"/>
            <until cond="y${k} ge 1000000" max="1000000">%s</until>
          </comethod>
        </unite>
        %s
        <publish name="best" data="r${k}" score="r${k}"/>
      </comethod>
    </par>
  </unite>
  <gather name="best" into="result" score="best" better="max"/>
</workflow>)";

TEST_P(Program, NestedUnitesRunInsideCoMethods) {
  for (const char* mapping : {"shared", "contexts"}) {
    char xml[4096];
    std::snprintf(xml, sizeof xml, kNested, inc("x${k}").c_str(), inc("y${k}").c_str(), inc("r${k}").c_str());
    const ProgramRun r = run(xml, GetParam(), {{"mapping", mapping}});
    ASSERT_TRUE(r.result.ok) << r.result.error;
    ASSERT_EQ(r.result.unites.size(), 3u) << mapping;
    const UniteRecord* outer = nullptr;
    std::map<std::string, const UniteRecord*> inner;
    for (const auto& u : r.result.unites) (u.within.empty() ? outer : inner[u.within]) = &u;
    ASSERT_TRUE(outer && inner.count("m1") && inner.count("m2")) << mapping;
    EXPECT_EQ(inner["m1"]->name, "inner1");
    for (const auto& [who, u] : inner) {
      EXPECT_EQ(u->winner, "fast") << who << " " << mapping;
      ASSERT_EQ(u->comethods.size(), 2u);
      EXPECT_TRUE(u->comethods[0].converged && u->comethods[0].iterations == 3) << who;
      EXPECT_TRUE(u->comethods[1].stopped) << who;
    }
    EXPECT_EQ(r.scalar("r1"), 14.0);  // inner1's winner (13), then one step
    EXPECT_EQ(r.scalar("r2"), 24.0);
    EXPECT_TRUE(outer->winner == "m1" || outer->winner == "m2") << outer->winner;
    EXPECT_EQ(r.scalar("result"), 24.0);  // the gather after the unite: the larger published
    EXPECT_EQ(r.scalar("best"), 24.0);
    if (GetParam() == 1 && std::string(mapping) == "contexts") {
      // the inner contexts share the outer co-method's workers
      for (const auto& [who, u] : inner) {
        const auto& mine = outer->comethods[who == "m1" ? 0 : 1].context_workers;
        for (const auto& c : u->comethods)
          for (int w : c.context_workers) EXPECT_NE(std::find(mine.begin(), mine.end(), w), mine.end()) << who;
      }
    }
  }
}

// exit="first" of the outer unite stops the loops of a unite nested in the
// co-method that lost the race.
TEST_P(Program, OuterExitStopsNestedCoMethods) {
  const ProgramRun r = run(R"(<workflow name="stop">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <unite name="outer" exit="first">
    <comethod name="quick">
      <data name="q" dtype="f64" shape="1" init="zeros"/>
      <until cond="q ge 2" max="10">)" + inc("q") +
                               R"(</until>
    </comethod>
    <comethod name="deep">
      <unite name="inner" exit="all">
        <comethod name="a"><data name="a" dtype="f64" shape="1" init="zeros"/><until cond="a lt 0" max="100000000">)" +
                               inc("a") + R"(</until></comethod>
        <comethod name="b"><data name="b" dtype="f64" shape="1" init="zeros"/><until cond="b lt 0" max="100000000">)" +
                               inc("b") + R"(</until></comethod>
      </unite>
    </comethod>
  </unite>
</workflow>)",
                           GetParam());
  ASSERT_TRUE(r.result.ok) << r.result.error;
  ASSERT_EQ(r.result.unites.size(), 2u);
  const UniteRecord& inner = r.result.unites[0].within.empty() ? r.result.unites[1] : r.result.unites[0];
  const UniteRecord& outer = r.result.unites[0].within.empty() ? r.result.unites[0] : r.result.unites[1];
  EXPECT_EQ(inner.within, "deep");
  EXPECT_EQ(outer.winner, "quick");
  for (const auto& c : inner.comethods) {
    EXPECT_TRUE(c.stopped) << c.name;
    EXPECT_LT(c.iterations, 100000000) << c.name;
  }
  EXPECT_TRUE(outer.comethods[1].stopped);  // 'deep' stopped, not converged
}

INSTANTIATE_TEST_SUITE_P(Backends, Program, testing::Values(0, 1),
                         [](const testing::TestParamInfo<int>& i) { return i.param ? "starpu" : "sequential"; });

TEST(ProgramDiagnostics, CoMethodsAndLoopsAreChecked) {
  EXPECT_EQ(diagnostics(R"(<workflow name="d">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="v" dtype="f64" shape="2" init="zeros"/>
  <comethod name="lonely"/>
  <until cond="v ge 1">)" + inc("one") + R"(</until>
  <until cond="nothing ge 1">)" + inc("one") + R"(</until>
  <until cond="one ge" max="0"/>
  <unite exit="budget">
    )" + inc("one") + R"(
    <comethod name="a">)" + inc("one") + R"(</comethod>
    <comethod name="a"><publish name="ch" data="v" score="one"/></comethod>
  </unite>
  <gather name="ch" into="one" score="one"/>
  <gather name="nobody" into="v" score="one"/>
  <gather name="ch" into="v" score="one" better="pareto"/>
  <gather name="ch" into="v" score="one,one" better="best"/>
</workflow>)"),
            "prog.xml:4:3: error: <comethod> must be inside a <unite>\n"
            "prog.xml:5:10: error: cond=\"v ge 1\": 'v' must be a 1-element tensor, but it is f64[2]\n"
            "prog.xml:6:10: error: undefined data 'nothing'\n"
            "prog.xml:7:24: error: max=\"0\" must be at least 1\n"
            "prog.xml:8:3: error: <unite exit=\"budget\"> needs budget_s= (wall-clock seconds) or budget_iters= (loop iterations)\n"
            "prog.xml:9:5: error: <task> directly inside <unite>: a unite holds <comethod>s (possibly in <par>, <seq> or <if>), and each co-method holds its own steps\n"
            "prog.xml:11:5: error: co-method 'a' defined twice in <unite> 'unite' (first at line 10)\n"
            "prog.xml:13:21: error: channel 'ch' is published as (f64[2]) at line 11, but gathered here as (f64[1])\n"
            "prog.xml:15:30: error: better=\"pareto\" needs several scores (score=\"a,b\"), got 1\n"
            "prog.xml:16:46: error: better=\"best\" must be min, max or pareto\n"
            "prog.xml:14:3: error: gather from channel 'nobody' that no <publish name=\"nobody\"> writes\n");
  // co-methods run concurrently: writing the same tensor is refused; so are a
  // keep= list that does not match save_exit and a publish of unwritten data
  EXPECT_EQ(diagnostics(R"(<workflow name="d">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="shared" dtype="f64" shape="1" init="zeros"/>
  <data name="out" dtype="f64" shape="1"/>
  <data name="never" dtype="f64" shape="1"/>
  <unite save_exit="out">
    <comethod name="a" keep="shared">)" + inc("shared") + R"(</comethod>
    <comethod name="b">)" + inc("shared") + R"(</comethod>
    <comethod name="c" keep="one"><publish name="p" data="never" score="one"/></comethod>
  </unite>
</workflow>)"),
            "prog.xml:9:53: error: <publish> of 'never' before anything writes it (give it init= or write it first)\n"
            "prog.xml:8:5: error: co-method 'b' keeps 0 tensors (keep=) but <unite> 'unite' saves 1 (save_exit=): they are copied in order\n"
            "prog.xml:8:24: error: co-method 'b' uses 'shared', which co-method 'a' writes (line 7): co-methods run concurrently and may share only data they all read; exchange results with <publish>/<gather>\n");
}

TEST(ProgramDiagnostics, NestedCoMethodsAreCheckedAgainstTheOuterOnes) {
  // a nested co-method may read what its own outer co-method wrote before the
  // inner unite ('x' reads 'pa'); a write in it conflicts with the other outer
  // co-methods, which the message names ('a', not 'y')
  EXPECT_EQ(diagnostics(R"(<workflow name="d">
  <data name="one" dtype="f64" shape="1" init="ones"/>
  <data name="w" dtype="f64" shape="1" init="zeros"/>
  <unite name="outer">
    <comethod name="a">
      <data name="pa" dtype="f64" shape="1" init="zeros"/>
      )" + inc("pa") + R"(
      <unite name="inner">
        <comethod name="x"><data name="t" dtype="f64" shape="1" init="zeros"/><task component="blas.axpy"><in port="x" data="pa"/><inout port="y" data="t"/></task></comethod>
        <comethod name="y">)" + inc("w") + R"(</comethod>
      </unite>
    </comethod>
    <comethod name="b">)" + inc("w") + R"(</comethod>
  </unite>
</workflow>)"),
            "prog.xml:13:24: error: co-method 'b' uses 'w', which co-method 'a' writes (line 10): co-methods run "
            "concurrently and may share only data they all read; exchange results with <publish>/<gather>\n");
}

}  // namespace

TEST(Compile, PortsAndArgsInsideIfInATask) {
  const std::string xml = R"(<workflow name="t">
  <param name="bias" type="bool" default="false"/>
  <data name="x" shape="2,3" init="ones"/><data name="w" shape="3,4" init="ones"/><data name="b" shape="4" init="ones"/>
  <data name="y" shape="2,4"/>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="w"/>
    <if cond="${bias}"><in port="b" data="b"/><else><arg name="activation" value="relu"/></else></if>
    <out port="y" data="y"/></task>
</workflow>)";
  for (const char* bias : {"false", "true"}) {
    SCOPED_TRACE(bias);
    Diagnostics diags;
    const CompileResult r = test::compile(xml, diags, {{"bias", bias}});
    ASSERT_TRUE(r.ok) << diags.str();
    ASSERT_EQ(r.dag.tasks.size(), 1u);
    const TaskNode& t = r.dag.tasks[0];
    const bool with = std::string(bias) == "true";
    EXPECT_EQ(t.bindings[2].ref.data >= 0, with);  // port b
    EXPECT_EQ(t.args.get_string("activation"), with ? "none" : "relu");
  }
  Diagnostics diags;
  const std::string bad = R"(<workflow name="t"><data name="x" shape="2,3" init="ones"/><data name="w" shape="3,4" init="ones"/>
  <data name="y" shape="2,4"/>
  <task component="nn.linear"><in port="x" data="x"/><in port="w" data="w"/><out port="y" data="y"/>
    <if cond="${'yes'}"><arg name="activation" value="relu"/></if>
    <if cond="${1}"><else/><else/></if>
    <save data="y" to="y.npy"/>
  </task></workflow>)";
  EXPECT_FALSE(test::compile(bad, diags).ok);
  const std::string msgs = diags.str();
  EXPECT_NE(msgs.find("cond=\"${'yes'}\" is not a boolean expression"), std::string::npos) << msgs;
  EXPECT_NE(msgs.find("<if> has more than one <else>"), std::string::npos) << msgs;
  EXPECT_NE(msgs.find("unknown element <save> in <task> (expected <in>, <out>, <inout>, <arg> or <if> around them)"),
            std::string::npos)
      << msgs;
}
