#pragma once
// The performance model: predicts a compiled workflow's time and memory before
// running it, from the components' cost functions (flops, bytes), the machine's
// measured rates (`ymlopt calibrate`) and a list-scheduling simulation of the DAG.
//
//   Calibration cal = load_calibration_or_builtin();      // ~/.cache/ymlopt/calibration-*.json
//   Prediction p = predict(dag, cal, /*workers=*/2);
//   std::cout << p.makespan_s * 1e3 << " ms, " << p.total_bytes() << " bytes\n";
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// One measured kernel rate at a product shape y[m, n] = x[m, k] · W (flops as
/// the component's cost function counts them, e.g. 2·m·nnz for CSR).
struct RatePoint {
  std::int64_t m = 0, n = 0, k = 0;
  double gflops = 0;
};

/// A component's measured rates on a representative task (from `ymlopt calibrate`).
struct ComponentRate {
  double gflops = 0;      // cost.flops / time
  double gbs = 0;         // cost.bytes / time
  double latency_us = 0;  // fixed time per task (io.save: create, fsync, rename)
};

/// The machine's measured figures, stored per machine by `ymlopt calibrate`.
///
///   Calibration c = builtin_calibration();          // rough defaults, calibrated == false
///   nlohmann::json j = to_json(c);  Calibration d = calibration_from_json(j);
struct Calibration {
  bool calibrated = false;  // false: built-in estimates
  std::string host, cpu_model, blas_core, created;
  int hardware_threads = 1;
  int starpu_workers = 1;  // CPU workers StarPU starts with --ncpu 0
  /// Kernel rates by kernel name: "sgemm", "dgemm" (OpenBLAS, 1 thread), "int8", "int4"
  /// (quant::linear), "bf16" (quant::linear_bf16), "csr" (90% sparse), "nm24",
  /// "bsr" (sparse::linear).
  std::map<std::string, std::vector<RatePoint>> kernels;
  /// By component name, and by the names of epilogues (TaskRate::epilogue) that
  /// components price apart.
  std::map<std::string, ComponentRate> components;
  double read_gbs = 10;   // streaming sum, 1 thread
  double copy_gbs = 5;    // memcpy (bytes read + written), 1 thread
  double mapped_gbs = 2;  // first read of a freshly mapped file in the page cache (page faults included)
  std::map<std::string, double> task_overhead_us = {{"sequential", 5}, {"starpu", 30}};  // per task, by backend
};

nlohmann::json to_json(const Calibration& c);
/// Throws std::runtime_error on a malformed document.
Calibration calibration_from_json(const nlohmann::json& j);
/// Rough figures for an uncalibrated machine (calibrated == false).
Calibration builtin_calibration();

/// $XDG_CACHE_HOME/ymlopt, else $HOME/.cache/ymlopt; empty if neither is set.
std::string ymlopt_cache_dir();
/// "model name" of /proc/cpuinfo ("unknown" if absent).
std::string cpu_model_name();
/// <cache dir>/calibration-<hostname>-<hash of the CPU model>.json ("" without a cache dir).
std::string calibration_path();
/// The stored calibration of this machine, if any (a malformed file counts as none).
std::optional<Calibration> load_calibration(const std::string& path = calibration_path());

/// How one task is priced (TaskRate, in the SDK): its component's `rate` hook
/// on the task's port shapes and args; without one (or when it throws), at the
/// component's own calibrated rates.
///
///   TaskRate r = task_rate(task, dag);   // nn.linear format=int8 -> {kernel, "int8", ...}
TaskRate task_rate(const TaskNode& t, const Dag& dag);

/// The rate (GFLOP/s) of kernel `name` nearest in log-shape to (m, n, k); 0 if
/// the calibration has no point for it.
double kernel_gflops(const Calibration& c, const std::string& name, std::int64_t m, std::int64_t n, std::int64_t k);

/// Predicted seconds of one task's kernel (no per-task overhead, no first touch of mapped parameters):
/// max(flops / rate, bytes / bandwidth), rate chosen by task_rate (plus a
/// component's fixed latency, and the task's epilogue at its calibrated rate).
double predict_task_seconds(const TaskNode& t, const Dag& dag, const Calibration& c);

/// Result of a list-scheduling simulation.
struct Schedule {
  double makespan = 0;
  double critical_path = 0;  // longest chain of task times (a lower bound of makespan)
  std::vector<double> start, finish;  // by task id
};

