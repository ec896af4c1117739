#include "ymlopt/scheduler/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <dlfcn.h>
#include <unistd.h>

// OpenBLAS introspection (signatures as in OpenBLAS's cblas.h). The functions
// are looked up in the running process with dlsym rather than referenced: the
// engine then needs no link dependency on OpenBLAS (a weak reference would be
// dropped by --as-needed), and reports "not linked" when the process uses
// another BLAS.
extern "C" {
using openblas_get_config_fn = char* (*)(void);
using openblas_get_corename_fn = char* (*)(void);
using openblas_get_num_threads_fn = int (*)(void);
using openblas_get_parallel_fn = int (*)(void);
}

namespace ymlopt {
namespace {

std::string plural(long n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string info(hwloc_obj_t o, const char* name) {
  const char* v = o ? hwloc_obj_get_info_by_name(o, name) : nullptr;
  return v ? v : "";
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

int count_inside(hwloc_topology_t topo, hwloc_const_cpuset_t set, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, type);
  return n < 0 ? 0 : n;
}

std::vector<CacheInfo> caches_inside(hwloc_topology_t topo, hwloc_const_cpuset_t set) {
  // (level, type, size) -> count
  std::map<std::tuple<int, std::string, std::uint64_t>, int> agg;
  for (hwloc_obj_type_t t : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L4CACHE,
                             HWLOC_OBJ_L5CACHE}) {
    hwloc_obj_t o = nullptr;
    while ((o = hwloc_get_next_obj_inside_cpuset_by_type(topo, set, t, o)) != nullptr) {
      const auto& c = o->attr->cache;
      if (c.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
      const std::string type = c.type == HWLOC_OBJ_CACHE_DATA ? "d" : "";
      ++agg[{static_cast<int>(c.depth), type, c.size}];
    }
  }
  std::vector<CacheInfo> out;
  for (const auto& [k, n] : agg) out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), n});
  std::sort(out.begin(), out.end(), [](const CacheInfo& a, const CacheInfo& b) {
    return a.level != b.level ? a.level > b.level : a.size > b.size;
  });
  return out;
}

std::string pci_busid(hwloc_obj_t pci) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return buf;
}

hwloc_obj_t pci_ancestor(hwloc_obj_t o) {
  for (hwloc_obj_t p = o ? o->parent : nullptr; p; p = p->parent)
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
  return nullptr;
}

bool gpu_vendor(unsigned id) { return id == 0x10de || id == 0x1002 || id == 0x8086; }

const char* vendor_name(unsigned id) {
  switch (id) {
    case 0x10de: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
  }
  return "";
}

/// The model from the NVIDIA driver's procfs, when hwloc has no CUDA/NVML plugin.
std::string nvidia_proc_model(const std::string& busid) {
  std::ifstream f("/proc/driver/nvidia/gpus/" + busid + "/information");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Model:", 0) == 0) return trim(line.substr(6));
  return "";
}

std::uint64_t kib_info(hwloc_obj_t o, const char* name) {
  const std::string v = info(o, name);
  return v.empty() ? 0 : std::strtoull(v.c_str(), nullptr, 10) * 1024;
}

void probe_gpus(hwloc_topology_t topo, Topology& t) {
  std::map<std::string, GpuInfo> groups;  // by PCI bus id (or osdev name)
  // PCI display controllers of GPU vendors (class 0x03xx), even without osdevs.
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_pcidev(topo, p)) != nullptr;) {
    const auto& a = p->attr->pcidev;
    if ((a.class_id >> 8) != 0x03 || !gpu_vendor(a.vendor_id)) continue;
    GpuInfo g;
    g.pci = pci_busid(p);
    g.vendor = vendor_name(a.vendor_id);
    g.name = info(p, "PCIDevice");
    if (g.name.empty() && a.vendor_id == 0x10de) g.name = nvidia_proc_model(g.pci);
    if (g.name.empty()) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s device %04x:%04x", g.vendor.c_str(), a.vendor_id, a.device_id);
      g.name = buf;
    }
    groups[g.pci] = g;
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(topo, o)) != nullptr;) {
    const auto type = o->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_GPU && type != HWLOC_OBJ_OSDEV_COPROC) continue;
    const std::string model = info(o, "GPUModel");
    hwloc_obj_t pci = pci_ancestor(o);
    const std::string key = pci ? pci_busid(pci) : std::string("osdev:") + (o->name ? o->name : "?");
    auto it = groups.find(key);
    if (it == groups.end()) {
      // A DRM card of a virtual display adapter is not a GPU worth reporting.
      if (type != HWLOC_OBJ_OSDEV_COPROC && model.empty()) continue;
      GpuInfo g;
      g.pci = pci ? key : "";
      it = groups.emplace(key, g).first;
    }
    GpuInfo& g = it->second;
    if (o->name) g.osdevs.push_back(o->name);
    if (!model.empty()) g.name = model;  // the osdev's model beats the PCI name
    const std::string vendor = info(o, "GPUVendor");
    if (!vendor.empty()) g.vendor = vendor;
    std::uint64_t mem = kib_info(o, "CUDAGlobalMemorySize");
    if (!mem) mem = kib_info(o, "OpenCLGlobalMemorySize");
    if (mem) g.memory = mem;
    if (g.name.empty()) g.name = o->name ? o->name : "GPU";
  }
  for (auto& [k, g] : groups) t.gpus.push_back(std::move(g));
}

