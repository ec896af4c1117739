// --distribute: how a model workflow splits over the ranks of a StarPU-MPI run,
// as the parameters it declares for that: `tp` (tensor-parallel shards) and
// `stages` (pipeline stages).
#pragma once
#include <string>
#include <vector>

namespace ymlopt {

/// The --set values SPEC gives a run on `ranks` ranks, `per_node` of them per
/// node, of the workflow in `file`:
///   tp       tp = ranks (and stages = 1 where it has stages)
///   pp       stages = ranks (tp left at its default: no shards)
///   tpxpp    tp = ranks per node, stages = nodes (Megatron: shards within a node)
///   tp=N,pp=M  N x M = ranks
///   auto     tpxpp on several nodes when it has both, else tp, else pp
/// Throws UsageError for a bad SPEC, a workflow without the parameter, sizes
/// that do not make `ranks`, or a --set in `sets` of the same parameter.
///   for (auto& s : distribute_sets("auto", wf.file, wf.sets, 4, 2)) wf.sets.push_back(s);  // tp=2, stages=2
std::vector<std::string> distribute_sets(const std::string& spec, const std::string& file,
                                         const std::vector<std::string>& sets, int ranks, int per_node);

}  // namespace ymlopt
