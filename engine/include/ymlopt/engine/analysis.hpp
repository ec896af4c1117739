#pragma once
#include <cstdint>
#include <map>
#include <string>

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
};

DagFootprint analyze(const Dag& dag);

}  // namespace ymlopt
