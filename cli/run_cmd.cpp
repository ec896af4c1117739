#include "run_cmd.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "blas_peak.hpp"
#include "calibrate_cmd.hpp"
#include "distribute.hpp"
#include "gemm/gemm.hpp"
#include "quant/qlinear.hpp"
#include "report.hpp"
#include "run_checkpoint.hpp"
#include "run_workflow.hpp"
#include "starpu_backend.hpp"
#include "starpu_bind.hpp"
#include "starpu_info.hpp"
#ifdef YMLOPT_WITH_STARPU_MPI
#include "starpu_mpi_backend.hpp"
#endif
#include "usage_error.hpp"
#include "version.hpp"
#include "workflow_args.hpp"
#include "ymlopt/engine/analysis.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/engine/dot.hpp"
#include "ymlopt/scheduler/memory_limit.hpp"
#include "ymlopt/scheduler/topology.hpp"


namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  return buf;
}

namespace {

std::string format_footprint(const Dag& dag, const DagFootprint& f) {
  std::ostringstream o;
  o << "workflow '" << dag.name << "': " << dag.tasks.size() << " tasks, " << dag.num_edges() << " dependencies, "
    << dag.data.size() << " data\n";
  o << "parameters (src= data): " << mib(double(f.parameter_total));
  for (const auto& [dt, b] : f.parameter_bytes) o << ", " << dt << " " << mib(double(b));
  o << "\nother data: " << mib(double(f.activation_total)) << " allocated, peak " << mib(double(f.activation_peak))
    << " if each tensor lived from its first to its last use\n";
  if (const auto& kv = f.kv_cache; !kv.tensors.empty()) {
    o << "KV cache: " << mib(double(kv.bytes)) << " (";
    for (std::size_t i = 0; i < kv.tensors.size(); ++i) o << (i ? ", " : "") << kv.tensors[i];
    o << "): " << kv.layers << " layers x " << kv.context << " tokens";
    if (kv.block > 0) o << " (" << kv.context / kv.block << " blocks of " << kv.block << ", taken as sequences reach them)";
    o << "; " << kv.bytes_per_token << " bytes per token ("
      << (kv.layers ? kv.bytes_per_token / kv.layers : 0) << " per layer), " << mib(double(kv.bytes_per_token * kv.context))
      << " at a full context\n";
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "work: %.3f GFLOP\n", f.flops / 1e9);
  o << buf;
  for (const auto& [c, fl] : f.flops_by_component)
    if (fl > 0) {
      std::snprintf(buf, sizeof buf, "  %-22s %12.3f GFLOP\n", c.c_str(), fl / 1e9);
      o << buf;
    }
  return o.str();
}

std::string default_run_dir(const std::string& name) {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&now));
  std::string base = "runs/" + name + "-" + buf;
  std::string dir = base;
  for (int k = 2; fs::exists(dir); ++k) dir = base + "-" + std::to_string(k);
  return dir;
}

class ProgressLine {
 public:
  ProgressLine(const Progress& p, bool enabled) : p_(p) {
    if (enabled) th_ = std::thread([this] { loop(); });
  }
  ~ProgressLine() { stop(); }
  void stop() {
    if (!th_.joinable()) return;
    stop_ = true;
    th_.join();
    std::cerr << "\r\033[K" << std::flush;
  }

 private:
  void loop() {
    const auto t0 = std::chrono::steady_clock::now();
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto done = p_.done.load(), started = p_.started.load();
      char buf[160];
      if (p_.total > 0) {
        const double eta = done > 0 ? s / double(done) * double(p_.total - done) : 0;
        std::snprintf(buf, sizeof buf, "\r[%lld/%lld done, %lld running] %.1fs elapsed, ETA %.1fs\033[K",
                      (long long)done, (long long)p_.total, (long long)(started - done), s, eta);
      } else {  // runtime loops: how many task runs there will be is not known
        std::snprintf(buf, sizeof buf, "\r[%lld task runs done, %lld running] %.1fs elapsed\033[K", (long long)done,
                      (long long)(started - done), s);
      }
      std::cerr << buf << std::flush;
    }
  }
  const Progress& p_;
  std::atomic<bool> stop_{false};
  std::thread th_;
};


