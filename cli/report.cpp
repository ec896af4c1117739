#include "report.hpp"

#include "gemm/gemm.hpp"
#include "quant/qlinear.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace ymlopt {

namespace {
struct ComponentRow {
  long tasks = 0;
  double us = 0, flops = 0;
};
// Tasks that ran, summed per component (sorted by name).
std::map<std::string, ComponentRow> component_rows(const Dag& dag, const ExecResult& r) {
  std::map<std::string, ComponentRow> rows;
  auto add = [&](const TaskRecord& rec) {
    if (!rec.ran || rec.restored) return;
    const TaskNode& n = dag.tasks[size_t(rec.task)];
    ComponentRow& row = rows[n.comp->name];
    ++row.tasks;
    row.us += rec.end_us - rec.start_us;
    row.flops += n.cost.flops;
  };
  for (const auto& rec : r.records) add(rec);
  for (const auto& rec : r.repeats) add(rec);  // runtime loops ran these again
  return rows;
}

// Runs per task (1 + the repeats of runtime loops).
std::vector<std::int64_t> runs_per_task(const Dag& dag, const ExecResult& r) {
  std::vector<std::int64_t> runs(dag.tasks.size(), 0);
  for (const auto& rec : r.records)
    if (rec.ran) ++runs[size_t(rec.task)];
  for (const auto& rec : r.repeats)
    if (rec.ran) ++runs[size_t(rec.task)];
  return runs;
}

nlohmann::json unite_json(const Dag& dag, const ExecResult& r) {
  using nlohmann::json;
  json out = json::array();
  for (const auto& u : r.unites) {
    json cms = json::array();
    for (const auto& c : u.comethods) {
      json hist = json::array();
      for (const auto& [t, s] : c.score_history) hist.push_back({t, s});
      json ex = json::array();
      for (const auto& e : c.exchanges) {
        json j = {{"t_s", e.time_s}, {"op", e.publish ? "publish" : "gather"}, {"channel", e.channel}, {"score", e.score}};
        if (!e.publish) j["source"] = e.source;
        ex.push_back(std::move(j));
      }
      const Region& g = dag.regions[size_t(c.region)];
      json j = {{"name", c.name},
                {"line", g.loc.line},
                {"status", c.failed ? "failed" : c.stopped ? "stopped" : c.converged ? "converged" : "finished"},
                {"winner", c.winner},
                {"iterations", c.iterations},
                {"publishes", c.publishes},
                {"gathers", c.gathers},
                {"gathered_from_others", c.adopted},
                {"best_score", std::isnan(c.best_score) ? json(nullptr) : json(c.best_score)},
                {"start_s", c.start_s},
                {"end_s", c.end_s},
                {"worker_s", c.worker_s},
                {"score_history", std::move(hist)},
                {"exchanges", std::move(ex)}};
      if (!c.error.empty()) j["error"] = c.error;
      if (!c.context_workers.empty()) j["context_workers"] = c.context_workers;
      cms.push_back(std::move(j));
    }
    json j = {{"name", u.name}, {"exit", u.exit},     {"winner", u.winner},
              {"start_s", u.start_s}, {"end_s", u.end_s}, {"comethods", std::move(cms)}};
    if (!u.within.empty()) j["within"] = u.within;
    out.push_back(std::move(j));
  }
  return out;
}
}  // namespace

