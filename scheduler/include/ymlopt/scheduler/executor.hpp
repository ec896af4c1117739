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
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/engine/ir.hpp"
#include "ymlopt/unite/rank_groups.hpp"
#include "ymlopt/unite/record.hpp"

namespace ymlopt {

/// What happened to one task: where and when it ran, and its scalar results.
struct TaskRecord {
  std::int32_t task = -1;       // the task's id
  std::int32_t iteration = 0;   // 0, then 1, 2, ... when a runtime loop runs it again
  std::int32_t worker = -1;
  double start_us = 0, end_us = 0;
  bool ran = false;
  bool restored = false;        // resumed run: outputs taken from the checkpoint, kernel not run
  double predicted_us = -1;     // the runtime's predicted duration on its worker (StarPU's dmda); < 0: none
  std::vector<std::pair<std::string, double>> results;
};

class Checkpoint;
class Session;

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
  /// Checkpointed runs keep every task on CPU workers (they read and write
  /// the host copies).
  Checkpoint* checkpoint = nullptr;
  /// OpenCL workers (StarPU backends) to start (0: none, the default; -1:
  /// every device), devices of type CPU (PoCL) counted too when opencl_on_cpus.
  int nopencl = 0;
  bool opencl_on_cpus = false;
  /// CUDA workers (StarPU built with CUDA): -1 (the default) every device, or
  /// StarPU's STARPU_NCUDA when set; 0 none.
  int ncuda = -1;
  /// --where: the kind of worker every task that has a kernel for it runs on
  /// (any: the scheduler chooses); a task's own `where` comes first.
  Where where = Where::any;
  /// Warm-up runs of a static DAG before the measured one, in the same session
  /// (runtime up, data registered, weights mapped and touched), as a serving
  /// process runs a model again: the records and makespan are the last run's.
  /// run_program runs them, writing the init= values of the tensors tasks
  /// write again before each run; warmup_refusal says which DAGs cannot.
  int warmup = 0;
  /// Called by run_program on the control thread at each iteration boundary of
  /// a runtime loop outside co-methods (before the first iteration, iteration 0,
  /// and after each, 1, 2, ...), with the session for reading data
  /// (acquire/release): generation streams its tokens from it.
  std::function<void(std::int32_t region, std::int64_t iteration, Session& s)> on_iteration;
};

/// Live counters for the progress line (updated by workers, read by the CLI).
struct Progress {
  alignas(64) std::atomic<std::int64_t> started{0};
  alignas(64) std::atomic<std::int64_t> done{0};
  std::int64_t total = 0;  // tasks to run; 0 when runtime loops decide it
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
  std::vector<Where> worker_kinds;  // cpu, opencl or cuda, indexed like workers
  /// Bytes the runtime moved between memory nodes, per direction with traffic.
  struct Transfer {
    std::string src, dst;  // "RAM", "OpenCL 0", "CUDA 0"
    std::int64_t bytes = 0, count = 0;
  };
  std::vector<Transfer> transfers;
  double makespan_us = 0;  // from the start of submission (TaskRunner::start_clock) to the last task's end
  double setup_us = 0;     // the backend's set-up before that: data registration, partition plans, placement
  std::vector<double> warmup_us;  // the makespans of the ExecOptions::warmup runs before the measured one
  std::string scheduler;
  std::string runtime;           // e.g. "StarPU 1.3.10"
  std::vector<std::string> warnings;
};

class TaskRunner;

/// Where TaskRunner::run runs a task's kernel: on the host, or on an
/// accelerator's queue (a cl_command_queue or a cudaStream_t), its ports then
/// device buffers (OpenCL: cl_mem at offsets[port] bytes). `sync` waits for
/// the queue and throws on a device error.
struct DeviceCall {
  Where kind = Where::cpu;
  void* queue = nullptr;
  const std::size_t* offsets = nullptr;
  void (*sync)(void* queue) = nullptr;
};

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

  /// The co-methods of top-level unites on rank groups (StarPU-MPI, one
  /// process per rank); null where the session is one process.
  virtual unite::RankGroups* rank_groups() { return nullptr; }

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
/// With opts.warmup > 0 it runs a static DAG that many times more, on one session.
ExecResult run_program(Executor& ex, const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress);

/// Why `dag` cannot run again in the same process for ExecOptions::warmup
/// ("" if it can): runtime loops or co-methods, or a task that writes a tensor
/// mapped from a file. (Tensors with other init= values that tasks write are
/// initialised again before each run.)
std::string warmup_refusal(const Dag& dag);

/// Shared by backends: runs one task's CPU kernel on `views` (its ports), times
/// it, captures results, and turns an exception into a cancellation of the run.
class TaskRunner {
 public:
  TaskRunner(const Dag& dag, const ExecOptions& opts, Progress& progress);
  /// Writes the task's port views (shapes, dtypes, content ids; data pointers
  /// null) to out[0 .. t.bindings.size()).
  void port_templates(const TaskNode& t, TensorView* out) const;
  /// TensorView::content_id of the task's port: this run's epoch (unique in the
  /// process) in the high 32 bits, content_ids(dag) in the low ones (moved on
  /// by each --warmup repeat for data some task writes); 0 if none.
  std::uint64_t content_id(std::int32_t task, std::size_t port) const;
  /// Runs the kernel; returns false if it threw (or the run was cancelled
  /// before). A task of a co-method that throws fails that co-method only.
  /// On a device (dev.kind opencl or cuda) it runs the component's kernel for
  /// it on dev.queue, then dev.sync waits for the queue inside the task's time.
  bool run(const TaskNode& t, std::span<const TensorView> views, std::int32_t worker, const DeviceCall& dev = {});
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  /// The co-method (region) has a failed task; its error message.
  bool comethod_failed(std::int32_t region) const;
  std::string comethod_error(std::int32_t region) const;
  /// Fails the co-method with `message` unless it has failed already (a task
  /// of it failed on another rank of its group).
  void fail_comethod(std::int32_t region, std::string message);
  void finish(ExecResult& r);
  /// µs since the clock started: construction, or the last start_clock().
  double now_us() const;
  /// Restarts the clock when the backend is set up and about to submit: task
  /// times and the makespan count from here, the time before is setup_us.
  void start_clock();
  /// After a warm-up run of the whole DAG: keeps its makespan
  /// (ExecResult::warmup_us), forgets its task records and restarts the clock.
  void next_repeat();
  /// How long the task's latest run took, in µs (0 if it has not run).
  /// Call after the run that ran it returned.
  double busy_us(std::int32_t task) const;
  /// The value the task's latest run reported under `key` (NaN if none).
  double result(std::int32_t task, std::string_view key) const;
  /// What KernelContext::remote_peers_at_work answers for a task of co-method
  /// region `comethod` (run_program sets it under MPI, before any task runs).
  void set_remote_peers(std::function<int(std::int32_t comethod)> fn) { remote_peers_ = std::move(fn); }
  /// After run(): the runtime's prediction of that run's duration (TaskRecord::predicted_us).
  void set_predicted(std::int32_t task, double us) { records_[size_t(task)].predicted_us = us; }

 private:
  const Dag& dag_;
  const ExecOptions& opts_;
  Progress& progress_;
  std::chrono::steady_clock::time_point t0_;
  double setup_us_ = 0;
  std::vector<double> warmup_us_;
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
  // --warmup: a port whose data some task writes gets a new id each repeat
  // (id + repeat * span); span 0 when the repeats would run out of ids
  std::vector<char> varies_;
  std::uint64_t id_span_ = 0, repeat_ = 0;
};


}  // namespace ymlopt
