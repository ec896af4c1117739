// Rewriting a compiled model: the optimizer's passes edit a copy of the DAG
// (rebind ports, change args, add tensors they computed, add tasks), and the
// result is written back as a flat workflow plus a safetensors file holding
// every tensor the passes made.
//
//   ModelEditor ed(std::move(compiled.dag), registry);
//   for (const WeightUse& u : ed.linear_weights()) {
//     DenseWeight w = ed.load(u);
//     ed.replace(u, {{"w", DType::i8, {w.n, w.k}, codes}, {"w_scale", DType::f32, {w.n}, scales}},
//                {{"format", "int8"}});
//   }
//   ed.write("model.opt.xml", "model.opt.safetensors");
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ymlopt/engine/ir.hpp"
#include "ymlopt/engine/registry.hpp"

namespace ymlopt::opt {

/// A weight matrix used by nn.linear tasks only (whole, or as tiles that split
/// its output features), loaded from a file: the unit the passes compress.
struct WeightUse {
  std::int32_t data = -1;
  std::string name;                // the tensor's key in its file (or its data name)
  std::vector<std::size_t> tasks;  // indices of the nn.linear tasks reading it, program order
  bool nk = false;                 // stored [n, k] (transpose_w=true) rather than [k, n]
  std::int64_t n = 0, k = 0;
  std::int64_t tile_n = 0;         // output features per tile; 0: used whole
};

/// A weight in [n, k] layout (rows are output features), as floats.
struct DenseWeight {
  std::int64_t n = 0, k = 0;
  std::vector<float> w;  // n * k, row-major
};

/// A tensor a pass made to replace a weight: role is the nn.linear port it
/// binds ("w", "w_scale", "w_zero", "w_index", "w_ptr", or "b" for a new bias). Row-tileable tensors
/// (first dimension n) are tiled like the weight's output features.
struct NewTensor {
  std::string role;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
  bool row_tiled = true;  // false: CSR-like arrays that cannot be split by rows
};

/// Writes a compiled DAG as a flat workflow (no params, loops or calls): the
/// data the tasks use, then the tasks in program order. Relative src= paths
/// are made absolute except those under `weights_dir`, written relative to
/// the output file's folder.
std::string emit_workflow(const Dag& dag, const std::string& out_xml_dir);

class ModelEditor {
 public:
  ModelEditor(Dag dag, const ComponentRegistry& reg);

  Dag& dag() { return dag_; }
  const Dag& dag() const { return dag_; }
  const ComponentRegistry& registry() const { return reg_; }

  /// Index of port `name` of task t's component; throws if it has none.
  std::size_t port_index(const TaskNode& t, const std::string& name) const;
  /// Every weight the passes may change, in program order of first use:
  /// file-backed float tensors read only by nn.linear's `w` port (dense format),
  /// with one layout and tiles that split output features only.
  std::vector<WeightUse> linear_weights() const;
  /// The weight as [n, k] floats (from its file, or as a previous pass left it).
  DenseWeight load(const WeightUse& u) const;
  /// All values of a file-backed (or pass-made) tensor as floats, row-major.
  std::vector<float> load_values(std::int32_t data) const;
  /// Rebinds every task of `u` to the new tensors (tiles where the tasks used
  /// tiles), with the given nn.linear args (e.g. format=int8). Returns the
  /// updated use (the weight's data is then the new "w" tensor).
  WeightUse replace(const WeightUse& u, std::vector<NewTensor> tensors,
                    const std::map<std::string, std::string>& args);

  /// Whether replace() keeps a float copy of each weight it replaces first
  /// (original(); default true). Editors that only mirror another editor's
  /// replacements (CalibrationRuns: one per calibration run) turn it off.
  void set_keep_originals(bool keep) { keep_originals_ = keep; }
  /// The weight before any pass changed it (kept on the first replacement), by original name.
  const DenseWeight* original(const std::string& name) const;
  /// Records that a pass changed the graph around weight `name` (e.g. low rank):
  /// the weights file alone then cannot run the original workflow.
  void mark_graph_changed(const std::string& name) { final_[name].graph_changed = true; }
  /// The same for a weight a rewrite stopped using without replace() (e.g. merged
  /// into another tensor): its original is kept and its file is copied whole.
  void mark_graph_changed(const WeightUse& u);

  /// A weight a pass factored as W ≈ A B (A [n, r], B [r, k]; data indices).
  struct LowRankPair {
    std::int32_t a = -1, b = -1;
    std::int64_t n = 0, k = 0, r = 0;
  };
  void set_lowrank(const std::string& name, LowRankPair p) { lowrank_[name] = p; }
  const std::map<std::string, LowRankPair>& lowrank() const { return lowrank_; }
  /// The bytes of a tensor a pass made (the data index of an add_tensor result).
  std::vector<std::byte>& tensor_bytes(std::int32_t data) { return new_bytes_.at(data); }
  const std::vector<std::byte>& tensor_bytes(std::int32_t data) const { return new_bytes_.at(data); }

