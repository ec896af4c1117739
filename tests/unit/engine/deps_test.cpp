// Dependency inference: RAW, WAR, WAW on whole tensors and tiles, events.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

#include "io/tensor_file.hpp"
#include "test_util.hpp"
#include "ymlopt/engine/analysis.hpp"

using namespace ymlopt;
using Preds = std::vector<std::int32_t>;

namespace {
Dag compile_ok(const std::string& body) {
  Diagnostics d;
  auto r = test::compile("<workflow name=\"t\">\n" + body + "\n</workflow>", d);
  EXPECT_TRUE(r.ok) << d.str();
  return std::move(r.dag);
}
std::string scale(const std::string& x) {
  return "<task component=\"tensor.scale\"><inout port=\"x\" data=\"" + x + "\"/></task>\n";
}
std::string copy(const std::string& x, const std::string& y) {
  return "<task component=\"tensor.copy\"><in port=\"x\" data=\"" + x + "\"/><out port=\"y\" data=\"" + y + "\"/></task>\n";
}
}  // namespace

TEST(Deps, ReadAfterWriteWriteAfterReadWriteAfterWrite) {
  Dag g = compile_ok(R"(<data name="A" shape="4,4" init="ones"/><data name="B" shape="4,4"/><data name="C" shape="4,4"/>)" +
                     copy("A", "B") +   // 0: writes B
                     copy("B", "C") +   // 1: RAW on B -> 0
                     copy("A", "B") +   // 2: WAR on B -> 1, WAW -> 0
                     scale("C") +       // 3: RAW/WAW on C -> 1
                     copy("A", "C"));   // 4: WAW on C -> 3 (1 is transitively before 3)
  ASSERT_EQ(g.tasks.size(), 5u);
  EXPECT_EQ(g.tasks[0].preds, Preds{});
  EXPECT_EQ(g.tasks[1].preds, Preds{0});
  EXPECT_EQ(g.tasks[2].preds, (Preds{0, 1}));
  EXPECT_EQ(g.tasks[3].preds, Preds{1});
  EXPECT_EQ(g.tasks[4].preds, Preds{3});
}

TEST(Deps, ReadersDoNotDependOnEachOther) {
  Dag g = compile_ok(R"(<data name="A" shape="4" init="ones"/><data name="B" shape="4"/><data name="C" shape="4"/>)" +
                     copy("A", "B") + copy("A", "C") + scale("A"));
  EXPECT_EQ(g.tasks[0].preds, Preds{});
  EXPECT_EQ(g.tasks[1].preds, Preds{});
  EXPECT_EQ(g.tasks[2].preds, (Preds{0, 1}));  // WAR on both readers
}

TEST(Deps, TilesAreIndependentUntilTheWholeTensorIsUsed) {
  Dag g = compile_ok(R"(<data name="A" shape="8,8" tile="4,4" init="ones"/><data name="B" shape="8,8"/>)" +
                     scale("A[0,0]") + scale("A[0,1]") + scale("A[0,0]") + copy("A", "B") + scale("A[1,1]"));
  EXPECT_EQ(g.tasks[0].preds, Preds{});
  EXPECT_EQ(g.tasks[1].preds, Preds{});
  EXPECT_EQ(g.tasks[2].preds, Preds{0});
  EXPECT_EQ(g.tasks[3].preds, (Preds{1, 2}));  // whole read after tile writes
  EXPECT_EQ(g.tasks[4].preds, Preds{3});       // tile write after whole read (WAR)
}

TEST(Deps, LoopsExpandInProgramOrder) {
  Dag g = compile_ok(R"(<data name="A" shape="4,8" tile="4,2" init="ones"/>
    <par var="j" from="0" to="4"><seq var="k" from="0" to="3">)" + scale("A[0,${j}]") + "</seq></par>");
  ASSERT_EQ(g.tasks.size(), 12u);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(g.tasks[size_t(3 * j)].preds, Preds{});
    EXPECT_EQ(g.tasks[size_t(3 * j + 1)].preds, Preds{3 * j});
    EXPECT_EQ(g.tasks[size_t(3 * j + 2)].preds, Preds{3 * j + 1});
  }
}

