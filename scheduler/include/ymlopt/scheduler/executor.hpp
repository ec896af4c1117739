#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ymlopt/engine/analysis.hpp"
#include "ymlopt/engine/data_store.hpp"
#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// What happened to one task: where and when it ran, and its scalar results.
struct TaskRecord {
  std::int32_t task = -1;       // the task's id
  std::int32_t iteration = 0;   // 0, then 1, 2, ... when a runtime loop runs it again
  std::int32_t worker = -1;
  double start_us = 0, end_us = 0;
  bool ran = false;
  bool restored = false;        // resumed run: outputs taken from the checkpoint, kernel not run
  std::vector<std::pair<std::string, double>> results;
};

class Checkpoint;

/// Options common to every backend.
struct ExecOptions {
  std::string run_dir;
  std::string sched = "lws";
  int ncpu = 0;                // 0: all the runtime allows
  std::string bind;            // --bind: worker placement on cores ("" = the backend's default)
  std::string starpu_home;     // empty: RUN_DIR/starpu
  bool verbose = false;
  /// Called by the sequential backend before each task with its port views
  /// (calibration capture: the optimizer records linear layers' inputs).
  std::function<void(const TaskNode&, std::span<const TensorView>)> before_task;
  /// Task-level checkpoints (null: none): TaskRunner restores the outputs of
  /// tasks the checkpoint holds and persists those of the tasks it runs.
  Checkpoint* checkpoint = nullptr;
};

/// Live counters for the progress line (updated by workers, read by the CLI).
struct Progress {
  alignas(64) std::atomic<std::int64_t> started{0};
  alignas(64) std::atomic<std::int64_t> done{0};
  std::int64_t total = 0;  // tasks to run; 0 when runtime loops decide it
};

/// One publish or gather of a co-method, as the report shows it.
struct ExchangeRecord {
  double time_s = 0;       // since the run started
  bool publish = true;
  std::string channel;
  std::string source;      // gather: the co-method whose entry was taken ("" when the board was empty)
  double score = 0;
};

/// What one co-method of a <unite> did.
struct CoMethodRecord {
  std::string name;
  std::int32_t region = -1;
  std::int64_t iterations = 0;  // runtime-loop iterations (restarts)
  bool converged = false;       // its loops all ended by their condition
  bool failed = false, stopped = false, winner = false;
  std::string error;            // why it failed
  double start_s = 0, end_s = 0;
  std::int64_t publishes = 0, gathers = 0, adopted = 0;  // adopted: gathers that took another's entry
  double best_score = 0;                                // best score it published (NaN if none)
  std::vector<ExchangeRecord> exchanges;
  std::vector<std::pair<double, double>> score_history;  // (time_s, best score it has seen), at each exchange
  std::vector<int> context_workers;                      // mapping="contexts": the workers of its context
  double worker_s = 0;                                   // worker time its tasks took (summed)
};

/// What one <unite> did.
struct UniteRecord {
  std::string name;
  std::string exit;    // first, all or budget
  std::string winner;  // "" if every co-method failed
  std::string within;  // a nested unite: the co-method that ran it ("outer" or "a/b"), else ""
  double start_s = 0, end_s = 0;
  std::vector<CoMethodRecord> comethods;
};

/// Outcome of executing a DAG.
struct ExecResult {
  bool ok = false;
  std::string error;             // first failure, already formatted
  std::int32_t failed_task = -1;
  std::vector<TaskRecord> records;  // indexed by task id (a looped task: its last run)
  std::vector<TaskRecord> repeats;  // earlier runs of tasks that runtime loops ran again
  std::vector<UniteRecord> unites;  // per <unite>, in the order they ran
  std::vector<std::pair<std::int32_t, std::int64_t>> loop_iterations;  // (region, iterations) per loop run
  std::vector<std::string> workers; // worker names, indexed by TaskRecord::worker
  double makespan_us = 0;
  std::string scheduler;
  std::string runtime;           // e.g. "StarPU 1.3.10"
  std::vector<std::string> warnings;
};

class TaskRunner;

/// An open execution of a DAG whose tasks are submitted part by part, as a
/// workflow with runtime loops and co-methods needs (run_program): the runtime
/// stays up and the data stay registered between parts. Thread-safe: the
/// co-methods of a <unite> call run() concurrently, on disjoint data.
///
///   auto s = executor->open(dag, store, opts, progress, result);
///   s->run(0, 10, 0, 0);                       // tasks [0, 10), all workers, waits
///   s->acquire(d, false); read store.base(d); s->release(d);
///   s->close(result);
class Session {
 public:
  virtual ~Session() = default;
  /// Runs tasks [first, end) of the DAG (whatever they depend on before
  /// `first` has run) and waits for them; false if one failed.
  virtual bool run(std::int32_t first, std::int32_t end, int context, int priority) = 0;
  /// A scheduling context over the given workers, run by the named StarPU
  /// policy ("eager", "prio"); 0 where the backend has none.
  virtual int create_context(const std::string& name, const std::vector<int>& workers, const char* policy) = 0;
  virtual void delete_context(int context) = 0;
  virtual int num_workers() const = 0;
  /// Makes a whole tensor's latest value readable (or writable) at
  /// DataStore::base until release().
  virtual void acquire(std::int32_t data, bool write) = 0;
  virtual void release(std::int32_t data) = 0;
  virtual TaskRunner& runner() = 0;

