// sparse.propagate: structural zeros followed through the compiled workflow.
//
// Forward, in program order, every tile of every tensor is "known zero" or
// not: zero-initialised tensors, weight tiles whose stored values are all
// zero, fills of 0, and what the rules below derive. A product whose multiply
// annihilates zero and whose reduction ignores it (op.matmul with mul a*b and
// add sum, nn.linear) gives zero when an operand is zero, through a bias and an
// activation that keep zero zero; activations, scalings, copies and sums of
// zeros are zero; attention over zero values is zero; a sum product whose
// output mask is all zero gives 0. A task that leaves its outputs as they were
// (a product accumulated from a zero operand, a zero written over zero) is
// dropped; one that writes zeros over other values becomes a fill of 0. Then, backward, tile by tile, a task none of whose
// written values is read any more (they fed only dropped tasks) is dropped too.
// Zeros are structural: 0 x inf and 0 x NaN count as 0, as in sparse BLAS.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "op/element_program.hpp"
#include "pass_util.hpp"
#include "component_names.hpp"

namespace ymlopt::opt::detail {
namespace {

/// Per tensor, per tile (one for an untiled tensor): a flag.
class TileFlags {
 public:
  explicit TileFlags(const Dag& dag) : dag_(dag), f_(dag.data.size()) {
    for (std::size_t d = 0; d < dag.data.size(); ++d) f_[d].assign(std::size_t(count(dag.data[d])), 0);
  }
  static std::int64_t count(const DataDecl& d) { return d.tiled() ? d.ntiles() : 1; }
  bool all(const DataRef& r) const {
    if (r.data < 0) return false;
    const auto& v = f_[std::size_t(r.data)];
    if (r.tile >= 0 && v.size() > 1) return v[std::size_t(r.tile)] != 0;
    return std::all_of(v.begin(), v.end(), [](char c) { return c != 0; });
  }
  bool any(const DataRef& r) const {
    const auto& v = f_[std::size_t(r.data)];
    if (r.tile >= 0 && v.size() > 1) return v[std::size_t(r.tile)] != 0;
    return std::any_of(v.begin(), v.end(), [](char c) { return c != 0; });
  }
  void set(const DataRef& r, bool on) {
    auto& v = f_[std::size_t(r.data)];
    if (r.tile >= 0 && v.size() > 1)
      v[std::size_t(r.tile)] = on;
    else
      std::fill(v.begin(), v.end(), char(on));
  }
  std::vector<char>& tiles(std::int32_t d) { return f_[std::size_t(d)]; }

