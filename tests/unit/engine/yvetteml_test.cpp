// YvetteML (YML's graph language) as a front end: the shipped YML Cholesky
// compiles to the same DAG as the XML one, each construct maps to the workflow
// language's, and errors point into the graph text.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "test_util.hpp"

using namespace ymlopt;

namespace {

Dag compile_file(const std::string& rel, std::vector<std::pair<std::string, std::string>> sets = {}) {
  Diagnostics d;
  CompileOptions o;
  o.file = std::string(YMLOPT_SOURCE_DIR) + "/" + rel;
  o.sets = std::move(sets);
  auto r = compile_workflow(o, test::builtins(), d);
  EXPECT_TRUE(r.ok) << d.str();
  return std::move(r.dag);
}

/// A task as the scheduler sees it: component, bindings by data name, args, predecessors.
std::string describe(const Dag& dag, const TaskNode& t) {
  std::string s = t.comp->name + "(";
  for (const Binding& b : t.bindings) s += (b.ref.data < 0 ? std::string("-") : dag.ref_name(b.ref)) + " ";
  s += ")";
  for (const ParamSpec& p : t.comp->params) s += " " + p.name + "=" + t.args.get_string(p.name);
  // (appended piecewise: GCC 12 warns -Wrestrict on " " + std::to_string())
  s += " after";
  for (std::int32_t p : t.preds) (s += ' ') += std::to_string(p);
  s += " events";
  for (std::int32_t p : t.event_preds) (s += ' ') += std::to_string(p);
  return s;
}

CompileResult compile_app(const std::string& graph, Diagnostics& d, const std::string& extra = "") {
  const std::string xml = R"(<application name="t">
  <component name="scale" impl="tensor.scale"><param name="X" mode="inout" port="x"/><param name="a" arg="alpha"/></component>
  <component name="copy" impl="tensor.copy"><param name="X" mode="in" port="x"/><param name="Y" mode="out" port="y"/></component>
  <param name="n" type="int" default="4"/>
  <data name="A" shape="8,8" tile="2,2" init="ones"/>
  <data name="B" shape="8,8" tile="2,2" init="zeros"/>)" + extra + R"(
  <graph>)" + graph + R"(</graph>
</application>)";
  return compile_workflow_text("app.xml", xml, {}, test::builtins(), d);
}

}  // namespace

// The classic YML applications shipped in both syntaxes: Cholesky, block LU
// (an event before the check) and block Gauss-Jordan (an event per step).
class ShippedYmlApplication : public testing::TestWithParam<const char*> {};

TEST_P(ShippedYmlApplication, GivesTheSameDagAsTheXmlWorkflow) {
  const std::string name = GetParam();
  for (const char* n : {"1024", "1000"}) {
    const std::vector<std::pair<std::string, std::string>> sets = {{"n", n}, {"bs", "256"}};
    const Dag xml = compile_file("workflows/linalg/" + name + ".xml", sets);
    const Dag yml = compile_file("workflows/yml/" + name + ".xml", sets);
    ASSERT_EQ(xml.tasks.size(), yml.tasks.size());
    ASSERT_GT(xml.tasks.size(), 20u);
    for (std::size_t i = 0; i < xml.tasks.size(); ++i)
      EXPECT_EQ(describe(xml, xml.tasks[i]), describe(yml, yml.tasks[i])) << "task " << i;
    EXPECT_EQ(xml.num_edges(), yml.num_edges());
    EXPECT_EQ(yml.name, name);
  }
}