// --opencl, --opencl-on-cpus, --ncuda and --where against each other and the
// backend (whether the devices exist is the run's business: exit 1, not 2).
void check_device_args(const RunArgs& a) {
  Where w = Where::any;
  if (!parse_where(a.where, w))
    throw UsageError("--where expects any, cpu, opencl or cuda, not '" + a.where + "'" +
                     did_you_mean(a.where, {"any", "cpu", "opencl", "cuda"}));
  if (a.nopencl < -1) throw UsageError("--opencl must be >= -1 (-1: every device)");
  if (a.ncuda < -1) throw UsageError("--ncuda must be >= -1 (-1: every device)");
  const bool devices = a.nopencl != 0 || a.opencl_on_cpus || a.ncuda > 0 || w == Where::opencl || w == Where::cuda;
  if (devices && a.backend == "sequential")
    throw UsageError("--opencl, --opencl-on-cpus, --ncuda and --where opencl|cuda need a StarPU backend, not sequential");
  if (w == Where::cuda && a.ncuda == 0) throw UsageError("--where cuda with --ncuda 0: no CUDA workers to run on");
  if (a.opencl_on_cpus && a.nopencl == 0)
    throw UsageError("--opencl-on-cpus counts CPU-type OpenCL devices for --opencl N: give --opencl too");
  if (w == Where::opencl && a.nopencl == 0) throw UsageError("--where opencl needs OpenCL workers: give --opencl N");
}


// Whether the run may start OpenCL (--opencl, or StarPU's STARPU_NOPENCL) or
// CUDA workers (a StarPU with CUDA, --ncuda / STARPU_NCUDA not 0).
bool may_use_opencl(const RunArgs& a) {
  const char* env = std::getenv("STARPU_NOPENCL");
  return a.backend != "sequential" && (a.nopencl != 0 || (env && std::atoi(env) != 0));
}
bool may_use_cuda(const RunArgs& a) {
  const char* env = std::getenv("STARPU_NCUDA");
  return a.backend != "sequential" && starpu_build_info().cuda && a.ncuda != 0 && !(a.ncuda < 0 && env && std::atoi(env) == 0);
}

// A run without OpenCL workers keeps the OpenCL drivers out of this process:
// starpu_init counts OpenCL devices whatever it is asked for, and hwloc's
// device probe lists them, and an installed driver may load a whole compiler
// on its first call (PoCL's loads LLVM: 150 ms of every run here). The ICD
// loader (ocl-icd, or Khronos') reads its drivers from OCL_ICD_VENDORS, here a
// directory that does not exist; one the user set is left alone. Once per
// process: the loader reads the list once.
void keep_opencl_drivers_out(const RunArgs& a) {
  if (may_use_opencl(a) || std::getenv("OCL_ICD_VENDORS")) return;
  setenv("OCL_ICD_VENDORS", "/nonexistent/ymlopt-run-without-opencl", 1);
}

// The machine, probed once: --bind is checked against it, and it goes into
// the report. Its I/O devices only when the run may use accelerators (hwloc's
// device discovery costs tens of ms, more with OpenCL drivers).
Topology probe_and_check_binding(const RunArgs& a) {
  keep_opencl_drivers_out(a);
  Topology topo = probe_topology(may_use_opencl(a) || may_use_cuda(a) ? ProbeDevices::yes : ProbeDevices::no);
  try {  // --bind names PUs this process may use (an MPI rank checks its own cpuset again)
    plan_binding(topo, a.bind, a.ncpu, 0);
  } catch (const BindError& e) {
    throw UsageError(e.what());
  }
  return topo;
}

// --backend starpu-mpi: every rank runs `ymlopt run` and compiles the same DAG;
// rank 0 alone writes the run directory (report merged from all ranks). The
// MPI world lives as long as this object.
struct RankWorld {
  bool use_mpi = false;
  int rank = 0, nranks = 1;
  explicit RankWorld(bool mpi) : use_mpi(mpi) {
#ifdef YMLOPT_WITH_STARPU_MPI
    if (use_mpi) {
      const MpiWorld world = mpi_world_init();
      rank = world.rank, nranks = world.size;
    }
#endif
  }
  ~RankWorld() {
#ifdef YMLOPT_WITH_STARPU_MPI
    if (use_mpi) mpi_world_finalize();
#endif
  }
  RankWorld(const RankWorld&) = delete;
  RankWorld& operator=(const RankWorld&) = delete;
  // Whether `ok` holds on every rank (a step failing on some ranks only stops every rank).
  bool all_ok(bool ok) const {
#ifdef YMLOPT_WITH_STARPU_MPI
    if (use_mpi) return mpi_all_ok(ok);
#endif
    return ok;
  }
};

