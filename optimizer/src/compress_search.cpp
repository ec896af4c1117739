// United compression search: the recipe menu, the in-process model evaluation
// and the components compress.search_step / compress.finish.
#include "ymlopt/optimizer/compress_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <sstream>

#include "register_builtin.hpp"
#include "model_run.hpp"
#include "nn/embedding_formats.hpp"
#include "ymlopt/engine/analysis.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/data_store.hpp"
#include "ymlopt/engine/perf_model.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/engine/scratch_dir.hpp"
#include "ymlopt/optimizer/model_editor.hpp"
#include "ymlopt/optimizer/passes.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace ymlopt::opt {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> r = {
      {"f32", "", 32, false},
      {"nm24", "prune.nm,sparse.nm24", 18, false},  // 2:4, stored as the kept values + 2-bit positions
      {"int8", "quant.int8", 8, false},
      // group scales (and zero points) stored in f16, as llama.cpp's: no quality lost on
      // USE-lite (BENCHMARKS, "f16 group scales"), 1 bit per weight less in groups of 32
      {"int4-g128", "quant.group:bits=4:group=128:scale_dtype=f16", 4.125, false},
      {"gptq-int4-g128", "quant.gptq:bits=4:group=128:scale_dtype=f16", 4.125, false},
      {"obs50-int4-g128", "prune.obs:sparsity=0.5,quant.group:bits=4:group=128:scale_dtype=f16", 4.125, false},
      {"gptq-int8", "quant.gptq:bits=8:group=0", 8, false},  // per output channel, like int8
      // embedding tables: per-row symmetric int8; 4-bit codes with an f16 scale and zero per 32
      {"emb-int8", "quant.embedding:bits=8", 8, true},
      {"emb-int4-g32a", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16", 5, true},
      // the same with the first quarter / eighth / half of the ids (the frequent pieces of a
      // tokenizer that numbers them by frequency) in int8: 5.75 / 5.4 / 6.5 bits, a third to
      // two thirds of the 4-bit table's error on USE-lite (BENCHMARKS, "hot rows"); recipes
      // are appended, never reordered: configurations hold their indices
      {"emb-int4-g32a-hot25", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.25",
       5.75, true},
      {"emb-int4-g32a-hot12", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.125",
       5.375, true},
      {"emb-int4-g32a-hot50", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.5",
       6.5, true},
  };
  return r;
}

const std::vector<Strategy>& strategies() {
  // each family holds the table recipe its single strategy would use too
  static const std::vector<Strategy> s = {
      {"int8", {2, 7}},
      {"nm24-int8", {1, 2, 7}},
      {"int4-g128", {3, 11, 9, 10, 8}},
      {"gptq", {6, 4, 7, 11, 9, 10, 8}},  // GPTQ per channel int8, then int4 in groups of 128
      {"obs50-int4", {5, 11, 9, 10, 8}},
  };
  return s;
}

const Strategy* find_strategy(const std::string& name) {
  const auto& all = strategies();
  for (const auto& s : all)
    if (s.name == name) return &s;
  if (!name.empty() && name.size() < 4 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      std::size_t(std::stoi(name)) < all.size())
    return &all[std::size_t(std::stoi(name))];
  return nullptr;
}

std::string strategy_names() {
  std::string out;
  for (std::size_t i = 0; i < strategies().size(); ++i) {
    if (!out.empty()) out += ", ";
    out += std::to_string(i);
    out += ' ';
    out += strategies()[i].name;
  }
  return out;
}

std::int32_t next_recipe(const Strategy& s, std::int32_t current, bool table) {
  const auto& menu = recipes();
  if (current < 0 || std::size_t(current) >= menu.size()) return -1;
  const double bits = menu[std::size_t(current)].bits;
  std::int32_t best = -1;
  for (std::int32_t r : s.family)
    if (menu[std::size_t(r)].table == table && menu[std::size_t(r)].bits < bits &&
        (best < 0 || menu[std::size_t(r)].bits > menu[std::size_t(best)].bits))
      best = r;
  return best;
}

std::int32_t lateral_recipe(const Strategy& s, std::int32_t current, bool table, std::int32_t after) {
  const auto& menu = recipes();
  if (current <= 0 || std::size_t(current) >= menu.size()) return -1;
  bool past = after < 0;
  for (std::int32_t r : s.family) {
    if (!past) {
      past = r == after;
      continue;
    }
    if (r != current && menu[std::size_t(r)].table == table && menu[std::size_t(r)].bits == menu[std::size_t(current)].bits)
      return r;
  }
  return -1;
}

