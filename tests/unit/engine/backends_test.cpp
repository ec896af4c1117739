// The StarPU backend must give exactly the sequential reference's results on
// every shipped workflow, whatever the scheduler; failures must cancel cleanly.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "sequential.hpp"
#include "starpu_backend.hpp"
#include "test_util.hpp"

using namespace ymlopt;

namespace {

struct Case {
  std::string name;
  std::string file;
  std::vector<std::pair<std::string, std::string>> sets;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.file; }

std::vector<std::vector<char>> run(const Dag& dag, Executor& ex, const std::string& sched, ExecResult* out = nullptr) {
  DataStore store(dag);
  ExecOptions o;
  o.run_dir = testing::TempDir() + "/ymlopt-backends";
  std::filesystem::create_directories(o.run_dir);
  o.sched = sched;
  Progress p;
  ExecResult r = ex.execute(dag, store, o, p);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(p.done.load(), std::int64_t(dag.tasks.size()));
  std::vector<std::vector<char>> bufs;  // logical contents, row by row (rows may be padded)
  for (size_t i = 0; i < dag.data.size(); ++i) {
    const TensorView v = store.view({std::int32_t(i), -1});
    const size_t row = size_t(v.cols) * dtype_size(v.dtype);
    std::vector<char>& b = bufs.emplace_back();
    for (std::int64_t r = 0; r < v.rows; ++r) {
      const char* p = static_cast<const char*>(v.data) + size_t(r * v.ld) * dtype_size(v.dtype);
      b.insert(b.end(), p, p + row);
    }
  }
  if (out) *out = std::move(r);
  return bufs;
}

Dag compile_file(const Case& c) {
  Diagnostics d;
  CompileOptions o;
  o.file = std::string(YMLOPT_SOURCE_DIR) + "/" + c.file;
  o.sets = c.sets;
  auto r = compile_workflow(o, test::builtins(), d);
  EXPECT_TRUE(r.ok) << d.str();
  return std::move(r.dag);
}

}  // namespace

class ShippedWorkflow : public testing::TestWithParam<Case> {};

