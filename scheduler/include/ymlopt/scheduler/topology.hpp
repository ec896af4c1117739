// Machine description (hwloc 2.x) and the BLAS library in use, for
// `ymlopt info`, report.json and CLI warnings.
//
//   const ymlopt::Topology t = ymlopt::probe_topology();
//   std::cout << ymlopt::format_topology(t);
//   for (const auto& w : t.warnings) std::cerr << "warning: " << w << "\n";
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ymlopt {

/// One cache level of a package, aggregated: `count` caches of `size` bytes.
struct CacheInfo {
  int level = 0;          // 1, 2, 3, ...
  std::string type;       // "d" (data), "i" (instruction), "" (unified)
  std::uint64_t size = 0; // bytes, per cache
  int count = 0;          // caches of this level and size in the package
};

struct PackageInfo {
  int index = 0;          // OS index (-1 when unknown)
  std::string cpu_model;  // hwloc "CPUModel" info, e.g. "AMD EPYC 7763 64-Core Processor"
  int cores = 0;
  int pus = 0;
  std::vector<CacheInfo> caches;  // L3 first, then L2, L1d (instruction caches omitted)
};

struct NumaInfo {
  int index = 0;
  std::uint64_t memory = 0;  // local memory, bytes
};

/// A GPU or co-processor seen by hwloc (CUDA, NVML, OpenCL, ROCm/RSMI, DRM
/// osdevs of one PCI device are merged into one entry).
struct GpuInfo {
  std::string name;                // model, e.g. "NVIDIA H100 80GB HBM3"
  std::string vendor;
  std::vector<std::string> osdevs; // e.g. {"cuda0", "nvml0", "card1"}
  std::string pci;                 // "0000:1b:00.0", "" if unknown
  std::uint64_t memory = 0;        // bytes, 0 if unknown
};

/// The OpenBLAS library linked into the process, if any.
struct BlasInfo {
  bool openblas = false;     // OpenBLAS symbols found
  std::string config;        // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  std::string version;       // parsed from config: "0.3.21"
  std::string core;          // openblas_get_corename(): the kernel set actually in use
  std::string coretype_env;  // $OPENBLAS_CORETYPE, "" when unset
  int num_threads = 0;       // openblas_get_num_threads()
  int parallel = -1;         // openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP
};

/// One processing unit (hardware thread) of the machine.
struct PuInfo {
  int os_index = 0;      // the kernel's CPU number (taskset, /proc/cpuinfo)
  int core = -1;         // logical index of its core (hwloc), -1 when unknown
  int starpu_index = -1; // StarPU's bind id: its rank among the PUs the cgroup allows (hwloc logical order)
  bool usable = false;   // in the cgroup's cpuset and this process's affinity mask
};

struct Topology {
  bool ok = false;        // false when hwloc failed (see error); the rest is then partial
  std::string error;
  std::string hwloc_version;  // hwloc version built against
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;
  int allowed_pus = 0;        // PUs this process may run on (cgroup/cpuset ∩ affinity)
  std::vector<int> cpuset;    // those PUs, OS indexes ascending (an MPI rank bound by mpirun: its own)
  std::vector<PuInfo> pu_list;  // every PU, in hwloc logical order
  std::string hostname;
  std::uint64_t memory = 0;   // total NUMA memory, bytes
  std::string cpu_model;      // of the first package
  std::vector<PackageInfo> package_list;
  std::vector<NumaInfo> numa;
  std::vector<GpuInfo> gpus;
  bool devices_probed = true;  // false: probed without I/O devices, so `gpus` says nothing
  BlasInfo blas;
  std::vector<std::string> warnings;  // things the CLI should warn about
};

/// Whether a probe looks for I/O devices (GPUs, OpenCL devices) too. They cost
/// 150 ms and more where an OpenCL ICD loads a compiler (PoCL loads LLVM) and
/// matter only to runs that may use accelerators.
enum class ProbeDevices { yes, no };

/// Probes the machine with hwloc and the OpenBLAS in use. Never throws: on an
/// hwloc failure, Topology::ok is false and error says why.
Topology probe_topology(ProbeDevices devices = ProbeDevices::yes);

/// Short text tree, e.g.
///   Machine: 1 package, 1 NUMA node (23.4 GiB), 2 cores, 2 PUs
///     Package 0: AMD EPYC 7763 64-Core Processor, 2 cores, 2 PUs
///       L3 32 MiB, L2 512 KiB x2, L1d 32 KiB x2
///   GPUs: none
///   OpenBLAS: 0.3.21, core Haswell (OPENBLAS_CORETYPE unset), 1 thread
std::string format_topology(const Topology& t);

/// The same as JSON (for report.json and `ymlopt info --json`).
nlohmann::json topology_json(const Topology& t);

/// "23.4 GiB", "512 KiB", "32 MiB" (exact multiples print without decimals).
std::string format_bytes(std::uint64_t bytes);

// ------------------------------------------------------------- --bind

/// A bad --bind value (or a PU outside the usable set); what() is the message.
struct BindError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Parses a PU list "0,2,4-7" into ascending, distinct numbers; throws
/// BindError ("--bind: ...") on syntax errors, reversed ranges, repeats.
///   parse_pu_list("4-5,0") == {0, 4, 5}
std::vector<int> parse_pu_list(const std::string& text);

/// The shortest list form: {0, 1, 2, 5} -> "0-2,5"; {} -> "".
std::string format_pu_list(const std::vector<int>& pus);

/// Where the CPU workers of a run go: one entry per worker.
struct BindPlan {
  std::string mode;             // "auto", "none", "cores" or "list"
  std::string spec;             // --bind as given ("" = auto)
  std::vector<int> cpuset;      // the PUs this process may use
  int ncpu = 0;                 // CPU workers to start (after StarPU's build cap)
  std::vector<int> pus;         // per worker: the PU (OS index) to bind it to; empty for "none"
  std::vector<int> starpu_ids;  // the same as StarPU bind ids (starpu_conf::workers_bindid)
  std::vector<std::string> warnings;
};

/// Resolves --bind MODE and --ncpu N against the process's cpuset:
///   auto   (or "") one worker per usable PU;
///   cores  one worker per physical core with a usable PU (its first), hyperthreads left idle;
///   none   StarPU does not bind (workers float over the process's cpuset);
///   LIST   "0,2,4-7": one worker per listed PU; a PU outside the cpuset throws BindError.
/// ncpu > 0 picks the worker count: fewer than the PUs takes the first ones, more
/// wraps around (workers share PUs) with a warning. `max_cpus` is StarPU's build
/// cap (STARPU_MAXCPUS): more workers than that are cut, with a warning.
///   plan_binding(probe_topology(), "0,1", 0, 4).pus == {0, 1}
BindPlan plan_binding(const Topology& t, const std::string& spec, int ncpu, int max_cpus);

/// Where a StarPU-MPI rank's progress thread goes: the StarPU bind id of the
/// first PU of the cpuset no worker of `p` is bound to, or -1 when there is
/// none (the workers fill the cpuset, or float: --bind none). The thread polls
/// MPI while any request is pending, so it needs a PU of its own; StarPU 1.3
/// would take the next bind id of the whole machine, outside a bound rank's
/// cpuset, onto another rank's worker. -1: leave it unbound, to share the
/// rank's own PUs.
///   progress_thread_bindid(plan_binding(t, "", 1, 64), t) == 1   // cpuset 0-1, one worker on PU 0
int progress_thread_bindid(const BindPlan& p, const Topology& t);

/// "auto: 2 workers on PUs 0-1 (cpuset 0-1)" — for `ymlopt info`.
std::string format_bind_plan(const BindPlan& p);
nlohmann::json bind_plan_json(const BindPlan& p);

/// Where one worker of a run actually ran, as the backend saw it after starting.
struct WorkerPlacement {
  std::string name;            // StarPU's worker name, "CPU 0"
  int pu = -1;                 // the PU (OS index) the runtime bound it to; -1: not bound
  int core = -1;               // that PU's core (logical index), -1 when unbound
  std::vector<int> affinity;   // the CPUs its thread may run on (sched_getaffinity inside a task)
};

/// Where a backend put its workers (report.json "machine" and, per MPI rank, "mpi.per_rank").
struct Placement {
  std::string host;
  std::string bind;              // the mode applied ("auto", "none", "cores", "list"); "" when the backend does not bind
  std::string spec;              // --bind as given
  std::vector<int> cpuset;       // the PUs the process could use
  std::vector<WorkerPlacement> workers;
};

/// {"host", "bind", "bind_spec", "cpuset": [..], "workers": [{"name", "pu", "core", "affinity"}]}.
nlohmann::json placement_json(const Placement& p);
Placement placement_from_json(const nlohmann::json& j);

/// Warnings about MPI ranks sharing a node: cpusets that overlap (ranks fighting
/// over the same PUs, e.g. mpirun --bind-to none with each rank binding from PU 0),
/// or workers of two ranks bound to the same PU. `ranks[r]` is rank r's placement.
///   "ranks 0 and 1 on node n1 share PUs 0-1 (rank 0 cpuset 0-1, rank 1 cpuset 0-1): ..."
std::vector<std::string> rank_overlap_warnings(const std::vector<Placement>& ranks);

/// MPI merge on rank 0: per_rank[r]["placement"] = rank_results[r]["placement"]
/// (what rank r's backend recorded), and the rank_overlap_warnings appended to
/// `warnings` (each once).
void merge_rank_placements(const std::vector<nlohmann::json>& rank_results, nlohmann::json& per_rank,
                           std::vector<std::string>& warnings);

}  // namespace ymlopt
