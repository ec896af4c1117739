// Machine description (hwloc 2.x) and the BLAS library in use, for
// `ymlopt info`, report.json and CLI warnings.
//
//   const ymlopt::Topology t = ymlopt::probe_topology();
//   std::cout << ymlopt::format_topology(t);
//   for (const auto& w : t.warnings) std::cerr << "warning: " << w << "\n";
#pragma once

#include <cstdint>
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

struct Topology {
  bool ok = false;        // false when hwloc failed (see error); the rest is then partial
  std::string error;
  std::string hwloc_version;  // hwloc version built against
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;
  int allowed_pus = 0;        // PUs this process may run on (cgroup/cpuset ∩ affinity)
  std::uint64_t memory = 0;   // total NUMA memory, bytes
  std::string cpu_model;      // of the first package
  std::vector<PackageInfo> package_list;
  std::vector<NumaInfo> numa;
  std::vector<GpuInfo> gpus;
  BlasInfo blas;
  std::vector<std::string> warnings;  // things the CLI should warn about
};

/// Probes the machine with hwloc and the OpenBLAS in use. Never throws: on an
/// hwloc failure, Topology::ok is false and error says why.
Topology probe_topology();

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

}  // namespace ymlopt
