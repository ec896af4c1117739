#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ymlopt/engine/data_store.hpp"
#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// What happened to one task: where and when it ran, and its scalar results.
struct TaskRecord {
  std::int32_t worker = -1;
  double start_us = 0, end_us = 0;
  bool ran = false;
  std::vector<std::pair<std::string, double>> results;
};

/// Options common to every backend.
struct ExecOptions {
  std::string run_dir;
  std::string sched = "lws";
  int ncpu = 0;                // 0: all the runtime allows
  std::string starpu_home;     // empty: RUN_DIR/starpu
  bool verbose = false;
  /// Called by the sequential backend before each task with its port views
  /// (calibration capture: the optimizer records linear layers' inputs).
  std::function<void(const TaskNode&, std::span<const TensorView>)> before_task;
};

/// Live counters for the progress line (updated by workers, read by the CLI).
struct Progress {
  alignas(64) std::atomic<std::int64_t> started{0};
  alignas(64) std::atomic<std::int64_t> done{0};
  std::int64_t total = 0;
};

/// Outcome of executing a DAG.
struct ExecResult {
  bool ok = false;
  std::string error;             // first failure, already formatted
  std::int32_t failed_task = -1;
  std::vector<TaskRecord> records;  // indexed by task id
  std::vector<std::string> workers; // worker names, indexed by TaskRecord::worker
  double makespan_us = 0;
  std::string scheduler;
  std::string runtime;           // e.g. "StarPU 1.3.10"
  std::vector<std::string> warnings;
};

/// A backend executes a compiled DAG over a DataStore.
///
///   auto ex = make_sequential_executor();
///   ExecResult r = ex->execute(dag, store, opts, progress);
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  virtual ExecResult execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) = 0;
};

/// Shared by backends: runs one task's CPU kernel on `views` (its ports), times
/// it, captures results, and turns an exception into a cancellation of the run.
class TaskRunner {
 public:
  TaskRunner(const Dag& dag, const ExecOptions& opts, Progress& progress);
  /// Writes the task's port views (shapes, dtypes; data pointers null) to
  /// out[0 .. t.bindings.size()).
  void port_templates(const TaskNode& t, TensorView* out) const;
  /// Runs the kernel; returns false if it threw (or the run was cancelled before).
  bool run(const TaskNode& t, std::span<const TensorView> views, std::int32_t worker);
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  void finish(ExecResult& r);
  double now_us() const;

 private:
  const Dag& dag_;
  const ExecOptions& opts_;
  Progress& progress_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<TaskRecord> records_;
  std::atomic<bool> cancelled_{false};
  std::atomic<std::int32_t> failed_{-1};
  std::string error_;
};


}  // namespace ymlopt
