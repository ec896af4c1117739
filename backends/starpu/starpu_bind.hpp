// --bind for the StarPU and StarPU-MPI backends: where the CPU workers go.
//
// StarPU 1.3 ignores the process's affinity mask: under `taskset -c 1` or an
// MPI rank bound by mpirun/srun, its workers still bind to PUs 0, 1, ... of
// the whole machine (ranks of one node pile onto the same cores). The binding
// is therefore always explicit (starpu_conf::workers_bindid from plan_binding
// over the process's cpuset), or off (--bind none: STARPU_WORKERS_NOBIND).
//
//   StarpuBinding bind;
//   starpu_conf conf; starpu_conf_init(&conf);
//   if (!bind.configure(conf, opts, result)) return;   // result.error says why
//   starpu_init(&conf);
//   bind.record(result);                               // last_starpu_placement() now tells where
#pragma once

#include <optional>
#include <string>

#include "ymlopt/scheduler/topology.hpp"
#include "ymlopt/scheduler/executor.hpp"

struct starpu_conf;

namespace ymlopt {

class StarpuBinding {
 public:
  StarpuBinding() = default;
  StarpuBinding(const StarpuBinding&) = delete;
  StarpuBinding& operator=(const StarpuBinding&) = delete;
  ~StarpuBinding();

  /// Before starpu_init: sets conf.ncpus and the workers' bind ids from
  /// opts.bind and opts.ncpu (plan_binding over this process's cpuset); the
  /// plan's warnings go to r.warnings. False with r.error set when --bind is invalid.
  bool configure(starpu_conf& conf, const ExecOptions& opts, ExecResult& r);

  /// After starpu_init: runs one tiny task on every CPU worker to see the CPUs
  /// its thread may use, reads StarPU's bind ids, and stores the placement
  /// (last_starpu_placement). Restores the environment configure() changed.
  void record();

  const BindPlan& plan() const { return plan_; }
  const Topology& topology() const { return topo_; }

 private:
  void restore_env();
  Topology topo_;
  BindPlan plan_;
  std::optional<std::string> saved_nobind_;  // STARPU_WORKERS_NOBIND before configure (nullopt: unset)
  bool env_changed_ = false;
};

/// While alive, hwloc topologies loaded in this process (ymlopt's probe and
/// starpu_init's) skip I/O discovery (HWLOC_COMPONENTS=-pci,-linuxio): PCI
/// and OS devices are of no use to CPU workers, and reading every PCI
/// device's configuration was most of starpu_init (30-85 ms -> ~6 ms). Left
/// alone when the user set HWLOC_COMPONENTS, or when StarPU has CUDA (it
/// places GPU workers by their PCI locality). Restores the variable.
///
///   { const ScopedCpuOnlyHwloc cpu_only; bind.configure(conf, opts, r); starpu_init(&conf); }
class ScopedCpuOnlyHwloc {
 public:
  ScopedCpuOnlyHwloc();
  ~ScopedCpuOnlyHwloc();
  ScopedCpuOnlyHwloc(const ScopedCpuOnlyHwloc&) = delete;
  ScopedCpuOnlyHwloc& operator=(const ScopedCpuOnlyHwloc&) = delete;

 private:
  bool set_ = false;
};

/// What a default run would do in this process: plan_binding(t, "auto", 0, STARPU_MAXCPUS).
BindPlan default_starpu_binding(const Topology& t);

/// Where the workers of the last StarPU started in this process went (StarPU
/// is one per process, so this is process state; empty before any run).
Placement last_starpu_placement();

}  // namespace ymlopt