// MPI ranks on rank 0's node (--distribute tpxpp and auto put the shards there), on every rank.
int ranks_per_node(const RankWorld& w) {
  if (!w.use_mpi) return 1;
#ifdef YMLOPT_WITH_STARPU_MPI
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  const auto all = mpi_gather_strings(host);
  const auto n = std::count(all.begin(), all.end(), all.empty() ? std::string() : all[0]);
  return std::stoi(mpi_broadcast_string(std::to_string(n)));
#else
  return 1;
#endif
}

// Loads the components and compiles; under MPI rank 0 prints its diagnostics
// once, and another rank its own only where they differ (a file that rank's
// node lacks). The exit code (0: `cr` holds the DAG).
int compile_run(const RunArgs& a, const RankWorld& w, ComponentRegistry& reg, CompileResult& cr) {
  std::string diagnostics;
  const int compiled = prepare(a.wf, reg, cr, !a.dry_run, w.use_mpi ? &diagnostics : nullptr);
#ifdef YMLOPT_WITH_STARPU_MPI
  if (w.use_mpi) {
    const auto all = mpi_gather_strings(diagnostics);
    for (size_t k = 0; k < all.size(); ++k)
      if (k == 0) std::cerr << all[0];
      else if (all[k] != all[0]) std::cerr << "rank " << k << ": " << all[k];
    if (!w.all_ok(compiled == 0)) return compiled ? compiled : 1;
  }
#endif
  return compiled;
}

// Rank 0 creates the run directory (default runs/<workflow>-<time>) and every
// rank learns its name; false (on every rank) if it could not be created.
bool open_run_dir(std::string& out, const Dag& dag, const RankWorld& w) {
  if (out.empty() && w.rank == 0) out = default_run_dir(dag.name);
  std::error_code ec;
  if (w.rank == 0) fs::create_directories(out, ec);
  if (ec) std::cerr << "ymlopt: error: cannot create run directory '" << out << "': " << ec.message() << "\n";
#ifdef YMLOPT_WITH_STARPU_MPI
  if (w.use_mpi) {
    out = mpi_broadcast_string(out);
    return mpi_broadcast_flag(!ec);
  }
#endif
  return !ec;
}

std::string mib(std::int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1 << 20));
  return buf;
}

// Why the data `held` cannot fit in this process's memory limit (cgroup,
// RLIMIT_AS) beside what it already uses, and on how many ranks they would;
// "" when they fit or nothing limits it. Checked before allocating anything, so
// that a run too big for its node fails with this, not an OOM kill halfway.
std::string memory_shortfall(const Dag& dag, const Residency& held, const RankWorld& w) {
  const MemoryLimit limit = memory_limit();
  if (!limit.limited()) return "";
  const HeldBytes need = held_bytes(dag, held);
  const std::int64_t used = resident_bytes();
  if (need.total() + used <= limit.bytes) return "";
  std::string msg = "out of memory: the data " + std::string(w.use_mpi ? "this rank holds" : "of the run") + " need " +
                    mib(need.total()) + " (" + mib(need.allocated) + " allocated, " + mib(need.mapped) +
                    " mapped from src= files) beside the " + mib(used) + " in use, over the limit of " +
                    mib(limit.bytes) + " (" + limit.source + ")";
  for (int n = std::max(2, 2 * w.nranks); n <= 64; n *= 2) {
    const DataOwners own = data_owners(dag, n);
    std::int64_t worst = 0;
    for (int r = 0; r < n; ++r) worst = std::max(worst, held_bytes(dag, residency(dag, own, r, n)).total());
    if (worst + used > limit.bytes) continue;
    return msg + "; on " + std::to_string(n) + " ranks of the starpu-mpi backend each would hold at most " + mib(worst) +
           " (`ymlopt estimate --nodes " + std::to_string(n) + "` plans it)";
  }
  return msg + "; even 64 ranks would not hold it";
}

