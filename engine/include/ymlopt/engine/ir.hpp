#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ymlopt/sdk.hpp>

#include "ymlopt/xml/parser.hpp"

namespace ymlopt {

enum class InitKind : std::uint8_t { none, zeros, ones, identity, random, spd, dominant, value, range, file };

/// Which kind of worker may run a task: any (the scheduler chooses among the
/// kinds the component has kernels for), or only CPU, OpenCL or CUDA workers
/// (a task's `where` attribute, `ymlopt run --where`).
enum class Where : std::uint8_t { any, cpu, opencl, cuda };

/// "any", "cpu", "opencl", "cuda".
const char* where_name(Where w);
/// The Where named `s`; false when `s` names none.
bool parse_where(std::string_view s, Where& out);
/// "" when `c` has a kernel for workers of kind `w` that handles the task, else why not.
std::string where_refusal(const ComponentSpec& c, Where w, const TaskShape& t);

/// A named tensor of the compiled workflow, optionally tiled into blocks.
/// Rank <= 2 tensors can be tiled; a tile is addressed (tile_row, tile_col).
struct DataDecl {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::int64_t rows = 1, cols = 1;        // 2-D view of the shape
  std::int64_t ld = 1;                    // elements between rows in memory (>= cols; padded to
                                          // avoid power-of-two strides, see padded_ld)
  std::int64_t tile_rows = 0, tile_cols = 0;  // block size; 0 = not tiled
  std::int64_t ntile_r = 1, ntile_c = 1;  // number of tiles per dimension
  // split="w0,w1,...": column tiles of the given widths (one row tile); holds
  // the first column of each tile, then cols. Empty: uniform tiles.
  std::vector<std::int64_t> col_starts;
  InitKind init = InitKind::none;
  std::uint64_t seed = 0;
  double value = 0;
  std::string src, key;  // InitKind::file
  bool reshape = false;  // accept a stored tensor of another shape with as many elements (row-major)
  SrcLoc loc;
  // A weight `ymlopt optimize` stored compressed: the file holds no `key` but
  // metadata "ymlopt.format.<key>" and companion tensors "<key>.<role>". The
  // tensor has no storage; the tasks reading it are bound to the companions
  // (data indices, by role) by their component (ComponentSpec::compressed).
  std::string format;  // "" for a plain tensor
  std::int64_t format_group = 0, format_block = 0;
  bool format_nk = false;  // declared [n, k] (torch Linear) rather than [k, n]
  std::string format_act;  // "f32": weight-only int8/int4 codes; "" the default
  std::vector<std::pair<std::string, std::int32_t>> companions;
  // Placement on MPI ranks (--backend starpu-mpi; other backends ignore it):
  // distribute="block-cyclic-2d|rows|cols|replicate" ("" = the backend's
  // default), owner="${expr}" = one rank for the whole tensor and its tiles
  // (taken modulo the number of ranks; -1 = not given), ranks="A-B" = the
  // tiles placed by the same rules over ranks A..B only, the tensor on A
  // (rank_count 0 = not given).
  std::string distribute;
  std::int32_t owner = -1;
  std::int32_t rank_first = 0, rank_count = 0;