std::int32_t crossover_recipe(std::int32_t current, std::int32_t gathered, bool table,
                              const std::function<bool(std::int32_t)>& rejected) {
  const auto& menu = recipes();
  if (gathered < 0 || std::size_t(gathered) >= menu.size() || current < 0 || std::size_t(current) >= menu.size())
    return -1;
  const Recipe& g = menu[std::size_t(gathered)];
  const double own_bits = menu[std::size_t(current)].bits;  // 0, f32, serves both kinds
  if (gathered == current || g.bits >= own_bits || g.table != table) return -1;
  if (!rejected(gathered)) return gathered;
  // the gathered recipe broke the bound here: the next one up the ladder of a family
  // that holds it (gptq-int4-g128 -> gptq-int8), still below this unit's bits
  std::int32_t up = -1;
  for (const Strategy& st : strategies()) {
    if (std::find(st.family.begin(), st.family.end(), gathered) == st.family.end()) continue;
    for (std::int32_t r : st.family) {
      const Recipe& c = menu[std::size_t(r)];
      if (c.table != g.table || c.bits <= g.bits || c.bits >= own_bits || rejected(r)) continue;
      if (up < 0 || c.bits < menu[std::size_t(up)].bits) up = r;
    }
  }
  return up;
}

std::vector<SearchPoint> pareto_front(const std::vector<SearchPoint>& pts, bool time) {
  std::vector<SearchPoint> front;
  for (std::size_t a = 0; a < pts.size(); ++a) {
    bool dominated = false;
    for (std::size_t b = 0; b < pts.size() && !dominated; ++b) {
      if (a == b) continue;
      const SearchPoint &x = pts[b], &y = pts[a];
      const bool le = x.bytes <= y.bytes && x.error <= y.error && (!time || x.predicted_s <= y.predicted_s);
      const bool lt = x.bytes < y.bytes || x.error < y.error || (time && x.predicted_s < y.predicted_s);
      // of two equal points keep the first
      dominated = le && (lt || b < a);
    }
    if (!dominated) front.push_back(pts[a]);
  }
  std::sort(front.begin(), front.end(), [](const SearchPoint& x, const SearchPoint& y) { return x.bytes < y.bytes; });
  return front;
}

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

// ---- components ----

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

