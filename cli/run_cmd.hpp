// `ymlopt run`: its options, and the run itself with hooks through which
// other commands (generate) watch a run of their workflow.
//
//   RunArgs a;
//   if (!parse_run_args(args, a)) return 0;   // --help
//   return run_command(a, {});
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "workflow_args.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {

// The options of `ymlopt run`.
struct RunArgs {
  WorkflowArgs wf;
  std::string out, backend = "starpu", sched = "lws", starpu_home, checkpoint_mode, resume;
  int ncpu = 0;
  std::string bind;  // --bind
  int nopencl = 0;
  bool opencl_on_cpus = false;
  int ncuda = -1;
  std::string where = "any";
  bool quiet = false, verbose = false, dry_run = false, no_history = false;
  int warmup = 0;  // --warmup
  std::string distribute;  // --distribute (cli/distribute.hpp)
};

/// What a command running a workflow through run_command watches.
struct RunHooks {
  /// At each iteration boundary of a runtime loop (ExecOptions::on_iteration).
  /// The DAG and store are the run's; read data under s.acquire / s.release.
  std::function<void(const Dag& dag, const DataStore& store, std::int32_t region, std::int64_t iteration, Session& s)>
      on_iteration;
  /// After the run, before the report: the compiled DAG, its data and the result.
  std::function<void(const Dag& dag, const DataStore& store, const ExecResult& r)> after_run;
};

// Parses and checks the options of `ymlopt run` (--resume: completed from the
// run directory's recorded invocation); false on --help.
bool parse_run_args(const std::vector<std::string>& args, RunArgs& a);

/// Compiles and runs a.wf (or prints its footprint with --dry-run), writes the
/// run directory and report; returns the exit code (0, 1 failed run or bad
/// workflow, 2 usage).
int run_command(RunArgs& a, const RunHooks& hooks);

/// `ymlopt run ARGS...`.
int cmd_run(const std::vector<std::string>& args);

/// "12.3 MiB".
std::string mib(double bytes);

}  // namespace ymlopt