  /// Adds a tensor computed by a pass; it is stored in the output weights file.
  DataRef add_tensor(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape,
                     std::vector<std::byte> bytes);
  /// Adds an intermediate (activation) tensor with no initial value.
  DataRef add_scratch(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape);
  /// A name not used by any data yet, from `base`.
  std::string fresh_name(const std::string& base) const;

  /// A task's stable name across passes: its label, or "#<id>" when it has none.
  static std::string task_key(const TaskNode& t);

  void bind(TaskNode& t, const std::string& port, DataRef ref, Access mode = Access::read) const;
  void unbind(TaskNode& t, const std::string& port) const;
  void set_arg(TaskNode& t, const std::string& name, const std::string& value) const;
  /// Inserts a copy of `t` before task index `pos` (ids are renumbered).
  TaskNode& insert_task(std::size_t pos, TaskNode t);
  /// Removes task `pos` (ids are renumbered).
  void remove_task(std::size_t pos);

  /// Bytes of the file-backed tensors the tasks use (the model's weights).
  std::int64_t weight_bytes() const;

  /// Writes the weights file and the workflow, each atomically (temp + rename).
  /// The weights file is complete: every tensor the model reads from the files
  /// whose weights were changed, plus the new ones, with metadata
  /// "ymlopt.format.<weight>" so that the original workflow runs on it
  /// unchanged (`--set weights=...`) unless a pass changed the graph. The
  /// flat workflow reads everything of those files from the new one.
  void write(const std::string& out_xml, const std::string& out_weights,
             const std::map<std::string, std::string>& metadata = {});

 private:
  Dag dag_;
  const ComponentRegistry& reg_;
  std::vector<std::int32_t> new_data_;  // indices of data added by passes (stored in the weights file)
  std::map<std::int32_t, std::vector<std::byte>> new_bytes_;
  std::map<std::string, DenseWeight> originals_;
  bool keep_originals_ = true;
  struct Final {  // what became of an original weight, for the weights file's metadata
    std::string format = "dense", src, activations;  // activations: "f32" for weight-only int8/int4
    std::int64_t group = 0, block = 0, n = 0, k = 0;
    bool orig_nk = false, graph_changed = false;
  };
  std::map<std::string, Final> final_;
  void keep_original(const WeightUse& u);  // originals_ and final_ entries, on first change
  /// Adds the tensors replacing weight `name` ("<name>.<role>"), row-tiled by tile_n when > 0.
  std::map<std::string, DataRef> add_replacement(const std::string& name, std::vector<NewTensor> tensors,
                                                 std::int64_t tile_n);
  std::map<std::string, LowRankPair> lowrank_;
  std::map<std::int32_t, std::string> origin_name_;  // new weight data -> original weight name

 public:
  // ---- embedding tables (quant.embedding) ----

  /// An embedding table the passes may compress: a file-backed float tensor
  /// [vocab, d] read whole by nn.embedding's `table` port (format dense), and
  /// possibly tied to nn.linear readers of port `w` with transpose_w=true (GPT-2's
  /// lm_head on wte; tiles splitting vocab only), which then read the same codes.
  ///   for (const auto& u : ed.embedding_tables()) ed.replace_embedding(u, {...}, {{"format", "int8"}});
  struct EmbeddingUse {
    std::int32_t data = -1;
    std::string name;                       // the tensor's key in its file (or its data name)
    std::vector<std::size_t> tasks;         // nn.embedding tasks reading it, program order
    std::vector<std::size_t> linear_tasks;  // tied nn.linear tasks (w = the table as [n, k] = [vocab, d])
    std::int64_t vocab = 0, d = 0;
    std::int64_t tile_n = 0;  // rows per tile of the tied linears; 0: not tiled
  };
  /// Every table nn.embedding reads that can be compressed, in program order; each
  /// table it reads that cannot gets "name: reason" in `refused` (when given), e.g.
  /// "wte: also read by tensor.add port 'a'".
  std::vector<EmbeddingUse> embedding_tables(std::vector<std::string>* refused = nullptr) const;
  /// The table as [vocab, d] floats (from its file, or as a previous pass left it).
  DenseWeight load_table(const EmbeddingUse& u) const;
  /// Rebinds the embedding tasks (roles "w" -> table, "w_scale" -> table_scale,
  /// "w_zero" -> table_zero) and the tied linears (w, w_scale, w_zero, tiles where they
  /// used tiles) to the new tensors, with args "format" and "group" on both. Records
  /// the table's format for the weights file (layout nk, n = vocab, k = d), so the
  /// original workflow runs on it. Returns the updated use.
  EmbeddingUse replace_embedding(const EmbeddingUse& u, std::vector<NewTensor> tensors,
                                 const std::map<std::string, std::string>& args);
};

}  // namespace ymlopt::opt
