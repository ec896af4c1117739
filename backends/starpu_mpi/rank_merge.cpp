// The ranks' results merged into one run (rank_result_json, merge_rank_results).
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "starpu_bind.hpp"
#include "starpu_mpi_backend.hpp"
#include "ymlopt/scheduler/topology.hpp"

namespace ymlopt {

nlohmann::json rank_result_json(const ExecResult& r, const MpiRankStats& s) {
  using nlohmann::json;
  json recs = json::array();
  for (size_t i = 0; i < r.records.size(); ++i) {
    const TaskRecord& rec = r.records[i];
    if (!rec.ran && std::int32_t(i) != r.failed_task) continue;
    json res = json::array();
    for (const auto& [k, v] : rec.results) res.push_back({k, v});
    recs.push_back({i, rec.worker, rec.start_us, rec.end_us, rec.ran, res});
  }
  // earlier runs of looped tasks, and the loops' iteration counts (the same on every rank)
  json repeats = json::array();
  for (const TaskRecord& rec : r.repeats)
    if (rec.ran) repeats.push_back({rec.task, rec.worker, rec.start_us, rec.end_us, rec.iteration});
  json loops = json::array();
  for (const auto& [region, it] : r.loop_iterations) loops.push_back({region, it});
  json kinds = json::array(), transfers = json::array();
  for (Where w : r.worker_kinds) kinds.push_back(where_name(w));
  for (const auto& x : r.transfers) transfers.push_back({x.src, x.dst, x.bytes, x.count});
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {{"rank", s.rank},         {"ok", r.ok},
          {"peak_rss_bytes", std::int64_t(ru.ru_maxrss) * 1024},
          {"error", r.error},       {"failed_task", r.failed_task},
          {"workers", r.workers},   {"makespan_us", r.makespan_us},
          {"runtime", r.runtime},   {"scheduler", r.scheduler},
          {"warnings", r.warnings}, {"sent_to", s.sent_to}, {"allocated_bytes", s.allocated_bytes},
          {"mapped_bytes", s.mapped_bytes},
          {"records", recs},        {"repeats", repeats},
          {"loops", loops},         {"placement", placement_json(last_starpu_placement())},
          {"worker_kinds", kinds},  {"transfers", transfers}};
}

MergedRun merge_rank_results(const Dag& dag, const std::vector<std::string>& per_rank_json) {
  using nlohmann::json;
  MergedRun m;
  ExecResult& out = m.result;
  out.records.assign(dag.tasks.size(), TaskRecord{});
  for (size_t i = 0; i < out.records.size(); ++i) out.records[i].task = std::int32_t(i);
  m.task_ranks.assign(dag.tasks.size(), -1);
  out.ok = true;
  const size_t n = per_rank_json.size();
  std::vector<std::uint64_t> received(n, 0);
  std::vector<json> ranks;
  for (const auto& s : per_rank_json) ranks.push_back(json::parse(s));
  for (size_t r = 0; r < n; ++r) {
    const auto sent = ranks[r]["sent_to"].get<std::vector<std::uint64_t>>();
    for (size_t d = 0; d < sent.size() && d < n; ++d) received[d] += sent[d];
  }
  double first_failure_us = 0;
  for (size_t r = 0; r < n; ++r) {
    const json& j = ranks[r];
    const std::int32_t offset = std::int32_t(out.workers.size());
    for (const auto& w : j["workers"]) out.workers.push_back(std::to_string(r) + ":" + w.get<std::string>());
    for (const auto& k : j.value("worker_kinds", json::array())) {
      Where w = Where::cpu;
      parse_where(k.get<std::string>(), w);
      out.worker_kinds.push_back(w);
    }
    for (const auto& x : j.value("transfers", json::array()))
      out.transfers.push_back({std::to_string(r) + ":" + x[0].get<std::string>(),
                               std::to_string(r) + ":" + x[1].get<std::string>(), x[2].get<std::int64_t>(),
                               x[3].get<std::int64_t>()});
    out.makespan_us = std::max(out.makespan_us, j["makespan_us"].get<double>());
    if (out.runtime.empty()) out.runtime = j["runtime"].get<std::string>(), out.scheduler = j["scheduler"].get<std::string>();
    for (const auto& w : j["warnings"]) {
      const std::string s = w.get<std::string>();
      if (std::find(out.warnings.begin(), out.warnings.end(), s) == out.warnings.end()) out.warnings.push_back(s);
    }
    double busy = 0;
    std::int64_t ran = 0;
    for (const auto& rec : j["records"]) {
      const auto id = rec[0].get<std::size_t>();
      if (id >= out.records.size()) continue;
      TaskRecord& t = out.records[id];
      const std::int32_t w = rec[1].get<std::int32_t>();
      t.worker = w >= 0 ? offset + w : -1;
      t.start_us = rec[2].get<double>();
      t.end_us = rec[3].get<double>();
      t.ran = rec[4].get<bool>();
      for (const auto& kv : rec[5]) t.results.emplace_back(kv[0].get<std::string>(), kv[1].get<double>());
      m.task_ranks[id] = std::int32_t(r);
      if (t.ran) busy += t.end_us - t.start_us, ++ran;
    }
    for (const auto& rec : j.value("repeats", json::array())) {
      TaskRecord t;
      t.task = rec[0].get<std::int32_t>();
      const std::int32_t w = rec[1].get<std::int32_t>();
      t.worker = w >= 0 ? offset + w : -1;
      t.start_us = rec[2].get<double>();
      t.end_us = rec[3].get<double>();
      t.iteration = rec[4].get<std::int32_t>();
      t.ran = true;
      busy += t.end_us - t.start_us, ++ran;
      out.repeats.push_back(std::move(t));
    }
    if (r == 0)
      for (const auto& l : j.value("loops", json::array()))
        out.loop_iterations.emplace_back(l[0].get<std::int32_t>(), l[1].get<std::int64_t>());
    std::uint64_t sent = 0;
    for (auto b : j["sent_to"]) sent += b.get<std::uint64_t>();
    m.bytes_moved += sent;
    m.ranks.push_back({{"rank", r},
                       {"workers", j["workers"]},
                       {"tasks_run", ran},
                       {"busy_us", busy},
                       {"makespan_us", j["makespan_us"]},
                       {"bytes_sent", sent},
                       {"bytes_received", received[r]},
                       {"allocated_bytes", j.value("allocated_bytes", std::uint64_t(0))},
                       {"mapped_bytes", j.value("mapped_bytes", std::uint64_t(0))},
                       {"peak_rss_bytes", j.value("peak_rss_bytes", std::int64_t(0))},
                       {"status", j["ok"].get<bool>() ? "ok" : "failed"}});
    if (!j["ok"].get<bool>()) {
      const std::int32_t ft = j["failed_task"].get<std::int32_t>();
      // a rank that only stopped with another (runtime loops agree after each
      // part) names no task: the rank whose task failed gives the error
      const double when = ft >= 0 && size_t(ft) < out.records.size() ? out.records[size_t(ft)].start_us
                                                                      : std::numeric_limits<double>::infinity();
      if (out.ok || when < first_failure_us) {
        out.ok = false;
        out.failed_task = ft;
        const std::string e = j["error"].get<std::string>();
        out.error = e.rfind("rank ", 0) == 0 ? e : "rank " + std::to_string(r) + ": " + e;
        first_failure_us = when;
      }
    }
  }
  // the same error on every rank (a workflow the backend refuses) is the run's, not a rank's
  if (!out.ok && std::all_of(ranks.begin(), ranks.end(), [&](const json& j) {
        return !j["ok"].get<bool>() && j["failed_task"].get<std::int32_t>() < 0 && j["error"] == ranks[0]["error"];
      }))
    out.error = ranks[0]["error"].get<std::string>();
  merge_rank_placements(ranks, m.ranks, out.warnings);  // each rank's cpuset and workers; overlapping ranks
  return m;
}

}  // namespace ymlopt
