// Where the StarPU backends let a task run: the codelet's kinds of worker
// (Codelet::init) and each task's starpu_task::where (task_where). No device is
// needed: these are the decisions StarPU is given, taken on the host.
#include <gtest/gtest.h>

#include "starpu_task.hpp"

namespace ymlopt {
namespace {

void kernel(KernelContext&) {}
void opencl_func(void**, void*) {}
void cuda_func(void**, void*) {}
void cpu_func(void**, void*) {}

// A component with a CPU kernel and, as asked, OpenCL and CUDA kernels whose
// checks refuse tasks with more than 64 columns.
ComponentSpec component(bool opencl, bool cuda) {
  ComponentSpec c;
  c.name = "test.op";
  c.cpu = kernel;
  auto narrow = [](const TaskShape& t) { return t.ports[0].cols > 64 ? std::string("too wide") : std::string(); };
  if (opencl) {
    c.opencl = kernel;
    c.opencl_check = narrow;
  }
  if (cuda) {
    c.cuda = kernel;
    c.cuda_check = narrow;
  }
  return c;
}

struct Placement : ::testing::Test {
  ComponentSpec both = component(true, true);
  TaskNode task;
  TensorView view;
  Codelet codelet;

  void SetUp() override {
    task.comp = &both;
    view.dtype = DType::f32;
    view.rows = 16;
    view.cols = 32;  // 2 KiB
  }
  std::uint32_t where(Where run = Where::any, DeviceBytes bytes = {}) {
    return task_where(task, codelet.cl, run, std::span<const TensorView>(&view, 1), bytes);
  }
};

TEST_F(Placement, CodeletTakesEachDeviceFunctionTheComponentHasAKernelFor) {
  codelet.init(both, cpu_func, false, DeviceFuncs{opencl_func, cuda_func});
  EXPECT_EQ(codelet.cl.where, std::uint32_t(STARPU_CPU | STARPU_OPENCL | STARPU_CUDA));
  EXPECT_EQ(codelet.cl.cpu_funcs[0], &cpu_func);
  EXPECT_EQ(codelet.cl.opencl_funcs[0], &opencl_func);
  EXPECT_EQ(codelet.cl.cuda_funcs[0], &cuda_func);
  EXPECT_EQ(codelet.cl.cuda_flags[0], char(STARPU_CUDA_ASYNC));
  EXPECT_EQ(codelet.cl.model, nullptr);  // not model-based: no perf model
  Codelet modelled;
  modelled.init(both, cpu_func, true, DeviceFuncs{opencl_func, cuda_func});
  ASSERT_NE(modelled.cl.model, nullptr);
  EXPECT_EQ(modelled.cl.model->type, STARPU_HISTORY_BASED);
  EXPECT_STREQ(modelled.cl.model->symbol, "ymlopt.test.op");
}

TEST_F(Placement, CodeletStaysOnCpusWithoutAKernelOrWorkers) {
  const ComponentSpec cpu_only = component(false, false);
  codelet.init(cpu_only, cpu_func, false, DeviceFuncs{opencl_func, cuda_func});
  EXPECT_EQ(codelet.cl.where, std::uint32_t(STARPU_CPU));
  ComponentSpec host = component(true, true);
  host.host_only = true;
  Codelet h;
  h.init(host, cpu_func, false, DeviceFuncs{opencl_func, cuda_func});
  EXPECT_EQ(h.cl.where, std::uint32_t(STARPU_CPU));
  Codelet no_workers;
  no_workers.init(both, cpu_func, false, DeviceFuncs{});
  EXPECT_EQ(no_workers.cl.where, std::uint32_t(STARPU_CPU));
  Codelet cuda_only;
  cuda_only.init(both, cpu_func, false, DeviceFuncs{nullptr, cuda_func});
  EXPECT_EQ(cuda_only.cl.where, std::uint32_t(STARPU_CPU | STARPU_CUDA));
  EXPECT_EQ(cuda_only.cl.opencl_funcs[0], nullptr);
}

TEST_F(Placement, TaskGoesWhereItsKernelsAcceptItsShape) {
  codelet.init(both, cpu_func, false, DeviceFuncs{opencl_func, cuda_func});
  EXPECT_EQ(where(), std::uint32_t(STARPU_CPU | STARPU_OPENCL | STARPU_CUDA));
  view.cols = 65;  // both device checks refuse it
  EXPECT_EQ(where(), std::uint32_t(STARPU_CPU));
  EXPECT_EQ(where(Where::cuda), std::uint32_t(STARPU_CPU));  // --where cuda: still the CPU, not an error
}

TEST_F(Placement, TaskStaysOffADeviceItsBuffersDoNotFit) {
  codelet.init(both, cpu_func, false, DeviceFuncs{opencl_func, cuda_func});
  EXPECT_EQ(where(Where::any, DeviceBytes{-1, 2048}), std::uint32_t(STARPU_CPU | STARPU_OPENCL | STARPU_CUDA));
  EXPECT_EQ(where(Where::any, DeviceBytes{-1, 2047}), std::uint32_t(STARPU_CPU | STARPU_OPENCL));
  EXPECT_EQ(where(Where::any, DeviceBytes{100, 2047}), std::uint32_t(STARPU_CPU));
}

TEST_F(Placement, RunAndTaskWhereNarrowToOneKind) {
  codelet.init(both, cpu_func, false, DeviceFuncs{opencl_func, cuda_func});
  EXPECT_EQ(where(Where::cuda), std::uint32_t(STARPU_CUDA));
  EXPECT_EQ(where(Where::opencl), std::uint32_t(STARPU_OPENCL));
  EXPECT_EQ(where(Where::cpu), std::uint32_t(STARPU_CPU));
  task.where = Where::cuda;  // the task's own where comes before the run's
  EXPECT_EQ(where(Where::cpu), std::uint32_t(STARPU_CUDA));
  task.where = Where::cpu;
  EXPECT_EQ(where(Where::cuda), std::uint32_t(STARPU_CPU));
}

}  // namespace
}  // namespace ymlopt