// Under a memory limit, the kernels' caches of packed weights (f32 and
// quantized panels: copies of the weights, kept for the run) get at most a
// quarter each of what the data and the process leave of it: a run that fits
// must not be pushed past its limit by its own caches.
void cap_panel_caches(std::int64_t data_bytes) {
  const MemoryLimit limit = memory_limit();
  if (!limit.limited()) return;
  const std::int64_t quarter = std::max<std::int64_t>(0, limit.bytes - data_bytes - resident_bytes()) / 4;
  gemm::limit_sgemm_pack_cache(quarter);
  quant::limit_panel_cache(quarter);
}

// The run's data; an MPI rank holds the data it owns (StarPU-MPI allocates
// what it receives). Null (on every rank) if one could not allocate, or if
// its data would not fit in its memory limit.
std::unique_ptr<DataStore> make_run_store(const Dag& dag, const RankWorld& w) {
  std::unique_ptr<DataStore> store;
  try {
    const Residency held =
        w.use_mpi ? residency(dag, data_owners(dag, w.nranks), w.rank, w.nranks) : Residency::all(dag);
    if (const std::string why = memory_shortfall(dag, held, w); !why.empty()) throw std::runtime_error(why);
    cap_panel_caches(held_bytes(dag, held).total());
    store = std::make_unique<DataStore>(dag, held);
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << (w.use_mpi ? "rank " + std::to_string(w.rank) + ": " : "") << e.what() << "\n";
  }
  if (!w.all_ok(store != nullptr)) return nullptr;
  return store;
}

// --checkpoint tasks / checkpoint="tasks": persist finished tasks' outputs;
// --resume: restore those the run directory holds. Sets `checkpoint` (null:
// none); false on an error, already printed.
bool open_checkpoint(const RunArgs& a, const Dag& dag, DataStore& store, const RankWorld& w, std::ostringstream& log,
                     std::unique_ptr<Checkpoint>& checkpoint) {
  const std::string mode = !a.checkpoint_mode.empty() ? a.checkpoint_mode
                           : !a.resume.empty()        ? "tasks"
                           : dag.checkpoint.empty()   ? "none"
                                                      : dag.checkpoint;
  if (mode != "tasks") return true;
  if (dag.dynamic() || w.use_mpi) {
    const std::string why = dag.dynamic() ? "workflow '" + dag.name +
                                                "' has runtime loops or <unite> blocks, whose tasks run a data-dependent "
                                                "number of times"
                                          : "the starpu-mpi backend does not checkpoint";
    if (!a.resume.empty()) {
      std::cerr << "ymlopt: error: cannot resume: " << why << "\n";
      return false;
    }
    if (!a.quiet && w.rank == 0) std::cerr << "ymlopt: warning: not checkpointing: " << why << "\n";
    log << "warning: not checkpointing: " << why << "\n";
    return true;
  }
  try {
    save_invocation(a.out, a.wf);
    checkpoint = std::make_unique<Checkpoint>(dag, store, a.out + "/checkpoint", !a.resume.empty());
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return false;
  }
  if (!a.resume.empty() && !a.quiet)
    std::cout << "resuming " << a.out << ": " << checkpoint->planned_reruns() << " of " << dag.tasks.size()
              << " tasks to run, the others restored from the checkpoint\n";
  return true;
}

// What one rank of a run holds once the workflow has run.
struct RunState {
  WorkflowRun run;
  std::vector<std::int32_t> task_ranks;  // StarPU-MPI: the rank of each task
  nlohmann::json mpi_info;               // StarPU-MPI: ranks and bytes moved
};

// --backend starpu-mpi: rank 0 merges every rank's records into one result;
// the other ranks stop here, with the exit code returned.
std::optional<int> merge_ranks(const Dag& dag, RunState& s, const RankWorld& w) {
#ifdef YMLOPT_WITH_STARPU_MPI
  if (!w.use_mpi) return std::nullopt;
  ExecResult& res = s.run.result;
  const auto& st = static_cast<const StarpuMpiExecutor&>(*s.run.executor).stats();
  const auto all = mpi_gather_strings(rank_result_json(res, st).dump());
  bool ok = res.ok;
  if (w.rank == 0) {
    MergedRun m = merge_rank_results(dag, all);
    m.result.unites = std::move(res.unites);  // every rank has every co-method's record (exchanged at each unite's end)
    res = std::move(m.result);
    s.task_ranks = std::move(m.task_ranks);
    s.mpi_info = {{"ranks", st.size}, {"bytes_moved", m.bytes_moved}, {"per_rank", m.ranks}};
    ok = res.ok;
  }
  ok = mpi_broadcast_flag(ok);
  if (w.rank != 0) return ok ? 0 : 1;
#else
  (void)dag, (void)s, (void)w;
#endif
  return std::nullopt;
}