void probe_blas(Topology& t) {
  BlasInfo& b = t.blas;
  if (const char* env = std::getenv("OPENBLAS_CORETYPE")) b.coretype_env = env;
  const auto get_config = reinterpret_cast<openblas_get_config_fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const auto get_corename =
      reinterpret_cast<openblas_get_corename_fn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const auto get_num_threads =
      reinterpret_cast<openblas_get_num_threads_fn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const auto get_parallel =
      reinterpret_cast<openblas_get_parallel_fn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (!get_config || !get_corename) return;
  b.openblas = true;
  if (const char* c = get_config()) b.config = trim(c);
  if (const char* c = get_corename()) b.core = trim(c);
  if (get_num_threads) b.num_threads = get_num_threads();
  if (get_parallel) b.parallel = get_parallel();
  std::istringstream cfg(b.config);
  std::string first, second;
  cfg >> first >> second;
  if (first == "OpenBLAS") b.version = second;

  if (!b.coretype_env.empty() && lower(b.coretype_env) != lower(b.core))
    t.warnings.push_back("OPENBLAS_CORETYPE=" + b.coretype_env + " but OpenBLAS uses core '" + b.core +
                         "' (unknown core name, or a build without DYNAMIC_ARCH)");
#if defined(__x86_64__) || defined(__i386__)
  // Virtual machines often report a CPU that OpenBLAS does not recognise, so
  // it falls back to a pre-AVX2 kernel set: several times slower GEMMs.
  static const char* kOldCores[] = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom",
                                    "sandybridge", "katmai", "coppermine", "northwood", "banias",
                                    "opteron", "barcelona", "bobcat", "bulldozer", "piledriver",
                                    "steamroller", "athlon", "generic"};
  const std::string core = lower(b.core);
  const bool old = std::any_of(std::begin(kOldCores), std::end(kOldCores),
                               [&](const char* c) { return core == c; });
  __builtin_cpu_init();
  if (old && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl");
    t.warnings.push_back("OpenBLAS uses core '" + b.core + "' but the CPU supports AVX2" +
                         std::string(avx512 ? "/AVX-512" : "") + ": set OPENBLAS_CORETYPE=" +
                         (avx512 ? "SkylakeX" : "Haswell") + " for faster kernels");
  } else if ((core == "haswell" || core == "zen") && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    // (BERT-base f32 on Zen 5: 1.3x the forward with SkylakeX's kernels)
    t.warnings.push_back("OpenBLAS uses core '" + b.core +
                         "' (AVX2 kernels) but the CPU supports AVX-512: set OPENBLAS_CORETYPE=SkylakeX for faster "
                         "kernels");
  }
#endif
}

std::string cache_name(const CacheInfo& c) { return "L" + std::to_string(c.level) + c.type; }

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  std::uint64_t unit = 1;
  while (u < 5 && bytes >= unit * 1024) {
    unit *= 1024;
    ++u;
  }
  char buf[32];
  if (bytes % unit == 0)
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(bytes / unit), kUnits[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", double(bytes) / double(unit), kUnits[u]);
  return buf;
}

