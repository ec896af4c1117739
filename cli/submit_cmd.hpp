// Batch submission: `ymlopt submit` writes and submits a Slurm batch script that runs a
// workflow with srun; `ymlopt status` reports what became of it.
#pragma once
#include <string>
#include <vector>

namespace ymlopt {

/// What `ymlopt submit` puts into the batch script.
///
///   SlurmJob j{.workflow = "/abs/wf.xml", .run_dir = "/abs/runs/x", .ymlopt = "/abs/bin/ymlopt",
///              .nodes = 1, .ntasks_per_node = 2, .cpus_per_task = 1, .time = "00:10:00"};
///   j.backend = "starpu-mpi"; j.mpi = "pmix";
///   std::string script = batch_script(j);
struct SlurmJob {
  std::string name;      // job name (the workflow's name)
  std::string workflow;  // absolute path of the workflow file
  std::string run_dir;   // absolute run directory (Slurm output files, report, per-rank STARPU_HOME)
  std::string ymlopt;    // absolute path of the ymlopt executable the job runs
  std::string workdir;   // absolute working directory of the job (the submitter's)
  int nodes = 1;
  int ntasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;           // 0: no --gpus-per-node line
  std::string time;                // [D-]HH:MM:SS, already checked
  std::string partition;           // empty: the cluster's default
  std::string backend = "starpu";  // passed to `ymlopt run --backend`
  std::string mpi;                 // srun --mpi plugin; empty: none (one process)
  std::vector<std::string> sets;   // NAME=VALUE, passed as --set
  std::vector<std::string> plugins;
  bool checkpoint = false;   // run --checkpoint tasks; a requeued job (preemption, node failure) resumes
  std::string submitted_at;  // UTC, ISO 8601, written into the script's header
};

/// Slurm's time limit in seconds from `[D-]HH:MM:SS` (hours may exceed 23); -1 when the text
/// is not in that form or minutes/seconds are >= 60.
///   parse_slurm_time("01:30:00") == 5400; parse_slurm_time("1-00:00:00") == 86400
long parse_slurm_time(const std::string& text);

/// The MPI plugin srun should use, from the output of `srun --mpi=list` (Slurm 22+ prints
/// "MPI plugin types are..." then tab-indented names; older ones print "srun: NAME" lines on
/// stderr): "pmix" when listed, else the newest "pmix_vN", else "pmi2"; empty when none.
std::string choose_mpi_plugin(const std::string& srun_mpi_list);

/// The batch script: #SBATCH lines, thread settings, then srun running `ymlopt run` with a
/// STARPU_HOME per rank (RUN_DIR/starpu.$SLURM_PROCID).
std::string batch_script(const SlurmJob& job);

/// `ymlopt submit WF.xml --nodes N --ntasks-per-node T --cpus-per-task C --time HH:MM:SS
/// [--partition P] [--gpus-per-node G] [--set k=v]... [--out RUN_DIR] [--backend B] [--dry-run]`:
/// compiles the workflow (exit 1 with diagnostics when it is wrong), writes RUN_DIR/job.sbatch,
/// submits it with `sbatch --parsable`, prints the job id and records it in RUN_DIR/submit.json.
/// --dry-run prints the script and creates and submits nothing. Bad options or no sbatch: exit 2.
///
///   ymlopt submit workflows/linalg/tiled_gemm.xml --nodes 1 --ntasks-per-node 2
///       --cpus-per-task 1 --time 00:10:00 --set n=512 --out runs/gemm
int cmd_submit(const std::vector<std::string>& args);

/// `ymlopt status RUN_DIR [--json]`: the state of the job recorded in RUN_DIR/submit.json
/// (squeue, then sacct, then `scontrol show job`, then the run's report.json): PENDING,
/// RUNNING, COMPLETED, FAILED (with the exit code), CANCELLED, ...; the Slurm output file; the
/// makespan once report.json exists. Exit 0 when the state is known, 1 for a failed job (FAILED,
/// TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...) or an unknown state, 2 when RUN_DIR is not a submitted
/// run directory.
///
///   ymlopt status runs/gemm   # -> "job 12: COMPLETED" ...
int cmd_status(const std::vector<std::string>& args);

}  // namespace ymlopt
