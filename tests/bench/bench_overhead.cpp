// ymlopt_bench_overhead: per-task overhead of ymlopt's StarPU backend against a
// hand-written StarPU program running the same DAG.
//
// The DAG: N tiny tasks; task i scales (x *= -1) the 1x16 f32 row i % 64 of a
// 64x16 tensor, so there are 64 independent chains of ~N/64 dependent tasks.
//   ymlopt: XML text -> compile_workflow_text -> DataStore ->
//           make_starpu_executor()->execute(); only execute() is timed, the
//           compile is timed and reported separately.
//   raw:    starpu_init, 64 starpu_matrix handles (1x16 views of the same kind
//           of buffer), one codelet with the same kernel work, N x
//           starpu_task_create + starpu_task_submit, starpu_task_wait_for_all,
//           unregister, starpu_shutdown.
// Fairness: both timed regions contain exactly one starpu_init and one
// starpu_shutdown (execute() does both internally); same ncpu, same scheduler.
// The "core" figures exclude init/shutdown: for ymlopt ExecResult::makespan_us
// (TaskRunner start -> after starpu_task_wait_for_all, i.e. codelets,
// handles, submission and execution), for raw the same span measured around
// handle registration -> starpu_task_wait_for_all.
//
//   ymlopt_bench_overhead [--tasks 20000] [--reps 5] [--ncpu N] [--sched lws]
//                         [--raw-model]   (give the raw codelet the same history perf model)
#include <starpu.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "register_builtin.hpp"
#include "starpu_backend.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace {

constexpr int kVec = 64, kLen = 16;

const char* kWorkflow = R"(<workflow name="bench-overhead">
  <param name="ntasks" type="int" default="20000"/>
  <param name="nvec" type="int" default="64"/>
  <param name="len" type="int" default="16"/>
  <data name="X" dtype="f32" shape="${nvec},${len}" tile="1,${len}" init="ones"/>
  <seq var="i" from="0" to="${ntasks}">
    <task component="tensor.scale">
      <inout port="x" data="X[${i % nvec},0]"/>
      <arg name="alpha" value="-1"/>
    </task>
  </seq>
</workflow>
)";

struct RawArg {
  float alpha;
};

// Same work as tensor.scale's kernel on a 1x16 f32 tile: x *= alpha, row by row.
void raw_scale(void* buffers[], void* cl_arg) {
  const float alpha = static_cast<const RawArg*>(cl_arg)->alpha;
  auto* x = reinterpret_cast<float*>(STARPU_MATRIX_GET_PTR(buffers[0]));
  const unsigned nx = STARPU_MATRIX_GET_NX(buffers[0]), ny = STARPU_MATRIX_GET_NY(buffers[0]);
  const unsigned ld = STARPU_MATRIX_GET_LD(buffers[0]);
  for (unsigned r = 0; r < ny; ++r)
    for (unsigned c = 0; c < nx; ++c) x[r * ld + c] *= alpha;
}

struct RawTimes {
  double total_s = 0, core_s = 0;
  bool ok = false;
};

