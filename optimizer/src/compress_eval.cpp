// The compression search's model evaluation: a model compiled for its
// calibration (and evaluation) runs, configurations applied from the
// (unit, recipe) cache and run in process, the points and rejections measured.
#include "ymlopt/optimizer/compress_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "register_builtin.hpp"
#include "model_run.hpp"
#include "nn/embedding_formats.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/perf_model.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/scheduler/scratch_dir.hpp"
#include "ymlopt/optimizer/model_editor.hpp"
#include "ymlopt/optimizer/passes.hpp"

namespace ymlopt::opt {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::strchr(".^$|()[]{}*+?\\/", c)) out += '\\';
    out += c;
  }
  return out;
}

const ComponentRegistry& inner_registry() {
  static const ComponentRegistry* reg = [] {
    auto* r = new ComponentRegistry();
    register_builtin_components(*r);
    return r;
  }();
  return *reg;
}

std::vector<std::vector<std::pair<std::string, std::string>>> parse_runs(const std::string& sets) {
  std::vector<std::vector<std::pair<std::string, std::string>>> runs;
  std::stringstream ss(sets);
  std::string run;
  while (std::getline(ss, run, ';')) {
    std::istringstream words(run);
    std::vector<std::pair<std::string, std::string>> one;
    for (std::string w; words >> w;) {
      const auto eq = w.find('=');
      if (eq == std::string::npos || eq == 0)
        throw KernelError("compress: calibration set '" + w + "' is not NAME=VALUE");
      one.emplace_back(w.substr(0, eq), w.substr(eq + 1));
    }
    if (!one.empty()) runs.push_back(std::move(one));
  }
  if (runs.empty()) runs.emplace_back();
  return runs;
}

/// A (unit, recipe) result as the passes left it in a model with that unit
/// alone compressed: the tensors bound to the unit's readers (by role) and the
/// args that changed on them. Replayed with ModelEditor::replace (linears) or
/// replace_embedding (tables), it rebinds the readers exactly as the passes did.
struct Replacement {
  bool replay = true;  // false: the passes changed more than the unit's readers (apply them each time)
  std::vector<NewTensor> tensors;
  std::map<std::string, std::string> args;
};

/// The roles replace() binds and the reader ports they are bound to.
const std::vector<std::pair<std::string, std::string>>& linear_roles() {
  static const std::vector<std::pair<std::string, std::string>> r = {
      {"w", "w"}, {"w_scale", "w_scale"}, {"w_zero", "w_zero"}, {"w_index", "w_index"}, {"w_ptr", "w_ptr"}, {"b", "b"}};
  return r;
}

std::int64_t port_of(const TaskNode& t, const std::string& name) {
  for (std::size_t i = 0; i < t.comp->ports.size(); ++i)
    if (t.comp->ports[i].name == name) return std::int64_t(i);
  return -1;
}

bool same_task(const TaskNode& a, const TaskNode& b) {
  if (a.comp != b.comp || a.bindings.size() != b.bindings.size()) return false;
  for (std::size_t i = 0; i < a.bindings.size(); ++i)
    if (a.bindings[i].ref.data != b.bindings[i].ref.data || a.bindings[i].ref.tile != b.bindings[i].ref.tile) return false;
  const auto& x = a.args.values();
  const auto& y = b.args.values();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i].text != y[i].text) return false;
  return true;
}