void search_step(KernelContext& ctx, const Strategy& st, Peers& peers) {
  const double bound = ctx.arg_float("err_bound");
  auto model = search_model(ctx.arg_string("model"), ctx.arg_string("sets"), ctx.arg_string("eval_sets"));
  const std::size_t L = model->layers().size();
  const TensorView& cv = ctx.port(kConfig);
  if (std::size_t(cv.cols) < L)
    throw KernelError("compress.search_step: config holds " + std::to_string(cv.cols) + " entries, the model has " +
                      std::to_string(L) + " compressible units (linears and embedding tables; raise max_layers)");
  std::int32_t* cfg_p = ptr<std::int32_t>(cv);
  double* sens = ptr<double>(ctx.port(kSens));
  double& bytes = *ptr<double>(ctx.port(kBytes));
  double& err = *ptr<double>(ctx.port(kErr));
  double& done = *ptr<double>(ctx.port(kDone));
  const std::string& run = ctx.run_dir();
  peers.enter(run, st.name, bytes <= 0);
  std::vector<std::int32_t> cfg(cfg_p, cfg_p + L);
  const std::string scratch = ctx.run_dir() + "/compress/scratch-" + st.name;
  const bool cache = ctx.arg_bool("cache");
  auto flush = [&] {
    std::copy(cfg.begin(), cfg.end(), cfg_p);
    for (std::size_t l = L; l < std::size_t(cv.cols); ++l) cfg_p[l] = -1;
    ctx.report("bytes", bytes);
    ctx.report("err", err);
  };
  if (bytes <= 0) {  // first call: measure the starting configuration
    const Evaluation e = model->evaluate(cfg, scratch, cache);
    bytes = e.bytes, err = e.error;
    model->record({st.name, cfg, e.bytes, e.error, e.seconds, 0, e.error <= bound, "start"});
  }
  // the gathered configuration (adopted below, once this family's own search is
  // exhausted) and the others' sensitivities for units never measured here
  const TensorView& gc = ctx.port(kGConfig);
  const bool exchange = ctx.arg_bool("exchange") && gc.data;
  if (exchange) {
    const double* gs = ptr<double>(ctx.port(kGSens));
    for (std::size_t l = 0; l < L; ++l)
      if (sens[l] == 0 && gs[l] > 0) sens[l] = gs[l];  // never measured here: take the others' estimate
  }
  // one step that tries `recipe` on unit l (a lateral move or a crossover, reported
  // under `kind`): kept when keep(evaluation), else rejected there for this strategy
  // under the bounds below below(evaluation)
  constexpr double kEvery = std::numeric_limits<double>::infinity();
  auto try_move = [&](std::size_t l, std::int32_t recipe, const char* kind, auto keep, auto below) {
    std::vector<std::int32_t> trial = cfg;
    trial[l] = recipe;
    Evaluation e;
    bool ok = false;
    std::string note = kind;
    peers.busy(run, st.name);
    double reject_below = kEvery;
    try {
      e = model->evaluate(trial, scratch, cache);
      ok = keep(e);
      reject_below = below(e);
    } catch (const std::exception& ex) {
      note = ex.what();
    }
    model->record({st.name, trial, e.bytes, e.error, e.seconds, 0, e.bytes > 0 && e.error <= bound, note});
    if (ok) {
      cfg = trial;
      bytes = e.bytes, err = e.error;
    } else {
      model->reject(st.name, l, recipe, reject_below);
    }
    done = 0;
    ctx.report("layer", double(l));
    ctx.report(kind, ok ? 1 : 0);
    ctx.report("accepted", ok ? 1 : 0);
    flush();
    return ok;
  };
  // 1. a lateral move (a unit another family compressed, to this family's recipe of
  // as many bits, e.g. int8 -> gptq-int8): kept when the error drops at no more bytes
  auto rejected_here = [&](std::size_t l, std::int32_t r) { return model->rejected(st.name, l, r, bound); };
  for (std::size_t l = 0; l < L; ++l) {
    std::int32_t lat = lateral_recipe(st, cfg[l], model->is_table(l));
    while (lat >= 0 && rejected_here(l, lat)) lat = lateral_recipe(st, cfg[l], model->is_table(l), lat);
    if (lat < 0) continue;
    try_move(l, lat, "lateral", [&](const Evaluation& e) { return e.error < err && e.bytes <= bytes; },
             [&](const Evaluation&) { return kEvery; });
    return;
  }
  // 2. the most promising unit one recipe further: units not measured yet first
  // (largest first; the step only measures them: a probe), then the lowest error
  // increase per byte saved (so the accepted steps follow the cheapest error first)
  std::int64_t pick = -1;
  std::int32_t to = -1;
  for (std::size_t l = 0; l < L; ++l) {
    // the family's next recipe for this unit, skipping those that failed here before
    // (2:4 may break the bound where int8 does not)
    std::int32_t nx = next_recipe(st, cfg[l], model->is_table(l));
    while (nx >= 0 && rejected_here(l, nx)) nx = next_recipe(st, nx, model->is_table(l));
    if (nx < 0) continue;
    if (pick < 0) {
      pick = std::int64_t(l), to = nx;
      continue;
    }
    const std::size_t p = std::size_t(pick);
    const bool ul = !(sens[l] > 0), up = !(sens[p] > 0);
    const bool better = ul != up ? ul : ul ? model->layer_bytes()[l] > model->layer_bytes()[p] : sens[l] < sens[p];
    if (better) pick = std::int64_t(l), to = nx;
  }
  if (pick < 0) {
    // this family's own chain is exhausted: restart from a gathered configuration
    // that dominates this one (no more bytes, no more error, one of them less), as
    // an ERAM restarts from the best Ritz pairs gathered. Adopting one during the
    // search instead (before its own chain ended) steered a co-method off its own
    // chain of cheapest steps, from where it ended behind what it reached alone
    // (USE-lite, five strategies: 5.27 MB against GPTQ alone's 4.96 MB); adopted
    // here, a co-method ends no worse than alone.
    if (exchange) {
      const double gb = *ptr<double>(ctx.port(kGBytes));
      const std::int32_t* g = ptr<std::int32_t>(gc);
      bool valid = gb > 0;
      for (std::size_t l = 0; l < L && valid; ++l)
        valid = g[l] >= 0 && std::size_t(g[l]) < recipes().size() &&
                (g[l] == 0 || recipes()[std::size_t(g[l])].table == model->is_table(l));
      const std::vector<std::int32_t> gcfg(g, g + L);
      if (valid && gb <= bytes && gcfg != cfg) {  // its error: measured again (memo: its publisher measured it)
        const Evaluation ge = model->evaluate(gcfg, scratch, cache);
        if (ge.error > bound)
          throw KernelError("compress.search_step: a gathered configuration breaks the bound (different err_bound per co-method?)");
        if (ge.error <= err && (ge.bytes < bytes || ge.error < err)) {
          peers.busy(run, st.name);
          cfg = gcfg;
          bytes = ge.bytes, err = ge.error;
          done = 0;
          ctx.report("adopted", 1);
          flush();
          return;
        }
      }
      // 3. a crossover: a unit the gathered configuration holds at fewer bits takes its
      // recipe (the most nominal bytes saved first), kept within the bound. This is how
      // the families mix unit by unit when no whole configuration dominates: on USE-lite
      // under 0.1, RTN's 4-bit table with another family's int8 linears
      if (valid) {
        std::int64_t best = -1;
        std::int32_t best_recipe = -1;
        double most = 0;
        for (std::size_t l = 0; l < L; ++l) {
          const std::int32_t r = crossover_recipe(cfg[l], gcfg[l], model->is_table(l),
                                                  [&](std::int32_t x) { return rejected_here(l, x); });
          if (r < 0) continue;
          const double saved =
              model->layer_bytes()[l] * (recipes()[std::size_t(cfg[l])].bits - recipes()[std::size_t(r)].bits) / 32;
          if (saved > most) best = std::int64_t(l), best_recipe = r, most = saved;
        }
        if (best >= 0) {
          const std::size_t l = std::size_t(best);
          if (try_move(l, best_recipe, "crossover", [&](const Evaluation& e) { return e.error <= bound && e.bytes < bytes; },
                       [&](const Evaluation& e) { return e.bytes < bytes ? e.error : kEvery; }))
            sens[l] = -1;  // its next recipe is not measured from there: probed again
          return;
        }
      }
    }
    // nothing to try with what was gathered: stay while another co-method is at
    // work (what it publishes next may give a crossover), sleeping on it so as to
    // leave the workers to it; on USE-lite under 0.1 the int4-g128 co-method
    // stopped before GPTQ published the int8 linears that complete the mix
    if (exchange && peers.idle(run, st.name, std::chrono::milliseconds(200),
                               std::size_t(std::max(ctx.remote_peers_at_work(), 0)))) {
      done = 0;
      flush();
      ctx.report("idle", 1);
      return;
    }
    peers.finish(run, st.name);
    done = 1;
    flush();
    ctx.report("done", 1);
    return;
  }
  done = 0;
  peers.busy(run, st.name);
  const std::size_t l = std::size_t(pick);
  const bool probe = !(sens[l] > 0);
  std::vector<std::int32_t> trial = cfg;
  trial[l] = to;
  Evaluation e;
  try {
    e = model->evaluate(trial, scratch, cache);  // after a probe of this very step: measured, not run again
  } catch (const std::exception& ex) {
    model->reject(st.name, l, to);  // under every bound
    model->record({st.name, trial, 0, 0, 0, 0, false, ex.what()});
    ctx.report("layer", double(l));
    ctx.report("accepted", 0);
    flush();
    return;
  }
  const double saved = std::max(bytes - e.bytes, 1.0);
  sens[l] = std::max(e.error - err, 1e-12) / saved;
  // a recipe that saves nothing (a pass that left the layer as it was, e.g. groups of
  // 128 on a width of 96) is rejected like one that breaks the bound
  const bool fits = e.error <= bound && e.bytes < bytes;
  model->record({st.name, trial, e.bytes, e.error, e.seconds, 0, e.error <= bound,
                 e.bytes < bytes ? (probe ? "probe" : "") : "no bytes saved"});
  const bool ok = fits && !probe;
  if (ok) {
    cfg = trial;
    bytes = e.bytes, err = e.error;
    sens[l] = -1;  // its next recipe is not measured yet: probed again (not the others' estimate)
  } else if (!fits) {
    model->reject(st.name, l, to, e.bytes < bytes ? e.error : kEvery);
    sens[l] = -1;  // its next recipe is probed before it competes (a rejected one's estimate is not its own)
  }
  ctx.report("layer", double(l));
  ctx.report("probe", probe ? 1 : 0);
  ctx.report("accepted", ok ? 1 : 0);
  flush();
}

void search_step_cpu(KernelContext& ctx) {
  const Strategy& st = *find_strategy(ctx.arg_string("strategy"));
  Peers& peers = Peers::get();
  try {
    search_step(ctx, st, peers);
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
