// Optimization passes over a compiled model (ModelEditor): compression of the
// linear layers' weights (quantization, pruning, sparse and low-rank forms)
// and graph rewrites. Each pass records what it did in a JSON object.
//
//   auto specs = parse_pass_list("prune.nm,quant.int8");
//   PassContext ctx{editor};
//   for (auto& s : specs) run_pass(ctx, s);
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "ymlopt/optimizer/model_editor.hpp"

namespace ymlopt::opt {

/// A pass and its options: "quant.group:bits=4:group=128".
struct PassSpec {
  std::string name;
  std::map<std::string, std::string> options;
  std::string text() const;
};

/// A bad pass list or option (unknown name with the closest one, bad value).
struct PassError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Inputs of the linear layers captured on calibration data, by task key
/// (ModelEditor::task_key): x [m, k] row-major.
struct Calibration {
  struct Input {
    std::int64_t m = 0, k = 0;
    std::vector<float> x;
  };
  std::map<std::string, Input> inputs;
};

/// Runs a compiled model once in process (sequential executor) and returns the
/// f32 inputs of its nn.linear tasks.
///
///   Calibration c = capture_linear_inputs(cr.dag, run_dir + "/calibration");
Calibration capture_linear_inputs(const Dag& dag, const std::string& scratch_dir);

/// A model's calibration runs (each its own compiled DAG: other inputs, other
/// sizes), kept to run again on the layers a pass has compressed so far:
/// quant.gptq:correct=true and prune.obs:correct=true compress each layer on
/// the inputs that the layers compressed before it produce. A pass mirrors each replacement it makes
/// (by weight name) with replace(); capture() then runs every run and stacks
/// the linears' inputs in run order, as the first capture did.
///
///   CalibrationRuns runs(std::move(dags), reg, dir);
///   PassContext ctx{ed, &calib};
///   ctx.runs = &runs;
class CalibrationRuns {
 public:
  CalibrationRuns(std::vector<Dag> runs, const ComponentRegistry& reg, std::string scratch_dir);
  ~CalibrationRuns();
  CalibrationRuns(const CalibrationRuns&) = delete;
  CalibrationRuns& operator=(const CalibrationRuns&) = delete;
  /// Rebinds the readers of weight `name` in every run, as ModelEditor::replace.
  void replace(const std::string& name, const std::vector<NewTensor>& tensors,
               const std::map<std::string, std::string>& args);
  /// Every run on the current weights; the nn.linear inputs, runs stacked.
  Calibration capture() const;

 private:
  struct Run;
  std::vector<std::unique_ptr<Run>> runs_;
  std::deque<std::vector<std::byte>> bytes_;  // the replacements' tensors, one copy for all runs
  std::string dir_;
};

/// What the passes of one sequence share: the model, the calibration inputs
/// (read-only: several searches may share the caller's), the log.
struct PassContext {
  ModelEditor& ed;
  const Calibration* calib = nullptr;  // for passes with needs_calibration
  nlohmann::json log = nlohmann::json::array();  // one entry per pass run
  /// A pass that changes the model's activations (smooth divides some inputs
  /// by s) copies the calibration here, changes the copy and points `calib`
  /// at it, so the later passes see the new model's inputs and the caller's
  /// stay as they were. writable_calibration() does that once.
  std::shared_ptr<Calibration> own_calib = nullptr;
  Calibration& writable_calibration();
  /// The calibration runs themselves, for passes that capture again
  /// (quant.gptq / prune.obs with correct=true); null where only the captured
  /// inputs exist.
  CalibrationRuns* runs = nullptr;
};

struct PassInfo {
  std::string name;
  std::string doc;
  std::vector<std::pair<std::string, std::string>> options;  // name, "default: meaning"
  void (*run)(PassContext&, const PassSpec&);
  bool needs_calibration = false;
  void (*check)(const PassSpec&) = nullptr;  // option values, before any work (PassError)
};

/// Every pass, in the order `ymlopt optimize --list-passes` prints them.
const std::vector<PassInfo>& all_passes();

/// "a:k=v:k2=v2,b" -> specs; unknown passes or options are a PassError.
std::vector<PassSpec> parse_pass_list(const std::string& text);
/// Checks a spec's name and option names (PassError with a suggestion).
void validate_pass(const PassSpec& spec);

/// Does any pass of the list need calibration activations?
bool needs_calibration(const std::vector<PassSpec>& specs);
/// Does any pass need the calibration runs themselves (CalibrationRuns)?
bool needs_calibration_runs(const std::vector<PassSpec>& specs);

/// Runs one pass; appends its record to ctx.log.
void run_pass(PassContext& ctx, const PassSpec& spec);

/// A model output's values as doubles, row by row (f32, f64, i32, i8; a padded
/// stride skipped), for comparing a compressed model's outputs with the
/// original's. Throws std::runtime_error for another dtype.
///
///   std::vector<double> y = output_values(store.view(save_task.bindings[0].ref));
std::vector<double> output_values(const TensorView& v);

}  // namespace ymlopt::opt