class Model final : public SearchModel {
 public:
  Model(const std::string& workflow, const std::string& sets, const std::string& eval_sets) : t0_(Clock::now()) {
    {
      const ScratchDir dir("compress-ref");
      auto compile = [&](const std::vector<std::pair<std::string, std::string>>& run) {
        Diagnostics diags;
        CompileResult cr = compile_workflow({workflow, run}, inner_registry(), diags);
        if (!cr.ok) throw KernelError("compress: model '" + workflow + "' does not compile:\n" + diags.str());
        return std::move(cr.dag);
      };
      // the calibration runs give the recipes their inputs (GPTQ's, OBS's Hessians); the
      // error is measured on the evaluation runs when there are any (else on the same
      // runs, where GPTQ fitted on a few sentences looks several times better than it is)
      const bool held_out = !eval_sets.empty();
      for (const auto& run : parse_runs(sets)) {
        Dag dag = compile(run);
        Outputs ref = run_dag(dag, {}, dir.path(), &calib_);
        if (held_out) continue;
        refs_.push_back(std::move(ref));
        dags_.push_back(std::move(dag));
      }
      if (held_out)
        for (const auto& run : parse_runs(eval_sets)) {
          Dag dag = compile(run);
          refs_.push_back(run_dag(dag, {}, dir.path(), nullptr));
          dags_.push_back(std::move(dag));
        }
    }
    for (const auto& o : refs_)
      for (const auto& v : o.values)
        for (double x : v) ref_sq_ += x * x;
    if (refs_[0].values.empty()) throw KernelError("compress: model '" + workflow + "' saves no output (io.save) to compare");
    // the units of every run's model: the cache holds one result per (unit, recipe)
    // for all runs, valid when every run reads the same tensors (same file and key)
    for (std::size_t r = 0; r < dags_.size(); ++r) {
      ModelEditor ed(copy_dag(dags_[r]), inner_registry());
      std::map<std::string, WeightUse> lin;
      std::map<std::string, ModelEditor::EmbeddingUse> tab;
      std::vector<std::string> names;
      for (const WeightUse& u : ed.linear_weights()) {
        lin[u.name] = u;
        names.push_back(u.name);
        if (r == 0) layers_.push_back(u.name), bytes_.push_back(double(ed.dag().data[std::size_t(u.data)].bytes())), table_.push_back(false);
      }
      for (const auto& u : ed.embedding_tables()) {
        tab[u.name] = u;
        names.push_back(u.name);
        if (r == 0) layers_.push_back(u.name), bytes_.push_back(double(ed.dag().data[std::size_t(u.data)].bytes())), table_.push_back(true);
      }
      if (names != layers_) shared_ = false;
      for (const std::string& n : names) {
        const std::int32_t d = lin.count(n) ? lin[n].data : tab[n].data;
        const DataDecl& x = dags_[r].data[std::size_t(d)];
        const std::int32_t d0 = lin0_.count(n) ? lin0_[n].data : tab0_.count(n) ? tab0_[n].data : -1;
        if (r > 0 && (d0 < 0 || x.src != dags_[0].data[std::size_t(d0)].src || x.key != dags_[0].data[std::size_t(d0)].key))
          shared_ = false;
      }
      if (r == 0) lin0_ = lin, tab0_ = tab;
      lin_.push_back(std::move(lin));
      tab_.push_back(std::move(tab));
    }
    if (layers_.empty()) throw KernelError("compress: model '" + workflow + "' has no compressible linear layer");
  }

  const std::vector<std::string>& layers() const override { return layers_; }
  const std::vector<double>& layer_bytes() const override { return bytes_; }
  bool is_table(std::size_t l) const override { return l < table_.size() && table_[l]; }

  /// Runs recipe r's passes on unit l of the context's editor.
  void run_recipe(PassContext& ctx, std::size_t l, std::int32_t r) const {
    const Recipe& rec = recipes()[std::size_t(r)];
    for (PassSpec spec : parse_pass_list(rec.passes)) {
      std::string pattern = "^";
      pattern += regex_escape(layers_[l]);
      pattern += "($|\\.)";
      spec.options["match"] = pattern;
      try {
        run_pass(ctx, spec);
      } catch (const std::exception& e) {
        throw std::runtime_error("recipe " + rec.name + " on layer '" + layers_[l] + "': " + e.what());
      }
    }
  }

