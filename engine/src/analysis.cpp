#include "ymlopt/engine/analysis.hpp"

#include <vector>

namespace ymlopt {

DagFootprint analyze(const Dag& dag) {
  DagFootprint f;
  const size_t nd = dag.data.size();
  // lifetime of each tensor in topological positions: [first use, last use]
  std::vector<std::int64_t> first(nd, -1), last(nd, -1);
  for (size_t pos = 0; pos < dag.topo_order.size(); ++pos) {
    const TaskNode& t = dag.tasks[size_t(dag.topo_order[pos])];
    f.flops += t.cost.flops;
    f.flops_by_component[t.comp->name] += t.cost.flops;
    for (const auto& b : t.bindings) {
      if (b.ref.data < 0) continue;
      const size_t d = size_t(b.ref.data);
      if (first[d] < 0) first[d] = std::int64_t(pos);
      last[d] = std::int64_t(pos);
    }
  }
  // a sweep over +size at first use and -size after last use
  std::vector<std::int64_t> delta(dag.topo_order.size() + 1, 0);
  for (size_t d = 0; d < nd; ++d) {
    const DataDecl& decl = dag.data[d];
    if (!decl.format.empty()) continue;  // no storage: its companions are counted
    if (decl.init == InitKind::file) {
      f.parameter_bytes[dtype_name(decl.dtype)] += decl.bytes();
      f.parameter_total += decl.bytes();
      continue;
    }
    f.activation_total += decl.bytes();
    if (first[d] < 0) continue;  // declared, never used
    delta[size_t(first[d])] += decl.bytes();
    delta[size_t(last[d]) + 1] -= decl.bytes();
  }
  std::int64_t live = 0;
  for (auto x : delta) {
    live += x;
    f.activation_peak = std::max(f.activation_peak, live);
  }
  return f;
}

}  // namespace ymlopt