// A StarPU-MPI run's per-rank peak RSS beyond what `ymlopt estimate` counts
// (data held, received copies, temporaries: priced here on the run's own task
// times), into the history that the estimate adds back.
void record_rank_overhead(History& h, const Dag& dag, const RunState& s, int ncpu) {
  const auto& ranks = s.mpi_info.value("per_rank", nlohmann::json::array());
  if (ranks.empty()) return;
  ClusterSpec spec;
  spec.ranks_per_node = int(ranks.size());
  spec.workers_per_rank = std::max(ncpu, 1);
  spec.kept_budget_bytes = kept_panel_budget();
  const DistributedEstimate e = estimate_distributed(dag, task_seconds(s.run.result), spec);
  for (size_t r = 0; r < ranks.size() && r < e.per_rank.size(); ++r) {
    const auto& p = ranks[r];
    const double data = p.value("allocated_bytes", 0.0) + p.value("mapped_bytes", 0.0) +
                        double(e.per_rank[r].remote_peak_bytes + e.per_rank[r].workspace_peak_bytes +
                               e.per_rank[r].kept_bytes);
    const double rss = p.value("peak_rss_bytes", 0.0);
    if (rss > data) h.rank_overhead_bytes.push_back(rss - data);
  }
  auto& v = h.rank_overhead_bytes;
  if (v.size() > History::kHistorySamples) v.erase(v.begin(), v.end() - History::kHistorySamples);
}

// The run's description in report.json: workflow, backend, parameters,
// machine and placement, memory, checkpoint, prediction against measurement.
nlohmann::json run_info(const RunArgs& a, const Dag& dag, const DataStore& store, const Topology& topo,
                        const DagFootprint& foot, const RunState& s) {
  nlohmann::json info = {{"workflow", dag.name}, {"file", dag.file},   {"backend", s.run.executor->name()},
                         {"ymlopt_version", kVersion}, {"run_dir", a.out}, {"data_bytes", store.total_bytes()}};
  nlohmann::json params = nlohmann::json::object();
  for (const auto& p : parse_sets(a.wf.sets)) params[p.first] = p.second;
  info["set"] = params;
  info["machine"] = topology_json(topo);
  // the placement the run got: bind mode, each worker's PU and core
  if (a.backend != "sequential") info["machine"].update(placement_json(last_starpu_placement()));
  if (!s.mpi_info.is_null()) info["mpi"] = s.mpi_info;
  info["memory"] = {{"parameter_bytes", foot.parameter_bytes},
                    {"parameter_total", foot.parameter_total},
                    {"activation_total", foot.activation_total},
                    {"activation_peak", foot.activation_peak},
                    {"allocated", store.total_bytes()},
                    {"mapped", store.mapped_bytes()}};
  if (const auto& kv = foot.kv_cache; !kv.tensors.empty())
    info["memory"]["kv_cache"] = {{"tensors", kv.tensors},
                                  {"bytes", kv.bytes},
                                  {"layers", kv.layers},
                                  {"context", kv.context},
                                  {"bytes_per_token", kv.bytes_per_token},
                                  {"bytes_per_token_per_layer", kv.layers ? kv.bytes_per_token / kv.layers : 0},
                                  {"block", kv.block}};
  return info;
}

