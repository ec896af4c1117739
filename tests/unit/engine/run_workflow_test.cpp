// run_workflow: the backend picked by name, the progress total set, the
// executor that ran the workflow returned with its result.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "run_workflow.hpp"
#include "test_util.hpp"

using namespace ymlopt;

namespace {

Dag quickstart() {
  Diagnostics d;
  CompileOptions o;
  o.file = std::string(YMLOPT_SOURCE_DIR) + "/examples/quickstart.xml";
  o.sets = {{"n", "128"}, {"bs", "64"}};
  auto r = compile_workflow(o, test::builtins(), d);
  EXPECT_TRUE(r.ok) << d.str();
  return std::move(r.dag);
}

}  // namespace

TEST(RunWorkflow, RunsOnTheNamedBackendAndCountsEveryTask) {
  const Dag dag = quickstart();
  ASSERT_FALSE(dag.tasks.empty());
  for (const char* backend : {"sequential", "starpu"}) {
    DataStore store(dag);
    Progress progress;
    RunOptions o;
    o.backend = backend;
    o.exec.run_dir = testing::TempDir() + "/ymlopt-run-workflow";
    std::filesystem::create_directories(o.exec.run_dir);
    o.progress = &progress;
    const WorkflowRun r = run_workflow(dag, store, o);
    EXPECT_TRUE(r.result.ok) << backend << ": " << r.result.error;
    ASSERT_NE(r.executor, nullptr);
    EXPECT_EQ(r.executor->name(), backend);
    EXPECT_EQ(progress.total, std::int64_t(dag.tasks.size())) << backend;
    EXPECT_EQ(progress.done.load(), std::int64_t(dag.tasks.size())) << backend;
  }
}

TEST(RunWorkflow, AnUnknownBackendThrows) {
  const Dag dag = quickstart();
  DataStore store(dag);
  RunOptions o;
  o.backend = "nope";
  EXPECT_THROW(run_workflow(dag, store, o), std::invalid_argument);
}
