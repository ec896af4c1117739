#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// The order a session submits a part in: the whole DAG is its topo_order; a
/// range [first, end) of task ids (a loop body, a co-method's part) is sorted
/// by topological position.
///
///   TaskOrder order(dag);
///   std::vector<std::int32_t> ids;
///   for (std::int32_t id : order.range(first, end, ids)) submit(id);
class TaskOrder {
 public:
  explicit TaskOrder(const Dag& dag) : dag_(&dag), pos_(dag.tasks.size()) {
    for (std::size_t k = 0; k < dag.topo_order.size(); ++k) pos_[std::size_t(dag.topo_order[k])] = std::int32_t(k);
  }

  /// Whether [first, end) is the whole DAG.
  bool whole(std::int32_t first, std::int32_t end) const {
    return first == 0 && end == std::int32_t(dag_->tasks.size());
  }

  /// Tasks [first, end) in topological order: dag.topo_order for the whole
  /// DAG, else `ids`, filled here.
  const std::vector<std::int32_t>& range(std::int32_t first, std::int32_t end, std::vector<std::int32_t>& ids) const {
    if (whole(first, end)) return dag_->topo_order;
    ids.clear();
    for (std::int32_t i = first; i < end; ++i) ids.push_back(i);
    std::sort(ids.begin(), ids.end(),
              [&](std::int32_t a, std::int32_t b) { return pos_[std::size_t(a)] < pos_[std::size_t(b)]; });
    return ids;
  }

 private:
  const Dag* dag_;
  std::vector<std::int32_t> pos_;  // position of each task in topo_order
};

}  // namespace ymlopt