namespace {
double us_of(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
}  // namespace

void PhaseClock::mark(const char* phase) {
  const auto now = std::chrono::steady_clock::now();
  phases_[phase] = us_of(now - last_);
  last_ = now;
}

double PhaseClock::total_us() const { return us_of(last_ - start_); }

nlohmann::json PhaseClock::json(const RunTotals& t) const {
  nlohmann::json j = phases_;
  if (phases_.contains("run")) {
    double warm = 0;
    for (double w : t.warmup_us) warm += w;
    j["run_split"] = {{"runtime_start_stop", phases_["run"].get<double>() - t.setup_us - warm - t.makespan_us},
                      {"setup", t.setup_us}, {"warmup", warm}, {"makespan", t.makespan_us}};
  }
  j["total"] = total_us();
  return j;
}

std::string PhaseClock::line(const nlohmann::json& j) const {
  const double report = us_of(std::chrono::steady_clock::now() - last_);
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "wall " << (total_us() + report) / 1e3 << " ms:";
  const char* sep = " ";
  for (const char* p : {"probe", "compile", "data", "predict"}) {
    if (!j.contains(p)) continue;
    o << sep << p << " " << j[p].get<double>() / 1e3;
    sep = ", ";
  }
  if (j.contains("run_split")) {
    const auto& r = j["run_split"];
    o << sep << "runtime start+stop " << r["runtime_start_stop"].get<double>() / 1e3 << ", set-up "
      << r["setup"].get<double>() / 1e3;
    if (r["warmup"].get<double>() > 0) o << ", warm-up runs " << r["warmup"].get<double>() / 1e3;
    o << ", makespan " << r["makespan"].get<double>() / 1e3;
  }
  if (j.contains("history")) o << ", history " << j["history"].get<double>() / 1e3;
  o << ", report " << report / 1e3 << " ms (from the command's start; loading the process and exiting come on top)\n";
  return o.str();
}

RunTotals compute_totals(const Dag& dag, const ExecResult& r) {
  RunTotals t;
  t.makespan_us = r.makespan_us;
  t.setup_us = r.setup_us;
  t.warmup_us = r.warmup_us;
  std::vector<double> finish(dag.tasks.size(), 0);
  for (auto id : dag.topo_order) {
    const TaskNode& n = dag.tasks[size_t(id)];
    const TaskRecord& rec = r.records[size_t(id)];
    const double dur = rec.ran ? rec.end_us - rec.start_us : 0;
    double start = 0;
    for (auto p : n.preds) start = std::max(start, finish[size_t(p)]);
    finish[size_t(id)] = start + dur;
    t.critical_path_us = std::max(t.critical_path_us, finish[size_t(id)]);
    if (rec.restored) {
      ++t.tasks_restored;
    } else if (rec.ran) {
      t.sum_task_us += dur;
      t.flops += n.cost.flops;
      ++t.tasks_run;
    }
  }
  for (const auto& rec : r.repeats) {  // earlier iterations of runtime loops
    if (!rec.ran) continue;
    t.sum_task_us += rec.end_us - rec.start_us;
    t.flops += dag.tasks[size_t(rec.task)].cost.flops;
    ++t.tasks_run;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  t.peak_rss_bytes = ru.ru_maxrss * 1024L;
  return t;
}

namespace {

struct WorkerRow {
  std::int64_t tasks = 0;
  double busy_us = 0, flops = 0;
};

// Tasks, busy time and flops per worker (every run of looped tasks).
std::vector<WorkerRow> worker_rows(const Dag& dag, const ExecResult& r) {
  std::vector<WorkerRow> rows(r.workers.size());
  auto add = [&](const TaskRecord& rec) {
    if (!rec.ran || rec.restored || rec.worker < 0 || size_t(rec.worker) >= rows.size()) return;
    WorkerRow& w = rows[size_t(rec.worker)];
    ++w.tasks;
    w.busy_us += rec.end_us - rec.start_us;
    w.flops += dag.tasks[size_t(rec.task)].cost.flops;
  };
  for (const auto& rec : r.records) add(rec);
  for (const auto& rec : r.repeats) add(rec);
  return rows;
}

const char* worker_kind(const ExecResult& r, size_t w) {
  return w < r.worker_kinds.size() ? where_name(r.worker_kinds[w]) : "cpu";
}

nlohmann::json worker_stats_json(const Dag& dag, const ExecResult& r) {
  nlohmann::json out = nlohmann::json::array();
  const auto rows = worker_rows(dag, r);
  for (size_t w = 0; w < rows.size(); ++w)
    out.push_back({{"worker", r.workers[w]}, {"kind", worker_kind(r, w)}, {"tasks", rows[w].tasks},
                   {"busy_us", rows[w].busy_us}, {"flops", rows[w].flops}});
  return out;
}

}  // namespace

nlohmann::json make_report(const Dag& dag, const ExecResult& r, const RunTotals& t, const nlohmann::json& run_info,
                           const std::vector<std::int32_t>* task_ranks) {
  using nlohmann::json;
  json tasks = json::array();
  const auto runs = runs_per_task(dag, r);
  for (const auto& n : dag.tasks) {
    const TaskRecord& rec = r.records[size_t(n.id)];
    json j = {{"id", n.id},
              {"name", n.label},
              {"component", n.comp->name},
              {"file", n.loc.file ? *n.loc.file : dag.file},
              {"line", n.loc.line},
              {"status", rec.restored ? "restored" : rec.ran ? "done" : (n.id == r.failed_task ? "failed" : "cancelled")},
              {"worker", rec.worker >= 0 && size_t(rec.worker) < r.workers.size() ? json(r.workers[size_t(rec.worker)]) : json(nullptr)},
              {"worker_kind", rec.worker >= 0 && size_t(rec.worker) < r.worker_kinds.size()
                                  ? json(where_name(r.worker_kinds[size_t(rec.worker)]))
                                  : json(nullptr)},
              {"start_us", rec.start_us},
              {"end_us", rec.end_us},
              {"flops", n.cost.flops},
              {"bytes", n.cost.bytes}};
    if (rec.predicted_us >= 0) j["predicted_us"] = rec.predicted_us;
    if (task_ranks) {
      const std::int32_t rank = (*task_ranks)[size_t(n.id)];
      j["rank"] = rank >= 0 ? json(rank) : json(nullptr);
    }
    json data = json::array();
    for (const auto& b : n.bindings)
      if (b.ref.data >= 0) data.push_back(std::string(access_name(b.mode)) + " " + dag.ref_name(b.ref));
    j["data"] = data;
    if (!n.preds.empty()) j["deps"] = n.preds;
    if (n.comethod >= 0) j["comethod"] = dag.comethod_path(n.comethod);
    if (runs[size_t(n.id)] > 1) j["runs"] = runs[size_t(n.id)];  // a runtime loop ran it again (start/end: the last run)
    if (!rec.results.empty()) {
      json res = json::object();
      for (const auto& [k, v] : rec.results) res[k] = v;
      j["results"] = res;
    }
    tasks.push_back(std::move(j));
  }
  // per component: tasks, measured time, flops, achieved rate
  json comps = json::object();
  for (const auto& [name, row] : component_rows(dag, r)) {
    const double rate = row.us > 0 ? row.flops / row.us / 1e3 : 0.0;
    comps[name] = {{"tasks", row.tasks}, {"time_us", row.us}, {"flops", row.flops}, {"gflops_per_s", rate}};
    // a task runs on one core: compare with the per-core share of the single call
    if (t.blas_peak_gflops > 0 && row.flops > 0 && !r.workers.empty())
      comps[name]["fraction_of_blas_per_core"] = rate / (t.blas_peak_gflops / double(r.workers.size()));
  }
  json report = run_info;
  report["components"] = std::move(comps);
  report["status"] = r.ok ? "ok" : "failed";
  if (!r.ok) report["error"] = r.error;
  report["scheduler"] = r.scheduler;
  report["runtime"] = r.runtime;
  report["workers"] = r.workers;
  report["worker_stats"] = worker_stats_json(dag, r);
  json transfers = json::array();
  std::int64_t moved = 0;
  for (const auto& x : r.transfers) {
    transfers.push_back({{"src", x.src}, {"dst", x.dst}, {"bytes", x.bytes}, {"count", x.count}});
    moved += x.bytes;
  }
  report["transfers"] = std::move(transfers);
  report["tasks"] = std::move(tasks);
  report["totals"] = {{"tasks", dag.tasks.size()},
                      {"tasks_run", t.tasks_run},
                      {"tasks_restored", t.tasks_restored},
                      {"edges", dag.num_edges()},
                      {"makespan_us", t.makespan_us},
                      {"setup_us", t.setup_us},
                      {"warmup_us", t.warmup_us},
                      {"critical_path_us", t.critical_path_us},
                      {"sum_task_us", t.sum_task_us},
                      {"flops", t.flops},
                      {"gflops_per_s", t.makespan_us > 0 ? t.flops / t.makespan_us / 1e3 : 0.0},
                      {"blas_peak_gflops", t.blas_peak_gflops},
                      {"fraction_of_blas_peak",
                       t.blas_peak_gflops > 0 && t.makespan_us > 0 ? t.flops / t.makespan_us / 1e3 / t.blas_peak_gflops : 0.0},
                      {"peak_rss_bytes", t.peak_rss_bytes},
                      {"bytes_moved", moved}};
  // weights packed into panels in this process (nn.linear: f32 by gemm::sgemm_panels, int8/int4/q8_0/q4_0 by
  // quant::linear's AVX-512 panel kernels): part of the peak RSS
  auto kept = [](const auto& s) {
    return json{{"packed", s.misses}, {"reused", s.hits},     {"first_uses", s.deferred},
                {"left_unpacked", s.refused}, {"bytes", s.bytes}, {"budget_bytes", s.budget}};
  };
  report["kept_panels"] = {{"f32", kept(gemm::sgemm_pack_cache_stats())}, {"quantized", kept(quant::panel_cache_stats())},
                           {"quantized_activations", kept(quant::acts_cache_stats())}};
  if (!r.warnings.empty()) report["warnings"] = r.warnings;
  if (dag.dynamic()) {
    report["unites"] = unite_json(dag, r);
    json loops = json::array();
    for (const auto& [region, n] : r.loop_iterations) {
      const Region& g = dag.regions[size_t(region)];
      json j = {{"kind", g.kind == Region::Kind::until ? "until" : "while"}, {"line", g.loc.line}, {"cond", g.cond},
                {"iterations", n}, {"max", g.max_iter}};
      if (g.end_task > g.first_task && dag.tasks[size_t(g.first_task)].comethod >= 0)
        j["comethod"] = dag.comethod_path(dag.tasks[size_t(g.first_task)].comethod);
      loops.push_back(std::move(j));
    }
    report["loops"] = std::move(loops);
  }
  return report;
}

std::int64_t kept_panel_budget() { return gemm::sgemm_pack_cache_stats().budget + quant::panel_cache_stats().budget; }

std::string trace_json(const Dag& dag, const ExecResult& r, const std::vector<std::int32_t>* task_ranks) {
  // Written as text, not built as a json tree: a generation of a few hundred
  // tokens has hundreds of thousands of task runs.
  using nlohmann::json;
  std::string o;
  o.reserve(256 + (r.records.size() + r.repeats.size()) * 200);
  o += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto meta = [&](const json& e) {
    if (!first) o += ',';
    first = false;
    o += e.dump();
  };
  for (size_t w = 0; w < r.workers.size(); ++w)
    meta({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", w}, {"args", {{"name", r.workers[w]}}}});
  meta({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", dag.name}}}});
  // co-methods: one process (a group of worker lanes) each
  std::map<std::int32_t, int> lane_of;
  for (const auto& n : dag.tasks)
    if (n.comethod >= 0 && !lane_of.count(n.comethod)) {
      const int pid = 2 + int(lane_of.size());
      lane_of[n.comethod] = pid;
      meta({{"name", "process_name"}, {"ph", "M"}, {"pid", pid},
            {"args", {{"name", "co-method " + dag.comethod_path(n.comethod)}}}});
      for (size_t w = 0; w < r.workers.size(); ++w)
        meta({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", w}, {"args", {{"name", r.workers[w]}}}});
    }
  // the per-task parts that do not change between runs of a task, once each
  std::vector<std::string> head(dag.tasks.size());
  auto number = [&](double v) {
    if (!std::isfinite(v)) {  // as nlohmann::json writes them
      o += "null";
      return;
    }
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    o.append(buf, res.ptr);
  };
  auto run = [&](const TaskRecord& rec) {
    const TaskNode& n = dag.tasks[size_t(rec.task)];
    if (!rec.ran && n.id != r.failed_task) return;
    std::string& h = head[size_t(n.id)];
    if (h.empty()) {
      h = "{\"name\":" + json(n.label.empty() ? n.comp->name : n.label).dump() + ",\"cat\":" + json(n.comp->name).dump() +
          ",\"ph\":\"X\",\"pid\":" + std::to_string(n.comethod >= 0 ? lane_of[n.comethod] : 1) + ",\"tid\":";
    }
    if (!first) o += ',';
    first = false;
    o += h;
    o += std::to_string(std::max(0, rec.worker));
    o += ",\"ts\":";
    number(rec.start_us);
    o += ",\"dur\":";
    number(std::max(0.0, rec.end_us - rec.start_us));
    o += ",\"args\":{\"id\":" + std::to_string(n.id) + ",\"line\":" + std::to_string(n.loc.line) + ",\"flops\":";
    number(n.cost.flops);
    if (rec.iteration > 0) o += ",\"iteration\":" + std::to_string(rec.iteration);
    if (task_ranks) o += ",\"rank\":" + std::to_string((*task_ranks)[size_t(n.id)]);
    for (const auto& [k, v] : rec.results) {
      o += ',';
      o += json(k).dump();
      o += ':';
      number(v);
    }
    o += "}}";
  };
  for (const auto& rec : r.repeats) run(rec);
  for (const auto& rec : r.records) run(rec);
  o += "]}";
  return o;
}

namespace {

// With accelerator workers or transfers: tasks, busy time and flops per kind
// of worker, and the bytes moved per direction.
std::string device_split(const Dag& dag, const ExecResult& r) {
  const bool devices = std::any_of(r.worker_kinds.begin(), r.worker_kinds.end(), [](Where w) { return w != Where::cpu; });
  if (!devices && r.transfers.empty()) return "";
  std::map<std::string, WorkerRow> kinds;
  const auto rows = worker_rows(dag, r);
  for (size_t w = 0; w < rows.size(); ++w) {
    WorkerRow& k = kinds[worker_kind(r, w)];
    k.tasks += rows[w].tasks;
    k.busy_us += rows[w].busy_us;
    k.flops += rows[w].flops;
  }
  std::string o = "workers:";
  char buf[160];
  for (const auto& [kind, k] : kinds) {
    std::snprintf(buf, sizeof buf, " %s %ld tasks %.3f ms %.3g GFLOP,", kind.c_str(), long(k.tasks), k.busy_us / 1e3,
                  k.flops / 1e9);
    o += buf;
  }
  o.back() = '\n';
  if (r.transfers.empty()) return o + "moved: nothing between memory nodes\n";
  o += "moved:";
  for (const auto& x : r.transfers) {
    std::snprintf(buf, sizeof buf, " %s -> %s %.2f MiB (%ld),", x.src.c_str(), x.dst.c_str(), double(x.bytes) / (1 << 20),
                  long(x.count));
    o += buf;
  }
  o.back() = '\n';
  return o;
}

}  // namespace

std::string summary_table(const Dag& dag, const ExecResult& r, const RunTotals& t) {
  const auto rows = component_rows(dag, r);
  std::string o;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-22s %8s %12s %10s\n", "component", "tasks", "time (ms)", "GFLOP/s");
  o += buf;
  for (const auto& [name, row] : rows) {
    if (row.flops > 0)
      std::snprintf(buf, sizeof buf, "%-22s %8ld %12.3f %10.2f\n", name.c_str(), row.tasks, row.us / 1e3,
                    row.us > 0 ? row.flops / row.us / 1e3 : 0.0);
    else
      std::snprintf(buf, sizeof buf, "%-22s %8ld %12.3f %10s\n", name.c_str(), row.tasks, row.us / 1e3, "-");
    o += buf;
  }
  if (t.tasks_restored > 0) {
    std::snprintf(buf, sizeof buf, "%-22s %8zu %12s %10s\n", "(restored)", t.tasks_restored, "-", "-");
    o += buf;
  }
  std::snprintf(buf, sizeof buf,
                "makespan %.3f ms (after %.3f ms of set-up), critical path %.3f ms, sum of task time %.3f ms, %.2f GFLOP/s "
                "overall, peak RSS %.1f MiB\n",
                t.makespan_us / 1e3, t.setup_us / 1e3, t.critical_path_us / 1e3, t.sum_task_us / 1e3,
                t.makespan_us > 0 ? t.flops / t.makespan_us / 1e3 : 0.0, double(t.peak_rss_bytes) / (1 << 20));
  o += buf;
  if (!t.warmup_us.empty()) {  // run --warmup: this was the last of 1 + N runs
    o += "after " + std::to_string(t.warmup_us.size()) + " warm-up run" + (t.warmup_us.size() == 1 ? "" : "s") +
         " (makespan";
    for (size_t i = 0; i < t.warmup_us.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s %.3f ms", i ? "," : "", t.warmup_us[i] / 1e3);
      o += buf;
    }
    o += ")\n";
  }
  o += device_split(dag, r);
  size_t shown = 0;
  for (const auto& n : dag.tasks) {
    const TaskRecord& rec = r.records[size_t(n.id)];
    if (rec.results.empty()) continue;
    if (shown++ == 20) {
      o += "  ... (more results in report.json)\n";
      break;
    }
    std::string line = "  " + (n.label.empty() ? n.comp->name + " #" + std::to_string(n.id) : n.label) + " (line " +
                       std::to_string(n.loc.line) + "):";
    for (const auto& [k, v] : rec.results) {
      std::snprintf(buf, sizeof buf, " %s=%.6g", k.c_str(), v);
      line += buf;
    }
    o += line + "\n";
  }
  return o;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot write");
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot rename temporary file");
  }
}

}  // namespace ymlopt