Topology probe_topology(ProbeDevices devices) {
  Topology t;
  t.devices_probed = devices == ProbeDevices::yes;
  probe_blas(t);
#ifdef HWLOC_VERSION
  t.hwloc_version = HWLOC_VERSION;  // the library built against
#else
  const unsigned v = hwloc_get_api_version();
  t.hwloc_version = std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + " (API)";
#endif

  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    t.error = "hwloc_topology_init failed";
    return t;
  }
  // The whole machine (PUs outside our cgroup included) and the important I/O devices.
  hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_io_types_filter(topo, t.devices_probed ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
                                                            : HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo) != 0) {
    t.error = "hwloc_topology_load failed";
    hwloc_topology_destroy(topo);
    return t;
  }
  t.ok = true;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) t.hostname = host;
  hwloc_obj_t root = hwloc_get_root_obj(topo);
  t.cores = count_inside(topo, root->cpuset, HWLOC_OBJ_CORE);
  t.pus = count_inside(topo, root->cpuset, HWLOC_OBJ_PU);

  // Usable PUs: allowed by the cgroup/cpuset, and in this process's affinity mask.
  hwloc_bitmap_t usable = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topo));
  hwloc_bitmap_t bound = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound))
    hwloc_bitmap_and(usable, usable, bound);
  hwloc_bitmap_and(usable, usable, root->cpuset);
  t.allowed_pus = std::max(0, hwloc_bitmap_weight(usable));
  // every PU with its core and StarPU's bind id: StarPU loads hwloc without the
  // disallowed PUs and binds worker k to PU number workers_bindid[k] of that
  // topology (logical order), so its ids count the cgroup-allowed PUs only
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
  int starpu_id = 0;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, o)) != nullptr;) {
    PuInfo pu;
    pu.os_index = static_cast<int>(o->os_index);
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, o);
    pu.core = core ? static_cast<int>(core->logical_index) : -1;
    if (hwloc_bitmap_isset(allowed, o->os_index)) pu.starpu_index = starpu_id++;
    pu.usable = hwloc_bitmap_isset(usable, o->os_index);
    if (pu.usable) t.cpuset.push_back(pu.os_index);
    t.pu_list.push_back(pu);
  }
  std::sort(t.cpuset.begin(), t.cpuset.end());
  hwloc_bitmap_free(bound);
  hwloc_bitmap_free(usable);

  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) != nullptr;) {
    t.numa.push_back({static_cast<int>(o->os_index), o->attr->numanode.local_memory});
    t.memory += o->attr->numanode.local_memory;
  }
  t.numa_nodes = static_cast<int>(t.numa.size());

  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, o)) != nullptr;) {
    PackageInfo p;
    p.index = o->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(o->os_index);
    p.cpu_model = info(o, "CPUModel");
    p.cores = count_inside(topo, o->cpuset, HWLOC_OBJ_CORE);
    p.pus = count_inside(topo, o->cpuset, HWLOC_OBJ_PU);
    p.caches = caches_inside(topo, o->cpuset);
    t.package_list.push_back(std::move(p));
  }
  t.packages = static_cast<int>(t.package_list.size());
  if (t.package_list.empty()) {
    // Some platforms expose no package object: describe the machine as one.
    PackageInfo p;
    p.index = -1;
    p.cpu_model = info(root, "CPUModel");
    p.cores = t.cores;
    p.pus = t.pus;
    p.caches = caches_inside(topo, root->cpuset);
    t.package_list.push_back(std::move(p));
  }
  t.cpu_model = t.package_list.front().cpu_model;

  if (t.devices_probed) probe_gpus(topo, t);
  hwloc_topology_destroy(topo);
  return t;
}

