#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ymlopt/engine/ir.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {

/// Totals derived from a run's task records.
struct RunTotals {
  double makespan_us = 0;
  double setup_us = 0;  // the backend's set-up before submission (not in makespan_us)
  std::vector<double> warmup_us;  // run --warmup: the makespans of the runs before this one
  double critical_path_us = 0;
  double sum_task_us = 0;
  double flops = 0;
  long peak_rss_bytes = 0;
  std::size_t tasks_run = 0;
  std::size_t tasks_restored = 0;  // resumed run: taken from the checkpoint, not run
  double blas_peak_gflops = 0;  // the machine's single-call sgemm rate (0: unknown)
};

RunTotals compute_totals(const Dag& dag, const ExecResult& r);
/// report.json: per task (id, name, component, file, line, worker, start/end µs,
/// flops, bytes, results) and totals. `task_ranks` (MPI runs): the rank that
/// ran each task, reported as the task's "rank" (null: none).
nlohmann::json make_report(const Dag& dag, const ExecResult& r, const RunTotals& t, const nlohmann::json& run_info,
                           const std::vector<std::int32_t>* task_ranks = nullptr);
/// Chrome trace format (Perfetto): one lane per worker (MPI runs: one per
/// RANK:WORKER, the task's rank in its args).
nlohmann::json make_trace(const Dag& dag, const ExecResult& r, const std::vector<std::int32_t>* task_ranks = nullptr);
/// Per-component table: count, total time, GFLOP/s; and task results.
std::string summary_table(const Dag& dag, const ExecResult& r, const RunTotals& t);
/// Writes `text` to `path` atomically (temporary file, then rename).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ymlopt
