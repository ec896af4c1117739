// Running a compiled model in process: see model_run.hpp.
#include "model_run.hpp"

#include <cstring>
#include <span>
#include <stdexcept>

#include "run_workflow.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/scheduler/executor.hpp"
#include "component_names.hpp"

namespace ymlopt::opt {

Dag copy_dag(const Dag& d) {
  Dag c;
  c.name = d.name;
  c.file = d.file;
  c.data = d.data;
  c.tasks = d.tasks;
  c.topo_order = d.topo_order;
  c.regions = d.regions;
  c.root_region = d.root_region;
  return c;
}

std::map<std::int32_t, const std::vector<std::byte>*> made_tensors(const ModelEditor& ed, std::size_t first) {
  std::map<std::int32_t, const std::vector<std::byte>*> made;
  for (std::size_t d = first; d < ed.dag().data.size(); ++d)
    if (ed.dag().data[d].init == InitKind::file) made[std::int32_t(d)] = &ed.tensor_bytes(std::int32_t(d));
  return made;
}

Outputs run_dag(const Dag& in, const std::map<std::int32_t, const std::vector<std::byte>*>& made, const std::string& dir,
                Calibration* capture) {
  Dag dag = copy_dag(in);
  for (const auto& [d, bytes] : made) {
    (void)bytes;
    dag.data[std::size_t(d)].init = InitKind::zeros;
    dag.data[std::size_t(d)].src.clear();
  }
  DataStore store(dag);
  for (const auto& [d, bytes] : made) {
    const TensorView v = store.view(DataRef{d, -1});
    const std::size_t row = std::size_t(v.cols) * dtype_size(v.dtype);
    if (bytes->size() != row * std::size_t(v.rows))
      throw std::runtime_error("tensor '" + dag.data[std::size_t(d)].name + "' holds the wrong byte count");
    for (std::int64_t r = 0; r < v.rows; ++r)
      std::memcpy(static_cast<std::byte*>(v.data) + std::size_t(r * v.ld) * dtype_size(v.dtype),
                  bytes->data() + std::size_t(r) * row, row);
  }
  RunOptions ro;  // the sequential backend: the one that calls before_task
  ro.exec.run_dir = dir;
  if (capture)
    ro.exec.before_task = [&](const TaskNode& t, std::span<const TensorView> views) {
      if (t.comp->name != components::kLinear || views.empty() || views[0].dtype != DType::f32) return;
      const TensorView& x = views[0];
      Calibration::Input& in = capture->inputs[ModelEditor::task_key(t)];
      if (in.m > 0 && in.k != x.cols) throw std::runtime_error("task '" + ModelEditor::task_key(t) + "' changes width");
      in.k = x.cols;
      for (std::int64_t r = 0; r < x.rows; ++r)
        in.x.insert(in.x.end(), static_cast<const float*>(x.data) + r * x.ld, static_cast<const float*>(x.data) + r * x.ld + x.cols);
      in.m += x.rows;
    };
  const ExecResult res = run_workflow(dag, store, ro).result;
  if (!res.ok) throw std::runtime_error("running '" + dag.file + "' failed: " + res.error);
  Outputs o;
  for (const TaskNode& t : dag.tasks)
    if (t.comp->name == components::kSave) o.values.push_back(output_values(store.view(t.bindings[0].ref)));
  return o;
}

}  // namespace ymlopt::opt
