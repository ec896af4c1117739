// ymlopt_bench_gemm: tiled GEMM through workflows/linalg/tiled_gemm.xml on the
// StarPU backend against ONE multithreaded OpenBLAS call on the same matrices.
//
//   ymlopt: compile_workflow(tiled_gemm.xml, sets n/bs/dtype) -> DataStore ->
//           make_starpu_executor()->execute() with ncpu = all cores; the timed
//           region is the whole execute() (starpu_init .. starpu_shutdown),
//           "core" is ExecResult::makespan_us (submission + execution).
//           Tasks run blas.gemm: f32 through oneDNN's sgemm when built with it
//           (components/gemm), f64 OpenBLAS's dgemm kernel on tiles packed once
//           per run (the packing is inside the timed region), one thread each.
//   ref:    openblas_set_num_threads(ncores); one cblas_sgemm/dgemm
//           C_ref = A*B + C_ref on the DataStore's A and B.
// GFLOP/s = 2 n^3 / time. Reps alternate ymlopt/ref; medians are reported.
// Each timed region starts after --gap-ms of idling: a 2-thread OpenBLAS call
// leaves its helper thread spinning ~0.1 s after it returns, which would
// otherwise eat into a ymlopt run that follows it. "cpu-s" is the process's
// CPU time (all threads) over the region: on a loaded host it tells how much
// work each side did when wall times mostly tell how much CPU it was given.
//
//   ymlopt_bench_gemm [--n 4096] [--bs 512,1024] [--dtype f32,f64] [--reps 5]
//                     [--sched lws] [--ncpu N] [--gap-ms 300] [--workflow PATH]
#include <cblas.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "gemm/gemm.hpp"
#include "register_builtin.hpp"
#include "starpu_backend.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/scheduler/executor.hpp"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
char* openblas_get_config(void);
int openblas_get_num_threads(void);
}

