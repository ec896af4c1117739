// United compression search (issue 5): per-layer recipe configurations of a
// model's linear layers, evaluated by running the compressed model in process.
//
// A configuration is one recipe index per compressible linear (ModelEditor::
// linear_weights order) into a menu shared by every strategy (recipes()). A
// strategy owns a family of recipes; alone it only moves layers down its own
// family, but inside a <unite> it adopts the smallest configuration any
// co-method published (under the error bound) and goes on from there, so the
// final configuration can mix families layer by layer.
//
//   ComponentRegistry reg;
//   register_builtin_components(reg);
//   opt::register_search_components(reg);   // compress.search_step, compress.finish
//
//   // or directly, without a workflow:
//   auto m = opt::search_model("workflows/models/gpt2.xml", "weights=g.safetensors layers=2");
//   opt::Evaluation e = m->evaluate({2, 0, 4, 0});   // bytes, relative output error, seconds
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ymlopt/sdk.hpp"

namespace ymlopt::opt {

/// One entry of the recipe menu: a pass list applied to a single layer.
struct Recipe {
  std::string name;    // "int8"
  std::string passes;  // "quant.int8" (parse_pass_list syntax, without match=)
  double bits = 32;    // nominal bits per weight, orders the recipes of a family
};

/// The menu (index 0 = keep f32). Indices are what configurations hold.
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

/// The next, more compressed recipe of `s` for a layer now at recipe `current`:
/// the family member with the most bits below current's; -1 when none.
std::int32_t next_recipe(const Strategy& s, std::int32_t current);

/// Result of running one configuration.
struct Evaluation {
  double bytes = 0;    // weight bytes of the compressed model (file-backed tensors the tasks use)
  double error = 0;    // ||y - y_ref|| / ||y_ref|| over every io.save output of every calibration run
  double seconds = 0;  // wall time of the passes and the runs
};

/// A measured point, kept for the Pareto front.
struct SearchPoint {
  std::string strategy;
  std::vector<std::int32_t> config;
  double bytes = 0, error = 0, seconds = 0, time_s = 0;  // time_s: since the model was loaded
  bool within_bound = false;  // error <= the bound it was searched under
  std::string note;  // why a recipe could not be applied, if so
};

/// A model prepared for the search: compiled calibration runs, their
/// reference outputs and linear-layer inputs. Thread-safe.
class SearchModel {
 public:
  virtual ~SearchModel() = default;
  /// Names of the compressible linears (configuration order).
  virtual const std::vector<std::string>& layers() const = 0;
  /// Bytes of each layer's original weight.
  virtual const std::vector<double>& layer_bytes() const = 0;
  /// Applies the configuration with the optimizer's passes and runs every
  /// calibration run (sequential executor). Throws when a recipe cannot be
  /// applied to a layer (the message names both).
  virtual Evaluation evaluate(const std::vector<std::int32_t>& config, const std::string& scratch_dir = "") const = 0;
  /// Writes the configuration's compressed weights (complete, with
  /// ymlopt.format metadata) and rewritten workflow, as `ymlopt optimize` does.
  virtual void write(const std::vector<std::int32_t>& config, const std::string& out_xml,
                     const std::string& out_weights) const = 0;
  virtual void record(SearchPoint p) = 0;
  virtual std::vector<SearchPoint> points() const = 0;
  /// Is (strategy, layer, recipe) known to break the bound or to fail?
  virtual bool rejected(const std::string& strategy, std::size_t layer, std::int32_t recipe) const = 0;
  virtual void reject(const std::string& strategy, std::size_t layer, std::int32_t recipe) = 0;
};

/// The process-wide model for (workflow, calibration sets), built on first use.
/// `sets`: calibration runs separated by ';', each NAME=VALUE words separated by
/// spaces (one run with the workflow's defaults when empty).
std::shared_ptr<SearchModel> search_model(const std::string& workflow, const std::string& sets);

/// The non-dominated points (bytes, error both minimised), by increasing bytes.
std::vector<SearchPoint> pareto_front(const std::vector<SearchPoint>& pts);

/// Registers compress.search_step and compress.finish. Explicit (no static initialiser).
void register_search_components(Registry& reg);

}  // namespace ymlopt::opt