std::string format_topology(const Topology& t) {
  std::ostringstream s;
  if (!t.ok) {
    s << "Machine: unknown (" << t.error << ")\n";
  } else {
    s << "Machine: " << plural(t.packages, "package") << ", " << plural(t.numa_nodes, "NUMA node") << " ("
      << format_bytes(t.memory) << "), " << plural(t.cores, "core") << ", " << plural(t.pus, "PU");
    if (t.allowed_pus != t.pus) s << " (" << t.allowed_pus << " usable)";
    s << "\n";
    s << "  Usable PUs (cgroup and affinity of this process): " << (t.cpuset.empty() ? "none" : format_pu_list(t.cpuset))
      << "\n";
    if (t.numa.size() > 1)
      for (const auto& n : t.numa) s << "  NUMA " << n.index << ": " << format_bytes(n.memory) << "\n";
    for (const auto& p : t.package_list) {
      s << "  Package " << (p.index >= 0 ? std::to_string(p.index) : "?") << ": "
        << (p.cpu_model.empty() ? "unknown CPU" : p.cpu_model) << ", " << plural(p.cores, "core") << ", "
        << plural(p.pus, "PU") << "\n";
      if (!p.caches.empty()) {
        s << "    ";
        for (std::size_t i = 0; i < p.caches.size(); ++i) {
          const auto& c = p.caches[i];
          s << (i ? ", " : "") << cache_name(c) << " " << format_bytes(c.size);
          if (c.count > 1) s << " x" << c.count;
        }
        s << "\n";
      }
    }
  }
  if (!t.devices_probed) {
    s << "GPUs: not probed\n";
  } else if (t.gpus.empty()) {
    s << "GPUs: none\n";
  } else {
    s << "GPUs: " << t.gpus.size() << "\n";
    for (std::size_t i = 0; i < t.gpus.size(); ++i) {
      const auto& g = t.gpus[i];
      s << "  GPU " << i << ": " << g.name;
      if (g.memory) s << " (" << format_bytes(g.memory) << ")";
      if (!g.osdevs.empty()) {
        s << " [";
        for (std::size_t k = 0; k < g.osdevs.size(); ++k) s << (k ? ", " : "") << g.osdevs[k];
        s << "]";
      }
      if (!g.pci.empty()) s << " PCI " << g.pci;
      s << "\n";
    }
  }
  const auto& b = t.blas;
  if (!b.openblas) {
    s << "OpenBLAS: not linked";
  } else {
    s << "OpenBLAS: " << (b.version.empty() ? b.config : b.version) << ", core " << b.core << " (OPENBLAS_CORETYPE="
      << (b.coretype_env.empty() ? "unset" : b.coretype_env) << "), " << plural(b.num_threads, "thread");
    if (b.parallel == 0) s << ", sequential build";
    if (b.parallel == 1) s << ", pthreads";
    if (b.parallel == 2) s << ", OpenMP";
  }
  s << "\nhwloc: " << t.hwloc_version << "\n";
  for (const auto& w : t.warnings) s << "warning: " << w << "\n";
  return s.str();
}

nlohmann::json topology_json(const Topology& t) {
  using nlohmann::json;
  json j;
  j["ok"] = t.ok;
  if (!t.ok) j["error"] = t.error;
  j["hwloc_version"] = t.hwloc_version;
  j["packages"] = t.packages;
  j["numa_nodes"] = t.numa_nodes;
  j["cores"] = t.cores;
  j["pus"] = t.pus;
  j["allowed_pus"] = t.allowed_pus;
  j["cpuset"] = t.cpuset;
  j["hostname"] = t.hostname;
  j["pu_list"] = json::array();
  for (const auto& p : t.pu_list)
    j["pu_list"].push_back({{"pu", p.os_index}, {"core", p.core}, {"starpu_id", p.starpu_index}, {"usable", p.usable}});
  j["memory_bytes"] = t.memory;
  j["cpu_model"] = t.cpu_model;
  j["numa"] = json::array();
  for (const auto& n : t.numa) j["numa"].push_back({{"index", n.index}, {"memory_bytes", n.memory}});
  j["package_list"] = json::array();
  for (const auto& p : t.package_list) {
    json caches = json::array();
    for (const auto& c : p.caches)
      caches.push_back({{"name", cache_name(c)}, {"level", c.level}, {"size_bytes", c.size}, {"count", c.count}});
    j["package_list"].push_back({{"index", p.index},
                                 {"cpu_model", p.cpu_model},
                                 {"cores", p.cores},
                                 {"pus", p.pus},
                                 {"caches", caches}});
  }
  j["devices_probed"] = t.devices_probed;
  j["gpus"] = json::array();
  for (const auto& g : t.gpus)
    j["gpus"].push_back({{"name", g.name},
                         {"vendor", g.vendor},
                         {"osdevs", g.osdevs},
                         {"pci", g.pci},
                         {"memory_bytes", g.memory}});
  const auto& b = t.blas;
  j["blas"] = {{"openblas", b.openblas},   {"config", b.config},         {"version", b.version},
               {"core", b.core},           {"coretype_env", b.coretype_env}, {"num_threads", b.num_threads},
               {"parallel", b.parallel}};
  j["warnings"] = t.warnings;
  return j;
}

