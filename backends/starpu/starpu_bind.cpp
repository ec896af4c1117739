#include "starpu_bind.hpp"

#include <sched.h>
#include <starpu.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace ymlopt {
namespace {

std::mutex g_mu;
Placement g_last;  // guarded by g_mu

// The CPUs the calling thread may run on.
std::vector<int> thread_affinity() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

void probe_affinity(void* /*buffers*/[], void* arg) {
  auto* slots = static_cast<std::vector<std::vector<int>>*>(arg);
  const int w = starpu_worker_get_id();
  if (w >= 0 && size_t(w) < slots->size()) (*slots)[size_t(w)] = thread_affinity();
}

}  // namespace

StarpuBinding::~StarpuBinding() { restore_env(); }

void StarpuBinding::restore_env() {
  if (!env_changed_) return;
  if (saved_nobind_) setenv("STARPU_WORKERS_NOBIND", saved_nobind_->c_str(), 1);
  else unsetenv("STARPU_WORKERS_NOBIND");
  env_changed_ = false;
}

bool StarpuBinding::configure(starpu_conf& conf, const ExecOptions& opts, ExecResult& r) {
  topo_ = probe_topology();
  try {
    plan_ = plan_binding(topo_, opts.bind, opts.ncpu, STARPU_MAXCPUS);
  } catch (const BindError& e) {
    r.error = e.what();
    return false;
  }
  r.warnings.insert(r.warnings.end(), plan_.warnings.begin(), plan_.warnings.end());
  if (plan_.ncpu > 0) conf.ncpus = plan_.ncpu;
  if (plan_.mode == "none") {
    const char* old = std::getenv("STARPU_WORKERS_NOBIND");
    saved_nobind_ = old ? std::optional<std::string>(old) : std::nullopt;
    setenv("STARPU_WORKERS_NOBIND", "1", 1);  // StarPU 1.3 has no starpu_conf field for it
    env_changed_ = true;
  } else if (!plan_.starpu_ids.empty() &&
             std::none_of(plan_.starpu_ids.begin(), plan_.starpu_ids.end(), [](int id) { return id < 0; })) {
    conf.use_explicit_workers_bindid = 1;
    for (size_t i = 0; i < plan_.starpu_ids.size() && i < STARPU_NMAXWORKERS; ++i)
      conf.workers_bindid[i] = unsigned(plan_.starpu_ids[i]);
  }
  return true;
}

void StarpuBinding::record() {
  Placement p;
  p.host = topo_.hostname;
  p.bind = plan_.mode;
  p.spec = plan_.spec.empty() ? "auto" : plan_.spec;
  p.cpuset = topo_.cpuset;
  const unsigned n = starpu_worker_get_count();
  std::vector<std::vector<int>> affinity(n);
  starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.where = STARPU_CPU;
  cl.cpu_funcs[0] = probe_affinity;
  cl.nbuffers = 0;
  cl.name = "ymlopt.bind_probe";
  for (unsigned w = 0; w < n; ++w) {
    if (starpu_worker_get_type(int(w)) != STARPU_CPU_WORKER) continue;
    starpu_task* t = starpu_task_create();
    t->cl = &cl;
    t->cl_arg = &affinity;
    t->execute_on_a_specific_worker = 1;
    t->workerid = w;
    t->synchronous = 1;
    if (starpu_task_submit(t) != 0) starpu_task_destroy(t);  // synchronous: returns once it ran (StarPU destroys it)
  }
  for (unsigned w = 0; w < n; ++w) {
    WorkerPlacement wp;
    char name[128];
    starpu_worker_get_name(int(w), name, sizeof name);
    wp.name = name;
    wp.affinity = affinity[w];
    const int id = starpu_worker_get_bindid(int(w));
    // STARPU_WORKERS_NOBIND (--bind none, or set by the user): ids are nominal
    const char* nobind = std::getenv("STARPU_WORKERS_NOBIND");
    const bool bound = !(nobind && std::atoi(nobind) > 0);
    if (bound && id >= 0)
      for (const auto& pu : topo_.pu_list)
        if (pu.starpu_index == id) wp.pu = pu.os_index, wp.core = pu.core;
    p.workers.push_back(std::move(wp));
  }
  restore_env();
  std::lock_guard<std::mutex> lock(g_mu);
  g_last = std::move(p);
}

ScopedCpuOnlyHwloc::ScopedCpuOnlyHwloc() {
#ifndef STARPU_USE_CUDA
  if (std::getenv("HWLOC_COMPONENTS")) return;
  setenv("HWLOC_COMPONENTS", "-pci,-linuxio", 1);
  set_ = true;
#endif
}

ScopedCpuOnlyHwloc::~ScopedCpuOnlyHwloc() {
  if (set_) unsetenv("HWLOC_COMPONENTS");
}

BindPlan default_starpu_binding(const Topology& t) { return plan_binding(t, "auto", 0, STARPU_MAXCPUS); }

Placement last_starpu_placement() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last;
}

}  // namespace ymlopt
