#include "run_checkpoint.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "report.hpp"
#include "usage_error.hpp"

namespace fs = std::filesystem;

namespace ymlopt {

namespace {
std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}
}  // namespace

void save_invocation(const std::string& run_dir, const WorkflowArgs& wf) {
  nlohmann::json plugins = nlohmann::json::array();
  for (const auto& p : wf.plugins) plugins.push_back(absolute(p));
  nlohmann::json j = {{"workflow", absolute(wf.file)}, {"set", wf.sets}, {"plugins", plugins}};
  if (!wf.model.empty()) j["model"] = absolute(wf.model);
  if (!wf.prompt.empty()) j["prompt"] = wf.prompt;
  fs::create_directories(run_dir + "/checkpoint");
  write_file_atomic(run_dir + "/checkpoint/run.json", j.dump(1) + "\n");
}

WorkflowArgs load_invocation(const std::string& run_dir) {
  const std::string path = run_dir + "/checkpoint/run.json";
  std::ifstream f(path);
  if (!f)
    throw UsageError("--resume: '" + run_dir +
                     "' holds no checkpoint (no checkpoint/run.json; runs are checkpointed with --checkpoint tasks "
                     "or <workflow checkpoint=\"tasks\">)");
  WorkflowArgs wf;
  try {
    const auto j = nlohmann::json::parse(f);
    wf.file = j.at("workflow").get<std::string>();
    wf.sets = j.at("set").get<std::vector<std::string>>();
    wf.plugins = j.at("plugins").get<std::vector<std::string>>();
    if (j.contains("model")) wf.model = j.at("model").get<std::string>();  // records before --model have none
    if (j.contains("prompt")) wf.prompt = j.at("prompt").get<std::string>();
  } catch (const std::exception& e) {
    throw UsageError("--resume: " + path + ": not a ymlopt run record (" + e.what() + ")");
  }
  return wf;
}

std::vector<std::string> merge_sets(const std::vector<std::string>& recorded, const std::vector<std::string>& given) {
  auto name = [](const std::string& s) { return s.substr(0, s.find('=')); };
  std::vector<std::string> out;
  for (const auto& r : recorded) {
    bool replaced = false;
    for (const auto& g : given) replaced |= name(g) == name(r);
    if (!replaced) out.push_back(r);
  }
  out.insert(out.end(), given.begin(), given.end());
  return out;
}

nlohmann::json checkpoint_json(const Checkpoint::Stats& s, bool resumed, std::size_t tasks_run) {
  nlohmann::json j = {{"mode", "tasks"},
                      {"dir", "checkpoint"},
                      {"resumed", resumed},
                      {"tasks_restored", s.tasks_restored},
                      {"tasks_run", tasks_run},
                      {"tasks_invalid", s.tasks_invalid},
                      {"tasks_persisted", s.tasks_persisted},
                      {"bytes_written", s.bytes_written},
                      {"bytes_restored", s.bytes_restored},
                      {"write_seconds", s.write_seconds},
                      {"copy_seconds", s.copy_seconds},
                      {"plan_seconds", s.plan_seconds}};
  if (!s.error.empty()) j["error"] = s.error;
  return j;
}

std::string checkpoint_line(const Checkpoint::Stats& s, bool resumed, std::size_t tasks_run) {
  char buf[256];
  if (resumed)
    std::snprintf(buf, sizeof buf,
                  "checkpoint: resumed, %lld tasks restored (%.1f MiB), %zu run again (%lld had damaged or missing "
                  "outputs); %lld persisted, %.1f MiB written\n",
                  (long long)s.tasks_restored, double(s.bytes_restored) / (1 << 20), tasks_run,
                  (long long)s.tasks_invalid, (long long)s.tasks_persisted, double(s.bytes_written) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "checkpoint: %lld tasks persisted, %.1f MiB written (writer busy %.2f s)\n",
                  (long long)s.tasks_persisted, double(s.bytes_written) / (1 << 20), s.write_seconds);
  return buf;
}

}  // namespace ymlopt