// ------------------------------------------------------------- --bind

std::vector<int> parse_pu_list(const std::string& text) {
  const std::string expect = "expected auto, none, cores or a list of PU numbers like 0,2,4-7, got '" + text + "'";
  if (text.empty()) throw BindError("--bind: " + expect);
  std::set<int> out;
  std::size_t pos = 0;
  auto number = [&](std::size_t& i) {
    const std::size_t b = i;
    long v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      v = v * 10 + (text[i] - '0');
      if (v > 1 << 20) throw BindError("--bind: PU number too large in '" + text + "'");
      ++i;
    }
    if (i == b) throw BindError("--bind: " + expect);
    return static_cast<int>(v);
  };
  while (true) {
    const int lo = number(pos);
    int hi = lo;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      hi = number(pos);
      if (hi < lo)
        throw BindError("--bind: range " + std::to_string(lo) + "-" + std::to_string(hi) + " goes backwards");
    }
    for (int v = lo; v <= hi; ++v)
      if (!out.insert(v).second) throw BindError("--bind: PU " + std::to_string(v) + " is listed twice");
    if (pos == text.size()) break;
    if (text[pos] != ',') throw BindError("--bind: " + expect);
    ++pos;
  }
  return {out.begin(), out.end()};
}

std::string format_pu_list(const std::vector<int>& pus) {
  std::vector<int> v(pus);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string s;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(v[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(v[j]);
    i = j + 1;
  }
  return s;
}

BindPlan plan_binding(const Topology& t, const std::string& spec, int ncpu, int max_cpus) {
  BindPlan p;
  p.spec = spec;
  p.cpuset = t.cpuset;
  p.mode = spec.empty() || spec == "auto" ? "auto" : spec == "none" || spec == "cores" ? spec : "list";
  const std::string usable = t.cpuset.empty() ? "none known" : format_pu_list(t.cpuset);
  std::vector<int> candidates;  // the PUs the workers go to, in order
  if (p.mode == "list") {
    const std::vector<int> listed = parse_pu_list(spec);
    if (t.cpuset.empty())
      throw BindError("--bind: the usable PUs are unknown (" + (t.error.empty() ? "hwloc found none" : t.error) +
                      "); use --bind auto or none");
    for (int pu : listed)
      if (!std::binary_search(t.cpuset.begin(), t.cpuset.end(), pu))
        throw BindError("--bind: PU " + std::to_string(pu) + " is not in this process's cpuset (usable PUs: " + usable + ")");
    candidates = listed;
  } else if (p.mode == "cores") {
    std::set<int> seen;  // cores with a worker already
    for (const auto& pu : t.pu_list)  // logical order: a core's PUs are consecutive
      if (pu.usable && (pu.core < 0 || seen.insert(pu.core).second)) candidates.push_back(pu.os_index);
  } else {
    candidates = t.cpuset;
  }
  const int have = static_cast<int>(candidates.size());
  int n = ncpu > 0 ? ncpu : have;
  const char* what = p.mode == "cores" ? " cores" : " PUs";
  if (ncpu > 0 && have > 0 && ncpu > have)
    p.warnings.push_back("--ncpu " + std::to_string(ncpu) + " asks for more CPU workers than the " + std::to_string(have) +
                         what + " --bind " + (spec.empty() ? "auto" : spec) + " gives (usable PUs: " + usable +
                         "): workers will share PUs");
  if (max_cpus > 0 && n > max_cpus) {
    if (ncpu > 0)
      p.warnings.push_back("--ncpu " + std::to_string(ncpu) + " exceeds this StarPU build's limit of " +
                           std::to_string(max_cpus) + " CPU workers; using " + std::to_string(max_cpus));
    else
      p.warnings.push_back("this StarPU build caps CPU workers at " + std::to_string(max_cpus) + " but " +
                           std::to_string(have) + what + " are usable (rebuild StarPU with --enable-maxcpus=" +
                           std::to_string(have) + " to use them all)");
    n = max_cpus;
  }
  p.ncpu = n;
  if (p.mode == "none" || candidates.empty()) return p;  // no explicit ids: StarPU's own choice (or none)
  for (int i = 0; i < n; ++i) {
    const int os = candidates[std::size_t(i) % candidates.size()];
    p.pus.push_back(os);
    const auto it = std::find_if(t.pu_list.begin(), t.pu_list.end(), [&](const PuInfo& q) { return q.os_index == os; });
    p.starpu_ids.push_back(it != t.pu_list.end() ? it->starpu_index : -1);
  }
  return p;
}

int progress_thread_bindid(const BindPlan& p, const Topology& t) {
  if (p.mode == "none" || p.pus.empty()) return -1;
  for (int os : p.cpuset) {
    if (std::find(p.pus.begin(), p.pus.end(), os) != p.pus.end()) continue;
    const auto it = std::find_if(t.pu_list.begin(), t.pu_list.end(), [&](const PuInfo& q) { return q.os_index == os; });
    if (it != t.pu_list.end() && it->starpu_index >= 0) return it->starpu_index;
  }
  return -1;
}

std::string format_bind_plan(const BindPlan& p) {
  std::ostringstream s;
  s << p.mode << ": " << plural(p.ncpu, "CPU worker");
  if (p.mode == "none")
    s << ", not bound (they run anywhere in " << (p.cpuset.empty() ? "the machine" : "PUs " + format_pu_list(p.cpuset))
      << ")";
  else if (p.pus.empty())
    s << ", StarPU's default binding";
  else {
    s << " on PU" << (p.pus.size() == 1 ? " " : "s ");
    for (std::size_t i = 0; i < p.pus.size(); ++i) s << (i ? "," : "") << p.pus[i];
  }
  return s.str();
}

nlohmann::json bind_plan_json(const BindPlan& p) {
  return {{"mode", p.mode}, {"spec", p.spec}, {"cpuset", p.cpuset}, {"ncpu", p.ncpu},
          {"pus", p.pus},   {"starpu_ids", p.starpu_ids}, {"warnings", p.warnings}};
}

nlohmann::json placement_json(const Placement& p) {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : p.workers)
    workers.push_back({{"name", w.name}, {"pu", w.pu}, {"core", w.core}, {"affinity", w.affinity}});
  return {{"host", p.host}, {"bind", p.bind}, {"bind_spec", p.spec}, {"cpuset", p.cpuset}, {"workers", workers}};
}

