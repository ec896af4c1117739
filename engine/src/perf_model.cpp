#include "ymlopt/engine/perf_model.hpp"

#include "ymlopt/engine/analysis.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ymlopt {

// ------------------------------------------------------------------ calibration

nlohmann::json to_json(const Calibration& c) {
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [name, pts] : c.kernels) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& p : pts) a.push_back({{"m", p.m}, {"n", p.n}, {"k", p.k}, {"gflops", p.gflops}});
    kernels[name] = a;
  }
  nlohmann::json comps = nlohmann::json::object();
  for (const auto& [name, r] : c.components) comps[name] = {{"gflops", r.gflops}, {"gbs", r.gbs}, {"latency_us", r.latency_us}};
  return {{"format", "ymlopt-calibration-1"},
          {"calibrated", c.calibrated},
          {"host", c.host},
          {"cpu_model", c.cpu_model},
          {"blas_core", c.blas_core},
          {"created", c.created},
          {"hardware_threads", c.hardware_threads},
          {"starpu_workers", c.starpu_workers},
          {"kernels", kernels},
          {"components", comps},
          {"read_gbs", c.read_gbs},
          {"copy_gbs", c.copy_gbs},
          {"mapped_gbs", c.mapped_gbs},
          {"task_overhead_us", c.task_overhead_us}};
}

Calibration calibration_from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object() || j.value("format", "") != "ymlopt-calibration-1")
      throw std::runtime_error("not a ymlopt calibration (format 'ymlopt-calibration-1' expected)");
    Calibration c;
    c.calibrated = j.at("calibrated").get<bool>();
    c.host = j.at("host").get<std::string>();
    c.cpu_model = j.at("cpu_model").get<std::string>();
    c.blas_core = j.at("blas_core").get<std::string>();
    c.created = j.at("created").get<std::string>();
    c.hardware_threads = j.at("hardware_threads").get<int>();
    c.starpu_workers = j.at("starpu_workers").get<int>();
    for (const auto& [name, pts] : j.at("kernels").items())
      for (const auto& p : pts)
        c.kernels[name].push_back({p.at("m").get<std::int64_t>(), p.at("n").get<std::int64_t>(),
                                   p.at("k").get<std::int64_t>(), p.at("gflops").get<double>()});
    for (const auto& [name, r] : j.at("components").items())
      c.components[name] = {r.at("gflops").get<double>(), r.at("gbs").get<double>(), r.value("latency_us", 0.0)};
    c.read_gbs = j.at("read_gbs").get<double>();
    c.copy_gbs = j.at("copy_gbs").get<double>();
    c.mapped_gbs = j.value("mapped_gbs", c.mapped_gbs);
    c.task_overhead_us = j.at("task_overhead_us").get<std::map<std::string, double>>();
    if (c.read_gbs <= 0 || c.copy_gbs <= 0 || c.mapped_gbs <= 0) throw std::runtime_error("bandwidths must be > 0");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed calibration: ") + e.what());
  }
}

Calibration builtin_calibration() {
  // deliberately plain figures of a current x86 core (1 thread): AVX2/AVX-512
  // sgemm ~50 GFLOP/s, half for dgemm, int8 ~2x sgemm, bf16 ~1.5x, sparse formats
  // at the dense rate in their own flop count, ~10 GB/s streaming
  Calibration c;
  c.calibrated = false;
  c.hardware_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  c.starpu_workers = c.hardware_threads;
  c.cpu_model = cpu_model_name();
  c.kernels = {{"sgemm", {{256, 256, 256, 50}}}, {"dgemm", {{256, 256, 256, 25}}}, {"int8", {{128, 768, 768, 100}}},
               {"int4", {{128, 768, 768, 60}}},  {"csr", {{128, 768, 768, 20}}},   {"nm24", {{128, 768, 768, 25}}},
               {"bsr", {{128, 768, 768, 30}}},   {"bf16", {{128, 768, 768, 75}}}};
  return c;
}

std::string ymlopt_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (std::filesystem::path(x) / "ymlopt").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (std::filesystem::path(h) / ".cache/ymlopt").string();
  return "";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string calibration_path() {
  const std::string dir = ymlopt_cache_dir();
  if (dir.empty()) return "";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across builds, unlike std::hash
  for (unsigned char ch : cpu_model_name()) h = (h ^ ch) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08llx", (unsigned long long)(h & 0xffffffffull));
  return (std::filesystem::path(dir) / ("calibration-" + std::string(host) + "-" + buf + ".json")).string();
}