namespace {

struct Aligned {
  void operator()(void* p) const { std::free(p); }
};

/// CPU seconds used so far by the whole process (all threads, user + system).
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int find_data(const ymlopt::Dag& dag, const std::string& name) {
  for (size_t i = 0; i < dag.data.size(); ++i)
    if (dag.data[i].name == name) return int(i);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args a(argc, argv);
  const long n = a.num("--n", 4096);
  const int reps = int(a.num("--reps", 5));
  const long gap_ms = a.num("--gap-ms", 300);
  const auto bss = a.list("--bs", "512,1024");
  const auto dtypes = a.list("--dtype", "f32,f64");
  const std::string sched = a.str("--sched", "lws");
  int ncpu = int(a.num("--ncpu", 0));
  if (ncpu <= 0) ncpu = int(std::thread::hardware_concurrency());
  const std::string wf = a.str("--workflow", std::string(YMLOPT_SOURCE_DIR) + "/workflows/linalg/tiled_gemm.xml");
  if (n <= 0 || reps <= 0 || gap_ms < 0) {
    std::fprintf(stderr, "usage: ymlopt_bench_gemm [--n N] [--bs B,..] [--dtype f32,f64] [--reps R] [--sched P] [--ncpu C] [--gap-ms G]\n");
    return 2;
  }
  setenv("STARPU_SILENT", "1", 0);
  bench::TempDir tmp;
  setenv("STARPU_HOME", tmp.path().c_str(), 1);

  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("ymlopt_bench_gemm: n=%ld, ncpu=%d, sched=%s, reps=%d, gap=%ld ms\n", n, ncpu, sched.c_str(), reps,
              gap_ms);
  std::printf("cpu: %s, %u hardware threads\n", bench::cpu_model().c_str(), std::thread::hardware_concurrency());
  std::printf("openblas: corename=%s config=\"%s\" OPENBLAS_CORETYPE=%s\n", openblas_get_corename(),
              openblas_get_config(), coretype ? coretype : "(unset)");
  std::printf("tile kernel (1 thread per task): f32 %s; f64 %s; reference: OpenBLAS, %d threads\n",
              ymlopt::gemm::sgemm_library().c_str(), ymlopt::gemm::dgemm_library().c_str(), ncpu);

  ymlopt::ComponentRegistry reg;
  ymlopt::register_builtin_components(reg);

  struct Row {
    std::string dtype;
    long bs, tasks;
    double y_gf, y_core_gf, r_gf, y_cpu, r_cpu;
  };
  std::vector<Row> rows;
  const double flops = 2.0 * double(n) * double(n) * double(n);
  for (const auto& dt : dtypes) {
    const bool f64 = dt == "f64";
    if (!f64 && dt != "f32") {
      std::fprintf(stderr, "unknown dtype '%s'\n", dt.c_str());
      return 2;
    }
    for (const auto& bs_s : bss) {
      const long bs = std::strtol(bs_s.c_str(), nullptr, 10);
      ymlopt::CompileOptions co;
      co.file = wf;
      co.sets = {{"n", std::to_string(n)}, {"bs", std::to_string(bs)}, {"dtype", dt}};
      ymlopt::Diagnostics diags;
      ymlopt::CompileResult cr = ymlopt::compile_workflow(co, reg, diags);
      if (!cr.ok) {
        std::fprintf(stderr, "%s", diags.str().c_str());
        return 1;
      }
      const ymlopt::Dag& dag = cr.dag;
      ymlopt::DataStore store(dag);
      const int ia = find_data(dag, "A"), ib = find_data(dag, "B");
      if (ia < 0 || ib < 0) {
        std::fprintf(stderr, "workflow has no A/B\n");
        return 1;
      }
      const size_t esz = f64 ? 8 : 4;
      std::unique_ptr<void, Aligned> cref(std::aligned_alloc(64, size_t(n) * size_t(n) * esz));
      std::memset(cref.get(), 0, size_t(n) * size_t(n) * esz);
      std::vector<double> yt, yc, rt, ycpu, rcpu;
      std::int64_t packs = 0, reuses = 0;  // f64: tile panels packed and reused by the last ymlopt run
      double peak_mib = 0;
      std::printf("\n%s bs=%ld: %zu tasks\n", dt.c_str(), bs, dag.tasks.size());
      for (int rep = 0; rep < reps; ++rep) {
        const auto idle = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms)); };
        auto run_y = [&]() -> bool {
          idle();
          const ymlopt::gemm::PackCacheStats p0 = ymlopt::gemm::pack_cache_stats();
          const double c0 = process_cpu_s();
          const bench::StarpuRun run = bench::run_starpu(dag, store, tmp.path(), sched, ncpu);
          ycpu.push_back(process_cpu_s() - c0);
          const ymlopt::gemm::PackCacheStats p1 = ymlopt::gemm::pack_cache_stats();
          packs = p1.misses - p0.misses, reuses = p1.hits - p0.hits, peak_mib = double(p1.peak) / (1 << 20);
          const ymlopt::ExecResult& r = run.result;
          yt.push_back(run.seconds);
          yc.push_back(r.makespan_us * 1e-6);
          if (!r.ok) std::fprintf(stderr, "ymlopt run failed: %s\n", r.error.c_str());
          return r.ok;
        };
        auto run_r = [&]() {
          openblas_set_num_threads(ncpu);
          const int nn = int(n);
          idle();
          const double c0 = process_cpu_s();
          const double t0 = bench::now_s();
          // the same A and B, with the row stride the engine gave them
          const int lda = int(store.view({ia, -1}).ld), ldb = int(store.view({ib, -1}).ld);
          if (f64)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nn, nn, nn, 1.0,
                        static_cast<const double*>(store.base(ia)), lda, static_cast<const double*>(store.base(ib)), ldb,
                        1.0, static_cast<double*>(cref.get()), nn);
          else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nn, nn, nn, 1.0f,
                        static_cast<const float*>(store.base(ia)), lda, static_cast<const float*>(store.base(ib)), ldb,
                        1.0f, static_cast<float*>(cref.get()), nn);
          rt.push_back(bench::now_s() - t0);
          rcpu.push_back(process_cpu_s() - c0);
          return true;
        };
        const bool ok = rep % 2 == 0 ? run_y() && run_r() : run_r() && run_y();
        if (!ok) return 1;
        std::printf("  rep %d: ymlopt %.3f s (core %.3f s, cpu %.3f s)  openblas %.3f s (cpu %.3f s)", rep, yt.back(),
                    yc.back(), ycpu.back(), rt.back(), rcpu.back());
        if (packs + reuses > 0)
          std::printf("  [panels: %lld packed, %lld reused; cache peak %.0f MiB]", (long long)packs, (long long)reuses,
                      peak_mib);
        std::printf("\n");
      }
      rows.push_back({dt, bs, long(dag.tasks.size()), flops / bench::median(yt) * 1e-9,
                      flops / bench::median(yc) * 1e-9, flops / bench::median(rt) * 1e-9, bench::median(ycpu),
                      bench::median(rcpu)});
    }
  }
  // cpu ratio: openblas CPU-s / ymlopt CPU-s (>1: the tiled run did its work with less CPU time)
  std::printf("\n%-6s %6s %7s %14s %14s %14s %8s %8s %10s %10s %9s\n", "dtype", "bs", "tasks", "ymlopt GF/s",
              "(core) GF/s", "openblas GF/s", "ratio", "core", "y cpu-s", "ob cpu-s", "cpu ratio");
  for (const auto& r : rows)
    std::printf("%-6s %6ld %7ld %14.1f %14.1f %14.1f %8.3f %8.3f %10.3f %10.3f %9.3f\n", r.dtype.c_str(), r.bs, r.tasks,
                r.y_gf, r.y_core_gf, r.r_gf, r.y_gf / r.r_gf, r.y_core_gf / r.r_gf, r.y_cpu, r.r_cpu, r.r_cpu / r.y_cpu);
  for (const auto& r : rows)
    std::printf("RESULT gemm %s bs=%ld ratio=%.3f target>=0.92 %s\n", r.dtype.c_str(), r.bs, r.y_gf / r.r_gf,
                r.y_gf / r.r_gf >= 0.92 ? "MET" : "MISSED");
  return 0;
}
