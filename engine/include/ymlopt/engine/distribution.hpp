#pragma once
// Where data and tasks live on N ranks (the StarPU-MPI backend's placement),
// and a simulation of a distributed run from per-task times: `ymlopt estimate`.
// No MPI or StarPU here: the backend and the estimate share these rules.
//
//   DataOwners own = data_owners(dag, 4);
//   std::int32_t r = task_rank(dag, dag.tasks[0], own);    // where it moves least
//   ClusterSpec spec;  spec.nodes = 2;  spec.ranks_per_node = 2;
//   DistributedEstimate e = estimate_distributed(dag, seconds, spec);
//   std::cout << e.makespan_s << " s, " << e.bytes_moved << " bytes moved\n";
#include <cstdint>
#include <string>
#include <vector>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// Owner rank of every data (whole tensor) and tile: own[d][0] is data d's,
/// own[d][1 + t] its tile t's.
using DataOwners = std::vector<std::vector<std::int32_t>>;

/// Owners on `size` ranks: data that a co-method writes belong to its rank
/// group (unite_placement): to its one rank, or, on a group of several, the
/// tiles by the rules below over the group's ranks and the tensor (and an
/// untiled one) to its first rank; otherwise owner= pins a tensor and its tiles to one rank
/// (modulo size); tiled tensors follow distribute= ("rows": tile row modulo size,
/// "cols": tile column, else one row or column of tiles: 1-D cyclic, else 2-D
/// block-cyclic on a p x q grid, p <= q as square as size allows; the tensor
/// itself lives with its first tile); untiled tensors, the largest first, go to
/// the least loaded rank (by bytes). distribute="replicate" gives owners like the
/// default (every rank also holds the initial value; see estimate_distributed).
///
///   DataOwners own = data_owners(dag, 2);   // own[A][1 + t] == t % 2 for a 1 x n tiling
DataOwners data_owners(const Dag& dag, int size);

/// Where the co-methods of each top-level <unite> run on `size` ranks: on a
/// rank group each. With at least as many co-methods as ranks, co-method i runs
/// on rank i % size (a rank may run several); with more ranks, co-method i of n
/// gets ranks [i * size / n, (i + 1) * size / n), consecutive ranks being the
/// ones of one node (unless a co-method holds a nested unite: then one rank
/// each, and extra ranks wait). A co-method's tasks, loops, exchanges and
/// nested unites stay on its group, and the data it writes (tasks' outputs,
/// gather targets, nested unites' save_exit) belong to it; on a group of several
/// ranks its tasks run where their data live (owner computes), and every rank of
/// the group runs its control flow. -1: outside co-methods (every rank, SPMD).
///
///   UnitePlacement p = unite_placement(dag, 4);   // 2 co-methods: ranks {0, 1} and {2, 3}
///   if (p.task_group[t] >= 0) ...   // task t runs on p.groups[p.task_group[t]] only
struct UnitePlacement {
  std::vector<std::vector<std::int32_t>> groups;  // the rank groups, each in rank order
  std::vector<std::int32_t> task_group;    // by task id: index in groups, -1 outside co-methods
  std::vector<std::int32_t> region_group;  // by region id
  std::vector<std::int32_t> data_group;    // by data id: the group whose co-method writes it, -1 none
  std::vector<std::int32_t> task_rank;     // the first rank of task_group (-1 outside)
  std::vector<std::int32_t> region_rank;
  std::vector<std::int32_t> data_rank;
  /// A data written by co-methods on two groups ("" if none): "'X': unite 'u' co-method 'a' and unite 'v' co-method 'b'".
  std::string conflict;
  std::int32_t conflict_region = -1;  // the second co-method
};
UnitePlacement unite_placement(const Dag& dag, int size);

/// What a rank keeps in memory of one data.
enum class Holding : std::uint8_t {
  none,   // nothing up front: StarPU-MPI allocates a copy when a task receives it
  whole,  // the tensor (its tiles are strided views into it)
  tiles,  // only the tiles it owns, each in its own contiguous block
};

/// What one rank allocates and initialises (the DataStore's residency).
struct Residency {
  std::vector<Holding> data;             // by data id
  /// By data id: the tiles this rank owns, tile t at [t] (Holding::tiles:
  /// those it holds; Holding::whole: those whose file pages it reads up
  /// front). Empty: all of them.
  std::vector<std::vector<char>> tiles;
  /// Everything whole (one process).
  static Residency all(const Dag& dag);
};

/// What rank `rank` of `size` holds. Whole: data it owns untiled, tiled data
/// it owns whole when some task or region reads or writes them whole or when
/// it owns every tile,
/// distribute="replicate" data, the scalars runtime loop conditions read
/// (every rank evaluates them), the data of publishes and gathers outside
/// co-methods (every rank runs them) and of those of a co-method on a group of
/// several ranks (every rank of the group runs them). Tiles: the tiles it
/// owns of any other tiled data, so that a rank holding a column tile of a
/// weight allocates and reads that tile, not the tensor.
///
///   DataStore store(dag, residency(dag, data_owners(dag, 4), rank, 4));
Residency residency(const Dag& dag, const DataOwners& own, int rank, int size);

