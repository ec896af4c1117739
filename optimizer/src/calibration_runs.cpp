// Calibration inputs captured by running the model in process, and the runs
// kept to capture again on compressed layers (passes.hpp).
#include <deque>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "model_run.hpp"
#include "ymlopt/optimizer/passes.hpp"

namespace ymlopt::opt {

Calibration capture_linear_inputs(const Dag& dag, const std::string& scratch_dir) {
  Calibration c;
  run_dag(dag, {}, scratch_dir, &c);
  return c;
}

struct CalibrationRuns::Run {
  ModelEditor ed;
  std::map<std::int32_t, const std::vector<std::byte>*> made;  // the replacements' tensors, shared by the runs
};

CalibrationRuns::CalibrationRuns(std::vector<Dag> runs, const ComponentRegistry& reg, std::string scratch_dir)
    : dir_(std::move(scratch_dir)) {
  for (Dag& d : runs) {
    runs_.push_back(std::make_unique<Run>(Run{ModelEditor(std::move(d), reg), {}}));
    runs_.back()->ed.set_keep_originals(false);
  }
}

CalibrationRuns::~CalibrationRuns() = default;

void CalibrationRuns::replace(const std::string& name, const std::vector<NewTensor>& tensors,
                              const std::map<std::string, std::string>& args) {
  // one copy of the bytes for every run (each editor's own copy is dropped)
  std::vector<const std::vector<std::byte>*> kept;
  for (const NewTensor& t : tensors) kept.push_back(&bytes_.emplace_back(t.bytes));
  std::vector<NewTensor> shapes = tensors;
  for (NewTensor& t : shapes) t.bytes.assign(t.bytes.size(), std::byte{0});
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    Run& run = *runs_[r];
    const std::size_t first = run.ed.dag().data.size();
    bool found = false;
    for (const WeightUse& u : run.ed.linear_weights())
      if (u.name == name) {
        run.ed.replace(u, shapes, args);
        found = true;
        break;
      }
    if (!found)
      throw std::runtime_error("calibration run " + std::to_string(r + 1) + " has no dense linear weight '" + name + "'");
    // replace() adds the tensors in order, one data each (the readers' tiles are views)
    if (run.ed.dag().data.size() - first != tensors.size())
      throw std::logic_error("CalibrationRuns: replace() added " + std::to_string(run.ed.dag().data.size() - first) +
                             " tensors for " + std::to_string(tensors.size()));
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto d = std::int32_t(first + i);
      std::vector<std::byte>().swap(run.ed.tensor_bytes(d));
      run.made[d] = kept[i];
    }
  }
}

Calibration CalibrationRuns::capture() const {
  Calibration c;
  std::filesystem::create_directories(dir_);
  for (const auto& run : runs_) run_dag(run->ed.dag(), run->made, dir_, &c);
  return c;
}

}  // namespace ymlopt::opt