std::optional<Calibration> load_calibration(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    nlohmann::json j;
    in >> j;
    return calibration_from_json(j);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// ------------------------------------------------------------------ rates

TaskRate task_rate(const TaskNode& t, const Dag& dag) {
  TaskRate r;
  if (t.comp->rate) {
    const std::vector<TensorView> views = dag.shape_views(t.bindings);
    try {
      r = t.comp->rate(TaskShape{views, t.args});
    } catch (const std::exception&) {
      r = TaskRate{};
    }
  }
  if (r.kind == RateKind::component && r.name.empty()) r.name = t.comp->name;
  return r;
}

double kernel_gflops(const Calibration& c, const std::string& name, std::int64_t m, std::int64_t n, std::int64_t k) {
  auto it = c.kernels.find(name);
  if (it == c.kernels.end() || it->second.empty()) return 0;
  auto lg = [](std::int64_t v) { return std::log(double(std::max<std::int64_t>(v, 1))); };
  double best = std::numeric_limits<double>::infinity(), rate = 0;
  for (const auto& p : it->second) {
    const double d = std::abs(lg(p.m) - lg(m)) + std::abs(lg(p.n) - lg(n)) + std::abs(lg(p.k) - lg(k));
    if (d < best) best = d, rate = p.gflops;
  }
  return rate;
}

double predict_task_seconds(const TaskNode& t, const Dag& dag, const Calibration& c) {
  const TaskRate r = task_rate(t, dag);
  const double bw = c.read_gbs * 1e9;
  const double mem_s = t.cost.bytes / bw;
  double rate = 0;  // flop/s
  switch (r.kind) {
    case RateKind::gemm:
    case RateKind::kernel:
      rate = kernel_gflops(c, r.name, r.m, r.n, r.k) * 1e9;
      if (rate <= 0 && r.kind == RateKind::kernel) rate = kernel_gflops(c, "sgemm", r.m, r.n, r.k) * 1e9;
      break;
    case RateKind::component: {
      auto it = c.components.find(r.name);
      if (it != c.components.end()) {
        const double f = it->second.gflops > 0 ? t.cost.flops / (it->second.gflops * 1e9) : 0;
        const double b = it->second.gbs > 0 ? t.cost.bytes / (it->second.gbs * 1e9) : 0;
        return it->second.latency_us * 1e-6 + std::max(f, b);
      }
      break;
    }
  }
  if (rate <= 0) {
    // an uncalibrated component: streaming bytes at copy bandwidth, flops at a
    // tenth of the sgemm rate (scalar or short-vector code)
    const double fallback = 0.1 * kernel_gflops(c, "sgemm", 256, 256, 256) * 1e9;
    const double f = fallback > 0 ? t.cost.flops / fallback : 0;
    return std::max(f, t.cost.bytes / (c.copy_gbs * 1e9));
  }
  double epilogue = 0;  // a fused activation, at its calibrated rate
  if (!r.epilogue.empty()) {
    auto it = c.components.find(r.epilogue);
    if (it != c.components.end() && it->second.gflops > 0) epilogue = r.epilogue_flops / (it->second.gflops * 1e9);
  }
  return std::max(t.cost.flops / rate, mem_s) + epilogue;
}

// ------------------------------------------------------------------ schedule

Schedule simulate_schedule(const Dag& dag, const std::vector<double>& seconds, int workers) {
  const size_t n = dag.tasks.size();
  if (seconds.size() != n) throw std::invalid_argument("simulate_schedule: one duration per task expected");
  if (workers < 1) throw std::invalid_argument("simulate_schedule: workers must be >= 1");
  Schedule s;
  s.start.assign(n, 0);
  s.finish.assign(n, 0);
  std::vector<std::vector<std::int32_t>> succ(n);
  std::vector<int> missing(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (std::int32_t p : dag.tasks[i].preds) succ[size_t(p)].push_back(std::int32_t(i));
    missing[i] = int(dag.tasks[i].preds.size());
  }
  // critical path over the topological order (or ids, when none was computed)
  std::vector<std::int32_t> order = dag.topo_order;
  if (order.size() != n) {
    order.resize(n);
    for (size_t i = 0; i < n; ++i) order[i] = std::int32_t(i);
  }
  std::vector<double> longest(n, 0);
  for (std::int32_t i : order) {
    double ready = 0;
    for (std::int32_t p : dag.tasks[size_t(i)].preds) ready = std::max(ready, longest[size_t(p)]);
    longest[size_t(i)] = ready + seconds[size_t(i)];
    s.critical_path = std::max(s.critical_path, longest[size_t(i)]);
  }
  // event simulation: ready queue by (ready time, id), running by finish time
  using Ready = std::pair<double, std::int32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready, running;
  for (size_t i = 0; i < n; ++i)
    if (missing[i] == 0) ready.push({0.0, std::int32_t(i)});
  double now = 0;
  int free = workers;
  size_t done = 0;
  while (done < n) {
    while (free > 0 && !ready.empty()) {
      const std::int32_t t = ready.top().second;
      ready.pop();
      s.start[size_t(t)] = now;
      s.finish[size_t(t)] = now + seconds[size_t(t)];
      running.push({s.finish[size_t(t)], t});
      --free;
    }
    if (running.empty()) throw std::runtime_error("simulate_schedule: the DAG has a cycle");
    now = running.top().first;
    while (!running.empty() && running.top().first <= now) {
      const std::int32_t t = running.top().second;
      running.pop();
      ++free;
      ++done;
      for (std::int32_t q : succ[size_t(t)])
        if (--missing[size_t(q)] == 0) ready.push({now, q});
    }
  }
  s.makespan = now;
  return s;
}

// ------------------------------------------------------------------ prediction

namespace {
double median_of(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

double History::median(const std::string& footprint) const {
  auto it = seconds.find(footprint);
  return it == seconds.end() ? -1 : median_of(it->second);
}

double History::rank_overhead() const { return median_of(rank_overhead_bytes); }

std::string task_footprint(const TaskNode& t, const Dag& dag) {
  std::ostringstream o;
  o << t.comp->name << "|";
  for (std::size_t i = 0; i < t.comp->params.size(); ++i) o << (i ? "," : "") << t.comp->params[i].name << "=" << t.args.get_string(t.comp->params[i].name);
  o << "|";
  for (std::size_t p = 0; p < t.bindings.size(); ++p) {
    const DataRef& r = t.bindings[p].ref;
    if (p) o << ";";
    if (r.data < 0) continue;
    o << dtype_name(dag.data[std::size_t(r.data)].dtype) << "[";
    const Shape s = dag.ref_shape(r);
    for (std::size_t d = 0; d < s.size(); ++d) o << (d ? "," : "") << s[d];
    o << "]";
  }
  return o.str();
}

std::string history_path() {
  const std::string cal = calibration_path();
  if (cal.empty()) return "";
  const std::filesystem::path p(cal);
  std::string name = p.filename().string();
  name.replace(0, std::string("calibration").size(), "history");
  return (p.parent_path() / name).string();
}

History load_history(const std::string& path) {
  History h;
  if (path.empty()) return h;
  std::ifstream in(path);
  if (!in) return h;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& [k, v] : j.at("seconds").items()) h.seconds[k] = v.get<std::vector<double>>();
    h.rank_overhead_bytes = j.value("rank_overhead_bytes", std::vector<double>{});
  } catch (const std::exception&) {
    h = History{};  // a damaged history is no history
  }
  return h;
}

void save_history(const History& h, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  if (!p.parent_path().empty()) std::filesystem::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"format", "ymlopt-history-1"},
                          {"seconds", h.seconds},
                          {"rank_overhead_bytes", h.rank_overhead_bytes}}
               .dump()
        << "\n";
    if (!out) throw std::runtime_error(tmp + ": cannot write the performance history");
  }
  std::filesystem::rename(tmp, path);
}