 private:
  const Dag& dag_;
  std::vector<std::vector<char>> f_;
};

bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }


/// Does `map` (an expression over c; "" none) keep 0 at 0?
bool map_keeps_zero(const std::string& map) {
  if (map.empty()) return true;
  const op::ElementProgram p = op::ElementProgram::compile(map, {"c"});
  const float zero = 0.0f;
  float out = 1.0f;
  const op::ElementProgram::Input in{&zero, 0};
  p.run({&in, 1}, &out, 1);
  return out == 0.0f;
}

/// op.matmul with mul a*b and add sum: its product is zero when a or b is.
bool annihilating_product(const TaskNode& t) {
  if (t.args.get_string("add") != "sum") return false;
  return op::ElementProgram::compile(t.args.get_string("mul"), {"a", "b"}).canonical() == "a*b";
}

/// What a task does to its outputs given the known zeros before it.
enum class Effect { unknown, noop, zero };

Effect effect(const ModelEditor& ed, const TaskNode& t, const TileFlags& z) {
  namespace c = components;
  const std::string& name = t.comp->name;
  auto has = [&](const char* p) { return bound(ed, t, p).data >= 0; };
  auto zero = [&](const char* p) { return has(p) && z.all(bound(ed, t, p)); };
  auto absent_or_zero = [&](const char* p) { return !has(p) || zero(p); };
  if (name == c::kOpMatmul && has("mask") && zero("mask") && t.args.get_string("add") == "sum") {
    // every entry masked: the identity 0, or `masked`, or with accumulate and no `masked` c as it was; then map
    const std::string& masked = t.args.get_string("masked");
    const bool to_zero = masked.empty() ? !t.args.get_bool("accumulate") : std::strtod(masked.c_str(), nullptr) == 0;
    const std::string& map = t.args.get_string("map");
    if (!to_zero && map.empty()) return Effect::noop;
    return (to_zero || zero("c")) && map_keeps_zero(map) ? Effect::zero : Effect::unknown;
  }
  if (name == c::kOpMatmul) {
    if (has("arg") || !annihilating_product(t)) return Effect::unknown;
    const bool product_zero = zero("a") || zero("b");
    const std::string& masked = t.args.get_string("masked");
    if (!product_zero || (has("mask") && !masked.empty() && std::strtod(masked.c_str(), nullptr) != 0))
      return Effect::unknown;
    const std::string& map = t.args.get_string("map");
    if (t.args.get_bool("accumulate")) {
      if (map.empty()) return Effect::noop;  // c + 0 = c
      return zero("c") && map_keeps_zero(map) ? Effect::zero : Effect::unknown;
    }
    return map_keeps_zero(map) ? Effect::zero : Effect::unknown;
  }
  if (name == c::kLinear) {
    if (t.args.get_string("format") != "dense" || !(zero("x") || zero("w"))) return Effect::unknown;
    return absent_or_zero("b") && absent_or_zero("r") ? Effect::zero : Effect::unknown;  // every activation: 0 -> 0
  }
  if (name == c::kRelu || name == c::kGelu || name == c::kSilu || name == c::kTanh)
    return zero("x") ? Effect::zero : Effect::unknown;
  if (name == c::kTensorScale || name == c::kTensorCopy) {
    for (const Binding& b : t.bindings)
      if (b.mode == Access::read && b.ref.data >= 0 && !z.all(b.ref)) return Effect::unknown;
    return Effect::zero;
  }
  if (name == c::kTensorAdd) return zero("a") && zero("b") ? Effect::zero : Effect::unknown;
  if (name == c::kTensorFill) return t.args.get_float("value") == 0 ? Effect::zero : Effect::unknown;
  if (name == c::kAttention) return zero("v") ? Effect::zero : Effect::unknown;
  return Effect::unknown;
}

/// Does the task overwrite this binding whole (its old value not read)?
bool overwrites(const TaskNode& t, const Binding& b, std::size_t p) {
  if (b.mode == Access::write) return true;
  return t.comp->name == components::kOpMatmul && t.comp->ports[p].name == "c" && !t.args.get_bool("accumulate");
}

/// Tiles of weights (tensors no task writes) whose stored values are all zero.
std::int64_t seed_weights(const ModelEditor& ed, TileFlags& z) {
  const Dag& dag = ed.dag();
  std::vector<char> written(dag.data.size(), 0), read(dag.data.size(), 0);
  for (const TaskNode& t : dag.tasks)
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0) (b.mode == Access::read ? read : written)[std::size_t(b.ref.data)] = 1;
  std::int64_t found = 0;
  for (std::size_t d = 0; d < dag.data.size(); ++d) {
    const DataDecl& dd = dag.data[d];
    if (written[d] || !read[d] || !dd.format.empty() || !is_float(dd.dtype)) continue;
    std::vector<float> v;
    try {
      v = ed.load_values(std::int32_t(d));
    } catch (const std::exception&) {
      continue;  // no stored values (a runtime input)
    }
    std::vector<char>& tiles = z.tiles(std::int32_t(d));
    for (std::size_t ti = 0; ti < tiles.size(); ++ti) {
      const std::int64_t tr = dd.tiled() ? std::int64_t(ti) / dd.ntile_c : 0,
                         tc = dd.tiled() ? std::int64_t(ti) % dd.ntile_c : 0;
      const std::int64_t r0 = dd.tile_row0(tr), c0 = dd.tile_col0(tc);
      bool all_zero = true;
      for (std::int64_t r = r0; r < r0 + dd.tile_nrows(tr) && all_zero; ++r)
        for (std::int64_t cc = c0; cc < c0 + dd.tile_ncols(tc); ++cc)
          if (v[std::size_t(r * dd.cols + cc)] != 0.0f) {
            all_zero = false;
            break;
          }
      tiles[ti] = all_zero;
      found += all_zero;
    }
  }
  return found;
}

}  // namespace