TEST(Deps, EventsAddEdgesAndReorderExecution) {
  // branch 1 waits for branch 2's notify: the event edge points forward in program order
  Dag g = compile_ok(R"(<data name="A" shape="4" init="ones"/><data name="B" shape="4" init="ones"/>
    <par><seq><wait event="go"/>)" + scale("A") + "</seq><seq>" + scale("B") + scale("B") +
                     R"(<notify event="go"/></seq></par>)");
  ASSERT_EQ(g.tasks.size(), 3u);
  EXPECT_EQ(g.tasks[0].preds, Preds{2});  // only the sink of branch 2
  EXPECT_EQ(g.tasks[0].event_preds, Preds{2});
  EXPECT_EQ(g.tasks[2].preds, Preds{1});
  EXPECT_EQ(g.topo_order, (std::vector<std::int32_t>{1, 2, 0}));
}

namespace {
/// Whether task `to` depends on task `from` through the DAG's edges.
bool reaches(const Dag& g, std::int32_t from, std::int32_t to) {
  std::vector<std::uint8_t> seen(g.tasks.size(), 0);
  std::vector<std::int32_t> stack = {to};
  while (!stack.empty()) {
    const auto t = stack.back();
    stack.pop_back();
    if (t == from) return true;
    for (auto p : g.tasks[size_t(t)].preds)
      if (!seen[size_t(p)]) seen[size_t(p)] = 1, stack.push_back(p);
  }
  return false;
}
}  // namespace

TEST(Deps, EventsAlternatingBetweenBranchesOrderEveryTask) {
  // X[i] after e[i-1] (notified after Y[i-1]), Y[i] after f[i] (notified after X[i]):
  // no data links them, the events alone order X0 Y0 X1 Y1 ...
  const int k = 40;
  Dag g = compile_ok(R"(<data name="X" shape=")" + std::to_string(k) + R"(" tile="1" init="ones"/>
    <data name="Y" shape=")" + std::to_string(k) + R"(" tile="1" init="ones"/>
    <par>
      <seq var="i" from="0" to=")" + std::to_string(k) + R"(">
        <if cond="${i > 0}"><wait event="e[${i-1}]"/></if>)" + scale("X[${i}]") + R"(<notify event="f[${i}]"/>
      </seq>
      <seq var="i" from="0" to=")" + std::to_string(k) + R"(">
        <wait event="f[${i}]"/>)" + scale("Y[${i}]") + R"(<notify event="e[${i}]"/>
      </seq>
    </par>)");
  ASSERT_EQ(g.tasks.size(), size_t(2 * k));
  std::vector<std::int32_t> want;
  for (int i = 0; i < k; ++i) want.push_back(i), want.push_back(k + i);
  EXPECT_EQ(g.topo_order, want);
  for (int i = 0; i < k; ++i) {
    EXPECT_TRUE(reaches(g, i, k + i)) << i;
    if (i + 1 < k) {
      EXPECT_TRUE(reaches(g, k + i, i + 1)) << i;
    }
  }
}

TEST(Deps, AnEventANotifyAlreadyFollowsAddsNoEdges) {
  // B's task comes after the wait for a, so a waiter of b follows X through it: the
  // task after wait(b) gets one edge (from Y), not one from X as well
  Dag g = compile_ok(R"(<data name="X" shape="4" init="ones"/><data name="Y" shape="4" init="ones"/>
    <data name="Z" shape="4" init="ones"/>
    <par>
      <seq var="i" from="0" to="1">)" + scale("X") + R"(<notify event="a"/></seq>
      <seq var="i" from="0" to="1"><wait event="a"/>)" + scale("Y") + R"(<notify event="b"/></seq>
      <seq var="i" from="0" to="1"><wait event="b"/>)" + scale("Z") + R"(</seq>
    </par>)");
  ASSERT_EQ(g.tasks.size(), 3u);
  EXPECT_EQ(g.tasks[1].event_preds, Preds{0});
  EXPECT_EQ(g.tasks[2].event_preds, Preds{1});
  EXPECT_TRUE(reaches(g, 0, 2));
  // with nothing between the wait and the notify, b's waiters get a's set themselves
  Dag h = compile_ok(R"(<data name="X" shape="4" init="ones"/><data name="Z" shape="4" init="ones"/>
    <par>
      <seq var="i" from="0" to="1">)" + scale("X") + R"(<notify event="a"/></seq>
      <seq var="i" from="0" to="1"><wait event="a"/><notify event="b"/></seq>
      <seq var="i" from="0" to="1"><wait event="b"/>)" + scale("Z") + R"(</seq>
    </par>)");
  ASSERT_EQ(h.tasks.size(), 2u);
  EXPECT_EQ(h.tasks[1].event_preds, Preds{0});
}