void record_history(History& h, const Dag& dag, const std::vector<double>& seconds) {
  for (std::size_t i = 0; i < dag.tasks.size() && i < seconds.size(); ++i) {
    if (seconds[i] < 0) continue;
    std::vector<double>& v = h.seconds[task_footprint(dag.tasks[i], dag)];
    v.push_back(seconds[i]);
    if (v.size() > History::kHistorySamples) v.erase(v.begin(), v.end() - History::kHistorySamples);
  }
}

Prediction predict(const Dag& dag, const Calibration& c, int workers, const std::string& backend,
                   const History* history) {
  Prediction p;
  p.calibrated = c.calibrated;
  p.one_iteration = dag.dynamic();
  p.backend = backend;
  p.workers = backend == "sequential" ? 1 : std::max(1, workers);
  auto oh = c.task_overhead_us.find(backend);
  const double overhead = oh != c.task_overhead_us.end() ? oh->second * 1e-6 : 0;
  const size_t n = dag.tasks.size();
  p.task_s.resize(n);
  // first touch of mapped parameters: charged to the first task (topological order) reading each tile
  std::vector<double> first_touch(n, 0);
  {
    // a task reading less than a tile (nn.embedding: the rows of its ids, as its
    // cost.bytes says) pays for what it reads and leaves the tile untouched
    std::set<std::pair<std::int32_t, std::int32_t>> seen;
    for (std::int32_t id : dag.topo_order) {
      const TaskNode& t = dag.tasks[size_t(id)];
      for (const Binding& b : t.bindings) {
        if (b.ref.data < 0) continue;
        const DataDecl& d = dag.data[size_t(b.ref.data)];
        if (d.init != InitKind::file || !d.format.empty() || seen.count({b.ref.data, b.ref.tile})) continue;
        if (b.ref.tile >= 0 && seen.count({b.ref.data, -1})) continue;  // the whole tensor was read already
        const TensorView r = dag.ref_view(b.ref);
        const double bytes = double(r.rows * r.cols) * double(dtype_size(d.dtype));
        const double read = std::min(bytes, t.cost.bytes);
        if (read >= bytes) seen.insert({b.ref.data, b.ref.tile});
        first_touch[size_t(id)] += read / (c.mapped_gbs * 1e9);
      }
    }
  }
  // history: measured medians where the footprint is known; the rest scaled by
  // how the known ones compare with their rate-based price. Tasks priced under
  // kScaleMinSeconds are latency (a 1 ms fsync'd save of 96 bytes, priced at
  // nanoseconds, once made the scale 150000): they do not say how fast the
  // machine runs today, so they do not set the scale.
  constexpr double kScaleMinSeconds = 100e-6;
  std::vector<double> rated(n), measured(n, -1);
  double sum_measured = 0, sum_rated = 0;
  for (size_t i = 0; i < n; ++i) {
    rated[i] = predict_task_seconds(dag.tasks[i], dag, c) + first_touch[i];
    if (history) measured[i] = history->median(task_footprint(dag.tasks[i], dag));
    if (measured[i] >= 0) {
      ++p.history_tasks;
      if (rated[i] < kScaleMinSeconds) continue;
      sum_measured += measured[i];
      sum_rated += rated[i];
    }
  }
  if (sum_rated > 0 && sum_measured > 0) p.rate_scale = sum_measured / sum_rated;
  for (size_t i = 0; i < n; ++i) {
    const TaskNode& t = dag.tasks[i];
    const double k = measured[i] >= 0 ? measured[i] : rated[i] * p.rate_scale;
    p.first_touch_s += first_touch[i];
    p.seconds_by_component[t.comp->name] += k;
    p.task_s[i] = k + overhead;
    p.work_s += p.task_s[i];
    p.overhead_s += overhead;
    p.flops += t.cost.flops;
  }
  if (n > 0) {
    const Schedule s = simulate_schedule(dag, p.task_s, p.workers);
    p.makespan_s = s.makespan;
    p.critical_path_s = s.critical_path;
    // temporaries: sweep the simulated start/finish events
    std::vector<std::pair<double, double>> ev;  // (time, +/- bytes); finishes sort before starts at equal times
    for (size_t i = 0; i < n; ++i)
      if (dag.tasks[i].cost.extra_bytes > 0) {
        ev.push_back({s.start[i], dag.tasks[i].cost.extra_bytes});
        ev.push_back({s.finish[i], -dag.tasks[i].cost.extra_bytes});
      }
    std::sort(ev.begin(), ev.end());
    double live = 0, peak = 0;
    for (const auto& e : ev) peak = std::max(peak, live += e.second);
    p.workspace_bytes = std::int64_t(peak);
  }
  // what kernels keep per content (blas.gemm's packed f64 panels), once each
  std::set<std::uint32_t> kept;
  for_each_kept_read(dag, [&](std::size_t, std::uint32_t id, std::int64_t bytes) {
    if (kept.insert(id).second) p.kept_bytes += bytes;
  });
  // memory exactly as DataStore allocates it
  for (const DataDecl& d : dag.data) {
    if (!d.format.empty()) continue;  // no storage: its companions hold the data
    if (d.init == InitKind::file) {
      p.parameter_bytes += d.bytes();  // mapped in place, or copied (ld == cols for files)
      continue;
    }
    p.activation_bytes += (d.storage_bytes() + 63) / 64 * 64;
  }
  return p;
}

nlohmann::json to_json(const Prediction& p) {
  return {{"calibrated", p.calibrated},
          {"one_iteration", p.one_iteration},
          {"backend", p.backend},
          {"workers", p.workers},
          {"makespan_us", p.makespan_s * 1e6},
          {"critical_path_us", p.critical_path_s * 1e6},
          {"work_us", p.work_s * 1e6},
          {"overhead_us", p.overhead_s * 1e6},
          {"first_touch_us", p.first_touch_s * 1e6},
          {"history_tasks", p.history_tasks},
          {"rate_scale", p.rate_scale},
          {"flops", p.flops},
          {"seconds_by_component", p.seconds_by_component},
          {"parameter_bytes", p.parameter_bytes},
          {"activation_bytes", p.activation_bytes},
          {"workspace_bytes", p.workspace_bytes},
          {"kept_bytes", p.kept_bytes},
          {"total_bytes", p.total_bytes()}};
}

}  // namespace ymlopt
