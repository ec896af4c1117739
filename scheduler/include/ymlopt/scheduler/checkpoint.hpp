#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

struct TaskRecord;

/// 64-bit content hash (four-lane multiply-rotate rounds over 8-byte words,
/// several GB/s): checkpoint keys and the integrity check of stored outputs.
///
///   Hash64 h;  h.add("nn.linear");  h.add(v.data, bytes);  std::uint64_t k = h.digest();
class Hash64 {
 public:
  explicit Hash64(std::uint64_t seed = 0);
  Hash64& add(const void* data, std::size_t bytes);
  Hash64& add(std::string_view s);
  Hash64& add(std::uint64_t v);
  std::uint64_t digest() const;

 private:
  void block(const unsigned char* p);
  std::uint64_t acc_[4];
  unsigned char buf_[32];
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;
};

/// "00ff..." (16 hex digits).
std::string hex64(std::uint64_t v);

/// Task-level checkpoints in a run directory (DESIGN "checkpoint and resume").
///
/// Every task has a key: the hash of its component, its arguments, the
/// geometry of its ports and the *versions* of the data it reads. A version is
/// the hash of how the data came to be: its init= spec or the content of its
/// src= tensor, else (task key, port) of the task that last wrote it; tiles
/// and whole tensors are versioned like the compiler tracks their
/// dependencies. Keys are computed from the DAG alone, before anything runs.
///
/// After a task finishes, its outputs (out/inout ports) are copied while the
/// task still holds them and written by a background thread to
/// RUN_DIR/checkpoint/objects/<version>.bin, then the task's marker
/// RUN_DIR/checkpoint/tasks/<key>.json (outputs, their content hashes, the
/// task's results), each through a temporary file and a rename: a run killed
/// at any point leaves whole files only.
///
/// On resume the same keys are recomputed: a task whose marker and objects are
/// present (content hashes checked) is *restored* instead of run: its outputs
/// are copied back, where a re-executed task will read them, in the task's own
/// slot of the DAG, so the runtime orders restores like the computations they
/// replace. Tasks with no outputs (io.save) always run again. A changed
/// parameter, input file or workflow changes the keys downstream of the
/// change: those tasks are stale and run again.
///
///   Checkpoint ck(dag, store, run_dir + "/checkpoint", /*resume=*/true);
///   opts.checkpoint = &ck;                    // TaskRunner restores / persists
///   run_program(exec, dag, store, opts, progress);
///   ck.finish();                              // waits for the writer
///   ck.stats().tasks_restored ...
class Checkpoint {
 public:
  struct Stats {
    std::int64_t tasks_persisted = 0;  // markers written by this run
    std::int64_t tasks_restored = 0;   // tasks not run: outputs taken from the checkpoint
    std::int64_t tasks_rerun = 0;      // tasks run on resume (missing, stale or without outputs)
    std::int64_t tasks_invalid = 0;    // markers found whose objects were missing or damaged
    std::int64_t bytes_written = 0, bytes_restored = 0;
    double write_seconds = 0;          // the writer thread's busy time (hash + write + rename)
    double copy_seconds = 0;           // time tasks spent copying their outputs out
    double plan_seconds = 0;           // computing keys and checking markers
    std::string error;                 // the first write error (persisting then stops)
  };

  /// Throws std::runtime_error if the directory cannot be created.
  Checkpoint(const Dag& dag, const DataStore& store, std::string dir, bool resume);
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  /// The task's outputs come from the checkpoint (resume only).
  bool restorable(std::int32_t task) const { return !rerun_.empty() && !rerun_[size_t(task)]; }
  /// Copies the task's needed outputs into `views` and its results into `rec`.
  void restore(const TaskNode& t, std::span<const TensorView> views, TaskRecord& rec);
  /// Snapshots the task's outputs and queues them for writing.
  void persist(const TaskNode& t, std::span<const TensorView> views, const TaskRecord& rec);
  /// Waits until everything queued is written.
  void finish();

  std::uint64_t key(std::int32_t task) const { return key_[size_t(task)]; }
  const std::string& dir() const { return dir_; }
  /// Tasks that a resume will run (the rest are restored); all of them when
  /// not resuming.
  std::int64_t planned_reruns() const;
  Stats stats() const;

 private:
  struct Producer {
    std::int32_t task, binding;
  };
  struct Object {
    std::uint64_t version = 0, content = 0;
    std::int32_t binding = 0;
    std::vector<unsigned char> bytes;
  };
  struct Job {
    std::int32_t task = 0;
    std::string marker;  // JSON, without the objects' content hashes
    std::vector<Object> objects;
  };
  void compute_keys(const DataStore& store);
  void plan();
  bool valid_object(std::uint64_t version, std::uint64_t content, std::int64_t bytes) const;
  void writer_loop();
  void write_job(Job& job);

  const Dag& dag_;
  std::string dir_;
  std::vector<std::uint64_t> key_;
  std::vector<std::vector<std::uint64_t>> out_version_;           // per task, per binding (0: not written)
  std::vector<std::vector<std::vector<Producer>>> producers_;      // per task, per binding: versions it reads
  std::vector<char> rerun_;                                       // resume: per task
  std::vector<std::vector<char>> needed_;                         // resume: per task, per binding
  std::vector<std::string> markers_;                              // resume: marker JSON per task ("" none)

  mutable std::mutex mu_;
  std::condition_variable cv_, space_;
  std::deque<Job> queue_;
  std::size_t queued_bytes_ = 0;
  bool stop_ = false, busy_ = false;
  Stats stats_;
  std::thread writer_;
};

}  // namespace ymlopt