// Writes report.json, trace.json and run.log and prints the summary; the exit code.
int report_run(const RunArgs& a, const Dag& dag, const DataStore& store, const Topology& topo, const DagFootprint& foot,
               const Prediction& prediction, Checkpoint* checkpoint, RunState& s, std::ostringstream& log,
               const PhaseClock& clock) {
  ExecResult& res = s.run.result;
  RunTotals totals = compute_totals(dag, res);
  totals.blas_peak_gflops = blas_peak_gflops(totals.makespan_us > 0 ? totals.flops / totals.makespan_us / 1e3 : 0);
  nlohmann::json info = run_info(a, dag, store, topo, foot, s);
  std::string checkpoint_summary;
  if (checkpoint) {
    const Checkpoint::Stats cs = checkpoint->stats();
    info["checkpoint"] = checkpoint_json(cs, !a.resume.empty(), totals.tasks_run);
    checkpoint_summary = checkpoint_line(cs, !a.resume.empty(), totals.tasks_run);
    if (!cs.error.empty()) res.warnings.push_back("checkpoint: persisting stopped: " + cs.error);
  }
  info["prediction"] = prediction_report(prediction, totals.makespan_us,
                                         double(store.total_bytes() + store.mapped_bytes()), double(totals.peak_rss_bytes));
  const nlohmann::json phases = clock.json(totals);
  info["phases_us"] = phases;
  const auto* ranks = s.task_ranks.empty() ? nullptr : &s.task_ranks;
  write_file_atomic(a.out + "/report.json", make_report(dag, res, totals, info, ranks).dump(1) + "\n");
  {
    std::string trace = trace_json(dag, res, ranks);
    trace += '\n';
    write_file_atomic(a.out + "/trace.json", trace);
  }
  for (const auto& w : res.warnings) {
    std::cerr << "ymlopt: warning: " << w << "\n";
    log << "warning: " << w << "\n";
  }
  const std::string table = summary_table(dag, res, totals);
  if (!s.mpi_info.is_null()) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%d MPI ranks, %.1f MiB moved between them\n", s.mpi_info["ranks"].get<int>(),
                  double(s.mpi_info["bytes_moved"].get<std::uint64_t>()) / (1 << 20));
    log << buf;
    if (!a.quiet && res.ok) std::cout << buf;
  }
  log << table << checkpoint_summary;
  if (!res.ok) {
    std::cerr << res.error << "\n";
    log << res.error << "\n";
    write_file_atomic(a.out + "/run.log", log.str());
    std::cerr << "run failed; partial report in " << a.out << "/report.json\n";
    return 1;
  }
  const std::string wall = clock.line(phases);
  log << wall;
  write_file_atomic(a.out + "/run.log", log.str());
  if (!a.quiet) {
    std::cout << "workflow '" << dag.name << "': " << dag.tasks.size() << " tasks on " << res.workers.size()
              << " worker" << (res.workers.size() == 1 ? "" : "s") << " (" << res.runtime << ", " << res.scheduler
              << ")\n"
              << table << wall << checkpoint_summary
              << (totals.tasks_restored ? "" : prediction_line(info["prediction"])) << "run directory: " << a.out
              << "\n";
  }
  return 0;
}

}  // namespace

