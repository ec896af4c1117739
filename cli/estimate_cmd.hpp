// `ymlopt estimate`: a distributed run on paper (StarPU-MPI placement, calibrated task
// times, a network of stated bandwidth and latency), without weights or machines.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/engine/perf_model.hpp"

namespace ymlopt {

/// The estimate as JSON (format "ymlopt-estimate-1"): cluster, makespan_us,
/// one_rank_makespan_us, bytes_moved, messages, per_rank [{rank, node, tasks, busy_us,
/// bytes_sent, bytes_received, owned_bytes, remote_peak_bytes, workspace_peak_bytes,
/// peak_bytes, allocated_bytes, mapped_bytes (what the backend's DataStore holds),
/// peak_rss_bytes (with `rank_overhead` >= 0, a rank's measured RSS beyond its data
/// from earlier runs: History::rank_overhead; else null)}], rank_overhead_bytes.
///
///   nlohmann::json j = estimate_json(dag, spec, est, one_rank, history.rank_overhead());
nlohmann::json estimate_json(const Dag& dag, const ClusterSpec& spec, const DistributedEstimate& e,
                             const Prediction& one_rank, double rank_overhead = -1);

/// The estimate as the table `ymlopt estimate` prints.
std::string format_estimate(const Dag& dag, const ClusterSpec& spec, const DistributedEstimate& e,
                            const Prediction& one_rank, double rank_overhead = -1);

/// `ymlopt estimate WF.xml --nodes N [--ranks-per-node R] [--ncpu C] [--cores-per-node K]
/// [--bandwidth GB/s] [--latency us] [--intra-bandwidth GB/s] [--json] [--no-history]
/// [--set k=v]... [--plugin P]...`: compiles without reading weight files and
/// predicts the StarPU-MPI run on N nodes. Exit 0; 1 for a bad workflow (diagnostics
/// printed); bad options throw UsageError (exit 2).
///
///   ymlopt estimate workflows/models/llama.xml --nodes 4 --ncpu 32 --set layers=32 --set width=4096 ...
int cmd_estimate(const std::vector<std::string>& args);

}  // namespace ymlopt