  bool tiled() const { return tile_rows > 0; }
  /// Column tiles of the given widths (split=; they must add up to cols).
  void set_split(const std::vector<std::int64_t>& widths) {
    col_starts.assign(1, 0);
    for (std::int64_t w : widths) col_starts.push_back(col_starts.back() + w);
    tile_rows = shape.size() == 1 ? 1 : rows;
    tile_cols = 0;
    for (std::int64_t w : widths) tile_cols = w > tile_cols ? w : tile_cols;
    ntile_r = 1;
    ntile_c = std::int64_t(widths.size());
  }
  std::int64_t ntiles() const { return ntile_r * ntile_c; }
  std::int64_t bytes() const { return rows * cols * std::int64_t(dtype_size(dtype)); }  // logical
  std::int64_t storage_bytes() const { return rows * ld * std::int64_t(dtype_size(dtype)); }
  /// Rows/cols of tile t (edge tiles may be smaller).
  std::int64_t tile_nrows(std::int64_t tr) const {
    return tiled() ? std::min(tile_rows, rows - tr * tile_rows) : rows;
  }
  std::int64_t tile_ncols(std::int64_t tc) const {
    if (!col_starts.empty()) return col_starts[std::size_t(tc) + 1] - col_starts[std::size_t(tc)];
    return tiled() ? std::min(tile_cols, cols - tc * tile_cols) : cols;
  }
  /// First row/column of tile (tr, tc).
  std::int64_t tile_row0(std::int64_t tr) const { return tiled() ? tr * tile_rows : 0; }
  std::int64_t tile_col0(std::int64_t tc) const {
    if (!col_starts.empty()) return col_starts[std::size_t(tc)];
    return tiled() ? tc * tile_cols : 0;
  }
};

/// The row stride the engine allocates for a rows x cols tensor: cols, plus a
/// cache line when a row is a multiple of 4 KiB (power-of-two strides make the
/// rows of a tile fight for the same cache sets: single-thread sgemm on a
/// 1024-tile of a 4096-wide matrix runs ~1.5x faster with ld 4112 than 4096).
std::int64_t padded_ld(std::int64_t rows, std::int64_t cols, DType t);

/// "[4,8]": a shape as diagnostics print it.
std::string shape_str(const std::vector<std::int64_t>& shape);

/// A reference to a whole tensor (tile == -1) or to one tile (row-major tile index).
struct DataRef {
  std::int32_t data = -1;
  std::int32_t tile = -1;
  bool operator==(const DataRef&) const = default;
};

/// One port binding of a task; unbound optional ports have ref.data == -1.
struct Binding {
  DataRef ref;
  Access mode = Access::read;
};

/// One component invocation.
struct TaskNode {
  std::int32_t id = 0;
  const ComponentSpec* comp = nullptr;
  std::vector<Binding> bindings;  // in ComponentSpec::ports order
  Args args;
  SrcLoc loc;
  std::string label;        // the task's `name` attribute, or empty
  Cost cost;
  std::vector<std::int32_t> preds;        // all predecessors (data + events), sorted
  std::vector<std::int32_t> event_preds;  // the subset that comes from wait/notify only
  std::int32_t comethod = -1;             // innermost <comethod> region holding the task, or -1
  Where where = Where::any;               // the task's `where` attribute
};

/// Control flow decided at run time (unite and conquer; docs/ARCHITECTURE.md): a runtime
/// loop (`<until>`, `<while>` on 1-element data written by tasks), a `<unite>`
/// of concurrent `<comethod>`s, and their `<publish>`/`<gather>` exchanges.
/// A loop body is compiled once: its tasks sit in Dag::tasks in program order
/// like any others (dependencies within one iteration as usual; the runtime
/// runs iterations, and the items of a region, one after the other). A region
/// owns the tasks [first_task, end_task) and lists its items in order: runs of
/// its own tasks and sub-regions.
///
///   for (const Region::Item& it : dag.regions[r].items)
///     if (it.region >= 0) run_region(it.region); else run_tasks(it.first, it.end);
struct Region {
  enum class Kind : std::uint8_t { body, until, while_, unite, comethod, publish, gather };
  enum class Exit : std::uint8_t { first, all, budget };
  struct Item {
    std::int32_t region = -1;          // a sub-region, or
    std::int32_t first = 0, end = 0;   // the tasks [first, end)
  };
  Kind kind = Kind::body;
  SrcLoc loc;
  std::string name;  // unite/comethod name, publish/gather channel
  std::int32_t first_task = 0, end_task = 0;
  std::vector<Item> items;
  // until/while: `cond` is an expression (C or YvetteML word operators) over
  // the 1-element tensors `cond_data` (names as declared), read after each
  // iteration (until) or before it (while); at most max_iter iterations.
  std::string cond;
  std::vector<std::int32_t> cond_data;
  std::int64_t max_iter = 0;
  // publish: `data` published with the values of `scores` (one or several
  // 1-element tensors); gather: the best entry's tensors copied into `data`,
  // its scores into `scores`.
  std::vector<std::int32_t> data;
  std::vector<std::int32_t> scores;
  bool maximize = false;  // better="max" (gather: by the first score; unite: how the winner is chosen)
  bool pareto = false;    // gather better="pareto": every score minimised, lowest Pareto rank wins
  // unite
  Exit exit = Exit::first;
  double budget_s = 0;                // Exit::budget: wall-clock seconds (0: none)
  std::int64_t budget_iters = 0;      // Exit::budget: loop iterations per co-method (0: none)
  // how co-methods share the workers: shared (one pool, static priorities),
  // contexts (a scheduling context each), fair (one pool, each co-method's next
  // tasks prioritised by how little worker time it has had: an equal share)
  enum class Mapping { shared, contexts, fair };
  Mapping mapping = Mapping::shared;
  std::vector<std::int32_t> save_exit;  // data that receive the winner's `keep` tensors
  // comethod
  std::vector<std::int32_t> keep;     // its tensors copied into the unite's save_exit when it wins
  int priority = 0;                   // StarPU task priority of its tasks (mapping="shared")
  std::int64_t workers = 0;           // mapping="contexts": workers of its context (0: an equal share)
  std::int32_t parent_comethod = -1;  // the co-method whose nested <unite> holds this one, or -1
};

/// The compiled workflow: data, tasks in program order, dependencies.
///
///   Dag dag = compile_workflow(opts, registry, diags);
///   for (auto& t : dag.tasks) for (int p : t.preds) ...
struct Dag {
  std::string name;
  std::string file;
  std::vector<DataDecl> data;
  std::vector<TaskNode> tasks;
  std::vector<std::int32_t> topo_order;  // a valid execution order (program order where possible)
  std::vector<Region> regions;           // runtime control flow; empty for a static DAG
  std::int32_t root_region = -1;         // the workflow body when `regions` is not empty
  // <workflow checkpoint="tasks|none">: persist every finished task's outputs
  // in the run directory so that `ymlopt run --resume` skips them ("": not stated, none)
  std::string checkpoint;
  std::vector<std::unique_ptr<xml::Document>> docs;  // keep SrcLoc::file pointers valid