// Parses and checks the options of `ymlopt run` (--resume: completed from the
// run directory's recorded invocation); false on --help.
bool parse_run_args(const std::vector<std::string>& args, RunArgs& a) {
  po::options_description d("ymlopt run WF.xml [options]");
  d.add_options()("help,h", "show this help")("out,o", po::value(&a.out), "run directory (default runs/<workflow>-<time>)")(
      "backend,b", po::value(&a.backend), "starpu (default), sequential, or starpu-mpi (one process per rank under mpirun/srun)")(
      "sched", po::value(&a.sched), "StarPU policy: lws, eager, ws, dmda, dmdas, prio, random, heteroprio")(
      "ncpu", po::value(&a.ncpu), "number of CPU workers (default: all)")(
      "bind", po::value(&a.bind), "worker placement: auto (default: one per PU of this process's cpuset), cores, none, or PUs 0,2,4-7")(
      "opencl", po::value(&a.nopencl),
      "OpenCL workers: N devices of type GPU or accelerator, -1 all (default 0: none, or StarPU's STARPU_NOPENCL)")(
      "opencl-on-cpus", po::bool_switch(&a.opencl_on_cpus),
      "count OpenCL devices of type CPU (PoCL) for --opencl; they share the cores with the CPU workers")(
      "ncuda", po::value(&a.ncuda),
      "CUDA workers (a StarPU built with CUDA): N devices, 0 none (default -1: every device, or StarPU's STARPU_NCUDA)")(
      "where", po::value(&a.where),
      "where tasks run: any (default: the scheduler chooses), cpu, opencl or cuda (every task that has a kernel for "
      "that kind of worker)")(
      "starpu-home", po::value(&a.starpu_home), "directory for StarPU perf models (default RUN_DIR/starpu)")(
      "dry-run", po::bool_switch(&a.dry_run), "compile and print memory and flops, allocate and run nothing")(
      "quiet,q", po::bool_switch(&a.quiet), "no progress line or summary")("verbose,v", po::bool_switch(&a.verbose),
                                                                           "show StarPU's own messages")(
      "no-history", po::bool_switch(&a.no_history),
      "predict from the calibrated rates only, and leave this run out of the machine's task history")(
      "checkpoint", po::value(&a.checkpoint_mode),
      "tasks: persist every finished task's outputs in RUN_DIR/checkpoint (for --resume); none (default: the "
      "workflow's checkpoint= attribute, else none)")(
      "resume", po::value(&a.resume),
      "RUN_DIR: resume an interrupted checkpointed run (same workflow and --set, plus any new --set): restore what "
      "its checkpoint holds, run what is missing or stale")(
      "warmup", po::value(&a.warmup),
      "run the workflow N times first in the same process (runtime started, weights mapped and touched), then the "
      "measured run, as a serving process runs a model again; the report is the last run's, the warm-up makespans in "
      "totals.warmup_us")(
      "distribute", po::value(&a.distribute),
      "split a model over the ranks (--backend starpu-mpi) by the workflow's parameters: tp (tensor parallel), pp "
      "(pipeline stages), tpxpp (shards within a node, stages across nodes), tp=N,pp=M, or auto");
  add_workflow_options(d, a.wf);
  if (parse_or_help(args, d, &a.wf, true)) return false;
  if (a.wf.file.empty() && a.resume.empty()) throw UsageError("missing workflow file");
  if (!a.checkpoint_mode.empty() && a.checkpoint_mode != "tasks" && a.checkpoint_mode != "none")
    throw UsageError("--checkpoint expects tasks or none, not '" + a.checkpoint_mode + "'");
  if (!a.resume.empty()) {
    if (a.checkpoint_mode == "none") throw UsageError("--resume restores from the checkpoint: it cannot be combined with --checkpoint none");
    if (!a.out.empty() && fs::weakly_canonical(a.out) != fs::weakly_canonical(a.resume))
      throw UsageError("--resume " + a.resume + " continues that run directory; --out names another ('" + a.out + "')");
    if (a.backend == "starpu-mpi") throw UsageError("--resume is not supported with --backend starpu-mpi");
    const WorkflowArgs recorded = load_invocation(a.resume);
    if (a.wf.file.empty()) a.wf.file = recorded.file;
    a.wf.sets = merge_sets(recorded.sets, a.wf.sets);
    if (a.wf.plugins.empty()) a.wf.plugins = recorded.plugins;
    if (a.wf.model.empty()) a.wf.model = recorded.model;
    if (a.wf.prompt.empty()) a.wf.prompt = recorded.prompt;
    a.out = a.resume;
  }
  if (a.backend == "starpu-mpi" && a.checkpoint_mode == "tasks")
    throw UsageError("--checkpoint tasks is not supported with --backend starpu-mpi");
  if (a.backend != "starpu" && a.backend != "sequential" && a.backend != "starpu-mpi")
    throw UsageError("unknown backend '" + a.backend + "' (expected starpu, sequential or starpu-mpi)");
#ifndef YMLOPT_WITH_STARPU_MPI
  if (a.backend == "starpu-mpi")
    throw UsageError("this ymlopt was built without StarPU-MPI (install libopenmpi-dev and rebuild) : no backend starpu-mpi");
#endif
  const auto& pol = starpu_policies();
  if (std::find(pol.begin(), pol.end(), a.sched) == pol.end())
    throw UsageError("unknown scheduler '" + a.sched + "'" + did_you_mean(a.sched, pol));
  if (a.ncpu < 0) throw UsageError("--ncpu must be >= 0");
  if (a.warmup < 0) throw UsageError("--warmup must be >= 0");
  if (a.warmup > 0 && a.backend == "starpu-mpi") throw UsageError("--warmup is not supported with --backend starpu-mpi");
  if (a.warmup > 0 && (!a.resume.empty() || a.checkpoint_mode == "tasks"))
    throw UsageError("--warmup runs the workflow again: it cannot be combined with --checkpoint tasks or --resume");
  check_device_args(a);
  return true;
}