/// The bytes a DataStore holding `held` keeps: allocated (64-byte aligned
/// blocks: whole tensors not from files, held tiles) and mapped (src= tensors
/// held whole, used in place: all of one, or the tiles the rank owns of it).
///
///   HeldBytes b = held_bytes(dag, residency(dag, data_owners(dag, 2), 0, 2));
struct HeldBytes {
  std::int64_t allocated = 0, mapped = 0;
  std::int64_t total() const { return allocated + mapped; }
};
HeldBytes held_bytes(const Dag& dag, const Residency& held);

/// By data id: 1 when a task binds the tensor whole or a region (loop
/// condition, publish, gather, unite exit) names it.
std::vector<char> used_whole(const Dag& dag);

/// Owner of the tensor or tile a binding refers to (-1 for an unbound port).
std::int32_t ref_owner(const DataOwners& own, const DataRef& ref);

/// The rank that runs a task (as StarPU-MPI's STARPU_EXECUTE_ON_NODE gets it
/// from the backend): io.save on rank 0 (outputs are gathered there); else the
/// owner of the first written operand (owner computes), else of the first bound
/// one, else rank 0 - unless the task updates no operand in place and the
/// owner of another operand moves at least 8x fewer bytes (operands read from
/// other ranks, written ones sent back to their owners; replicated data read
/// anywhere): then the one that moves fewest. An embedding lookup thus runs
/// where its table is, not where its small output is.
///
///   std::int32_t r = task_rank(dag, t, own);   // blas.gemm writing C[1,0] -> owner of that tile
std::int32_t task_rank(const Dag& dag, const TaskNode& t, const DataOwners& own);

/// The machines of a distributed run to simulate.
struct ClusterSpec {
  int nodes = 1;
  int ranks_per_node = 1;
  int workers_per_rank = 1;  // StarPU CPU workers of each rank (--ncpu)
  /// Cores per node; 0: ranks_per_node * workers_per_rank (none shared). With fewer,
  /// task times stretch by (ranks_per_node * workers_per_rank) / cores_per_node.
  int cores_per_node = 0;
  double bandwidth_gbs = 12.5;  // between nodes, per node NIC (100 Gb/s InfiniBand)
  double latency_us = 2;        // between nodes, per message
  double intra_gbs = 5;         // between ranks of one node (shared memory: a copy)
  double intra_latency_us = 1;  // between ranks of one node, per message
  double sync_seconds = 0;      // a join/split no-op task (the per-task overhead)
  /// What the kernels' caches of packed weights may keep per rank (their budgets).
  std::int64_t kept_budget_bytes = std::int64_t(2) << 30;
};

/// One rank's share of the simulated run.
struct RankEstimate {
  std::int32_t rank = 0, node = 0;
  std::int64_t tasks = 0;   // workflow tasks it runs (join/split no-ops not counted)
  double busy_s = 0;        // sum of their (stretched) times
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  std::int64_t messages_sent = 0;
  std::int64_t owned_bytes = 0;        // tensors and tiles it owns
  std::int64_t remote_peak_bytes = 0;  // most copies of others' data held at once
  std::int64_t workspace_peak_bytes = 0;  // most cost.extra_bytes of its tasks at once
  /// Packed copies its kernels keep (Cost::kept_ports): contents two or more of
  /// its tasks read (the caches pack on the second use), once each, up to the budget.
  std::int64_t kept_bytes = 0;
  std::int64_t peak_bytes() const { return owned_bytes + remote_peak_bytes + workspace_peak_bytes + kept_bytes; }
};

/// The simulated run.
struct DistributedEstimate {
  int ranks = 1;
  double time_scale = 1;  // task-time stretch from cores shared by ranks
  double makespan_s = 0;
  double compute_s = 0;        // sum of the stretched task times
  double transfer_s = 0;       // sum of the transfer times
  std::uint64_t bytes_moved = 0;  // sum of bytes_sent (what StarPU-MPI's comm stats count)
  std::int64_t messages = 0;
  std::int64_t sync_tasks = 0;  // join/split no-ops the backend adds
  std::vector<std::int32_t> task_ranks;  // by task id
  std::vector<RankEstimate> per_rank;
};

/// Simulates the StarPU-MPI backend's run of `dag` on `spec` with task i taking
/// `seconds[i]` on one worker (predict()'s task_s). Placement: data_owners and
/// task_rank, plus the backend's join/split no-op on a tensor's owner when a task
/// uses a tiled tensor whole after its tiles were written (or a tile after the
/// whole was written). Data movement follows StarPU-MPI with its cache: a task
/// reading data its rank holds no valid copy of waits for a send from the owner
/// (each rank receives a version once); data written on another rank go back to
/// the owner, and the write invalidates every other copy; distribute="replicate"
/// data start valid everywhere. A transfer between nodes takes latency +
/// bytes / bandwidth and occupies the sending node's NIC (one send at a time;
/// receives are not serialised); between ranks of one node intra_latency_us +
/// bytes / intra_gbs, not serialised. Each rank list-schedules its tasks over its workers (a free
/// worker takes the task ready first; ties: lowest id), a task being ready when
/// its compiler dependencies finished and its operands arrived.
/// Throws std::invalid_argument on a bad spec or a seconds/tasks size mismatch.
///
///   auto e = estimate_distributed(dag, predict(dag, cal, 1).task_s, spec);
DistributedEstimate estimate_distributed(const Dag& dag, const std::vector<double>& seconds, const ClusterSpec& spec);

}  // namespace ymlopt
