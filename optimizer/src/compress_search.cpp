// The compression search's components: compress.search_step (one strategy's
// co-method step: gather, adopt or cross over, try the next recipe, publish)
// and compress.finish (the best configuration within the bound, written out).
#include "ymlopt/optimizer/compress_search.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <sstream>

#include "ymlopt/engine/registry.hpp"

namespace ymlopt::opt {
namespace fs = std::filesystem;

namespace {

// The co-methods of one run (keyed by its run directory) that search in this
// process, and whether each is still working. A co-method with nothing left to
// try stays (idle) while another is at work: what that one publishes next may give
// it a crossover. It stops once no other is at work, after one more gather (so
// it sees their last publishes). Co-methods on other MPI ranks are not seen here:
// the engine counts those at work (KernelContext::remote_peers_at_work), and the
// step passes that count in.
//
// An idle step runs on a worker like any other, and sleeps there (up to `wait`,
// woken when a co-method finishes) only while a worker is left for each co-method
// at work: as many co-methods sleep as the threads that ran steps in this run,
// less those at work. The others nap (wait / 20) and wait in the queue. (Sleeping
// whenever idle took a quarter of the worker time of a USE-lite search on 2
// cores and delayed GPTQ's steps behind the sleepers.) Its `idle` report keeps
// mapping="fair" from holding the co-methods at work back for it.
class Peers {
 public:
  static Peers& get() {
    static Peers p;
    return p;
  }
  // a step of `who` begins; `first`: its first step (a name seen before in this
  // run directory means a new run there: the earlier run's entries go)
  void enter(const std::string& run, const std::string& who, bool first) {
    std::lock_guard<std::mutex> lock(mu_);
    Run& r = runs_[run];
    if (first && r.peers.count(who)) r.peers.clear(), r.threads.clear();
    r.peers.try_emplace(who);
    r.threads.insert(std::this_thread::get_id());
  }
  // `who` did something this step (a configuration tried)
  void busy(const std::string& run, const std::string& who) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[run].peers[who] = State::busy;
  }
  void finish(const std::string& run, const std::string& who) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[run].peers[who] = State::finished;
    cv_.notify_all();
  }
  // `who` has nothing to try: true to stay (an idle step), false to stop;
  // `remote`: co-methods of the run at work on other MPI ranks
  bool idle(const std::string& run, const std::string& who, std::chrono::milliseconds wait, std::size_t remote = 0) {
    std::unique_lock<std::mutex> lock(mu_);
    Run& r = runs_[run];
    std::size_t busy = 0;
    for (const auto& [name, state] : r.peers) busy += name != who && state == State::busy;
    State& me = r.peers[who];
    if (busy + remote == 0) {
      if (me == State::last_look) return false;
      me = State::last_look;  // one more gather: their last publishes
      return true;
    }
    me = State::idle;
    if (r.sleeping + busy < r.threads.size()) {
      ++r.sleeping;
      cv_.wait_for(lock, wait);
      --r.sleeping;
    } else {
      cv_.wait_for(lock, wait / 20);  // a nap: at most 100 idle steps a second (64k in 20 s without it, contexts)
    }
    return true;
  }

