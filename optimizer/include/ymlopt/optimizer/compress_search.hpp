// United compression search (issue 5): per-unit recipe configurations of a
// model's weights, evaluated by running the compressed model in process.
//
// A unit is a compressible linear (ModelEditor::linear_weights order) or an
// embedding table (ModelEditor::embedding_tables, after the linears). A
// configuration is one recipe index per unit into a menu shared by every
// strategy (recipes(); a recipe applies to linears or to tables). A strategy
// owns a family of recipes; alone it only moves units along its own family,
// but inside a <unite> it adopts a configuration another co-method published
// when it dominates its own (no more bytes, no more error) and goes on from
// there (a unit at another family's recipe may move laterally to one of its
// own of as many bits); when none dominates, it tries that configuration's
// recipe on one unit where it holds fewer bits (a crossover, kept within the
// bound), so the final configuration can mix families unit by unit.
//
// A unit's compressed tensors under a recipe depend only on the recipe, the
// unit's weights and its calibration inputs (captured once on the original
// model), so they are computed once per (unit, recipe) and cached, shared by
// every co-method: an evaluation then costs the model's forward runs only.
//
//   ComponentRegistry reg;
//   register_builtin_components(reg);
//   opt::register_search_components(reg);   // compress.search_step, compress.finish
//
//   // or directly, without a workflow:
//   auto m = opt::search_model("workflows/models/gpt2.xml", "weights=g.safetensors layers=2");
//   opt::Evaluation e = m->evaluate({2, 0, 4, 0});   // bytes, relative output error, seconds
//   m->cache_stats().hits;                            // (unit, recipe) results reused
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ymlopt/sdk.hpp"