  /// The (unit, recipe) result from the run-0 model with that unit alone compressed.
  std::shared_ptr<const Replacement> compute(std::size_t l, std::int32_t r) const {
    const Dag& a = dags_[0];
    ModelEditor ed(copy_dag(a), inner_registry());
    PassContext ctx{ed, &calib_};
    run_recipe(ctx, l, r);
    auto rep = std::make_shared<Replacement>();
    const Dag& b = ed.dag();
    std::vector<std::size_t> mine;
    if (table_[l]) {
      const auto& u = tab0_.at(layers_[l]);
      mine = u.tasks;
      mine.insert(mine.end(), u.linear_tasks.begin(), u.linear_tasks.end());
    } else {
      mine = lin0_.at(layers_[l]).tasks;
    }
    rep->replay = b.tasks.size() == a.tasks.size() && ed.lowrank().empty() && !mine.empty();
    const std::set<std::size_t> own(mine.begin(), mine.end());
    for (std::size_t i = 0; rep->replay && i < b.tasks.size(); ++i)
      if (!own.count(i) && !same_task(a.tasks[i], b.tasks[i])) rep->replay = false;
    if (!rep->replay) return rep;
    const TaskNode& t = b.tasks[mine[0]];
    const TaskNode& o = a.tasks[mine[0]];
    for (const auto& [role, port] : table_[l] ? nn::table_companion_ports() : linear_roles()) {
      const std::int64_t p = port_of(t, port);
      if (p < 0) continue;
      const DataRef ref = t.bindings[std::size_t(p)].ref;
      if (ref.data < std::int32_t(a.data.size())) continue;  // unbound, or the original tensor (a bias left alone)
      const DataDecl& d = b.data[std::size_t(ref.data)];
      if (d.init != InitKind::file) {
        rep->replay = false;
        return rep;
      }
      rep->tensors.push_back({role, d.dtype, d.shape, ed.tensor_bytes(ref.data), true});
    }
    const auto& tv = t.args.values();
    const auto& ov = o.args.values();
    for (std::size_t i = 0; i < tv.size() && i < ov.size(); ++i)
      if (tv[i].text != ov[i].text) rep->args[t.comp->params[i].name] = tv[i].text;
    const bool has_w = std::any_of(rep->tensors.begin(), rep->tensors.end(), [](const NewTensor& n) { return n.role == "w"; });
    if (!has_w && (!rep->tensors.empty() || !rep->args.empty())) rep->replay = false;  // not a replacement replace() makes
    return rep;
  }