 private:
  enum class State { busy, idle, last_look, finished };
  struct Run {
    std::map<std::string, State> peers;
    std::set<std::thread::id> threads;  // that ran steps: the workers
    std::size_t sleeping = 0;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Run> runs_;
};

// 8 ports: StarPU's default STARPU_NMAXBUFS. The gathered error is not a port:
// every published configuration is one a co-method accepted under the same bound.
enum SearchPort : std::size_t { kConfig, kSens, kBytes, kErr, kDone, kGConfig, kGSens, kGBytes };

std::string dims_of(const TensorView& v) {
  std::string s;
  for (auto d : v.shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return "[" + s + "] " + dtype_name(v.dtype);
}

std::string check_search(const TaskShape& t) {
  const std::string& s = t.args.get_string("strategy");
  if (!find_strategy(s))
    return "compress.search_step: unknown strategy '" + s + "' (a name or an index: " + strategy_names() + ")";
  if (t.args.get_float("err_bound") <= 0) return "compress.search_step: err_bound must be > 0";
  const auto& p = t.ports;
  if (p[kConfig].dtype != DType::i32 || p[kConfig].rows != 1)
    return "compress.search_step: port 'config' must be a 1-D i32 vector, got " + dims_of(p[kConfig]);
  const std::int64_t n = p[kConfig].cols;
  if (p[kSens].dtype != DType::f64 || p[kSens].rows != 1 || p[kSens].cols != n)
    return "compress.search_step: port 'sensitivity' must be f64 [" + std::to_string(n) + "] like config, got " + dims_of(p[kSens]);
  for (std::size_t k : {kBytes, kErr, kDone})
    if (p[k].dtype != DType::f64 || p[k].rows * p[k].cols != 1)
      return "compress.search_step: ports 'bytes', 'err' and 'done' must be 1-element f64, got " + dims_of(p[k]);
  const bool g = p[kGConfig].bound();
  if (g) {
    if (p[kGConfig].dtype != DType::i32 || p[kGConfig].cols != n || p[kGSens].dtype != DType::f64 || p[kGSens].cols != n)
      return "compress.search_step: gathered_config/gathered_sensitivity must match config/sensitivity";
    if (p[kGBytes].dtype != DType::f64 || p[kGBytes].rows * p[kGBytes].cols != 1)
      return "compress.search_step: port 'gathered_bytes' must be 1-element f64, got " + dims_of(p[kGBytes]);
  }
  return "";
}

template <class T> T* ptr(const TensorView& v) { return static_cast<T*>(v.data); }

// One compress.search_step of strategy `st`: the task's ports read into the
// configuration it works on, then one move (a lateral move, the family's next
// recipe on the most promising unit, or, once the family is exhausted, a
// gathered configuration adopted or crossed over), written back by flush().
class SearchStep {
 public:
  SearchStep(KernelContext& ctx, const Strategy& st, Peers& peers)
      : ctx_(ctx), st_(st), peers_(peers), bound_(ctx.arg_float("err_bound")),
        model_(search_model(ctx.arg_string("model"), ctx.arg_string("sets"), ctx.arg_string("eval_sets"))),
        L_(model_->layers().size()), cv_(ctx.port(kConfig)), run_(ctx.run_dir()),
        scratch_(ctx.run_dir() + "/compress/scratch-" + st.name), cache_(ctx.arg_bool("cache")) {
    if (std::size_t(cv_.cols) < L_)
      throw KernelError("compress.search_step: config holds " + std::to_string(cv_.cols) + " entries, the model has " +
                        std::to_string(L_) + " compressible units (linears and embedding tables; raise max_layers)");
    cfg_p_ = ptr<std::int32_t>(cv_);
    sens_ = ptr<double>(ctx.port(kSens));
    bytes_ = ptr<double>(ctx.port(kBytes));
    err_ = ptr<double>(ctx.port(kErr));
    done_ = ptr<double>(ctx.port(kDone));
    peers_.enter(run_, st_.name, *bytes_ <= 0);
    cfg_.assign(cfg_p_, cfg_p_ + L_);
    if (*bytes_ <= 0) {  // first call: measure the starting configuration
      const Evaluation e = model_->evaluate(cfg_, scratch_, cache_);
      *bytes_ = e.bytes, *err_ = e.error;
      model_->record({st_.name, cfg_, e.bytes, e.error, e.seconds, 0, e.error <= bound_, "start"});
    }
    // the gathered configuration (adopted below, once this family's own search is
    // exhausted) and the others' sensitivities for units never measured here
    gc_ = &ctx.port(kGConfig);
    exchange_ = ctx.arg_bool("exchange") && gc_->data;
    if (exchange_) {
      const double* gs = ptr<double>(ctx.port(kGSens));
      for (std::size_t l = 0; l < L_; ++l)
        if (sens_[l] == 0 && gs[l] > 0) sens_[l] = gs[l];  // never measured here: take the others' estimate
    }
  }

  void run() {
    if (lateral()) return;
    std::int32_t to = -1;
    const std::int64_t pick = pick_unit(to);
    if (pick < 0) exhausted();
    else advance(std::size_t(pick), to);
  }

 private:
  static constexpr double kEvery = std::numeric_limits<double>::infinity();

  bool rejected_here(std::size_t l, std::int32_t r) const { return model_->rejected(st_.name, l, r, bound_); }

  void flush() {
    std::copy(cfg_.begin(), cfg_.end(), cfg_p_);
    for (std::size_t l = L_; l < std::size_t(cv_.cols); ++l) cfg_p_[l] = -1;
    ctx_.report("bytes", *bytes_);
    ctx_.report("err", *err_);
  }

  // One step that tries `recipe` on unit l (a lateral move or a crossover, reported
  // under `kind`): kept when keep(evaluation), else rejected there for this strategy
  // under the bounds below below(evaluation).
  template <class Keep, class Below>
  bool try_move(std::size_t l, std::int32_t recipe, const char* kind, Keep keep, Below below) {
    std::vector<std::int32_t> trial = cfg_;
    trial[l] = recipe;
    Evaluation e;
    bool ok = false;
    std::string note = kind;
    peers_.busy(run_, st_.name);
    double reject_below = kEvery;
    try {
      e = model_->evaluate(trial, scratch_, cache_);
      ok = keep(e);
      reject_below = below(e);
    } catch (const std::exception& ex) {
      note = ex.what();
    }
    model_->record({st_.name, trial, e.bytes, e.error, e.seconds, 0, e.bytes > 0 && e.error <= bound_, note});
    if (ok) {
      cfg_ = trial;
      *bytes_ = e.bytes, *err_ = e.error;
    } else {
      model_->reject(st_.name, l, recipe, reject_below);
    }
    *done_ = 0;
    ctx_.report("layer", double(l));
    ctx_.report(kind, ok ? 1 : 0);
    ctx_.report("accepted", ok ? 1 : 0);
    flush();
    return ok;
  }

  // 1. a lateral move (a unit another family compressed, to this family's recipe of
  // as many bits, e.g. int8 -> gptq-int8): kept when the error drops at no more
  // bytes. Whether one was tried.
  bool lateral() {
    for (std::size_t l = 0; l < L_; ++l) {
      std::int32_t lat = lateral_recipe(st_, cfg_[l], model_->is_table(l));
      while (lat >= 0 && rejected_here(l, lat)) lat = lateral_recipe(st_, cfg_[l], model_->is_table(l), lat);
      if (lat < 0) continue;
      const double err = *err_, bytes = *bytes_;
      try_move(l, lat, "lateral", [&](const Evaluation& e) { return e.error < err && e.bytes <= bytes; },
               [&](const Evaluation&) { return kEvery; });
      return true;
    }
    return false;
  }

  // 2. the most promising unit one recipe further (-1: none; `to`: its recipe):
  // units not measured yet first (largest first; the step only measures them: a
  // probe), then the lowest error increase per byte saved (so the accepted steps
  // follow the cheapest error first)
  std::int64_t pick_unit(std::int32_t& to) const {
    std::int64_t pick = -1;
    for (std::size_t l = 0; l < L_; ++l) {
      // the family's next recipe for this unit, skipping those that failed here before
      // (2:4 may break the bound where int8 does not)
      std::int32_t nx = next_recipe(st_, cfg_[l], model_->is_table(l));
      while (nx >= 0 && rejected_here(l, nx)) nx = next_recipe(st_, nx, model_->is_table(l));
      if (nx < 0) continue;
      if (pick < 0) {
        pick = std::int64_t(l), to = nx;
        continue;
      }
      const std::size_t p = std::size_t(pick);
      const bool ul = !(sens_[l] > 0), up = !(sens_[p] > 0);
      const bool better = ul != up ? ul : ul ? model_->layer_bytes()[l] > model_->layer_bytes()[p] : sens_[l] < sens_[p];
      if (better) pick = std::int64_t(l), to = nx;
    }
    return pick;
  }

  // This family's own chain is exhausted: restart from a gathered configuration
  // that dominates this one (no more bytes, no more error, one of them less), as
  // an ERAM restarts from the best Ritz pairs gathered. Adopting one during the
  // search instead (before its own chain ended) steered a co-method off its own
  // chain of cheapest steps, from where it ended behind what it reached alone
  // (USE-lite, five strategies: 5.27 MB against GPTQ alone's 4.96 MB); adopted
  // here, a co-method ends no worse than alone. Else a crossover, else idle or done.
  void exhausted() {
    if (exchange_) {
      const double gb = *ptr<double>(ctx_.port(kGBytes));
      const std::int32_t* g = ptr<std::int32_t>(*gc_);
      bool valid = gb > 0;
      for (std::size_t l = 0; l < L_ && valid; ++l)
        valid = g[l] >= 0 && std::size_t(g[l]) < recipes().size() &&
                (g[l] == 0 || recipes()[std::size_t(g[l])].table == model_->is_table(l));
      const std::vector<std::int32_t> gcfg(g, g + L_);
      if (valid && gb <= *bytes_ && gcfg != cfg_ && adopt(gcfg)) return;
      if (valid && crossover(gcfg)) return;
    }
    // nothing to try with what was gathered: stay while another co-method is at
    // work (what it publishes next may give a crossover), sleeping on it so as to
    // leave the workers to it; on USE-lite under 0.1 the int4-g128 co-method
    // stopped before GPTQ published the int8 linears that complete the mix
    if (exchange_ && peers_.idle(run_, st_.name, std::chrono::milliseconds(200),
                                 std::size_t(std::max(ctx_.remote_peers_at_work(), 0)))) {
      *done_ = 0;
      flush();
      ctx_.report("idle", 1);
      return;
    }
    peers_.finish(run_, st_.name);
    *done_ = 1;
    flush();
    ctx_.report("done", 1);
  }

  // Takes the gathered configuration when it dominates this one; whether it did.
  bool adopt(const std::vector<std::int32_t>& gcfg) {
    const Evaluation ge = model_->evaluate(gcfg, scratch_, cache_);  // its error: measured again (memo: its publisher measured it)
    if (ge.error > bound_)
      throw KernelError("compress.search_step: a gathered configuration breaks the bound (different err_bound per co-method?)");
    if (!(ge.error <= *err_ && (ge.bytes < *bytes_ || ge.error < *err_))) return false;
    peers_.busy(run_, st_.name);
    cfg_ = gcfg;
    *bytes_ = ge.bytes, *err_ = ge.error;
    *done_ = 0;
    ctx_.report("adopted", 1);
    flush();
    return true;
  }

  // 3. a crossover: a unit the gathered configuration holds at fewer bits takes its
  // recipe (the most nominal bytes saved first), kept within the bound. This is how
  // the families mix unit by unit when no whole configuration dominates: on USE-lite
  // under 0.1, RTN's 4-bit table with another family's int8 linears. Whether one was tried.
  bool crossover(const std::vector<std::int32_t>& gcfg) {
    std::int64_t best = -1;
    std::int32_t best_recipe = -1;
    double most = 0;
    for (std::size_t l = 0; l < L_; ++l) {
      const std::int32_t r = crossover_recipe(cfg_[l], gcfg[l], model_->is_table(l),
                                              [&](std::int32_t x) { return rejected_here(l, x); });
      if (r < 0) continue;
      const double saved =
          model_->layer_bytes()[l] * (recipes()[std::size_t(cfg_[l])].bits - recipes()[std::size_t(r)].bits) / 32;
      if (saved > most) best = std::int64_t(l), best_recipe = r, most = saved;
    }
    if (best < 0) return false;
    const std::size_t l = std::size_t(best);
    const double bound = bound_, bytes = *bytes_;
    if (try_move(l, best_recipe, "crossover", [&](const Evaluation& e) { return e.error <= bound && e.bytes < bytes; },
                 [&](const Evaluation& e) { return e.bytes < bytes ? e.error : kEvery; }))
      sens_[l] = -1;  // its next recipe is not measured from there: probed again
    return true;
  }

  // Unit l one recipe further (to `to`): a probe when its sensitivity is unknown
  // (measured, not kept), else kept when within the bound and saving bytes.
  void advance(std::size_t l, std::int32_t to) {
    *done_ = 0;
    peers_.busy(run_, st_.name);
    const bool probe = !(sens_[l] > 0);
    std::vector<std::int32_t> trial = cfg_;
    trial[l] = to;
    Evaluation e;
    try {
      e = model_->evaluate(trial, scratch_, cache_);  // after a probe of this very step: measured, not run again
    } catch (const std::exception& ex) {
      model_->reject(st_.name, l, to);  // under every bound
      model_->record({st_.name, trial, 0, 0, 0, 0, false, ex.what()});
      ctx_.report("layer", double(l));
      ctx_.report("accepted", 0);
      flush();
      return;
    }
    const double bytes = *bytes_, err = *err_;
    const double saved = std::max(bytes - e.bytes, 1.0);
    sens_[l] = std::max(e.error - err, 1e-12) / saved;
    // a recipe that saves nothing (a pass that left the layer as it was, e.g. groups of
    // 128 on a width of 96) is rejected like one that breaks the bound
    const bool fits = e.error <= bound_ && e.bytes < bytes;
    model_->record({st_.name, trial, e.bytes, e.error, e.seconds, 0, e.error <= bound_,
                    e.bytes < bytes ? (probe ? "probe" : "") : "no bytes saved"});
    const bool ok = fits && !probe;
    if (ok) {
      cfg_ = trial;
      *bytes_ = e.bytes, *err_ = e.error;
      sens_[l] = -1;  // its next recipe is not measured yet: probed again (not the others' estimate)
    } else if (!fits) {
      model_->reject(st_.name, l, to, e.bytes < bytes ? e.error : kEvery);
      sens_[l] = -1;  // its next recipe is probed before it competes (a rejected one's estimate is not its own)
    }
    ctx_.report("layer", double(l));
    ctx_.report("probe", probe ? 1 : 0);
    ctx_.report("accepted", ok ? 1 : 0);
    flush();
  }

  KernelContext& ctx_;
  const Strategy& st_;
  Peers& peers_;
  const double bound_;
  const std::shared_ptr<SearchModel> model_;
  const std::size_t L_;
  const TensorView& cv_;
  const std::string run_, scratch_;
  const bool cache_;
  std::int32_t* cfg_p_ = nullptr;
  double* sens_ = nullptr;
  double *bytes_ = nullptr, *err_ = nullptr, *done_ = nullptr;
  std::vector<std::int32_t> cfg_;
  const TensorView* gc_ = nullptr;
  bool exchange_ = false;
};

void search_step_cpu(KernelContext& ctx) {
  const Strategy& st = *find_strategy(ctx.arg_string("strategy"));
  Peers& peers = Peers::get();
  try {
    SearchStep(ctx, st, peers).run();
  } catch (...) {
    peers.finish(ctx.run_dir(), st.name);  // a failed co-method publishes nothing more: none waits on it
    throw;
  }
}

std::string check_finish(const TaskShape& t) {
  const auto& c = t.ports[0];
  if (c.dtype != DType::i32 || c.rows != 1) return "compress.finish: port 'config' must be a 1-D i32 vector, got " + dims_of(c);
  return "";
}

std::string point_json_config(const std::vector<std::int32_t>& cfg) {
  std::string s;
  for (auto r : cfg) s += (s.empty() ? "" : ",") + (r >= 0 && std::size_t(r) < recipes().size() ? recipes()[std::size_t(r)].name : "?");
  return s;
}

void finish_cpu(KernelContext& ctx) {
  auto model = search_model(ctx.arg_string("model"), ctx.arg_string("sets"), ctx.arg_string("eval_sets"));
  const std::size_t L = model->layers().size();
  const TensorView& cv = ctx.port(0);
  if (std::size_t(cv.cols) < L)
    throw KernelError("compress.finish: config holds " + std::to_string(cv.cols) + " entries, the model has " +
                      std::to_string(L) + " compressible units");
  const std::int32_t* c = ptr<std::int32_t>(cv);
  std::vector<std::int32_t> cfg(c, c + L);
  for (auto& r : cfg)
    if (r < 0 || std::size_t(r) >= recipes().size()) r = 0;  // a config never written: f32
  const auto pts = model->points();
  const double bound = ctx.arg_float("err_bound");
  // the unite's winner holds its own last configuration; a smaller one measured
  // within the bound by any co-method (each point was measured) wins over it
  Evaluation e = model->evaluate(cfg, ctx.run_dir() + "/compress/scratch-finish");
  std::string from = "unite winner";
  for (const auto& p : pts)
    if (p.bytes > 0 && p.within_bound && p.error <= bound && (p.bytes < e.bytes || (p.bytes == e.bytes && p.error < e.error))) {
      cfg = p.config, e.bytes = p.bytes, e.error = p.error, from = p.strategy;
    }
  if (from != "unite winner") e = model->evaluate(cfg, ctx.run_dir() + "/compress/scratch-finish");
  const std::string dir = ctx.run_dir() + "/" + ctx.arg_string("dir");
  fs::create_directories(dir);
  const std::string name = ctx.arg_string("name");
  const std::string weights = dir + "/" + name + ".opt.safetensors";
  fs::remove(weights);  // a run before this one's, in the same folder: this configuration may write none
  model->write(cfg, dir + "/" + name + ".opt.xml", weights);
  // nothing compressed: no new tensors, the workflow reads the original weights
  const nlohmann::json weights_json = fs::exists(weights) ? nlohmann::json(weights) : nlohmann::json(nullptr);
  fs::remove_all(ctx.run_dir() + "/compress/scratch-finish");
  std::vector<SearchPoint> measured;
  for (const auto& p : pts)
    if (p.bytes > 0) measured.push_back(p);
  const auto front = pareto_front(measured);
  const auto front_time = pareto_front(measured, true);
  double original = 0;
  for (double b : model->layer_bytes()) original += b;
  auto pj = [&](const SearchPoint& p) {
    return nlohmann::json{{"strategy", p.strategy}, {"bytes", p.bytes},     {"error", p.error},
                          {"predicted_s", p.predicted_s}, {"eval_seconds", p.seconds}, {"time_s", p.time_s},
                          {"within_bound", p.within_bound},
                          {"config", point_json_config(p.config)}};
  };
  nlohmann::json j = {{"model", ctx.arg_string("model")},
                      {"sets", ctx.arg_string("sets")},
                      {"eval_sets", ctx.arg_string("eval_sets")},
                      {"err_bound", ctx.arg_float("err_bound")},
                      {"layers", model->layers()},
                      {"linear_bytes_f32", original},
                      {"recipes", nlohmann::json::array()},
                      {"points", pts.size()},
                      {"front", nlohmann::json::array()},
                      {"front_time", nlohmann::json::array()},
                      {"time_model", {{"what", "predicted seconds of the evaluation runs, sequential, warm"},
                                      {"calibrated", model->time_calibrated()}}},
                      {"chosen", {{"config", point_json_config(cfg)}, {"bytes", e.bytes}, {"error", e.error}, {"predicted_s", e.predicted_s}, {"from", from},
                                  {"workflow", dir + "/" + name + ".opt.xml"},
                                  {"weights", weights_json}}}};
  for (const auto& r : recipes()) j["recipes"].push_back({{"name", r.name}, {"passes", r.passes}, {"table", r.table}});
  {
    const CacheStats cs = model->cache_stats();
    j["cache"] = {{"hits", cs.hits}, {"misses", cs.misses}, {"uncacheable", cs.uncacheable}, {"recipe_seconds", cs.seconds}};
    // configurations run (a memo hit is not) and their wall time, co-methods summed
    j["evaluations"] = {{"runs", cs.runs}, {"seconds", cs.run_seconds}};
  }
  for (const auto& p : front) j["front"].push_back(pj(p));
  for (const auto& p : front_time) j["front_time"].push_back(pj(p));
  nlohmann::json all = nlohmann::json::array();
  for (const auto& p : pts) all.push_back(pj(p));
  j["all_points"] = all;
  std::ofstream(dir + "/pareto.json") << j.dump(1) << "\n";
  std::ostringstream md;
  md << "# Compression search: Pareto front (weight bytes, relative output error)\n\n"
     << "err_bound " << ctx.arg_float("err_bound") << ", " << pts.size() << " configurations measured; chosen: "
     << std::int64_t(e.bytes) << " bytes, error " << e.error << "\n\n"
     << "predicted ms: the performance model's time of the evaluation runs (sequential, warm, "
     << (model->time_calibrated() ? "this machine's calibration" : "built-in rates: run ymlopt calibrate") << ")\n\n";
  auto table = [&](const std::vector<SearchPoint>& f) {
    md << "| strategy | bytes | error | predicted ms | config |\n|---|---:|---:|---:|---|\n";
    for (const auto& p : f)
      md << "| " << p.strategy << " | " << std::int64_t(p.bytes) << " | " << p.error << " | " << p.predicted_s * 1e3 << " | "
         << point_json_config(p.config) << " |\n";
  };
  table(front);
  md << "\n## Front over (weight bytes, error, predicted time)\n\n";
  table(front_time);
  std::ofstream(dir + "/pareto.md") << md.str();
  ctx.report("bytes", e.bytes);
  ctx.report("err", e.error);
  ctx.report("front", double(front.size()));
  ctx.report("points", double(pts.size()));
  ctx.report("predicted_ms", e.predicted_s * 1e3);
}

}  // namespace

void register_search_components(Registry& reg) {
  const std::vector<PortSpec> ports = {
      {"config", Access::read_write, {DType::i32}, false, 1, "recipe index per compressible unit: linears, then embedding tables (extra entries: -1)"},
      {"sensitivity", Access::read_write, {DType::f64}, false, 1, "error increase per byte saved of the last step tried per layer (0: unknown)"},
      {"bytes", Access::read_write, {DType::f64}, false, 1, "weight bytes of config (0: not measured yet)"},
      {"err", Access::read_write, {DType::f64}, false, 1, "relative output error of config"},
      {"done", Access::read_write, {DType::f64}, false, 1, "1 when the strategy has no step left to try"},
      {"gathered_config", Access::read, {DType::i32}, true, 1, "a configuration gathered from the co-methods"},
      {"gathered_sensitivity", Access::read, {DType::f64}, true, 1, ""},
      {"gathered_bytes", Access::read, {DType::f64}, true, 1, "its weight bytes"},
  };
  const std::vector<ParamSpec> common = {
      {"model", ParamType::string_, "", true, "model workflow (io.save outputs are compared)"},
      {"sets", ParamType::string_, "", false, "calibration runs: ';'-separated, each 'NAME=VALUE ...'"},
      {"eval_sets", ParamType::string_, "", false,
       "evaluation runs, as sets: the error is measured on them (default: on the calibration runs)"},
      {"err_bound", ParamType::float_, "0.01", false, "largest relative output error accepted"},
  };
  ComponentSpec s;
  s.name = "compress.search_step";
  s.doc = "one greedy step of a compression strategy over per-layer recipes: compress the most promising layer "
          "one recipe further, run the model, keep the step if the error stays under err_bound; once the chain is "
          "exhausted, restart from a gathered configuration that dominates this one, or else take the gathered "
          "recipe of one unit that holds fewer bits (kept within the bound)";
  s.ports = ports;
  s.params = common;
  s.params.push_back({"strategy", ParamType::string_, "", true, "a name or its index: 0 int8, 1 nm24-int8, 2 int4-g128, 3 gptq (int8 then int4-g128), 4 obs50-int4"});
  s.params.push_back({"exchange", ParamType::bool_, "true", false, "use the gathered configuration and sensitivities"});
  s.params.push_back({"cache", ParamType::bool_, "true", false,
                      "reuse (unit, recipe) results; false: run every recipe's passes at each evaluation (to measure the cache)"});
  s.cpu = search_step_cpu;
  s.check = check_search;
  s.cost = [](const TaskShape&) { return Cost{}; };
  reg.add(std::move(s));

  ComponentSpec f;
  f.name = "compress.finish";
  f.doc = "writes a configuration's compressed weights and model workflow, and the Pareto front of every measured "
          "configuration (pareto.json, pareto.md)";
  f.ports = {{"config", Access::read, {DType::i32}, false, 1, "the chosen configuration"}};
  f.params = common;
  f.params.push_back({"dir", ParamType::string_, "compress", false, "output folder in the run directory"});
  f.params.push_back({"name", ParamType::string_, "model", false, "file names: NAME.opt.xml, NAME.opt.safetensors"});
  f.cpu = finish_cpu;
  f.check = check_finish;
  f.cost = [](const TaskShape&) { return Cost{}; };
  f.host_only = true;
  reg.add(std::move(f));
}

}  // namespace ymlopt::opt