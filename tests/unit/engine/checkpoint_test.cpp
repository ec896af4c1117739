// Task-level checkpoints: the content hash, task keys (stable, and changed
// exactly downstream of a change), and resume on both backends: a run whose
// checkpoint lost some tasks re-executes those alone and ends with the same
// bytes as the uninterrupted run; a damaged object is detected.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "sequential.hpp"
#include "starpu_backend.hpp"
#include "test_util.hpp"
#include "ymlopt/scheduler/checkpoint.hpp"
#include "ymlopt/scheduler/executor.hpp"

using namespace ymlopt;
namespace fs = std::filesystem;

namespace {

// 2 x 2 tiles of C += A B (tasks 0-7), then C scaled whole (8), then D = C B (9):
// whole reads after tile writes and tile reads of initial data.
const char* kWorkflow = R"(<workflow name="ck">
  <param name="alpha" type="float" default="2"/>
  <data name="A" dtype="f64" shape="8,8" tile="4,4" init="random" seed="3"/>
  <data name="B" dtype="f64" shape="8,8" tile="4,4" init="random" seed="4"/>
  <data name="C" dtype="f64" shape="8,8" tile="4,4" init="zeros"/>
  <data name="D" dtype="f64" shape="8,8" init="zeros"/>
  <par var="i" from="0" to="2"><par var="j" from="0" to="2"><seq var="k" from="0" to="2">
    <task component="blas.gemm">
      <in port="a" data="A[${i},${k}]"/><in port="b" data="B[${k},${j}]"/><inout port="c" data="C[${i},${j}]"/>
      <arg name="beta" value="1"/>
    </task>
  </seq></par></par>
  <task component="tensor.scale" name="scale"><inout port="x" data="C"/><arg name="alpha" value="${alpha}"/></task>
  <task component="blas.gemm" name="last"><in port="a" data="C"/><in port="b" data="B"/><inout port="c" data="D"/></task>
</workflow>)";

Dag compile_dag(std::vector<std::pair<std::string, std::string>> sets = {}) {
  Diagnostics d;
  CompileResult c = test::compile(kWorkflow, d, std::move(sets));
  EXPECT_TRUE(c.ok) << d.str();
  return std::move(c.dag);
}

std::vector<std::uint64_t> keys(const Dag& dag) {
  DataStore store(dag);
  const std::string dir = testing::TempDir() + "/ymlopt-ck-keys";
  Checkpoint ck(dag, store, dir, false);
  std::vector<std::uint64_t> k;
  for (size_t i = 0; i < dag.tasks.size(); ++i) k.push_back(ck.key(std::int32_t(i)));
  return k;
}

struct Outcome {
  std::vector<double> c, d;
  ExecResult result;
  Checkpoint::Stats stats;
};

Outcome run(const Dag& dag, int backend, const std::string& dir, bool checkpoint, bool resume) {
  DataStore store(dag);
  std::unique_ptr<Checkpoint> ck;
  if (checkpoint) ck = std::make_unique<Checkpoint>(dag, store, dir, resume);
  ExecOptions o;
  o.run_dir = testing::TempDir();
  o.sched = "eager";
  o.checkpoint = ck.get();
  Progress p;
  auto ex = backend ? make_starpu_executor() : make_sequential_executor();
  Outcome out;
  out.result = run_program(*ex, dag, store, o, p);
  if (ck) {
    ck->finish();
    out.stats = ck->stats();
  }
  auto copy = [&](const char* name, std::vector<double>& v) {
    for (size_t i = 0; i < dag.data.size(); ++i)
      if (dag.data[i].name == name) {
        const DataDecl& d = dag.data[i];
        const auto* p = static_cast<const double*>(store.base(std::int32_t(i)));
        for (std::int64_t r = 0; r < d.rows; ++r) v.insert(v.end(), p + r * d.ld, p + r * d.ld + d.cols);
      }
  };
  copy("C", out.c);
  copy("D", out.d);
  return out;
}

std::string marker(const std::string& dir, std::uint64_t key) { return dir + "/tasks/" + hex64(key) + ".json"; }

}  // namespace