  /// The cached (unit, recipe) result: computed by the first caller, the others wait for it.
  std::shared_ptr<const Replacement> replacement(std::size_t l, std::int32_t r) const {
    std::shared_future<std::shared_ptr<const Replacement>> fut;
    std::promise<std::shared_ptr<const Replacement>> mine;
    bool compute_here = false;
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      auto it = cache_.find({l, r});
      if (it == cache_.end()) {
        fut = mine.get_future().share();
        cache_.emplace(std::make_pair(l, r), fut);
        compute_here = true;
        ++stats_.misses;
      } else {
        fut = it->second;
        ++stats_.hits;
      }
    }
    if (compute_here) {
      const auto t0 = Clock::now();
      try {
        auto rep = compute(l, r);
        std::lock_guard<std::mutex> lock(cache_mu_);
        stats_.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        if (!rep->replay) ++stats_.uncacheable;
        mine.set_value(std::move(rep));
      } catch (...) {
        mine.set_exception(std::current_exception());
      }
    }
    return fut.get();  // rethrows a recipe's failure to every caller
  }

  /// Applies the configuration's recipes to run `run`'s editor, unit by unit.
  void apply(ModelEditor& ed, std::size_t run, const std::vector<std::int32_t>& config, bool use_cache, nlohmann::json* log) const {
    PassContext ctx{ed, &calib_};
    const auto& menu = recipes();
    for (std::size_t l = 0; l < layers_.size() && l < config.size(); ++l) {
      const std::int32_t r = config[l];
      if (r < 0 || std::size_t(r) >= menu.size())
        throw KernelError("compress: configuration entry " + std::to_string(l) + " is " + std::to_string(r) +
                          ", not a recipe index in [0, " + std::to_string(menu.size()) + ")");
      const Recipe& rec = menu[std::size_t(r)];
      if (rec.passes.empty()) continue;
      if (rec.table != table_[l])
        throw std::runtime_error("recipe " + rec.name + " on layer '" + layers_[l] + "': it applies to " +
                                 (rec.table ? "embedding tables" : "linear layers") + ", the layer is " +
                                 (table_[l] ? "an embedding table" : "a linear"));
      if (use_cache && shared_) {
        const auto rep = replacement(l, r);
        if (rep->replay) {
          if (rep->tensors.empty()) continue;  // the recipe left the unit as it was
          if (table_[l]) ed.replace_embedding(tab_[run].at(layers_[l]), rep->tensors, rep->args);
          else ed.replace(lin_[run].at(layers_[l]), rep->tensors, rep->args);
          continue;
        }
      }
      run_recipe(ctx, l, r);
    }
    if (log) *log = ctx.log;
  }

  Evaluation evaluate(const std::vector<std::int32_t>& config, const std::string& scratch_dir, bool use_cache) const override {
    const std::vector<std::int32_t> key = memo_key(config);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = memo_.find(key); it != memo_.end()) return it->second;  // measured before (by any co-method)
    }
    Evaluation ev = measure(key, use_cache, scratch_dir);
    std::lock_guard<std::mutex> lock(mu_);
    memo_.emplace(key, ev);
    return ev;
  }

  Evaluation measure(const std::vector<std::int32_t>& config, bool use_cache, const std::string& scratch_dir) const override {
    const auto t0 = Clock::now();
    Evaluation ev;
    double num = 0;
    std::optional<ScratchDir> own;  // removed on every exit, exceptions included
    if (scratch_dir.empty()) own.emplace("compress");
    const std::string dir = own ? own->path() : scratch_dir;
    fs::create_directories(dir);
    for (std::size_t r = 0; r < dags_.size(); ++r) {
      ModelEditor ed(copy_dag(dags_[r]), inner_registry());
      apply(ed, r, config, use_cache, nullptr);
      if (r == 0) ev.bytes = double(ed.weight_bytes());
      Dag& dag = ed.dag();
      for (TaskNode& t : dag.tasks) t.cost = dag.task_cost(t);  // the recipes rebound the units' tasks
      const Prediction p = predict(dag, machine_, 1, "sequential");
      ev.predicted_s += p.makespan_s - p.first_touch_s;
      const Outputs out = run_dag(dag, made_tensors(ed, dags_[r].data.size()), dir, nullptr);
      if (out.values.size() != refs_[r].values.size()) throw std::runtime_error("compress: the compressed model saves other outputs");
      for (std::size_t k = 0; k < out.values.size(); ++k) {
        const auto& a = refs_[r].values[k];
        const auto& b = out.values[k];
        if (a.size() != b.size()) throw std::runtime_error("compress: an output of the compressed model changed size");
        for (std::size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]);
      }
    }
    ev.error = ref_sq_ > 0 ? std::sqrt(num / ref_sq_) : std::sqrt(num);
    ev.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(cache_mu_);
    ++stats_.runs;
    stats_.run_seconds += ev.seconds;
    return ev;
  }

  bool time_calibrated() const override { return machine_.calibrated; }

  CacheStats cache_stats() const override {
    std::lock_guard<std::mutex> lock(cache_mu_);
    return stats_;
  }

  void write(const std::vector<std::int32_t>& config, const std::string& out_xml,
             const std::string& out_weights) const override {
    for (const std::string& f : {out_xml, out_weights})
      if (fs::path(f).has_parent_path()) fs::create_directories(fs::path(f).parent_path());
    ModelEditor ed(copy_dag(dags_[0]), inner_registry());
    nlohmann::json log;
    apply(ed, 0, config, false, &log);  // the passes themselves: their log names the formats
    std::string text;
    for (std::size_t l = 0; l < layers_.size(); ++l)
      text += (text.empty() ? "" : ",") + layers_[l] + "=" + recipes()[std::size_t(config[l])].name;
    std::map<std::string, std::string> meta = {{"ymlopt.sequence", "compress-search"}, {"ymlopt.passes", text}};
    for (const auto& rec : log)
      if (rec.contains("formats"))
        for (const auto& [k, v] : rec["formats"].items()) meta["ymlopt.format." + k] = v.get<std::string>();
    ed.write(out_xml, out_weights, meta);
  }

  void record(SearchPoint p) override {
    std::lock_guard<std::mutex> lock(mu_);
    p.time_s = std::chrono::duration<double>(Clock::now() - t0_).count();
    if (auto it = memo_.find(memo_key(p.config)); it != memo_.end()) p.predicted_s = it->second.predicted_s;
    points_.push_back(std::move(p));
  }
  std::vector<SearchPoint> points() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return points_;
  }
  bool rejected(const std::string& strategy, std::size_t layer, std::int32_t recipe, double bound) const override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = rejected_.find({strategy, layer, recipe});
    return it != rejected_.end() && it->second > bound;
  }
  void reject(const std::string& strategy, std::size_t layer, std::int32_t recipe, double below) override {
    std::lock_guard<std::mutex> lock(mu_);
    double& b = rejected_[{strategy, layer, recipe}];
    b = std::max(b, below);
  }

 private:
  // a configuration's entries for this model's units (the ports hold max_layers)
  std::vector<std::int32_t> memo_key(const std::vector<std::int32_t>& config) const {
    return {config.begin(), config.begin() + std::ptrdiff_t(std::min(config.size(), layers_.size()))};
  }
  Clock::time_point t0_;
  std::vector<Dag> dags_;
  std::vector<Outputs> refs_;
  double ref_sq_ = 0;
  Calibration calib_;
  const ymlopt::Calibration machine_ = load_calibration().value_or(builtin_calibration());  // the perf model's rates
  std::vector<std::string> layers_;
  std::vector<double> bytes_;
  std::vector<bool> table_;
  // each run's units, by name (the cache's results are replayed on every run's model)
  std::map<std::string, WeightUse> lin0_;
  std::map<std::string, ModelEditor::EmbeddingUse> tab0_;
  std::vector<std::map<std::string, WeightUse>> lin_;
  std::vector<std::map<std::string, ModelEditor::EmbeddingUse>> tab_;
  bool shared_ = true;  // every run reads the same unit tensors: the cache applies
  mutable std::mutex cache_mu_;
  mutable std::map<std::pair<std::size_t, std::int32_t>, std::shared_future<std::shared_ptr<const Replacement>>> cache_;
  mutable CacheStats stats_;
  mutable std::mutex mu_;
  std::vector<SearchPoint> points_;
  std::map<std::tuple<std::string, std::size_t, std::int32_t>, double> rejected_;  // -> the bounds below which
  mutable std::map<std::vector<std::int32_t>, Evaluation> memo_;
};

}  // namespace

std::shared_ptr<SearchModel> search_model(const std::string& workflow, const std::string& sets,
                                          const std::string& eval_sets) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<SearchModel>>* cache = new std::map<std::string, std::shared_ptr<SearchModel>>();
  // built under the lock: co-methods wait for the one that loads the model
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[workflow + "\n" + sets + "\n" + eval_sets];
  if (!slot) slot = std::make_shared<Model>(workflow, sets, eval_sets);
  return slot;
}

}  // namespace ymlopt::opt