TEST(Deps, RandomEventWorkflowsOrderWhatTheWaitsRequire) {
  // Random <par> branches of tasks, notifies and waits (a wait names an event notified
  // at an earlier step of the interleaving, so every wait can be satisfied). What the
  // DAG must order, by YML's rules simulated directly: a wait makes every later task
  // of its branch follow what its event requires; a notify requires what its branch
  // follows so far and every task the branch emitted before it.
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    // half the seeds have no data between a branch's tasks (events alone order them)
    const int branches = 2 + int(seed % 3), steps = 14 + int(seed % 11), chain_one_in = seed % 2 ? 3 : 1000;
    struct Step {
      int kind;  // 0 task, 1 notify, 2 wait
      int event;
      bool chain;  // a task on the branch's own tensor (data after its previous one)
    };
    const auto nb = static_cast<std::size_t>(branches);
    std::vector<std::vector<Step>> prog(nb);
    std::vector<int> notified;  // events notified so far in the interleaving
    int events = 0;
    for (int j = 0; j < steps; ++j)
      for (int b = 0; b < branches; ++b) {
        const int r = int(rng() % 10);
        if (r < 5 || (r >= 8 && notified.empty())) prog[size_t(b)].push_back({0, -1, rng() % std::uint32_t(chain_one_in) == 0});
        else if (r < 8) prog[size_t(b)].push_back({1, events, false}), notified.push_back(events++);
        else prog[size_t(b)].push_back({2, notified[rng() % notified.size()], false});
      }
    std::string body;
    for (int b = 0; b < branches; ++b)
      body += "<data name=\"C" + std::to_string(b) + "\" shape=\"4\" init=\"ones\"/><data name=\"T" +
              std::to_string(b) + "\" shape=\"" + std::to_string(steps) + "\" tile=\"1\" init=\"ones\"/>";
    body += "<par>";
    for (int b = 0; b < branches; ++b) {
      body += "<seq var=\"i\" from=\"0\" to=\"1\">";
      for (int j = 0; j < steps; ++j) {
        const Step& st = prog[size_t(b)][size_t(j)];
        if (st.kind == 0) {
          std::string x = st.chain ? "C" : "T";  // (appends: GCC 12 warns on "T" + to_string(), bug 105329)
          x += std::to_string(b);
          if (!st.chain) {
            x += '[';
            x += std::to_string(j);
            x += ']';
          }
          body += scale(x);
          continue;
        }
        body += st.kind == 1 ? "<notify event=\"e" : "<wait event=\"e";
        body += std::to_string(st.event);
        body += "\"/>";
      }
      body += "</seq>";
    }
    Dag g = compile_ok(body + "</par>");
    // the simulation: tasks are numbered in program order (branch after branch)
    std::vector<std::set<std::int32_t>> req(static_cast<std::size_t>(events));  // what each event's waiters follow
    std::vector<std::vector<std::int32_t>> task_id(nb);
    std::int32_t id = 0;
    for (int b = 0; b < branches; ++b)
      for (const Step& st : prog[size_t(b)]) task_id[size_t(b)].push_back(st.kind == 0 ? id++ : -1);
    ASSERT_EQ(g.tasks.size(), size_t(id)) << seed;
    std::vector<std::set<std::int32_t>> follows(nb), emitted(nb);
    std::vector<std::pair<std::int32_t, std::int32_t>> must;  // (before, after)
    for (int j = 0; j < steps; ++j)
      for (int b = 0; b < branches; ++b) {
        const Step& st = prog[size_t(b)][size_t(j)];
        auto& f = follows[size_t(b)];
        if (st.kind == 2) {
          f.insert(req[size_t(st.event)].begin(), req[size_t(st.event)].end());
        } else if (st.kind == 1) {
          req[size_t(st.event)] = f;
          req[size_t(st.event)].insert(emitted[size_t(b)].begin(), emitted[size_t(b)].end());
        } else {
          const std::int32_t t = task_id[size_t(b)][size_t(j)];
          for (auto s : f) must.emplace_back(s, t);
          emitted[size_t(b)].insert(t);
        }
      }
    for (const auto& [a, t] : must) EXPECT_TRUE(reaches(g, a, t)) << "seed " << seed << ": task " << t << " must follow " << a;
  }
}

