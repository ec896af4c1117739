// ymlopt_bench_compile: XML -> DAG compile time and peak memory for a workflow
// that expands to ~200k tasks: workflows/linalg/tiled_gemm.xml with
// n = tiles*bs, i.e. tiles^3 blas.gemm tasks (default 59^3 = 205,379) and the
// RAW/WAW chains on every C tile (plus reads of A/B tiles).
//
// Time: wall time of compile_workflow() (median over reps). Memory: the peak
// RSS growth of one compile, VmHWM after minus VmRSS before (VmHWM is reset
// to the current RSS through /proc/self/clear_refs before each rep; when that
// is not permitted, only the first rep's figure is meaningful and used).
//
//   ymlopt_bench_compile [--tiles 59] [--bs 16] [--reps 3] [--workflow PATH]
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "register_builtin.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/registry.hpp"

int main(int argc, char** argv) {
  bench::Args a(argc, argv);
  const long tiles = a.num("--tiles", 59), bs = a.num("--bs", 16);
  const int reps = int(a.num("--reps", 3));
  const std::string wf = a.str("--workflow", std::string(YMLOPT_SOURCE_DIR) + "/workflows/linalg/tiled_gemm.xml");
  if (tiles <= 0 || bs <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: ymlopt_bench_compile [--tiles T] [--bs B] [--reps R] [--workflow PATH]\n");
    return 2;
  }
  ymlopt::ComponentRegistry reg;
  ymlopt::register_builtin_components(reg);
  ymlopt::CompileOptions co;
  co.file = wf;
  co.sets = {{"n", std::to_string(tiles * bs)}, {"bs", std::to_string(bs)}};
  std::printf("ymlopt_bench_compile: %s --set n=%ld --set bs=%ld (%ld^3 tasks expected), reps=%d\n", wf.c_str(),
              tiles * bs, bs, tiles, reps);

  std::vector<double> times, mbs;
  size_t ntasks = 0, nedges = 0;
  bool hwm_reset_ok = true;
  for (int rep = 0; rep < reps; ++rep) {
    const bool reset = bench::reset_peak_rss();
    hwm_reset_ok = hwm_reset_ok && reset;
    const long rss0 = bench::proc_status_kb("VmRSS");
    double t = 0;
    long hwm = 0;
    {
      ymlopt::Diagnostics diags;
      const double t0 = bench::now_s();
      ymlopt::CompileResult cr = ymlopt::compile_workflow(co, reg, diags);
      t = bench::now_s() - t0;
      hwm = bench::proc_status_kb("VmHWM");
      if (!cr.ok) {
        std::fprintf(stderr, "%s", diags.str().c_str());
        return 1;
      }
      ntasks = cr.dag.tasks.size();
      nedges = cr.dag.num_edges();
    }
    times.push_back(t);
    const double mb = double(hwm - rss0) / 1024.0;
    if (reset || rep == 0) mbs.push_back(mb);
    std::printf("  rep %d: %.3f s, peak RSS growth %.1f MB%s (VmHWM %.1f MB)\n", rep, t, mb,
                reset || rep == 0 ? "" : " (HWM not reset: ignored)", double(hwm) / 1024.0);
  }
  const double tm = bench::median(times), mm = bench::median(mbs);
  std::printf("\n%10s %10s %10s %10s %12s\n", "tasks", "edges", "time s", "peak MB", "us/task");
  std::printf("%10zu %10zu %10.3f %10.1f %12.2f\n", ntasks, nedges, tm, mm, tm * 1e6 / double(ntasks));
  if (!hwm_reset_ok) std::printf("note: /proc/self/clear_refs not writable; peak MB from rep 0 only\n");
  std::printf("RESULT compile time=%.3fs target<1s %s; peak=%.1fMB target<300MB %s\n", tm, tm < 1.0 ? "MET" : "MISSED",
              mm, mm < 300 ? "MET" : "MISSED");
  return 0;
}