namespace ymlopt::opt {

/// One entry of the recipe menu: a pass list applied to a single unit.
struct Recipe {
  std::string name;    // "int8"
  std::string passes;  // "quant.int8" (parse_pass_list syntax, without match=)
  double bits = 32;    // nominal bits per weight, orders the recipes of a family
  bool table = false;  // applies to embedding tables (quant.embedding), else to linears
};

/// The menu (index 0 = keep f32, for both kinds). Indices are what configurations hold.
const std::vector<Recipe>& recipes();

/// A strategy: its name and its family (menu indices, most to least bytes).
struct Strategy {
  std::string name;
  std::vector<std::int32_t> family;
};
const std::vector<Strategy>& strategies();
/// The strategy called `name` (or with that index in strategies(): "2"), or nullptr.
const Strategy* find_strategy(const std::string& name);
/// "0 int8, 1 nm24-int8, ..." (for messages).
std::string strategy_names();

/// The next, more compressed recipe of `s` for a unit now at recipe `current`:
/// the family member of the unit's kind (`table`) with the most bits below
/// current's (the first in family order on a tie); -1 when none.
///   next_recipe(*find_strategy("gptq"), 0)  // gptq-int8, then gptq-int4-g128
std::int32_t next_recipe(const Strategy& s, std::int32_t current, bool table = false);
/// A recipe of `s` with as many bits as `current` but another name (int8 -> gptq-int8:
/// same bytes, maybe less error), the first in family order after `after` (-1: from
/// the start); -1 when none.
std::int32_t lateral_recipe(const Strategy& s, std::int32_t current, bool table = false, std::int32_t after = -1);

/// The recipe a crossover tries on a unit (an embedding table when `table`) now at
/// `current` whose gathered configuration holds `gathered`: `gathered` when it is a
/// recipe of the unit's kind with fewer bits and is not rejected here; once rejected,
/// the recipe with the fewest bits above it on the ladder of a family that holds it,
/// still below `current`'s (gptq-int4-g128 -> gptq-int8); -1 when none.
///   crossover_recipe(f32, gptq_int4, false, [](std::int32_t) { return false; })  // gptq-int4-g128
std::int32_t crossover_recipe(std::int32_t current, std::int32_t gathered, bool table,
                              const std::function<bool(std::int32_t)>& rejected);

/// Result of running one configuration.
struct Evaluation {
  double bytes = 0;    // weight bytes of the compressed model (file-backed tensors the tasks use)
  double error = 0;    // ||y - y_ref|| / ||y_ref|| over every io.save output of every evaluation run
  double seconds = 0;  // wall time of the passes and the runs
  // the performance model's time of the evaluation runs, warm (no first read of
  // mapped weights), sequential, with this machine's calibration (built-in figures without one)
  double predicted_s = 0;
};

/// A measured point, kept for the Pareto front.
struct SearchPoint {
  std::string strategy;
  std::vector<std::int32_t> config;
  double bytes = 0, error = 0, seconds = 0, time_s = 0;  // time_s: since the model was loaded
  bool within_bound = false;  // error <= the bound it was searched under
  std::string note;  // why a recipe could not be applied, if so
  double predicted_s = 0;  // Evaluation::predicted_s of the configuration (0: not measured)
};

/// Reuse of (unit, recipe) results: computed once (misses, taking `seconds`),
/// reused by later evaluations (hits); `uncacheable`: results a recipe made by
/// changing more than its unit's bindings (applied by the passes each time).
/// `runs`, `run_seconds`: configurations measured (memo misses) and their wall time.
struct CacheStats {
  std::int64_t hits = 0, misses = 0, uncacheable = 0, runs = 0;
  double seconds = 0, run_seconds = 0;
};

/// A model prepared for the search: compiled calibration runs, their
/// reference outputs and linear-layer inputs. Thread-safe.
class SearchModel {
 public:
  virtual ~SearchModel() = default;
  /// Names of the units: compressible linears, then embedding tables (configuration order).
  virtual const std::vector<std::string>& layers() const = 0;
  /// Bytes of each unit's original weight.
  virtual const std::vector<double>& layer_bytes() const = 0;
  /// Is unit `l` an embedding table (table recipes) rather than a linear?
  virtual bool is_table(std::size_t l) const = 0;
  /// Applies the configuration (cached (unit, recipe) results, computed with the
  /// optimizer's passes on first use) and runs every evaluation run (the calibration
  /// runs when no evaluation runs were given; sequential executor); a configuration
  /// measured before (by anyone) is not run again.
  /// Throws when a recipe cannot be applied to a unit (the message names both).
  /// `use_cache` false: measured (when new) with the passes run afresh, as measure(config, false).
  virtual Evaluation evaluate(const std::vector<std::int32_t>& config, const std::string& scratch_dir = "",
                              bool use_cache = true) const = 0;
  /// The same, always run, with (`use_cache`) or without the (unit, recipe) cache:
  /// without it every recipe's passes run again on every calibration run's model.
  virtual Evaluation measure(const std::vector<std::int32_t>& config, bool use_cache,
                             const std::string& scratch_dir = "") const = 0;
  virtual CacheStats cache_stats() const = 0;
  /// Whether Evaluation::predicted_s comes from this machine's calibration (ymlopt calibrate).
  virtual bool time_calibrated() const = 0;
  /// Writes the configuration's compressed weights (complete, with
  /// ymlopt.format metadata) and rewritten workflow, as `ymlopt optimize` does.
  virtual void write(const std::vector<std::int32_t>& config, const std::string& out_xml,
                     const std::string& out_weights) const = 0;
  virtual void record(SearchPoint p) = 0;
  virtual std::vector<SearchPoint> points() const = 0;
  /// Is (strategy, layer, recipe) known to break `bound` or to fail? A rejection
  /// holds for the bounds below its `below`: the error it was measured at (a search
  /// under a looser bound in the same process tries it again), or every bound
  /// (infinity: it failed, saved no bytes, or a lateral move did not lower the error).
  ///   m->reject("int8", 3, 2, 0.07);  m->rejected("int8", 3, 2, 0.05);  // true; at 0.1: false
  virtual bool rejected(const std::string& strategy, std::size_t layer, std::int32_t recipe, double bound = 0) const = 0;
  virtual void reject(const std::string& strategy, std::size_t layer, std::int32_t recipe,
                      double below = std::numeric_limits<double>::infinity()) = 0;
};

/// The process-wide model for (workflow, calibration sets, evaluation sets), built on
/// first use. `sets`: calibration runs separated by ';', each NAME=VALUE words separated
/// by spaces (one run with the workflow's defaults when empty); the recipes that need
/// calibration (GPTQ, OBS) use their inputs. `eval_sets`: runs in the same syntax on
/// which the error is measured; empty: the calibration runs themselves, where a recipe
/// fitted to a few sentences looks better than it is on others.
std::shared_ptr<SearchModel> search_model(const std::string& workflow, const std::string& sets,
                                          const std::string& eval_sets = "");

/// The non-dominated points (bytes, error both minimised; with `time`, the
/// predicted time too), by increasing bytes.
///   auto f = pareto_front(model->points(), /*time=*/true);
std::vector<SearchPoint> pareto_front(const std::vector<SearchPoint>& pts, bool time = false);

/// Registers compress.search_step and compress.finish. Explicit (no static initialiser).
void register_search_components(Registry& reg);

}  // namespace ymlopt::opt
