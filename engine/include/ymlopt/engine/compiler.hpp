#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ymlopt/engine/ir.hpp"
#include "ymlopt/engine/registry.hpp"

namespace ymlopt {

/// What to compile: a workflow file and its `--set name=value` overrides.
struct CompileOptions {
  std::string file;
  std::vector<std::pair<std::string, std::string>> sets;
  /// Expansion stops with an error beyond this many tasks (a loop with more
  /// iterations is refused before expanding): at the measured ~2 us and ~180 B
  /// per task, 10M tasks take ~20 s and ~2 GB to compile.
  std::size_t max_tasks = 10'000'000;
  /// Check that src= files exist and hold what the workflow declares. Off for
  /// dry runs, which size a model from its declarations alone.
  bool check_files = true;
  /// Parameters a checkpoint gives (`--model DIR`): each one the workflow
  /// declares takes its value unless `sets` names it; a workflow that declares
  /// none of them gets a warning per value it ignores.
  std::vector<std::pair<std::string, std::string>> model_sets{};
  /// Parameters the checkpoint does not determine: a workflow that declares
  /// one needs it in `sets`.
  std::vector<std::string> model_missing{};
  /// Names in model_sets a workflow may leave undeclared without a warning
  /// (`--prompt` gives batch=1, which generation workflows do not have).
  std::vector<std::string> model_optional{};
  /// Names in model_sets a workflow must declare, each with why: without it
  /// the workflow computes another model (a sliding window). An error.
  std::vector<std::pair<std::string, std::string>> model_required{};
  std::string model_origin{};  // "--model DIR", for messages
};

/// Outcome of compilation: the DAG, or diagnostics. `usage_error` is set when
/// the fault is on the command line (e.g. `--set` of an unknown parameter).
struct CompileResult {
  Dag dag;
  bool ok = false;
  bool usage_error = false;
};

/// XML -> expanded IR -> DAG: expands params, loops, ifs and calls, resolves
/// data and components, validates ports/args/shapes/initialisation, infers
/// RAW/WAR/WAW dependencies in program order plus wait/notify events, and
/// checks the result is acyclic.
///
///   Diagnostics diags;
///   CompileResult r = compile_workflow({"wf.xml", {{"n", "8"}}}, registry, diags);
///   if (!r.ok) std::cerr << diags.str();
CompileResult compile_workflow(const CompileOptions& opts, const ComponentRegistry& registry,
                               Diagnostics& diags);

/// Same, from XML text held in memory (tests); `path` names it in messages.
CompileResult compile_workflow_text(const std::string& path, const std::string& text,
                                    const CompileOptions& opts, const ComponentRegistry& registry,
                                    Diagnostics& diags);

}  // namespace ymlopt
