// fuse.compose and fuse.merge on op.matmul (optimizer/src/op_rules.cpp): a rule
// applies to the products whose (add, mul) pair obeys its law and nowhere else.
// Each rewritten workflow is run and compared with the original run (exactly
// for the tropical pairs on integers, within rounding for sum and logsumexp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>

#include "io/tensor_file.hpp"
#include "register_builtin.hpp"
#include "sequential.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/model_editor.hpp"
#include "ymlopt/optimizer/passes.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;

namespace {

const ComponentRegistry& registry() {
  static const ComponentRegistry reg = [] {
    ComponentRegistry r;
    register_builtin_components(r);
    return r;
  }();
  return reg;
}

/// x [6, 8], w1 [8, 5], w2 [5, 3], w3 [8, 4], w4 [4, 3], b5 [1, 5] as .npy files of small integers.
struct Files {
  fs::path dir = fs::temp_directory_path() / ("ymlopt-op-rules-" + std::to_string(::getpid()));
  Files() {
    fs::create_directories(dir);
    std::mt19937 gen(5);
    std::uniform_int_distribution<int> d(-4, 4);
    for (auto [name, r, c] :
         {std::tuple{"x", 6, 8}, {"w1", 8, 5}, {"w2", 5, 3}, {"w3", 8, 4}, {"w4", 4, 3}, {"b5", 1, 5}}) {
      std::vector<float> v(std::size_t(r * c));
      for (float& e : v) e = float(d(gen));
      TensorView t;
      t.data = v.data();
      t.dtype = DType::f32;
      t.rows = r, t.cols = c, t.ld = c;
      t.shape = Shape({r, c});
      io::save_npy((dir / (std::string(name) + ".npy")).string(), t);
    }
  }
  ~Files() { fs::remove_all(dir); }
  std::string data() const {
    std::string s;
    for (auto [name, shape] : {std::pair{"x", "6,8"}, {"w1", "8,5"}, {"w2", "5,3"}, {"w3", "8,4"}, {"w4", "4,3"}})
      s += std::string("<data name=\"") + name + "\" shape=\"" + shape + "\" src=\"" + (dir / name).string() +
           ".npy\"/>";
    return s +
           "<data name=\"t\" shape=\"6,5\" init=\"zeros\"/><data name=\"y\" shape=\"6,3\" init=\"zeros\"/>"
           "<data name=\"z\" shape=\"6,4\" init=\"zeros\"/><data name=\"s\" shape=\"6,3\" init=\"zeros\"/>";
  }
};

std::vector<float> run(Dag& dag, const std::string& what) {
  DataStore store(dag);
  ExecOptions eo;
  Progress progress;
  const ExecResult r = make_sequential_executor()->execute(dag, store, eo, progress);
  EXPECT_TRUE(r.ok) << r.error;
  std::int32_t d = -1;
  for (std::size_t i = 0; i < dag.data.size(); ++i)
    if (dag.data[i].name == what) d = std::int32_t(i);
  const TensorView v = store.view(DataRef{d, -1});
  std::vector<float> out;
  for (std::int64_t i = 0; i < v.rows; ++i)
    for (std::int64_t j = 0; j < v.cols; ++j) out.push_back(v.ptr<float>()[i * v.ld + j]);
  return out;
}

struct Rewritten {
  nlohmann::json log;
  std::size_t tasks_before = 0, tasks_after = 0;
  std::vector<float> before, after;  // values of `out`
};

Rewritten rewrite(const Files& f, const std::string& body, const std::string& pass, const std::string& out) {
  auto compile = [&] {
    Diagnostics diags;
    CompileResult cr = compile_workflow_text("r.xml", "<workflow name=\"r\">" + f.data() + body + "</workflow>", {},
                                             registry(), diags);
    EXPECT_TRUE(cr.ok) << diags.str();
    return cr;
  };
  Rewritten r;
  CompileResult original = compile();
  r.before = run(original.dag, out);
  r.tasks_before = original.dag.tasks.size();
  opt::ModelEditor ed(compile().dag, registry());
  opt::PassContext ctx{ed};
  opt::run_pass(ctx, opt::parse_pass_list(pass)[0]);
  r.log = ctx.log.back();
  // run the rewritten DAG as `ymlopt optimize` does: written out and compiled again
  const fs::path xml = f.dir / "rewritten.xml", weights = f.dir / "rewritten.safetensors";
  ed.write(xml.string(), weights.string());
  Diagnostics d2;
  CompileResult again = compile_workflow({xml.string(), {}}, registry(), d2);
  EXPECT_TRUE(again.ok) << d2.str();
  r.tasks_after = again.dag.tasks.size();
  r.after = run(again.dag, out);
  return r;
}

std::string products(const std::string& add, const std::string& mul, const std::string& map = "") {
  const std::string args = "<arg name=\"add\" value=\"" + add + "\"/><arg name=\"mul\" value=\"" + mul + "\"/>";
  return "<task component=\"op.matmul\" name=\"first\"><in port=\"a\" data=\"x\"/><in port=\"b\" data=\"w1\"/>"
         "<inout port=\"c\" data=\"t\"/>" +
         args +
         "</task>"
         "<task component=\"op.matmul\" name=\"second\"><in port=\"a\" data=\"t\"/><in port=\"b\" data=\"w2\"/>"
         "<inout port=\"c\" data=\"y\"/>" +
         args + (map.empty() ? "" : "<arg name=\"map\" value=\"" + map + "\"/>") +
         "</task><save data=\"y\" to=\"y.npy\"/>";
}

TEST(OpRules, ComposeWhereThePairIsASemiringOnly) {
  const Files f;
  // x [6,8] (w1 [8,5] w2 [5,3]): 8*3 <= 5*(8+3) multiply-adds per row, composed
  for (const auto& [add, mul, exact] :
       {std::tuple{"max", "a+b", true}, {"min", "a+b", true}, {"sum", "a*b", true}, {"logsumexp", "a+b", false}}) {
    const Rewritten r = rewrite(f, products(add, mul, "relu(c)"), "fuse.compose", "y");
    EXPECT_EQ(r.log["products_composed"], 1) << add << mul << r.log.dump();
    EXPECT_EQ(r.tasks_after, r.tasks_before - 1);
    ASSERT_EQ(r.before.size(), r.after.size());
    for (std::size_t i = 0; i < r.before.size(); ++i)
      if (exact)
        EXPECT_EQ(r.before[i], r.after[i]) << add << " " << i;
      else
        EXPECT_NEAR(r.before[i], r.after[i], 1e-5 * std::max(1.0f, std::abs(r.before[i]))) << add << " " << i;
  }
  // not semirings: refused, with the law that fails
  for (const auto& [add, mul] : {std::pair{"max", "a*b"}, {"sum", "a+b"}, {"sum", "a*relu(b)"}}) {
    const Rewritten r = rewrite(f, products(add, mul), "fuse.compose", "y");
    EXPECT_EQ(r.log["products_composed"], 0) << add << mul;
    ASSERT_EQ(r.log["skipped"].size(), 1u) << r.log.dump();
    EXPECT_NE(r.log["skipped"][0].get<std::string>().find("is not associative"), std::string::npos);
    EXPECT_EQ(r.before, r.after);
  }
}

TEST(OpRules, MergeProductsOfOneInputForEveryPair) {
  const Files f;
  for (const auto& [add, mul] : {std::pair{"max", "a+b"}, {"sum", "a*b"}, {"sum", "a*relu(b)"}}) {
    const std::string args =
        std::string("<arg name=\"add\" value=\"") + add + "\"/><arg name=\"mul\" value=\"" + mul + "\"/>";
    const std::string body =
        "<task component=\"op.matmul\" name=\"p1\"><in port=\"a\" data=\"x\"/><in port=\"b\" data=\"w1\"/>"
        "<inout port=\"c\" data=\"t\"/>" +
        args +
        "</task>"
        "<task component=\"op.matmul\" name=\"p3\"><in port=\"a\" data=\"x\"/><in port=\"b\" data=\"w3\"/>"
        "<inout port=\"c\" data=\"z\"/>" +
        args +
        "</task>"
        // readers of both results: t w2 + z w4
        "<task component=\"op.matmul\" name=\"use_t\"><in port=\"a\" data=\"t\"/><in port=\"b\" data=\"w2\"/>"
        "<inout port=\"c\" data=\"y\"/></task>"
        "<task component=\"op.matmul\" name=\"use_z\"><in port=\"a\" data=\"z\"/><in port=\"b\" data=\"w4\"/>"
        "<inout port=\"c\" data=\"s\"/></task>"
        "<task component=\"tensor.add\" name=\"both\"><in port=\"a\" data=\"y\"/><in port=\"b\" data=\"s\"/>"
        "<out port=\"c\" data=\"y\"/></task><save data=\"y\" to=\"y.npy\"/>";
    const Rewritten r = rewrite(f, body, "fuse.merge", "y");
    EXPECT_EQ(r.log["product_groups"], 1) << add << mul << r.log.dump();
    EXPECT_EQ(r.tasks_after, r.tasks_before - 1);
    ASSERT_EQ(r.before.size(), r.after.size());
    for (std::size_t i = 0; i < r.before.size(); ++i) EXPECT_EQ(r.before[i], r.after[i]) << add << mul << " " << i;
  }
}

TEST(OpRules, MergeProductsWritingTheTilesOfOneRow) {
  // per-tile products x w1[:, tile] -> tt[:, tile] (as a transformer's per-head products), each followed by an
  // accumulated rank-1 bias product: the products become one writing tt whole with w1 whole, then so do the biases
  const Files f;
  const std::string w1 = (f.dir / "w1.npy").string(), b5 = (f.dir / "b5.npy").string();
  std::string body =
      "<data name=\"tt\" shape=\"6,5\" tile=\"6,2\" init=\"zeros\"/>"
      "<data name=\"w1t\" shape=\"8,5\" tile=\"8,2\" src=\"" +
      w1 +
      "\"/>"
      "<data name=\"one\" shape=\"6,1\" init=\"ones\"/>"
      "<data name=\"bias\" shape=\"5\" tile=\"2\" src=\"" +
      b5 + "\" reshape=\"true\"/>";
  for (int j = 0; j < 3; ++j) {
    const std::string jj = std::to_string(j);
    body += "<task component=\"op.matmul\" name=\"p" + jj +
            "\"><in port=\"a\" data=\"x\"/><in port=\"b\" data=\"w1t[0," + jj + "]\"/><inout port=\"c\" data=\"tt[0," +
            jj +
            "]\"/><arg name=\"add\" value=\"max\"/><arg name=\"mul\" value=\"a+b\"/></task>"
            "<task component=\"op.matmul\" name=\"b" +
            jj + "\"><in port=\"a\" data=\"one\"/><in port=\"b\" data=\"bias[" + jj +
            "]\"/><inout port=\"c\" data=\"tt[0," + jj +
            "]\"/><arg name=\"add\" value=\"max\"/><arg name=\"mul\" value=\"a+b\"/>"
            "<arg name=\"accumulate\" value=\"true\"/></task>";
  }
  body += "<save data=\"tt\" to=\"tt.npy\"/>";
  const Rewritten r = rewrite(f, body, "fuse.merge", "tt");
  EXPECT_EQ(r.log["product_groups"], 2) << r.log.dump();
  EXPECT_EQ(r.tasks_after, r.tasks_before - 4);
  EXPECT_EQ(r.before, r.after);
}

TEST(OpRules, MergeAKSplitProductBackIntoOne) {
  // y ⊕= x[:, 0:4] w1[0:4, :], y ⊕= x[:, 4:8] w1[4:8, :] -> y ⊕= x w1 for (min, +) and (sum, a*b)
  const Files f;
  for (const auto& [add, mul] : {std::pair{"min", "a+b"}, {"sum", "a*b"}}) {
    std::string body = "<data name=\"xt\" shape=\"6,8\" tile=\"6,4\" src=\"" + (f.dir / "x.npy").string() +
                       "\"/><data name=\"w1r\" shape=\"8,5\" tile=\"4,5\" src=\"" + (f.dir / "w1.npy").string() +
                       "\"/><data name=\"y5\" shape=\"6,5\" init=\"zeros\"/>";
    for (int p = 0; p < 2; ++p) {
      const std::string pp = std::to_string(p);
      body += "<task component=\"op.matmul\" name=\"k" + pp + "\"><in port=\"a\" data=\"xt[0," + pp +
              "]\"/><in port=\"b\" data=\"w1r[" + pp +
              ",0]\"/><inout port=\"c\" data=\"y5\"/><arg name=\"add\" value=\"" + add +
              "\"/><arg name=\"mul\" value=\"" + mul + "\"/><arg name=\"accumulate\" value=\"true\"/></task>";
    }
    body += "<save data=\"y5\" to=\"y5.npy\"/>";
    const Rewritten r = rewrite(f, body, "fuse.merge", "y5");
    EXPECT_EQ(r.log["product_groups"], 1) << add << r.log.dump();
    EXPECT_EQ(r.tasks_after, r.tasks_before - 1);
    EXPECT_EQ(r.before, r.after) << add;  // small integers: exact in both
  }
}

}  // namespace