void pass_sparse_propagate(PassContext& ctx, const PassSpec& s) {
  ModelEditor& ed = ctx.ed;
  Dag& dag = ed.dag();
  nlohmann::json entry = {{"pass", s.text()}, {"tasks_before", dag.tasks.size()}};
  if (!dag.regions.empty()) {
    entry["skipped"] = "the workflow has runtime loops or unite regions: its tasks run a number of times";
    ctx.log.push_back(entry);
    return;
  }
  const ComponentSpec* fill = ed.registry().find(components::kTensorFill);
  TileFlags zero(dag);
  for (std::size_t d = 0; d < dag.data.size(); ++d) {
    const DataDecl& dd = dag.data[d];
    if (dd.init == InitKind::zeros || (dd.init == InitKind::value && dd.value == 0))
      zero.set({std::int32_t(d), -1}, true);
  }
  const std::int64_t seeds = seed_weights(ed, zero);

  // forward: what each task does to the known zeros
  enum class Fate { keep, drop, fill, dead };
  std::vector<Fate> fate(dag.tasks.size(), Fate::keep);
  double flops_before = 0;
  for (TaskNode& t : dag.tasks) t.cost = dag.task_cost(t);  // earlier passes may have rebound tasks
  for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
    const TaskNode& t = dag.tasks[i];
    flops_before += t.cost.flops;
    Effect e = effect(ed, t, zero);
    int writes = 0;
    bool already = true;
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0 && b.mode != Access::read) ++writes, already = already && zero.all(b.ref);
    if (writes == 0 || t.comp->name == components::kSave) continue;
    if (e == Effect::zero && writes > 1) e = Effect::unknown;  // one fill replaces one output
    if (e == Effect::noop || (e == Effect::zero && already)) {
      fate[i] = Fate::drop;
      continue;
    }
    if (e == Effect::zero && fill && t.comp != fill) fate[i] = Fate::fill;
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0 && b.mode != Access::read) zero.set(b.ref, e == Effect::zero && fill);
  }

  // backward: tasks whose written values nothing reads any more
  TileFlags live(dag);
  for (std::size_t i = dag.tasks.size(); i-- > 0;) {
    const TaskNode& t = dag.tasks[i];
    if (fate[i] == Fate::drop) continue;
    bool writes = false, read_later = false;
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0 && b.mode != Access::read) writes = true, read_later = read_later || live.any(b.ref);
    if (writes && !read_later && t.comp->name != components::kSave) {
      fate[i] = Fate::dead;
      continue;
    }
    for (std::size_t p = 0; p < t.bindings.size(); ++p)
      if (t.bindings[p].ref.data >= 0 && t.bindings[p].mode != Access::read &&
          (fate[i] == Fate::fill || overwrites(t, t.bindings[p], p)))
        live.set(t.bindings[p].ref, false);
    if (fate[i] == Fate::fill) continue;  // the fill reads nothing
    for (std::size_t p = 0; p < t.bindings.size(); ++p)
      if (t.bindings[p].ref.data >= 0 && !overwrites(t, t.bindings[p], p)) live.set(t.bindings[p].ref, true);
  }

  // apply: fills in place, then removals from the back
  double flops_removed = 0;
  std::int64_t dropped = 0, filled = 0, dead = 0;
  nlohmann::json removed = nlohmann::json::array(), fills = nlohmann::json::array();
  for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
    if (fate[i] == Fate::keep) continue;
    TaskNode& t = dag.tasks[i];
    flops_removed += t.cost.flops;
    const std::string key = ModelEditor::task_key(t);
    if (fate[i] == Fate::fill) {
      TaskNode f;
      f.comp = fill;
      std::vector<ArgValue> vals;
      for (const ParamSpec& p : fill->params) vals.push_back({0.0, p.name == "value" ? "0" : p.default_value});
      f.args = Args(&fill->params, std::move(vals));
      f.loc = t.loc;
      f.label = key + ".zeros";
      for (const Binding& b : t.bindings)
        if (b.ref.data >= 0 && b.mode != Access::read) {
          f.bindings = {Binding{b.ref, Access::write}};
          break;
        }
      t = std::move(f);
      ++filled;
      if (fills.size() < 4096) fills.push_back(key);
      continue;
    }
    (fate[i] == Fate::drop ? dropped : dead) += 1;
    if (removed.size() < 4096) removed.push_back(key);
  }
  for (std::size_t i = dag.tasks.size(); i-- > 0;)
    if (fate[i] == Fate::drop || fate[i] == Fate::dead) ed.remove_task(i);
  entry.update({{"zero_tiles_stored", seeds},
                {"tasks_after", dag.tasks.size()},
                {"dropped_no_effect", dropped},
                {"dropped_unread", dead},
                {"filled", filled},
                {"flops_before", flops_before},
                {"flops_removed", flops_removed},
                {"removed", removed},
                {"fills", fills}});
  ctx.log.push_back(entry);
}

}  // namespace ymlopt::opt::detail