TEST(Hash64, StreamingEqualsOneShotAndInputsDiffer) {
  std::vector<unsigned char> bytes(1000);
  std::mt19937 rng(7);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  const std::uint64_t whole = Hash64().add(bytes.data(), bytes.size()).digest();
  for (size_t split : {0, 1, 7, 31, 32, 33, 500, 999}) {
    Hash64 h;
    h.add(bytes.data(), split).add(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(h.digest(), whole) << "split at " << split;
  }
  bytes[517] ^= 1;
  EXPECT_NE(Hash64().add(bytes.data(), bytes.size()).digest(), whole);
  EXPECT_NE(Hash64().add(bytes.data(), 999).digest(), Hash64().add(bytes.data(), 1000).digest());
  EXPECT_NE(Hash64(1).add("x").digest(), Hash64(2).add("x").digest());
  EXPECT_EQ(hex64(0xabcULL), "0000000000000abc");
}

TEST(Checkpoint, KeysAreStableAndChangeDownstreamOfAChange) {
  const auto a = keys(compile_dag()), b = keys(compile_dag());
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::set<std::uint64_t>(a.begin(), a.end()).size(), a.size()) << "every task its own key";
  const auto c = keys(compile_dag({{"alpha", "3"}}));
  for (int t = 0; t < 8; ++t) EXPECT_EQ(a[size_t(t)], c[size_t(t)]) << "gemm tile task " << t << " is upstream of alpha";
  EXPECT_NE(a[8], c[8]);  // the scale task's argument
  EXPECT_NE(a[9], c[9]);  // reads the scaled C
}

class Resume : public testing::TestWithParam<int> {};

TEST_P(Resume, RestoresWhatTheCheckpointHoldsAndRunsTheRest) {
  const Dag dag = compile_dag();
  const std::string dir = testing::TempDir() + "/ymlopt-ck-resume-" + std::to_string(GetParam());
  fs::remove_all(dir);
  const Outcome plain = run(dag, GetParam(), dir + "-none", false, false);
  ASSERT_TRUE(plain.result.ok) << plain.result.error;
  const Outcome first = run(dag, GetParam(), dir, true, false);
  ASSERT_TRUE(first.result.ok) << first.result.error;
  EXPECT_EQ(first.stats.tasks_persisted, 10);
  EXPECT_EQ(first.c, plain.c);
  EXPECT_EQ(first.d, plain.d);

  // as if killed before tile task 3 and the last task were persisted
  std::vector<std::uint64_t> k = keys(dag);
  fs::remove(marker(dir, k[3]));
  fs::remove(marker(dir, k[9]));
  const Outcome resumed = run(dag, GetParam(), dir, true, true);
  ASSERT_TRUE(resumed.result.ok) << resumed.result.error;
  EXPECT_EQ(resumed.stats.tasks_restored, 8);
  EXPECT_EQ(resumed.stats.tasks_persisted, 2);
  for (const TaskRecord& rec : resumed.result.records)
    EXPECT_EQ(rec.restored, rec.task != 3 && rec.task != 9) << "task " << rec.task;
  EXPECT_EQ(resumed.c, plain.c);  // bit for bit
  EXPECT_EQ(resumed.d, plain.d);
  // restored: t2's C[0,1] (read by t3) and t8's whole C (read by t9), 8x8 + 4x4 doubles
  EXPECT_EQ(resumed.stats.bytes_restored, (64 + 16) * 8);

  // a damaged object that a re-executed task needs: its task runs again too
  fs::remove(marker(dir, k[9]));
  std::ifstream m(marker(dir, k[8]));
  const std::string text((std::istreambuf_iterator<char>(m)), std::istreambuf_iterator<char>());
  const auto at = text.find("\"version\":\"") + 11;
  const std::string object = dir + "/objects/" + text.substr(at, 16) + ".bin";
  {
    std::fstream f(object, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.write("damage", 6);
  }
  const Outcome repaired = run(dag, GetParam(), dir, true, true);
  ASSERT_TRUE(repaired.result.ok) << repaired.result.error;
  EXPECT_EQ(repaired.stats.tasks_invalid, 1);
  EXPECT_FALSE(repaired.result.records[8].restored);
  EXPECT_FALSE(repaired.result.records[9].restored);
  EXPECT_EQ(repaired.stats.tasks_restored, 8);
  EXPECT_EQ(repaired.d, plain.d);
}

TEST_P(Resume, AChangedParameterRerunsOnlyTheStaleTasks) {
  const std::string dir = testing::TempDir() + "/ymlopt-ck-stale-" + std::to_string(GetParam());
  fs::remove_all(dir);
  ASSERT_TRUE(run(compile_dag(), GetParam(), dir, true, false).result.ok);
  const Dag changed = compile_dag({{"alpha", "-1"}});
  const Outcome plain = run(changed, GetParam(), dir + "-none", false, false);
  const Outcome resumed = run(changed, GetParam(), dir, true, true);
  ASSERT_TRUE(resumed.result.ok) << resumed.result.error;
  EXPECT_EQ(resumed.stats.tasks_restored, 8);  // the gemm tiles
  EXPECT_FALSE(resumed.result.records[8].restored);
  EXPECT_FALSE(resumed.result.records[9].restored);
  EXPECT_EQ(resumed.c, plain.c);
  EXPECT_EQ(resumed.d, plain.d);
}

INSTANTIATE_TEST_SUITE_P(Backends, Resume, testing::Values(0, 1),
                         [](const auto& i) { return i.param ? std::string("starpu") : std::string("sequential"); });