  /// Logical shape of a reference (tile shape for a tile).
  Shape ref_shape(const DataRef& r) const;
  std::string ref_name(const DataRef& r) const;
  /// "FILE:LINE:COL: error: task 'label'" (or "component #id"): how a run's
  /// errors about task t begin.
  std::string task_error(const TaskNode& t) const;
  /// A view without data of a reference: dtype, shape, rows and cols (a tile's
  /// for a tile), ld = cols. What `check` and `cost` see of a port.
  TensorView ref_view(const DataRef& r) const;
  /// ref_view of each binding (unbound ports: an empty view).
  std::vector<TensorView> shape_views(const std::vector<Binding>& binds) const;
  /// The task's cost from its component's cost function on its current bindings
  /// and args (every port's bytes without one; {} when it throws): what the
  /// compiler sets. A pass that rebinds a task (ModelEditor) calls it again:
  ///   for (TaskNode& t : dag.tasks) t.cost = dag.task_cost(t);
  Cost task_cost(const TaskNode& t) const;
  /// The same on views the caller already has (shape_views(t.bindings)).
  Cost task_cost(const TaskNode& t, const std::vector<TensorView>& views) const;
  std::size_t num_edges() const;
  /// The workflow has runtime loops or unite blocks (run by run_program).
  bool dynamic() const { return root_region >= 0; }
  /// A co-method's name with those of the co-methods it is nested in: "outer/inner".
  std::string comethod_path(std::int32_t region) const {
    std::string s = regions[size_t(region)].name;
    for (auto p = regions[size_t(region)].parent_comethod; p >= 0; p = regions[size_t(p)].parent_comethod)
      s = regions[size_t(p)].name + "/" + s;
    return s;
  }
};

}  // namespace ymlopt
