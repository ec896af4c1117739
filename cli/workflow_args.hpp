// What the workflow-taking subcommands share: the workflow file, --set and
// --plugin options, parsing with --help, and loading + compiling.
#pragma once
#include <boost/program_options.hpp>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/registry.hpp"

namespace ymlopt {

struct WorkflowArgs {
  std::string file;
  std::vector<std::string> sets;
  std::vector<std::string> plugins;
  std::string model;   // --model: a checkpoint whose config and tensors set the parameters
  std::string prompt;  // --prompt: text the model folder's tokenizer turns into the ids (with --model)
  std::size_t max_tasks = CompileOptions{}.max_tasks;
};

/// --set NAME=VALUE -> pairs; a malformed one is a UsageError.
std::vector<std::pair<std::string, std::string>> parse_sets(const std::vector<std::string>& sets);
/// Adds --set, --model, --prompt, --plugin and --max-tasks.
void add_workflow_options(boost::program_options::options_description& d, WorkflowArgs& a);
/// Parses a subcommand's options (the workflow file positional when wf is given);
/// prints the help and returns true on --help; throws UsageError (also when the
/// workflow file is missing, unless `file_optional`).
bool parse_or_help(const std::vector<std::string>& args, const boost::program_options::options_description& d,
                   WorkflowArgs* wf, bool file_optional = false);
/// Parses a subcommand's options whose positional arguments are the options
/// named in `positional`, in order (each taken once); prints the help and
/// returns true on --help; throws UsageError("CMD: ...").
///   if (parse_positional_or_help(args, d, {"input", "output"}, "convert")) return 0;
bool parse_positional_or_help(const std::vector<std::string>& args, const boost::program_options::options_description& d,
                              std::initializer_list<const char*> positional, const std::string& cmd);
/// Built-in components plus plugins; prints the error and returns false on failure.
bool load_registry(ComponentRegistry& reg, const std::vector<std::string>& plugins);
/// Compiles, printing diagnostics (appended to `text` instead, when given); returns the exit
/// code (0 ok, 1 bad workflow, 2 usage).
int compile(const WorkflowArgs& a, const ComponentRegistry& reg, CompileResult& out, bool check_files = true,
            std::string* text = nullptr);
/// load_registry + compile.
int prepare(const WorkflowArgs& wf, ComponentRegistry& reg, CompileResult& out, bool check_files = true,
            std::string* text = nullptr);

}  // namespace ymlopt