TEST(Deps, BranchesHandingEventsBackAndForthCostOneEdgePerTask) {
  // no data between the tasks: each notify's set was every earlier task of its branch
  // (k = 3,000: 9M edges); the task since its previous notify is enough, as the branch's
  // last task follows that notify through the other branch
  const int k = 3000;
  const std::string n = std::to_string(k);
  Dag g = compile_ok(R"(<data name="X" shape=")" + n + R"(" tile="1" init="ones"/>
    <data name="Y" shape=")" + n + R"(" tile="1" init="ones"/>
    <par>
      <seq var="i" from="0" to=")" + n + R"(">
        <if cond="${i > 0}"><wait event="e[${i-1}]"/></if>)" + scale("X[${i}]") + R"(<notify event="f[${i}]"/>
      </seq>
      <seq var="i" from="0" to=")" + n + R"("><wait event="f[${i}]"/>)" + scale("Y[${i}]") + R"(<notify event="e[${i}]"/></seq>
    </par>)");
  ASSERT_EQ(g.tasks.size(), size_t(2 * k));
  EXPECT_EQ(g.num_edges(), size_t(2 * k - 1));
  for (int i = 0; i + 1 < k; ++i) {
    EXPECT_EQ(g.tasks[size_t(k + i)].event_preds, Preds{i});
    EXPECT_EQ(g.tasks[size_t(i + 1)].event_preds, Preds{k + i});
  }
  // a consumer of a producer's events: Y[i] must follow X[0..i], which nothing orders,
  // so the edges stay k(k+1)/2; but each head used to go through the sets of all the
  // waits before it (14.7 s for k = 3,000), and now takes only the last one's
  Dag h = compile_ok(R"(<data name="X" shape=")" + n + R"(" tile="1" init="ones"/>
    <data name="Y" shape=")" + n + R"(" tile="1" init="ones"/>
    <par>
      <seq var="i" from="0" to=")" + n + R"(">)" + scale("X[${i}]") + R"(<notify event="f[${i}]"/></seq>
      <seq var="i" from="0" to=")" + n + R"("><wait event="f[${i}]"/>)" + scale("Y[${i}]") + R"(</seq>
    </par>)");
  EXPECT_EQ(h.num_edges(), size_t(k) * size_t(k + 1) / 2);
  for (int i : {0, 1, k / 2, k - 1}) EXPECT_EQ(h.tasks[size_t(k + i)].event_preds.size(), size_t(i + 1));
}

TEST(Deps, AnEventPerStepOfALoopKeepsTheEdgesFew) {
  // YML's block Gauss-Jordan: step k waits for step k-1's event, the check for the
  // last one. Each wait used to add an edge from every task before the notify to
  // every task after the wait, and each notify after a wait repeated the earlier
  // events' sets: 8,673 tasks took 138 s, 18 GB and 1.5M edges to compile
  for (const char* file : {"workflows/linalg/gauss_jordan.xml", "workflows/yml/gauss_jordan.xml"}) {
    Diagnostics d;
    CompileOptions o;
    o.file = std::string(YMLOPT_SOURCE_DIR) + "/" + file;
    o.sets = {{"n", "4096"}, {"bs", "256"}};
    auto r = compile_workflow(o, test::builtins(), d);
    ASSERT_TRUE(r.ok) << d.str();
    EXPECT_EQ(r.dag.tasks.size(), 8673u);
    EXPECT_LT(r.dag.num_edges(), 40000u) << file;  // 32,341: a notify after a wait adds no set it follows
    // the check (the last task) still follows the last step's inverse of its pivot
    std::int32_t last_inv = -1;
    for (const auto& t : r.dag.tasks)
      if (t.comp->name == "blas.getri") last_inv = t.id;
    EXPECT_TRUE(reaches(r.dag, last_inv, std::int32_t(r.dag.tasks.size()) - 1));
  }
}

TEST(Deps, ConditionalsAndCallsExpand) {
  Dag g = compile_ok(R"(<param name="k" type="int" default="3"/><data name="A" shape="4" init="ones"/>
    <seq var="i" from="0" to="${k}"><if cond="${i % 2 == 0}">)" + scale("A") + "<else>" + copy("A", "A") +
                     "</else></if></seq>");
  ASSERT_EQ(g.tasks.size(), 3u);
  EXPECT_EQ(g.tasks[0].comp->name, "tensor.scale");
  EXPECT_EQ(g.tasks[1].comp->name, "tensor.copy");
  EXPECT_EQ(g.tasks[2].comp->name, "tensor.scale");
}