TEST_P(ShippedWorkflow, StarpuMatchesSequentialBitForBit) {
  const Dag dag = compile_file(GetParam());
  ASSERT_FALSE(dag.tasks.empty());
  auto seq = make_sequential_executor();
  auto ref = run(dag, *seq, "lws");
  for (const char* sched : {"lws", "eager", "dmda", "prio"}) {
    auto sp = make_starpu_executor();
    ExecResult r;
    auto got = run(dag, *sp, sched, &r);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_TRUE(got[i] == ref[i]) << "data '" << dag.data[i].name << "' differs with --sched " << sched;
    // every verification task reported its error, and it is tiny
    for (const auto& t : dag.tasks)
      if (t.comp->name == "tensor.compare") {
        ASSERT_FALSE(r.records[size_t(t.id)].results.empty());
        for (const auto& [k, v] : r.records[size_t(t.id)].results) EXPECT_LT(v, 1e-4) << k;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Workflows, ShippedWorkflow,
    testing::Values(Case{"gemm_f32_ragged", "workflows/linalg/tiled_gemm.xml", {{"n", "200"}, {"bs", "64"}, {"verify", "true"}}},
                    Case{"gemm_f64", "workflows/linalg/tiled_gemm.xml", {{"n", "96"}, {"bs", "32"}, {"dtype", "f64"}, {"verify", "true"}}},
                    // rows of 4 KiB: the engine pads the row stride (ld 520), tiles are ragged
                    Case{"gemm_f64_padded", "workflows/linalg/tiled_gemm.xml", {{"n", "512"}, {"bs", "160"}, {"dtype", "f64"}, {"verify", "true"}, {"save", "true"}}},
                    Case{"cholesky_f64_padded", "workflows/linalg/cholesky.xml", {{"n", "512"}, {"bs", "192"}}},
                    Case{"cholesky_f64_ragged", "workflows/linalg/cholesky.xml", {{"n", "300"}, {"bs", "64"}}},
                    Case{"cholesky_f32", "workflows/linalg/cholesky.xml", {{"n", "256"}, {"bs", "64"}, {"dtype", "f32"}}},
                    Case{"lu_f64_ragged", "workflows/linalg/lu.xml", {{"n", "300"}, {"bs", "64"}}},
                    Case{"lu_yml_f32", "workflows/yml/lu.xml", {{"n", "256"}, {"bs", "64"}, {"dtype", "f32"}}},
                    Case{"gauss_jordan_f64_ragged", "workflows/linalg/gauss_jordan.xml", {{"n", "300"}, {"bs", "64"}}},
                    Case{"gauss_jordan_yml_f32", "workflows/yml/gauss_jordan.xml", {{"n", "256"}, {"bs", "64"}, {"dtype", "f32"}}},
                    Case{"mlp2_ragged", "workflows/models/mlp2.xml", {{"batch", "70"}, {"d_in", "96"}, {"hidden", "130"}, {"d_out", "40"}, {"bs", "32"}}},
                    Case{"quickstart", "examples/quickstart.xml", {{"n", "256"}, {"bs", "64"}}}),
    [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

namespace {
void throwing_kernel(KernelContext&) { throw KernelError("deliberate failure"); }
}  // namespace

// Runs `dag` on the sequential (0) or StarPU (1) backend, default options.
ExecResult execute_on(int backend, const Dag& dag, DataStore& store) {
  auto ex = backend ? make_starpu_executor() : make_sequential_executor();
  ExecOptions o;
  o.run_dir = testing::TempDir();
  Progress p;
  return ex->execute(dag, store, o, p);
}

TEST(Backends, AThrowingKernelCancelsTheRunWithItsLocation) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  ComponentSpec s;
  s.name = "test.throw";
  PortSpec x;
  x.name = "x";
  x.access = Access::read_write;
  x.dtypes = {DType::f32};
  s.ports = {x};
  s.cpu = throwing_kernel;
  reg.add(s);
  Diagnostics d;
  auto r = compile_workflow_text("fail.xml", R"(<workflow name="f">
  <data name="A" shape="8,8" tile="4,4" init="ones"/>
  <task component="tensor.scale"><inout port="x" data="A[0,0]"/></task>
  <task component="test.throw" name="boom"><inout port="x" data="A[0,0]"/></task>
  <seq var="k" from="0" to="50"><task component="tensor.scale"><inout port="x" data="A[0,0]"/></task></seq>
  <task component="tensor.scale"><inout port="x" data="A[1,1]"/></task>
</workflow>)",
                                 {}, reg, d);
  ASSERT_TRUE(r.ok) << d.str();
  for (int backend = 0; backend < 2; ++backend) {
    DataStore store(r.dag);
    const ExecResult res = execute_on(backend, r.dag, store);
    EXPECT_FALSE(res.ok);
    EXPECT_EQ(res.failed_task, 1);
    EXPECT_EQ(res.error, "fail.xml:4:3: error: task 'boom' (component test.throw) failed: deliberate failure");
    EXPECT_FALSE(res.records[2].ran);  // the dependent chain was cancelled
  }
}

// y = sum of ten inputs: more buffers than StarPU's inline arrays (STARPU_NMAXBUFS, 8 in Debian's build)
void sum_kernel(KernelContext& ctx) {
  const auto ports = ctx.ports();
  double* y = ports.back().ptr<double>();
  for (std::int64_t i = 0; i < ports.back().size(); ++i) {
    y[i] = 0;
    for (size_t k = 0; k + 1 < ports.size(); ++k) y[i] += ports[k].ptr<double>()[i];
  }
}

TEST(Backends, ATaskMayUseMoreBuffersThanStarpuHoldsInline) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  ComponentSpec s;
  s.name = "test.sum10";
  for (int k = 0; k <= 10; ++k) {
    PortSpec p;
    p.name = k < 10 ? "x" + std::to_string(k) : "y";
    p.access = k < 10 ? Access::read : Access::write;
    p.dtypes = {DType::f64};
    p.optional = k == 9;  // a variable buffer count (StarPU's STARPU_VARIABLE_NBUFFERS path)
    s.ports.push_back(p);
  }
  s.cpu = sum_kernel;
  reg.add(s);
  std::string xml = R"(<workflow name="many"><data name="Y" dtype="f64" shape="4" init="zeros"/>)";
  std::string task = R"(<task component="test.sum10">)";
  for (int k = 0; k < 10; ++k) {
    xml += "<data name=\"X" + std::to_string(k) + "\" dtype=\"f64\" shape=\"4\" init=\"value\" value=\"" +
           std::to_string(k + 1) + "\"/>";
    task += "<in port=\"x" + std::to_string(k) + "\" data=\"X" + std::to_string(k) + "\"/>";
  }
  xml += task + R"(<out port="y" data="Y"/></task></workflow>)";
  Diagnostics d;
  auto r = compile_workflow_text("many.xml", xml, {}, reg, d);
  ASSERT_TRUE(r.ok) << d.str();
  for (int backend = 0; backend < 2; ++backend) {
    DataStore store(r.dag);
    const ExecResult res = execute_on(backend, r.dag, store);
    ASSERT_TRUE(res.ok) << res.error;
    const auto* y = static_cast<const double*>(store.base(0));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 55.0) << "backend " << backend;
  }
}