// partitioned: like ymlopt's DAG, the 64 rows are tiles of ONE registered
// 64x16 matrix (partition plan + partition_submit); otherwise 64 handles.
RawTimes run_raw(long ntasks, int ncpu, const std::string& sched, bool with_model, bool partitioned) {
  RawTimes t;
  std::vector<float> buf(size_t(kVec) * kLen, 1.0f);
  static RawArg arg{-1.0f};
  starpu_perfmodel model;
  std::memset(&model, 0, sizeof model);
  model.type = STARPU_HISTORY_BASED;
  model.symbol = "bench.raw_scale";
  starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.where = STARPU_CPU;
  cl.cpu_funcs[0] = raw_scale;
  cl.nbuffers = 1;
  cl.modes[0] = STARPU_RW;
  cl.name = "raw_scale";
  if (with_model) cl.model = &model;

  const double t0 = bench::now_s();
  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.sched_policy_name = sched.c_str();
  conf.ncpus = ncpu;
  conf.nopencl = 0;
#ifndef STARPU_USE_CUDA
  conf.ncuda = 0;
#endif
  if (starpu_init(&conf) != 0) {
    std::fprintf(stderr, "raw: starpu_init failed\n");
    return t;
  }
  const double c0 = bench::now_s();
  std::vector<starpu_data_handle_t> h(kVec);
  starpu_data_handle_t whole = nullptr;
  if (partitioned) {
    starpu_matrix_data_register(&whole, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(buf.data()), kLen, kLen, kVec,
                                sizeof(float));
    starpu_data_filter f;
    std::memset(&f, 0, sizeof f);
    f.filter_func = starpu_matrix_filter_vertical_block;
    f.nchildren = kVec;
    starpu_data_partition_plan(whole, &f, h.data());
    starpu_data_partition_submit(whole, kVec, h.data());
  } else {
    for (int v = 0; v < kVec; ++v)
      starpu_matrix_data_register(&h[size_t(v)], STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(&buf[size_t(v) * kLen]),
                                  kLen, kLen, 1, sizeof(float));
  }
  bool ok = true;
  for (long i = 0; i < ntasks; ++i) {
    starpu_task* task = starpu_task_create();
    task->cl = &cl;
    task->handles[0] = h[size_t(i % kVec)];
    task->cl_arg = &arg;
    task->cl_arg_free = 0;
    if (starpu_task_submit(task) != 0) {
      ok = false;
      break;
    }
  }
  if (partitioned) starpu_data_unpartition_submit(whole, kVec, h.data(), STARPU_MAIN_RAM);
  starpu_task_wait_for_all();
  const double c1 = bench::now_s();
  if (partitioned) {
    starpu_data_partition_clean(whole, kVec, h.data());
    starpu_data_unregister(whole);
  } else {
    for (auto& x : h) starpu_data_unregister(x);
  }
  starpu_shutdown();
  t.total_s = bench::now_s() - t0;
  t.core_s = c1 - c0;
  // every element was multiplied by -1 once per task of its row
  for (int v = 0; v < kVec && ok; ++v) {
    const long n = ntasks / kVec + (v < ntasks % kVec ? 1 : 0);
    ok = buf[size_t(v) * kLen] == (n % 2 ? -1.0f : 1.0f);
  }
  t.ok = ok;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args a(argc, argv);
  const long ntasks = a.num("--tasks", 20000);
  const int reps = int(a.num("--reps", 5));
  int ncpu = int(a.num("--ncpu", 0));
  if (ncpu <= 0) ncpu = int(std::thread::hardware_concurrency());
  const std::string sched = a.str("--sched", "lws");
  const bool raw_model = a.has("--raw-model");
  if (ntasks <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: ymlopt_bench_overhead [--tasks N] [--reps R] [--ncpu C] [--sched P] [--raw-model]\n");
    return 2;
  }
  setenv("STARPU_SILENT", "1", 0);
  bench::TempDir tmp;  // STARPU_HOME for both (perf models), run dir
  setenv("STARPU_HOME", tmp.path().c_str(), 1);

  ymlopt::ComponentRegistry reg;
  ymlopt::register_builtin_components(reg);
  ymlopt::CompileOptions copts;
  copts.sets = {{"ntasks", std::to_string(ntasks)}, {"nvec", std::to_string(kVec)}, {"len", std::to_string(kLen)}};

  std::printf("ymlopt_bench_overhead: %ld tasks (64 chains of 1x16 f32 tensor.scale), ncpu=%d, sched=%s, reps=%d%s\n",
              ntasks, ncpu, sched.c_str(), reps, raw_model ? ", raw codelet with history perf model" : "");
  std::printf("timed region, both: starpu_init .. starpu_shutdown (one each); core: handles+submit+wait_for_all\n");
  std::printf("raw StarPU: the same DAG on the same layout (64 tiles of one partitioned 64x16 matrix)\n");
  std::vector<double> comp_s, y_total, y_core, r_total, r_core, s_total, s_core;
  size_t edges = 0;
  for (int rep = 0; rep < reps; ++rep) {
    auto run_ymlopt = [&]() -> bool {
      ymlopt::Diagnostics diags;
      const double c0 = bench::now_s();
      ymlopt::CompileResult cr = ymlopt::compile_workflow_text("bench_overhead.xml", kWorkflow, copts, reg, diags);
      comp_s.push_back(bench::now_s() - c0);
      if (!cr.ok) {
        std::fprintf(stderr, "%s", diags.str().c_str());
        return false;
      }
      edges = cr.dag.num_edges();
      ymlopt::DataStore store(cr.dag);
      const bench::StarpuRun run = bench::run_starpu(cr.dag, store, tmp.path(), sched, ncpu);
      const ymlopt::ExecResult& r = run.result;
      y_total.push_back(run.seconds);
      y_core.push_back(r.makespan_us * 1e-6);
      if (!r.ok) {
        std::fprintf(stderr, "ymlopt run failed: %s\n", r.error.c_str());
        return false;
      }
      return true;
    };
    auto run_raw_once = [&]() -> bool {
      RawTimes t = run_raw(ntasks, ncpu, sched, raw_model, true);
      r_total.push_back(t.total_s);
      r_core.push_back(t.core_s);
      RawTimes u = run_raw(ntasks, ncpu, sched, raw_model, false);
      s_total.push_back(u.total_s);
      s_core.push_back(u.core_s);
      if (!t.ok || !u.ok) std::fprintf(stderr, "raw run failed or gave wrong values\n");
      return t.ok && u.ok;
    };
    // alternate the order so that drift on a noisy machine hits both sides
    const bool ok = rep % 2 == 0 ? run_ymlopt() && run_raw_once() : run_raw_once() && run_ymlopt();
    if (!ok) return 1;
    std::printf("  rep %d: ymlopt %.1f ms (core %.1f ms)  raw %.1f ms (core %.1f ms)  compile %.1f ms\n", rep,
                y_total.back() * 1e3, y_core.back() * 1e3, r_total.back() * 1e3, r_core.back() * 1e3,
                comp_s.back() * 1e3);
  }
  const double n = double(ntasks);
  const double yt = bench::median(y_total), yc = bench::median(y_core);
  const double rt = bench::median(r_total), rc = bench::median(r_core);
  std::printf("\ntasks %ld, edges %zu\n", ntasks, edges);
  std::printf("compile (XML text -> DAG): median %.1f ms (%.2f us/task)\n", bench::median(comp_s) * 1e3,
              bench::median(comp_s) * 1e6 / n);
  std::printf("%-28s %12s %12s %12s\n", "median over reps", "ymlopt", "raw StarPU", "ymlopt/raw");
  std::printf("%-28s %12.2f %12.2f %12.3f\n", "us/task (init..shutdown)", yt * 1e6 / n, rt * 1e6 / n, yt / rt);
  std::printf("%-28s %12.2f %12.2f %12.3f\n", "us/task (core)", yc * 1e6 / n, rc * 1e6 / n, yc / rc);
  const double st = bench::median(s_total), sc = bench::median(s_core);
  std::printf("%-28s %12s %12.2f %12.3f   (raw with 64 separate handles instead of tiles)\n", "us/task (init..shutdown)",
              "", st * 1e6 / n, yt / st);
  std::printf("%-28s %12s %12.2f %12.3f   (same, core)\n", "us/task (core)", "", sc * 1e6 / n, yc / sc);
  std::printf("RESULT overhead ratio=%.3f target<=1.10 %s\n", yt / rt, yt / rt <= 1.10 ? "MET" : "MISSED");
  return 0;
}
