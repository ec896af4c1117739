#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt {

/// The MPI job this process belongs to (mpirun/srun start one process per
/// rank; every rank runs the same `ymlopt run` and compiles the same DAG).
///
///   const MpiWorld w = mpi_world_init();   // MPI_Init_thread once
///   if (w.rank == 0) write_report(...);
///   mpi_world_finalize();
struct MpiWorld {
  int rank = 0;
  int size = 1;
  bool thread_multiple = false;  // MPI_THREAD_MULTIPLE: runtime loops agree between parts
};
/// Initialises MPI on the first call (MPI_THREAD_MULTIPLE where the library has
/// it, else at least MPI_THREAD_SERIALIZED, what StarPU-MPI needs); later calls
/// return the same world. Throws std::runtime_error.
MpiWorld mpi_world_init();
/// MPI_Finalize if mpi_world_init initialised MPI (idempotent).
void mpi_world_finalize();
/// Ends every rank of the job with `code` (MPI_Abort).
[[noreturn]] void mpi_world_abort(int code);
/// Rank 0 receives every rank's string (index = rank); others get {}.
std::vector<std::string> mpi_gather_strings(const std::string& mine);
/// Rank 0's string on every rank.
std::string mpi_broadcast_string(const std::string& from_root);
/// Rank 0's flag on every rank.
bool mpi_broadcast_flag(bool from_root);
/// True on every rank when `mine` is true on every rank (a step that failed on
/// some ranks, such as compiling or loading, stops them all instead of leaving
/// the others waiting in a collective).
bool mpi_all_ok(bool mine);

/// Communication of one rank during a run (StarPU-MPI's comm stats).
struct MpiRankStats {
  int rank = 0;
  int size = 1;
  std::vector<std::uint64_t> sent_to;  // bytes this rank sent to each rank
  std::vector<std::int32_t> owners;    // owner rank of each data (whole tensor), by data index
  std::uint64_t allocated_bytes = 0;   // the rank's DataStore (what it owns; received copies not counted)
  std::uint64_t mapped_bytes = 0;      // its src= tensors used in place (DataStore::mapped_bytes)
};

/// The StarPU-MPI backend: each rank registers every tensor and every tile as
/// its own StarPU handle (tiles point into their tensor's memory, or, on a
/// rank holding only its tiles of a tensor, into their own blocks; data the
/// rank's DataStore does not hold, see residency(), get no home buffer and
/// StarPU allocates received copies) with an owner rank and a unique tag (starpu_mpi_data_register). Owners are the
/// engine's data_owners (ymlopt/engine/distribution.hpp: the data's
/// distribute=/owner=, else 2-D block-cyclic tiles on a p x q grid of ranks, one
/// row or column of tiles 1-D cyclic, whole tensors balanced by size). Tasks go
/// through starpu_mpi_task_build/post_build on the engine's task_rank (owner
/// computes: the rank owning the first written operand runs it, io.save runs on
/// rank 0; StarPU-MPI moves the operands and sends written data back
/// to their owners); within a rank the compiler's dependencies are declared
/// too (tiles alias their tensor). A task reading a tensor whose tiles were
/// written (or tiles of a tensor written whole) is preceded by a no-op
/// join/split task on the tensor's owner that moves the tiles. Every rank
/// returns its own records; merge_rank_results gives rank 0 the whole run.
///
///   StarpuMpiExecutor ex;
///   ExecResult mine = ex.execute(dag, store, opts, progress);
///   auto all = mpi_gather_strings(rank_result_json(mine, ex.stats()).dump());
class StarpuMpiExecutor final : public Executor {
 public:
  std::string name() const override { return "starpu-mpi"; }
  ExecResult execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) override;
  /// Runtime loops (<until>, <while>): every rank runs the same parts; loop
  /// conditions read the owner's value; after each part the ranks agree on
  /// its success. <unite>: co-method i of a top-level unite runs on rank
  /// i % size (unite_placement), its inputs sent there first; publishes and
  /// stops are posted to every rank; at the unite's end the ranks exchange the
  /// co-methods' records and choose the same winner. Refused (r.error) when
  /// co-methods on two ranks write the same data.
  std::unique_ptr<Session> open(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress,
                                ExecResult& r) override;
  const MpiRankStats& stats() const { return stats_; }

 private:
  MpiRankStats stats_;
};

/// One rank's outcome as JSON (records of the tasks it ran, its workers, its
/// error, its communication) for rank 0 to merge.
nlohmann::json rank_result_json(const ExecResult& r, const MpiRankStats& s);

/// The run as one: tasks from the rank that ran them, workers named
/// "RANK:WORKER" (one trace lane each), the first failure prefixed with its
/// rank, makespan the longest rank's. `task_ranks[t]` is the rank that ran
/// task t (-1: none); `ranks` has per rank: workers, tasks, busy time, bytes
/// sent and received.
struct MergedRun {
  ExecResult result;
  std::vector<std::int32_t> task_ranks;
  nlohmann::json ranks = nlohmann::json::array();
  std::uint64_t bytes_moved = 0;
};
MergedRun merge_rank_results(const Dag& dag, const std::vector<std::string>& per_rank_json);

}  // namespace ymlopt