TEST(Deps, LiteralConditionsAndBudgets) {
  // an attribute without ${} is a literal: cond="1"/"true" take the branch, "0"/"false" do not
  Dag g = compile_ok(R"(<data name="A" shape="4" init="ones"/><if cond="1">)" + scale("A") + R"(</if>
    <if cond="false">)" + copy("A", "A") + R"(</if><if cond="true">)" + copy("A", "A") + "</if>");
  ASSERT_EQ(g.tasks.size(), 2u);
  EXPECT_EQ(g.tasks[0].comp->name, "tensor.scale");
  EXPECT_EQ(g.tasks[1].comp->name, "tensor.copy");
  Diagnostics d;
  auto r = test::compile(R"(<workflow name="t"><data name="A" shape="4" init="ones"/>
<if cond="maybe"></if><if cond="nan"></if></workflow>)", d);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(d.str(),
            "test.xml:2:5: error: cond=\"maybe\" is not a boolean expression\n"
            "test.xml:2:27: error: cond=\"nan\" is not a boolean expression\n");
  Dag u = compile_ok(R"(<unite name="u" exit="budget" budget_s="0.5"><comethod name="a">
    <data name="x" shape="1" init="ones"/>)" + scale("x") + "</comethod></unite>");
  bool found = false;
  for (const auto& reg : u.regions)
    if (reg.kind == Region::Kind::unite) {
      found = true;
      EXPECT_EQ(reg.budget_s, 0.5);
    }
  EXPECT_TRUE(found);
}

TEST(Deps, SetOverridesParamsAndUnknownSetIsAUsageError) {
  Diagnostics d;
  auto r = test::compile(R"(<workflow name="t"><param name="n" type="int" default="2"/>
    <data name="A" shape="${n}" init="ones"/><seq var="i" from="0" to="${n}">)" + scale("A") + "</seq></workflow>",
                         d, {{"n", "5"}});
  ASSERT_TRUE(r.ok) << d.str();
  EXPECT_EQ(r.dag.tasks.size(), 5u);
  EXPECT_EQ(r.dag.data[0].shape, std::vector<std::int64_t>{5});
  Diagnostics d2;
  auto r2 = test::compile(R"(<workflow name="t"><param name="n" type="int" default="2"/></workflow>)", d2, {{"m", "1"}});
  EXPECT_FALSE(r2.ok);
  EXPECT_TRUE(r2.usage_error);
  EXPECT_EQ(d2.str(), "test.xml: error: --set m=1: unknown parameter 'm' (did you mean 'n'?)\n");
  Diagnostics d3;
  auto r3 = test::compile(R"(<workflow name="t"><param name="n" type="int" default="2"/></workflow>)", d3, {{"n", "x"}});
  EXPECT_TRUE(r3.usage_error);
  EXPECT_EQ(d3.str(), "test.xml: error: --set n=x: parameter 'n' of type int cannot take value 'x'\n");
}

TEST(Deps, AllErrorsOfAFileAreReportedOnceEach) {
  Diagnostics d;
  auto r = test::compile(R"(<workflow name="t"><data name="A" shape="4" init="ones"/>
<seq var="i" from="0" to="100"><task component="tensor.scale"><inout port="x" data="B"/></task></seq>
<task component="nope.op"/></workflow>)",
                         d);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(d.error_count(), 2) << d.str();  // the loop's 100 identical errors collapse into one
}

// content_ids (TensorView::content_id): reads with no write between share an
// id; a write to the tile or to the whole tensor starts a new version; written
// ports and reads of data the same task writes get 0.
TEST(ContentIds, NameOneVersionPerTileAndTensor) {
  Dag g = compile_ok(R"(<data name="A" shape="8,8" tile="4,4" init="ones"/><data name="B" shape="8,8"/>)"
                     R"(<data name="C" shape="4,4"/>)" +
                     copy("A[0,0]", "C") +  // 0
                     copy("A[0,1]", "C") +  // 1
                     copy("A[0,0]", "C") +  // 2: the same version of A[0,0] as 0
                     scale("A[0,1]") +      // 3: a new version of A[0,1] (and of A)
                     copy("A[0,1]", "C") +  // 4
                     copy("A[0,0]", "C") +  // 5: A[0,0] unchanged
                     copy("A", "B") +       // 6: the whole of A
                     copy("A", "B") +       // 7: the same
                     copy("B", "A") +       // 8: a new version of every tile
                     copy("A[0,0]", "C"));  // 9
  const ContentIds c = content_ids(g);
  auto id = [&](int t, int port) { return c.ids[c.first[size_t(t)] + size_t(port)]; };
  ASSERT_EQ(c.first.size(), g.tasks.size() + 1);
  for (int t : {0, 1, 2, 4, 5, 6, 7, 8, 9}) {
    EXPECT_NE(id(t, 0), 0u) << t;
    EXPECT_EQ(id(t, 1), 0u) << t << ": a written port";
  }
  EXPECT_EQ(id(3, 0), 0u) << "an inout port";
  EXPECT_EQ(id(0, 0), id(2, 0));
  EXPECT_EQ(id(0, 0), id(5, 0));
  EXPECT_NE(id(0, 0), id(1, 0));
  EXPECT_NE(id(1, 0), id(4, 0));
  EXPECT_EQ(id(6, 0), id(7, 0));
  EXPECT_NE(id(6, 0), id(0, 0));
  EXPECT_NE(id(9, 0), id(0, 0));
}

