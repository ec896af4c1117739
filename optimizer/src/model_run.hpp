// Running a compiled model in process (sequential executor) with the tensors
// passes made, for the compression search and the calibration runs.
//
//   Outputs o = run_dag(ed.dag(), made_tensors(ed, original.data.size()), dir, &calib);
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/optimizer/model_editor.hpp"
#include "ymlopt/optimizer/passes.hpp"

namespace ymlopt::opt {

/// A copy of a compiled DAG without its XML documents (not copyable; the
/// copy's source locations point into the original's, which must outlive it).
Dag copy_dag(const Dag& d);

struct Outputs {
  std::vector<std::vector<double>> values;  // one per io.save task, program order
};

/// The tensors a pass made in `ed` (data from index `first` on, file-backed
/// with no file yet), by data index.
std::map<std::int32_t, const std::vector<std::byte>*> made_tensors(const ModelEditor& ed, std::size_t first);

/// Runs a DAG with the sequential executor; pass-made tensors are filled from
/// `made`. Returns every io.save input; with `capture`, the f32 input of every
/// nn.linear task is appended to its entry (several runs stack).
Outputs run_dag(const Dag& in, const std::map<std::int32_t, const std::vector<std::byte>*>& made, const std::string& dir,
                Calibration* capture);

}  // namespace ymlopt::opt
