#pragma once
#include <chrono>
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

/// Where the wall time of `ymlopt run` goes, phase by phase from the start of
/// the command (report.json "phases_us"; the summary's "wall" line). The run
/// phase is split into the runtime's start and stop, its set-up, the warm-up
/// runs and the makespan.
///   PhaseClock clock;  ...  clock.mark("compile");  ...  clock.json(totals)
class PhaseClock {
 public:
  /// Ends phase `phase` now (it began at the previous mark, or at construction).
  void mark(const char* phase);
  double total_us() const;
  nlohmann::json json(const RunTotals& t) const;
  /// "wall 651.2 ms: probe 4.1, compile 21.0, ..., report 6.3 ms (...)" (`j`: json()).
  std::string line(const nlohmann::json& j) const;

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
  nlohmann::json phases_ = nlohmann::json::object();
};

/// report.json: per task (id, name, component, file, line, worker, start/end µs,
/// flops, bytes, results) and totals. `task_ranks` (MPI runs): the rank that
/// ran each task, reported as the task's "rank" (null: none).
nlohmann::json make_report(const Dag& dag, const ExecResult& r, const RunTotals& t, const nlohmann::json& run_info,
                           const std::vector<std::int32_t>* task_ranks = nullptr);
/// trace.json's text, Chrome trace format (Perfetto): one lane per worker (MPI
/// runs: one per RANK:WORKER, the task's rank in its args).
/// What the caches of packed weights (f32 and quantized panels) may keep in this process: their budgets.
std::int64_t kept_panel_budget();

std::string trace_json(const Dag& dag, const ExecResult& r, const std::vector<std::int32_t>* task_ranks = nullptr);
/// Per-component table: count, total time, GFLOP/s; and task results.
std::string summary_table(const Dag& dag, const ExecResult& r, const RunTotals& t);
/// Writes `text` to `path` atomically (temporary file, then rename).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ymlopt