INSTANTIATE_TEST_SUITE_P(Classic, ShippedYmlApplication, testing::Values("cholesky", "lu", "gauss_jordan"),
                         [](const testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

TEST(YvetteML, LoopsAreInclusiveAndNestSeveralIndices) {
  Diagnostics d;
  auto r = compile_app(R"(
    par (i := 0; n - 1) (j := i; 3) do
      compute scale(A[i][j], i + 10 * j);
    enddo
    seq (k := 3; 0; -1) do compute copy(A[k][k], B[k][k]); enddo)", d);
  ASSERT_TRUE(r.ok) << d.str();
  // i = 0..3, j = i..3: 10 tasks, then k = 3, 2, 1, 0
  ASSERT_EQ(r.dag.tasks.size(), 14u);
  EXPECT_EQ(r.dag.ref_name(r.dag.tasks[1].bindings[0].ref), "A[0,1]");
  EXPECT_EQ(r.dag.tasks[1].args.get_string("alpha"), "10");
  EXPECT_EQ(r.dag.tasks[9].args.get_string("alpha"), "33");
  EXPECT_EQ(r.dag.ref_name(r.dag.tasks[10].bindings[0].ref), "A[3,3]");
  EXPECT_EQ(r.dag.ref_name(r.dag.tasks[13].bindings[1].ref), "B[0,0]");
  EXPECT_EQ(r.dag.tasks[0].label, "scale(A[0,0],i + 10 * j)");
}

TEST(YvetteML, BranchesConditionsAssignmentsAndEvents) {
  Diagnostics d;
  auto r = compile_app(R"(
    # two branches; the second waits for both events of the first
    par
      compute scale(A[0][0], 2); notify(e[0]);
      compute scale(A[1][1], 2); notify(e[1]);
    //
      wait(e[0] and e[1]);
      m := n * 2 - 5;
      if (m gt 2 and not (m eq 4)) then
        compute copy(A[0][0], B[m][0]);
      else
        compute copy(A[1][1], B[0][0]);
      endif
    endpar)", d);
  ASSERT_TRUE(r.ok) << d.str();
  ASSERT_EQ(r.dag.tasks.size(), 3u);
  EXPECT_EQ(r.dag.ref_name(r.dag.tasks[2].bindings[1].ref), "B[3,0]");  // m = 3: then-branch
  EXPECT_EQ(r.dag.tasks[2].event_preds, (std::vector<std::int32_t>{0, 1}));
}

TEST(YvetteML, ErrorsPointIntoTheGraphText) {
  struct Case {
    std::string graph, message;
  };
  // <graph> is on line 7 of the application; the graph text starts right after it
  const std::vector<Case> cases = {
      {"\n  compute scal(A[0][0], 1);", "app.xml:8:11: error: unknown abstract component 'scal' (did you mean 'scale'?) "
                                        "(declare it: <component name=\"scal\" impl=\"...\">)"},
      {"\n  compute copy(A[0][0]);", "app.xml:8:11: error: 'copy' takes 2 arguments, given 1"},
      {"\n  par (i := 0; 3) do\n    compute scale(A[i][i], 1);\n", "app.xml:10:1: error: expected 'enddo' to close 'par' (line 8), found the end of the graph"},
      {"\n  seq (i := 0 3) do enddo", "app.xml:8:15: error: expected ';' between the loop bounds, found '3'"},
      {"\n  wait(e[0] or e[1]);", "app.xml:8:13: error: expected ')' after the events ('and' between several), found 'or'"},
      {"\n  x := ;", "app.xml:8:8: error: expected an expression before ';'"},
      {"\n  compute scale(A[0][0], 1) @", "app.xml:8:29: error: unexpected character '@' in the graph"},
      {"\n  compute copy(A[9][0], B[0][0]);", "app.xml:8:16: error: tile index out of range: 'A[9,0]' but 'A' has [4,4] tiles"},
      {"\n  compute scale(A[0][0], 1 +);", "app.xml:8:26: error: bad expression in value=\"${1 +}\": expected a value"},
  };
  for (const Case& c : cases) {
    Diagnostics d;
    auto r = compile_app(c.graph, d);
    EXPECT_FALSE(r.ok) << c.graph;
    ASSERT_FALSE(d.all().empty()) << c.graph;
    EXPECT_EQ(d.str().substr(0, d.str().find('\n')), c.message) << c.graph;
  }
}

TEST(YvetteML, BadApplicationsAreRefused) {
  Diagnostics d;
  auto r = compile_workflow_text("app.xml", R"(<application name="t" mode="x">
  <component name="c"><param name="X"/></component>
  <component name="d" impl="tensor.copy"><param name="X" mode="sideways"/></component>
</application>)", {}, test::builtins(), d);
  EXPECT_FALSE(r.ok);
  const std::string s = d.str();
  EXPECT_NE(s.find("app.xml:1:23: error: unknown attribute 'mode' on <application>"), std::string::npos) << s;
  EXPECT_NE(s.find("app.xml:2:3: error: <component> needs name= and impl="), std::string::npos) << s;
  EXPECT_NE(s.find("app.xml:3:58: error: mode=\"sideways\": expected in, out or inout"), std::string::npos) << s;
  EXPECT_NE(s.find("app.xml:1:1: error: <application> has no <graph>"), std::string::npos) << s;
}
