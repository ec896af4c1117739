// `ymlopt run --checkpoint tasks` / `--resume RUN_DIR`: what a run directory
// records so that a later command can resume it, and the report section.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workflow_args.hpp"
#include "ymlopt/scheduler/checkpoint.hpp"

namespace ymlopt {

/// Records the workflow, its --set values and plugins in
/// RUN_DIR/checkpoint/run.json (atomically), for `--resume`.
///
///   save_invocation("runs/x", wf);
///   WorkflowArgs again = load_invocation("runs/x");   // same file, sets, plugins
void save_invocation(const std::string& run_dir, const WorkflowArgs& wf);
/// Throws UsageError when RUN_DIR holds no checkpoint.
WorkflowArgs load_invocation(const std::string& run_dir);
/// The recorded --set values, then the new ones (a new value of a recorded
/// parameter replaces it).
std::vector<std::string> merge_sets(const std::vector<std::string>& recorded, const std::vector<std::string>& given);
/// report.json "checkpoint": mode, what was restored, persisted and its cost.
nlohmann::json checkpoint_json(const Checkpoint::Stats& s, bool resumed, std::size_t tasks_run);
/// One line for the terminal and run.log.
std::string checkpoint_line(const Checkpoint::Stats& s, bool resumed, std::size_t tasks_run);

}  // namespace ymlopt
