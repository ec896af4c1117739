#include "estimate_cmd.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "calibrate_cmd.hpp"
#include "distribute.hpp"
#include "report.hpp"
#include "usage_error.hpp"
#include "workflow_args.hpp"
#include "ymlopt/xml/diagnostic.hpp"

namespace po = boost::program_options;

namespace ymlopt {

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / (1 << 20));
  return buf;
}

std::string human_bytes(double bytes) {
  char buf[32];
  if (bytes >= double(1ll << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ll << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1 << 20));
  return buf;
}

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  return buf;
}

// What the StarPU-MPI backend's DataStore holds on each rank (residency():
// the tensors it owns whole, its own tiles of the others, each in a block of
// its own, src= tiles read into them): allocated, and mapped from the src=
// files (tensors held whole, used in place).
struct RankMemory {
  std::vector<std::int64_t> allocated, mapped;
  /// Predicted peak RSS of rank r: its data, received copies and temporaries,
  /// plus `overhead` (the process beyond them, measured by earlier runs).
  double rss(const RankEstimate& r, double overhead) const {
    return double(allocated[size_t(r.rank)] + mapped[size_t(r.rank)] + r.remote_peak_bytes + r.workspace_peak_bytes +
                  r.kept_bytes) +
           overhead;
  }
};
RankMemory rank_memory(const Dag& dag, int ranks) {
  RankMemory m;
  const DataOwners own = data_owners(dag, ranks);
  for (int r = 0; r < ranks; ++r) {
    const HeldBytes b = held_bytes(dag, residency(dag, own, r, ranks));
    m.allocated.push_back(b.allocated);
    m.mapped.push_back(b.mapped);
  }
  return m;
}

}  // namespace

nlohmann::json estimate_json(const Dag& dag, const ClusterSpec& spec, const DistributedEstimate& e,
                             const Prediction& one_rank, double rank_overhead) {
  const RankMemory mem = rank_memory(dag, e.ranks);
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankEstimate& r : e.per_rank)
    ranks.push_back({{"rank", r.rank},
                     {"allocated_bytes", mem.allocated[size_t(r.rank)]},
                     {"mapped_bytes", mem.mapped[size_t(r.rank)]},
                     {"peak_rss_bytes", rank_overhead < 0 ? nlohmann::json(nullptr)
                                                          : nlohmann::json(mem.rss(r, rank_overhead))},
                     {"node", r.node},
                     {"tasks", r.tasks},
                     {"busy_us", r.busy_s * 1e6},
                     {"bytes_sent", r.bytes_sent},
                     {"bytes_received", r.bytes_received},
                     {"messages_sent", r.messages_sent},
                     {"owned_bytes", r.owned_bytes},
                     {"remote_peak_bytes", r.remote_peak_bytes},
                     {"workspace_peak_bytes", r.workspace_peak_bytes},
                     {"kept_bytes", r.kept_bytes},
                     {"peak_bytes", r.peak_bytes()}});
  return {{"format", "ymlopt-estimate-1"},
          {"workflow", dag.name},
          {"tasks", dag.tasks.size()},
          {"calibrated", one_rank.calibrated},
          {"one_iteration", one_rank.one_iteration},
          {"history_tasks", one_rank.history_tasks},
          {"cluster",
           {{"nodes", spec.nodes},
            {"ranks_per_node", spec.ranks_per_node},
            {"ranks", e.ranks},
            {"workers_per_rank", spec.workers_per_rank},
            {"cores_per_node", spec.cores_per_node > 0 ? spec.cores_per_node : spec.ranks_per_node * spec.workers_per_rank},
            {"time_scale", e.time_scale},
            {"bandwidth_gbs", spec.bandwidth_gbs},
            {"latency_us", spec.latency_us},
            {"intra_gbs", spec.intra_gbs},
            {"intra_latency_us", spec.intra_latency_us}}},
          {"makespan_us", e.makespan_s * 1e6},
          {"one_rank_makespan_us", one_rank.makespan_s * 1e6},
          {"compute_us", e.compute_s * 1e6},
          {"transfer_us", e.transfer_s * 1e6},
          {"bytes_moved", e.bytes_moved},
          {"messages", e.messages},
          {"sync_tasks", e.sync_tasks},
          {"flops", one_rank.flops},
          {"per_rank", ranks},
          {"rank_overhead_bytes", rank_overhead < 0 ? nlohmann::json(nullptr) : nlohmann::json(rank_overhead)},
          {"one_process_bytes", one_rank.parameter_bytes + one_rank.activation_bytes}};
}