Placement placement_from_json(const nlohmann::json& j) {
  Placement p;
  if (!j.is_object()) return p;
  p.host = j.value("host", "");
  p.bind = j.value("bind", "");
  p.spec = j.value("bind_spec", "");
  p.cpuset = j.value("cpuset", std::vector<int>{});
  if (j.contains("workers"))
    for (const auto& w : j["workers"])
      p.workers.push_back({w.value("name", ""), w.value("pu", -1), w.value("core", -1),
                           w.value("affinity", std::vector<int>{})});
  return p;
}

std::vector<std::string> rank_overlap_warnings(const std::vector<Placement>& ranks) {
  std::vector<std::string> out;
  for (std::size_t a = 0; a < ranks.size(); ++a)
    for (std::size_t b = a + 1; b < ranks.size(); ++b) {
      if (ranks[a].host != ranks[b].host) continue;
      std::vector<int> shared;
      std::set_intersection(ranks[a].cpuset.begin(), ranks[a].cpuset.end(), ranks[b].cpuset.begin(),
                            ranks[b].cpuset.end(), std::back_inserter(shared));
      if (shared.empty()) continue;
      out.push_back("MPI ranks " + std::to_string(a) + " and " + std::to_string(b) + " on node " +
                    (ranks[a].host.empty() ? "?" : ranks[a].host) + " share PU" + (shared.size() == 1 ? " " : "s ") +
                    format_pu_list(shared) + " (cpusets " + format_pu_list(ranks[a].cpuset) + " and " +
                    format_pu_list(ranks[b].cpuset) +
                    "): their workers compete for the same cores; bind each rank to its own cores "
                    "(mpirun --bind-to core, srun --cpu-bind=cores)");
    }
  return out;
}

void merge_rank_placements(const std::vector<nlohmann::json>& rank_results, nlohmann::json& per_rank,
                           std::vector<std::string>& warnings) {
  std::vector<Placement> all;
  for (std::size_t r = 0; r < rank_results.size(); ++r) {
    const nlohmann::json pj = rank_results[r].value("placement", nlohmann::json::object());
    if (r < per_rank.size()) per_rank[r]["placement"] = pj;
    all.push_back(placement_from_json(pj));
  }
  for (auto& w : rank_overlap_warnings(all))
    if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(std::move(w));
}

}  // namespace ymlopt
