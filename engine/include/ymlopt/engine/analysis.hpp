#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// What a DAG needs, known before running it: parameters (data loaded with
/// src=) by dtype, other data in total and at their peak when each tensor
/// lives from its first to its last use, and the work.
///
///   DagFootprint f = analyze(dag);   // ymlopt run --dry-run prints it
struct DagFootprint {
  std::map<std::string, std::int64_t> parameter_bytes;  // by dtype name
  std::int64_t parameter_total = 0;
  std::int64_t activation_total = 0;  // every non-parameter tensor at once
  std::int64_t activation_peak = 0;   // live non-parameter tensors, at the worst point of the topological order
  double flops = 0;
  std::map<std::string, double> flops_by_component;
  /// The key/value caches of generation: the tiles nn.kv_append writes (one
  /// row block of `context` rows per layer and cache tensor, and an int8
  /// cache's scales). Empty when none.
  struct KvCache {
    std::vector<std::string> tensors;   // the data holding them
    std::int64_t bytes = 0;             // those tensors, allocated whole
    std::int64_t layers = 0;            // row blocks per tensor
    std::int64_t context = 0;           // rows per block: the longest sequence
    std::int64_t bytes_per_token = 0;   // one row of every block: every layer, keys and values
    std::int64_t block = 0;             // a batch's pool: tokens per block (nn.kv_blocks); 0: one sequence's rows
  } kv_cache;
};

DagFootprint analyze(const Dag& dag);

/// Names the contents each read-only port sees, for TensorView::content_id:
/// ids[first[t] + p] of task t's port p is nonzero for a read whose data (or
/// tile) no task writes between two reads with the same id: one id per
/// version of each tensor and tile. Written ports get 0. In a DAG with runtime
/// loops or co-methods (tasks that run again) only reads of data no task writes
/// (weights) get one: one per tensor and tile.
///
///   ContentIds c = content_ids(dag);
///   std::uint32_t id = c.ids[c.first[t] + p];
struct ContentIds {
  std::vector<std::size_t> first;  // tasks + 1 offsets into ids
  std::vector<std::uint32_t> ids;
};

ContentIds content_ids(const Dag& dag);

/// Calls fn(task, id, bytes) for every read that a kernel may keep a copy of
/// (a port in the task's Cost::kept_ports with a content id): what the
/// prediction and the per-rank estimate count as kept.
void for_each_kept_read(const Dag& dag,
                        const std::function<void(std::size_t task, std::uint32_t id, std::int64_t bytes)>& fn);

/// written[d] != 0 when some task writes data d (an out or inout port).
std::vector<char> written_data(const Dag& dag);

}  // namespace ymlopt