std::string format_estimate(const Dag& dag, const ClusterSpec& spec, const DistributedEstimate& e,
                            const Prediction& one_rank, double rank_overhead) {
  std::ostringstream o;
  const int cores = spec.cores_per_node > 0 ? spec.cores_per_node : spec.ranks_per_node * spec.workers_per_rank;
  char buf[256];
  o << "workflow '" << dag.name << "': " << dag.tasks.size() << " tasks on " << e.ranks << " rank"
    << (e.ranks == 1 ? "" : "s") << " (" << spec.nodes << " node" << (spec.nodes == 1 ? "" : "s") << " x "
    << spec.ranks_per_node << " rank" << (spec.ranks_per_node == 1 ? "" : "s") << ", " << spec.workers_per_rank
    << " worker" << (spec.workers_per_rank == 1 ? "" : "s") << " each, " << cores << " cores per node";
  if (e.time_scale > 1) {
    std::snprintf(buf, sizeof buf, ": tasks %.2fx slower, cores shared", e.time_scale);
    o << buf;
  }
  o << ")\n";
  std::snprintf(buf, sizeof buf,
                "network: %.3g GB/s and %.3g us per message between nodes (sends serialised on the node's NIC); "
                "%.3g GB/s and %.3g us between ranks of a node\n",
                spec.bandwidth_gbs, spec.latency_us, spec.intra_gbs, spec.intra_latency_us);
  o << buf;
  if (one_rank.one_iteration) o << "note: runtime loops or co-methods: the figures are for one iteration of each loop\n";
  o << "predicted makespan: " << ms(e.makespan_s) << " (one rank with " << one_rank.workers << " worker"
    << (one_rank.workers == 1 ? "" : "s") << ": " << ms(one_rank.makespan_s) << ")"
    << (one_rank.calibrated ? "" : " [uncalibrated (run ymlopt calibrate)]") << "\n";
  std::snprintf(buf, sizeof buf, "communication: %s MiB in %lld messages (%lld join/split no-ops)\n",
                mib(double(e.bytes_moved)).c_str(), (long long)e.messages, (long long)e.sync_tasks);
  o << buf;
  o << "rank  node   tasks     busy ms   sent MiB   recv MiB  owned MiB  remote peak MiB  workspace MiB  kept MiB  "
       "peak MiB\n";
  for (const RankEstimate& r : e.per_rank) {
    std::snprintf(buf, sizeof buf, "%4d  %4d  %6lld  %10.1f  %9s  %9s  %9s  %15s  %13s  %8s  %8s\n", r.rank, r.node,
                  (long long)r.tasks, r.busy_s * 1e3, mib(double(r.bytes_sent)).c_str(),
                  mib(double(r.bytes_received)).c_str(), mib(double(r.owned_bytes)).c_str(),
                  mib(double(r.remote_peak_bytes)).c_str(), mib(double(r.workspace_peak_bytes)).c_str(),
                  mib(double(r.kept_bytes)).c_str(), mib(double(r.peak_bytes())).c_str());
    o << buf;
  }
  const RankMemory mem = rank_memory(dag, e.ranks);
  o << "memory with the starpu-mpi backend: each rank holds the tensors it owns whole and its own tiles of the "
       "others, StarPU what it receives\nheld per rank (allocated + mapped from src= files):";
  for (size_t r = 0; r < mem.allocated.size(); ++r)
    o << (r ? ", " : " ") << human_bytes(double(mem.allocated[r])) << " + " << human_bytes(double(mem.mapped[r]));
  o << " (one process: " << human_bytes(double(one_rank.parameter_bytes + one_rank.activation_bytes)) << ")\n";
  if (rank_overhead < 0) {
    o << "peak RSS per rank: run it once with --backend starpu-mpi to measure what a rank uses beyond its data\n";
    return o.str();
  }
  o << "peak RSS per rank (its data, received copies, temporaries, and " << human_bytes(rank_overhead)
    << " a rank used beyond them in earlier runs):";
  for (const RankEstimate& r : e.per_rank) o << (r.rank ? ", " : " ") << human_bytes(mem.rss(r, rank_overhead));
  o << "\n";
  return o.str();
}