/// Greedy list scheduling on `workers` identical workers: tasks become ready when
/// all their preds (TaskNode::preds) finish; a free worker takes the ready task
/// that became ready first (ties: lowest id), as StarPU's eager/lws policies do.
/// `seconds[i]` is task i's duration.
///
///   Schedule s = simulate_schedule(dag, {1, 2, 3}, 2);
Schedule simulate_schedule(const Dag& dag, const std::vector<double>& seconds, int workers);

/// Measured task times by footprint, per machine: StarPU's history-based model
/// (a task of the same component, args and port shapes takes what it took on
/// this machine before). Kept in <cache dir>/history-<host>-<cpu hash>.json,
/// the last kHistorySamples times per footprint.
///
///   History h = load_history();
///   Prediction p = predict(dag, cal, 2, "starpu", &h);   // before the run
///   record_history(h, dag, seconds_by_task);  save_history(h);   // after it
struct History {
  static constexpr std::size_t kHistorySamples = 16;
  std::map<std::string, std::vector<double>> seconds;  // footprint -> samples (kernel seconds)
  /// A StarPU-MPI rank's peak RSS beyond its data (held, received copies,
  /// temporaries): the process itself, its runtimes and buffers. Samples in bytes.
  std::vector<double> rank_overhead_bytes;
  /// Median of a footprint's samples; -1 when it has none.
  double median(const std::string& footprint) const;
  /// Median of rank_overhead_bytes; -1 when there is none.
  double rank_overhead() const;
};
/// "component|arg=value,...|dtype[shape];..." of a task: what its time depends on.
std::string task_footprint(const TaskNode& t, const Dag& dag);
/// <cache dir>/history-<hostname>-<hash of the CPU model>.json ("" without a cache dir).
std::string history_path();
/// The stored history (empty when missing or malformed).
History load_history(const std::string& path = history_path());
/// Writes atomically (temp file + rename); does nothing for an empty path.
void save_history(const History& h, const std::string& path = history_path());
/// Adds one run's task times (seconds by task id; entries < 0 are skipped).
void record_history(History& h, const Dag& dag, const std::vector<double>& seconds);

/// What the model predicts for one run of a DAG.
struct Prediction {
  bool calibrated = false;
  /// The DAG has runtime loops or co-methods (Dag::dynamic()): the figures are
  /// for one iteration of each loop and every co-method to its end, not a run.
  bool one_iteration = false;
  std::string backend;
  int workers = 1;
  double makespan_s = 0;
  double critical_path_s = 0;
  double work_s = 0;      // sum of the task times (kernels + overhead)
  double overhead_s = 0;  // of which per-task overhead
  double first_touch_s = 0;  // and first reads of mapped parameters
  /// By component: kernel time plus first touch of mapped parameters.
  std::vector<double> task_s;                       // by task id, overhead included
  std::map<std::string, double> seconds_by_component;
  double flops = 0;
  /// DataStore's memory, exactly: parameters (src= data, mapped or copied) and
  /// every other declared tensor (padded rows, 64-byte rounded).
  std::int64_t parameter_bytes = 0, activation_bytes = 0;
  /// Temporaries: the largest sum of cost.extra_bytes of tasks running at once in the simulation.
  std::int64_t workspace_bytes = 0;
  /// Copies kernels keep for the run (Cost::kept_ports), once per content id.
  std::int64_t kept_bytes = 0;
  std::int64_t total_bytes() const { return parameter_bytes + activation_bytes + workspace_bytes + kept_bytes; }
  /// History: tasks priced by their measured footprint; the others by the rates
  /// times rate_scale (sum of measured / sum of rate-priced over the matched tasks:
  /// how this machine runs today against its calibration; 1 without matches).
  std::int64_t history_tasks = 0;
  double rate_scale = 1;
};

/// Predicts time and memory of running `dag` with `workers` workers on `backend`
/// ("sequential" forces 1 worker, "starpu"). The first task reading each tile of a
/// src= tensor also pays its bytes at mapped_gbs (DataStore maps files lazily: the
/// page faults happen in the tasks). With a history, tasks it knows take their
/// measured median and the others are scaled (Prediction::rate_scale).
///
///   Prediction p = predict(dag, cal, 2);
Prediction predict(const Dag& dag, const Calibration& c, int workers, const std::string& backend = "starpu",
                   const History* history = nullptr);

nlohmann::json to_json(const Prediction& p);

}  // namespace ymlopt