  // Distributed sessions (StarPU-MPI, one process per rank). The co-methods of
  // a top-level <unite> run on rank groups (unite_placement); everything else
  // runs on every rank alike. The defaults are a single process's.
  virtual int rank() const { return 0; }
  virtual int ranks() const { return 1; }
  /// Every rank, before the co-methods of top-level unite `region` start: each
  /// co-method's inputs are brought to the ranks of its group that read them.
  virtual void unite_begin(std::int32_t region) { (void)region; }
  /// Called by a co-method's thread with the region of the top-level
  /// co-method it runs in: its later run(), acquire() and release() stay on
  /// that co-method's rank group (the co-method's data are the group's). On a
  /// group of several ranks every rank of it calls them alike (SPMD).
  virtual void set_comethod(std::int32_t region) { (void)region; }
  /// Whether this thread's rank leads its co-method's group (its first rank;
  /// true outside co-methods): the rank whose publishes, stops and records count.
  virtual bool leads() const { return true; }
  /// The number of ranks of this thread's co-method group (1 outside co-methods).
  virtual int group_size() const { return 1; }
  /// On a group of several ranks: the leader's `bytes` on every rank of this
  /// thread's group (what the others pass is dropped); elsewhere `bytes`.
  virtual std::vector<std::byte> share(std::vector<std::byte> bytes) { return bytes; }
  /// `v` summed over the ranks of this thread's co-method group (a co-method's
  /// worker time on several ranks); elsewhere `v`.
  virtual double group_sum(double v) { return v; }
  /// Every rank of a co-method's group, once its control flow has ended: what
  /// it wrote is made current where the unite's end expects it.
  virtual void comethod_end() {}
  /// Sends `msg` to every other rank, without waiting (thread-safe).
  virtual void post(std::vector<std::byte> msg) { (void)msg; }
  /// What other ranks posted that has arrived, oldest first (thread-safe).
  virtual std::vector<std::vector<std::byte>> poll() { return {}; }
  /// Every rank, once its co-methods of the unite ended: receives the unite's
  /// messages still in flight (the next poll() returns them), makes what the
  /// co-methods wrote readable from every rank, and returns every rank's
  /// `mine`, by rank.
  virtual std::vector<std::vector<std::byte>> unite_end(std::int32_t region, std::vector<std::byte> mine) {
    (void)region;
    return {std::move(mine)};
  }
  /// Copies whole tensor `from` into `to` (same dtype and shape) on every rank
  /// alike; false: the caller copies through acquire().
  virtual bool copy(std::int32_t from, std::int32_t to) {
    (void)from, (void)to;
    return false;
  }

  /// Waits for everything, shuts the runtime down, fills in `r`.
  virtual void close(ExecResult& r) = 0;
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
  /// Opens a session (workers, warnings and runtime go to `r`); null with
  /// r.error set on failure or where the backend runs whole DAGs only.
  virtual std::unique_ptr<Session> open(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress,
                                        ExecResult& r);
};

/// Runs a workflow with runtime control flow (Dag::dynamic(): <until>/<while>
/// loops, <unite> co-methods exchanging results through publish/gather) on a
/// session of `ex`; a static DAG goes to ex.execute() unchanged.
ExecResult run_program(Executor& ex, const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress);

/// Shared by backends: runs one task's CPU kernel on `views` (its ports), times
/// it, captures results, and turns an exception into a cancellation of the run.
class TaskRunner {
 public:
  TaskRunner(const Dag& dag, const ExecOptions& opts, Progress& progress);
  /// Writes the task's port views (shapes, dtypes, content ids; data pointers
  /// null) to out[0 .. t.bindings.size()).
  void port_templates(const TaskNode& t, TensorView* out) const;
  /// TensorView::content_id of the task's port: this run's epoch (unique in the
  /// process) in the high 32 bits, content_ids(dag) in the low ones; 0 if none.
  std::uint64_t content_id(std::int32_t task, std::size_t port) const;
  /// Runs the kernel; returns false if it threw (or the run was cancelled
  /// before). A task of a co-method that throws fails that co-method only.
  bool run(const TaskNode& t, std::span<const TensorView> views, std::int32_t worker);
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  /// The co-method (region) has a failed task; its error message.
  bool comethod_failed(std::int32_t region) const;
  std::string comethod_error(std::int32_t region) const;
  /// Fails the co-method with `message` unless it has failed already (a task
  /// of it failed on another rank of its group).
  void fail_comethod(std::int32_t region, std::string message);
  void finish(ExecResult& r);
  double now_us() const;
  /// How long the task's latest run took, in µs (0 if it has not run).
  /// Call after the run that ran it returned.
  double busy_us(std::int32_t task) const;
  /// The value the task's latest run reported under `key` (NaN if none).
  double result(std::int32_t task, std::string_view key) const;
  /// What KernelContext::remote_peers_at_work answers for a task of co-method
  /// region `comethod` (run_program sets it under MPI, before any task runs).
  void set_remote_peers(std::function<int(std::int32_t comethod)> fn) { remote_peers_ = std::move(fn); }

 private:
  const Dag& dag_;
  const ExecOptions& opts_;
  Progress& progress_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<TaskRecord> records_;
  std::vector<TaskRecord> repeats_;
  std::function<int(std::int32_t)> remote_peers_;
  std::unique_ptr<std::atomic<bool>[]> region_failed_;
  std::vector<std::string> region_error_;
  mutable std::mutex mu_;  // repeats_, region_error_
  std::atomic<bool> cancelled_{false};
  std::atomic<std::int32_t> failed_{-1};
  std::string error_;
  ContentIds content_;  // content_id()
  std::uint64_t epoch_ = 0;
};


}  // namespace ymlopt