int run_command(RunArgs& a, const RunHooks& hooks) {
  PhaseClock clock;
  const Topology topo = probe_and_check_binding(a);
  const RankWorld world(a.backend == "starpu-mpi" && !a.dry_run);
  if (!a.distribute.empty())
    for (auto& s : distribute_sets(a.distribute, a.wf.file, a.wf.sets, world.nranks, ranks_per_node(world)))
      a.wf.sets.push_back(std::move(s));
  clock.mark("probe");
  ComponentRegistry reg;
  CompileResult cr;
  if (int rc = compile_run(a, world, reg, cr)) return rc;
  clock.mark("compile");
  const Dag& dag = cr.dag;
  if (a.warmup > 0) {
    if (const std::string why = warmup_refusal(dag); !why.empty()) throw UsageError("--warmup: " + why);
    if (!dag.checkpoint.empty() && dag.checkpoint != "none" && a.checkpoint_mode != "none")
      throw UsageError("--warmup: workflow '" + dag.name + "' asks for checkpoint=\"" + dag.checkpoint +
                       "\"; give --checkpoint none to warm it up");
  }
  const DagFootprint foot = analyze(dag);
  if (a.dry_run) {
    std::cout << format_footprint(dag, foot);
    return 0;
  }
  if (!open_run_dir(a.out, dag, world)) return 1;
  std::ostringstream log;
  log << "ymlopt " << kVersion << " run " << a.wf.file;
  for (const auto& s : a.wf.sets) log << " --set " << s;
  log << " --backend " << a.backend << " --sched " << a.sched << "\n";
  const std::unique_ptr<DataStore> store = make_run_store(dag, world);
  if (!store) return 1;
  clock.mark("data");
  if (world.rank == 0) write_file_atomic(a.out + "/dag.dot", dag_to_dot(dag));
  // the machine the run saw goes into the report; its warnings (e.g. OpenBLAS
  // running generic kernels on an AVX-512 CPU) explain slow runs
  for (const auto& w : topo.warnings) {
    if (!a.quiet && world.rank == 0) std::cerr << "ymlopt: warning: " << w << "\n";
    log << "warning: " << w << "\n";
  }
  std::unique_ptr<Checkpoint> checkpoint;
  if (!open_checkpoint(a, dag, *store, world, log, checkpoint)) return 1;
  RunOptions ro;
  ro.backend = a.backend;
  ro.exec.run_dir = a.out;
  ro.exec.sched = a.sched;
  ro.exec.ncpu = a.ncpu;
  ro.exec.bind = a.bind;
  ro.exec.nopencl = a.nopencl;
  ro.exec.opencl_on_cpus = a.opencl_on_cpus;
  ro.exec.ncuda = a.ncuda;
  parse_where(a.where, ro.exec.where);
  ro.exec.starpu_home = a.starpu_home;
  ro.exec.verbose = a.verbose;
  ro.exec.checkpoint = checkpoint.get();
  ro.exec.warmup = a.warmup;
  if (hooks.on_iteration)
    ro.exec.on_iteration = [&](std::int32_t region, std::int64_t it, Session& ses) {
      hooks.on_iteration(dag, *store, region, it, ses);
    };
  Progress progress;
  ro.progress = &progress;
  // before running: the run must not inform it (the history holds earlier runs only)
  History history = a.no_history || world.rank != 0 ? History{} : load_history();
  const Prediction prediction = predict_run(dag, a.backend, a.ncpu, &history);
  clock.mark("predict");
  RunState s;
  {
    ProgressLine line(progress, !a.quiet && isatty(2) && !world.use_mpi);
    s.run = run_workflow(dag, *store, ro);
  }
  if (checkpoint) checkpoint->finish();  // everything persisted before the report says so
  clock.mark("run");
  if (const std::optional<int> rc = merge_ranks(dag, s, world)) return *rc;
  if (s.run.result.ok && !a.no_history && world.rank == 0) {
    if (world.use_mpi) record_rank_overhead(history, dag, s, a.ncpu);
    else record_history(history, dag, task_seconds(s.run.result));
    try {
      save_history(history);
    } catch (const std::exception& e) {
      std::cerr << "ymlopt: warning: " << e.what() << "\n";
    }
  }
  clock.mark("history");
  if (hooks.after_run) hooks.after_run(dag, *store, s.run.result);
  return report_run(a, dag, *store, topo, foot, prediction, checkpoint.get(), s, log, clock);
}

int cmd_run(const std::vector<std::string>& args) {
  RunArgs a;
  if (!parse_run_args(args, a)) return 0;
  return run_command(a, {});
}

}  // namespace ymlopt