TEST(Backends, RowsOfFourKibAreStoredWithAPaddedStride) {
  Diagnostics d;
  auto r = compile_workflow_text("pad.xml", R"(<workflow name="p">
  <data name="A" shape="4,1024" tile="2,256" init="random" seed="3"/>
  <data name="B" shape="4,1000" init="ones"/>
</workflow>)", {}, test::builtins(), d);
  ASSERT_TRUE(r.ok) << d.str();
  EXPECT_EQ(r.dag.data[0].ld, 1024 + 16);
  EXPECT_EQ(r.dag.data[1].ld, 1000);
  DataStore store(r.dag);
  const TensorView a = store.view({0, -1}), tile = store.view({0, 5});  // tile (1, 1)
  EXPECT_EQ(a.ld, 1040);
  EXPECT_EQ(tile.ld, 1040);
  // values depend on the logical index only, and the tile is where it should be
  EXPECT_EQ(a.at<float>(3, 1023), float(random_value(3, 3 * 1024 + 1023)));
  EXPECT_EQ(tile.at<float>(1, 2), a.at<float>(3, 258));
}

TEST(Backends, SplitColumnTilesAreViewsOfTheirColumns) {
  // A is written whole, then its three column tiles of widths 5, 2, 3 are
  // scaled in place by separate tasks and copied out: both backends, same bytes,
  // each tile exactly its columns.
  Diagnostics d;
  auto r = compile_workflow_text("split.xml", R"(<workflow name="s">
  <data name="X" shape="6,10" init="random" seed="5"/>
  <data name="A" shape="6,10" split="5,2,3"/>
  <data name="B" shape="6,2"/>
  <data name="v" shape="10" split="4,6" init="ones"/>
  <task component="tensor.copy"><in port="x" data="X"/><out port="y" data="A"/></task>
  <task component="tensor.scale"><inout port="x" data="A[0,1]"/><arg name="alpha" value="3"/></task>
  <task component="tensor.scale"><inout port="x" data="A[0,2]"/><arg name="alpha" value="-1"/></task>
  <task component="tensor.copy"><in port="x" data="A[0,1]"/><out port="y" data="B"/></task>
  <task component="tensor.scale"><inout port="x" data="v[1]"/><arg name="alpha" value="2"/></task>
</workflow>)", {}, test::builtins(), d);
  ASSERT_TRUE(r.ok) << d.str();
  const DataDecl& a = r.dag.data[1];
  EXPECT_EQ(a.ntile_c, 3);
  EXPECT_EQ(r.dag.ref_shape({1, 2}), (Shape{6, 3}));
  EXPECT_EQ(r.dag.ref_shape({3, 1}), (Shape{6}));
  auto seq = make_sequential_executor();
  auto spu = make_starpu_executor();
  const auto ref = run(r.dag, *seq, "");
  EXPECT_EQ(run(r.dag, *spu, "lws"), ref);
  auto at = [&](int data, int i, int j, int cols) {
    float v;
    std::memcpy(&v, ref[std::size_t(data)].data() + (std::size_t(i) * cols + j) * 4, 4);
    return v;
  };
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 10; ++j) {
      const float x = at(0, i, j, 10);
      EXPECT_EQ(at(1, i, j, 10), j < 5 ? x : j < 7 ? 3 * x : -x) << i << "," << j;
      if (j >= 5 && j < 7) {
        EXPECT_EQ(at(2, i, j - 5, 2), 3 * x);
      }
    }
  for (int j = 0; j < 10; ++j) EXPECT_EQ(at(3, 0, j, 10), j < 4 ? 1.0f : 2.0f);
}

TEST(Backends, RegistryRefusesBadSpecs) {
  ComponentRegistry reg;
  register_builtin_components(reg);
  ComponentSpec dup;
  dup.name = "blas.gemm";
  dup.cpu = throwing_kernel;
  EXPECT_THROW(reg.add(dup), std::invalid_argument);
  ComponentSpec noname;
  noname.name = "gemm";
  noname.cpu = throwing_kernel;
  EXPECT_THROW(reg.add(noname), std::invalid_argument);
  ComponentSpec nocpu;
  nocpu.name = "x.y";
  EXPECT_THROW(reg.add(nocpu), std::invalid_argument);
  EXPECT_THROW(reg.load_plugin("/nonexistent/libnothing.so"), std::runtime_error);
}