TEST(ContentIds, ReadsOfDataTheTaskWritesGetNoneAndLoopsOnlyUnwrittenData) {
  Dag g = compile_ok(R"(<data name="A" shape="4,4" init="ones"/>)"
                     R"(<task component="tensor.add"><in port="a" data="A"/><in port="b" data="A"/>)"
                     R"(<out port="c" data="A"/></task>)");
  const ContentIds c = content_ids(g);
  EXPECT_EQ(c.ids, (std::vector<std::uint32_t>{0, 0, 0}));
  Dag loop = compile_ok(R"(<data name="one" dtype="f64" shape="1" init="ones"/>)"
                        R"(<data name="c" dtype="f64" shape="1" init="zeros"/><data name="d" dtype="f64" shape="1"/>)"
                        R"(<until cond="c ge 5" max="10">)" +
                        copy("one", "d") +
                        R"(<task component="blas.axpy"><in port="x" data="one"/><inout port="y" data="c"/></task>)"
                        R"(</until>)");
  ASSERT_TRUE(loop.dynamic());
  const ContentIds l = content_ids(loop);
  // tasks that run again: only `one`, which no task writes, keeps an id (the same in both reads)
  ASSERT_EQ(l.ids.size(), 4u);
  EXPECT_NE(l.ids[0], 0u);
  EXPECT_EQ(l.ids[2], l.ids[0]);
  EXPECT_EQ(l.ids[1], 0u);
  EXPECT_EQ(l.ids[3], 0u);
}

// Two declarations of one file tensor (a sub-workflow called twice) share its
// storage while no task writes it; a write to it afterwards is refused, and a
// tensor already written gets a copy of its own.
TEST(SharedFileData, OneTensorForTwoNamesUntilSomethingWritesIt) {
  const std::string dir = testing::TempDir() + "/ymlopt-shared-file-data";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/w.safetensors";
  std::vector<float> a(12, 0.5f);
  io::save_safetensors(file, {{"a", {a.data(), DType::f32, 3, 4, 4, Shape{3, 4}}}});
  auto decl = [&](const std::string& name, const std::string& extra = "") {
    return "<data name=\"" + name + "\" shape=\"3,4\" src=\"" + file + "\" key=\"a\"" + extra + "/>\n";
  };
  Dag g = compile_ok(decl("x") + decl("y") + R"(<data name="out" shape="3,4"/>)" +
                     R"(<task component="tensor.add"><in port="a" data="x"/><in port="b" data="y"/><out port="c" data="out"/></task>)");
  ASSERT_EQ(g.data.size(), 2u);
  EXPECT_EQ(g.tasks[0].bindings[0].ref.data, g.tasks[0].bindings[1].ref.data);
  EXPECT_EQ(compile_ok(decl("x") + decl("y", " tile=\"1,4\"")).data.size(), 2u) << "another tiling: another tensor";
  Diagnostics d;
  auto r = test::compile("<workflow name=\"t\">" + decl("x") + decl("y") + scale("y") + "</workflow>", d);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(d.str().find("writes 'x', which 'y' also reads ('a' of " + file + ", loaded once for both)"),
            std::string::npos)
      << d.str();
  Dag written = compile_ok(decl("x") + scale("x") + decl("y") + scale("y"));
  EXPECT_EQ(written.data.size(), 2u) << "x was written before y was declared";
  EXPECT_NE(written.tasks[0].bindings[0].ref.data, written.tasks[1].bindings[0].ref.data);
}