int cmd_estimate(const std::vector<std::string>& args) {
  constexpr int kNotGiven = -2147483647;
  WorkflowArgs wf;
  int nodes = kNotGiven, ranks_per_node = 1, ncpu = 0, cores = 0;
  double bandwidth = 12.5, latency = 2, intra = 0, intra_latency = 1;
  bool json = false, no_history = false;
  std::string distribute;
  po::options_description d("ymlopt estimate WF.xml --nodes N [options]");
  d.add_options()("help,h", "show this help")("nodes,N", po::value(&nodes), "number of nodes (required)")(
      "ranks-per-node", po::value(&ranks_per_node), "MPI ranks per node (default 1)")(
      "ncpu", po::value(&ncpu), "StarPU CPU workers per rank (default: the calibrated StarPU worker count)")(
      "cores-per-node", po::value(&cores),
      "cores of a node (default ranks-per-node x ncpu; fewer: ranks share them and tasks stretch)")(
      "bandwidth", po::value(&bandwidth), "network bandwidth between nodes in GB/s (default 12.5: 100 Gb/s InfiniBand)")(
      "latency", po::value(&latency), "network latency per message in microseconds (default 2)")(
      "intra-bandwidth", po::value(&intra), "GB/s between ranks of one node (default: the calibrated copy bandwidth)")(
      "intra-latency", po::value(&intra_latency), "latency per message between ranks of one node in microseconds (default 1)")(
      "json", po::bool_switch(&json), "machine-readable output")(
      "no-history", po::bool_switch(&no_history), "price tasks by the calibrated rates only, not this machine's task history")(
      "distribute", po::value(&distribute),
      "split a model over the ranks as `ymlopt run --distribute` does: tp, pp, tpxpp, tp=N,pp=M or auto");
  add_workflow_options(d, wf);
  std::vector<std::string> names;
  for (const auto& opt : d.options()) names.push_back("--" + opt->long_name());
  try {
    if (parse_or_help(args, d, &wf)) return 0;
  } catch (const UsageError& e) {
    // boost: "unrecognised option '--nodse'": suggest the nearest option
    std::string msg = e.what();
    const auto q1 = msg.find('\''), q2 = msg.rfind('\'');
    if (msg.find("unrecognised option") != std::string::npos && q1 != std::string::npos && q2 > q1) {
      std::string bad = msg.substr(q1 + 1, q2 - q1 - 1);
      const auto eq = bad.find('=');
      if (eq != std::string::npos) bad.resize(eq);
      msg = "estimate: unknown option '" + bad + "'" + did_you_mean(bad, names);
    } else {
      msg = "estimate: " + msg;
    }
    throw UsageError(msg);
  }
  if (nodes == kNotGiven) throw UsageError("estimate: --nodes N is required");
  if (nodes < 1) throw UsageError("estimate: --nodes must be >= 1");
  if (ranks_per_node < 1) throw UsageError("estimate: --ranks-per-node must be >= 1");
  if (ncpu < 0) throw UsageError("estimate: --ncpu must be >= 0");
  if (cores < 0) throw UsageError("estimate: --cores-per-node must be >= 0");
  if (!(bandwidth > 0)) throw UsageError("estimate: --bandwidth must be > 0 (GB/s)");
  if (!(latency >= 0)) throw UsageError("estimate: --latency must be >= 0 (microseconds)");
  if (intra < 0 || intra != intra) throw UsageError("estimate: --intra-bandwidth must be > 0 (GB/s)");
  if (!(intra_latency >= 0)) throw UsageError("estimate: --intra-latency must be >= 0 (microseconds)");

  if (!distribute.empty())
    for (auto& s : distribute_sets(distribute, wf.file, wf.sets, nodes * ranks_per_node, ranks_per_node))
      wf.sets.push_back(std::move(s));
  ComponentRegistry reg;
  CompileResult cr;
  if (int rc = prepare(wf, reg, cr, /*check_files=*/false)) return rc;  // plan without the weights
  const Dag& dag = cr.dag;
  const Calibration cal = calibration_or_builtin();
  const int workers = ncpu > 0 ? ncpu : std::max(1, cal.starpu_workers);
  const History history = no_history ? History{} : load_history();
  const Prediction one = predict(dag, cal, workers, "starpu", &history);
  ClusterSpec spec;
  spec.nodes = nodes;
  spec.ranks_per_node = ranks_per_node;
  spec.workers_per_rank = workers;
  spec.cores_per_node = cores;
  spec.bandwidth_gbs = bandwidth;
  spec.latency_us = latency;
  spec.intra_gbs = intra > 0 ? intra : cal.copy_gbs;
  spec.intra_latency_us = intra_latency;
  auto oh = cal.task_overhead_us.find("starpu");
  spec.sync_seconds = oh != cal.task_overhead_us.end() ? oh->second * 1e-6 : 0;
  spec.kept_budget_bytes = kept_panel_budget();
  const DistributedEstimate e = estimate_distributed(dag, one.task_s, spec);
  if (json) std::cout << estimate_json(dag, spec, e, one, history.rank_overhead()).dump(1) << "\n";
  else std::cout << format_estimate(dag, spec, e, one, history.rank_overhead());
  return 0;
}

}  // namespace ymlopt
