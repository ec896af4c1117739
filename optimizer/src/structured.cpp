// Structured pruning passes: prune.heads and prune.neurons remove whole
// attention heads / FFN neurons from the graph. The unit (a head's dh
// columns, or one neuron) is followed from the layer that reads it (o_proj,
// down_proj: the "consumer", whose input columns are the units) back through
// the column-wise tasks (nn.attention, nn.rope, nn.swiglu, activations) to the
// linear layers that make it (q/k/v, gate/up: the "leaves"). Every tensor on
// the way becomes a narrower split= tensor, every leaf keeps the weight rows of
// the kept units, the consumer keeps their weight columns, attention and rope
// get the new head counts. Under grouped-query attention a unit is a kv head
// with the query heads it serves (their columns of k/v and of q/y are mapped
// to the consumer's by ColMap). The scores come from the prune.heads and
// prune.neurons components (magnitude, or activations from calibration).
#include <algorithm>
#include <cmath>
#include <set>

#include "pass_util.hpp"
#include "component_names.hpp"

namespace ymlopt::opt::detail {
namespace {

/// Ports of the column-wise components whose columns correspond one to one.
const std::vector<std::string>* column_ports(const std::string& comp) {
  static const std::map<std::string, std::vector<std::string>> m = {
      {components::kSwiglu, {"gate", "up", "y"}}, {components::kGelu, {"x", "y"}},  {components::kRelu, {"x", "y"}},
      {components::kSilu, {"x", "y"}},            {components::kTanh, {"x", "y"}},  {components::kRope, {"x"}},
      {components::kAttention, {"q", "k", "v", "y"}}};
  auto it = m.find(comp);
  return it == m.end() ? nullptr : &it->second;
}

bool per_head(const std::string& comp) { return comp == components::kRope || comp == components::kAttention; }

/// Which columns of the consumer's input x a tensor's columns stand for: column
/// i is x's h0 + (i / blk) * step + i % blk. Contiguous (blk = step = 1) but for
/// the keys and values of grouped-query attention, whose kv head g (blk = dh
/// columns) serves the `group` query heads at step = group * dh.
struct ColMap {
  int64_t h0 = 0, w = 0, blk = 1, step = 1;
  int64_t col(int64_t i) const { return h0 + (i / blk) * step + i % blk; }
  int64_t span() const { return w / blk * step; }  // x's columns it covers: [h0, h0 + span)
  bool contiguous() const { return blk == step; }
  bool operator==(const ColMap& o) const {
    return h0 == o.h0 && w == o.w && (contiguous() ? o.contiguous() : blk == o.blk && step == o.step);
  }
  bool operator!=(const ColMap& o) const { return !(*this == o); }
};

/// What feeds a consumer's input: every binding on the way, with the input
/// columns it carries.
struct Closure {
  std::map<std::pair<std::size_t, std::size_t>, ColMap> bindings;  // (task, port) -> its columns
  std::vector<std::size_t> leaves;  // nn.linear tasks making units, in the order found
  std::map<std::size_t, std::vector<int64_t>> leaf_cols;  // leaf -> per output column: consumer column, or -1
  std::set<std::size_t> tasks;
  int64_t dh = 0;     // head size when attention is on the way, else 0
  int64_t group = 1;  // query heads per key/value head (grouped-query attention)
  std::string why;    // why it cannot be pruned
  /// Columns of x per unit: a head, or under grouped-query attention a kv head's
  /// whole group of query heads (the kv head goes with them).
  int64_t unit() const { return dh * group; }
};

class Tracer {
 public:
  Tracer(const ModelEditor& ed, Closure& c) : ed_(ed), dag_(ed.dag()), c_(c) {}

  bool add(std::size_t task, std::size_t port, const ColMap& m) {
    auto [it, fresh] = c_.bindings.try_emplace({task, port}, m);
    if (!fresh && it->second != m) return fail("a tensor carries two different column ranges");
    c_.tasks.insert(task);
    return true;
  }
  bool fail(const std::string& why) {
    if (c_.why.empty()) c_.why = why;
    return false;
  }

  /// Follows the value task `before` reads at r (standing for the consumer's input
  /// columns `m` maps it to; m.w is set here).
  bool trace(const DataRef& r, std::size_t before, ColMap m) {
    const int64_t w = dag_.ref_shape(r).back();
    m.w = w;
    for (std::size_t j = before; j-- > 0;) {
      const TaskNode& t = dag_.tasks[j];
      if (t.comp->name == components::kLinear) {
        // a leaf: it writes exactly r, or the whole tensor r is a tile of
        const Binding& yb = t.bindings[ed_.port_index(t, "y")];
        if (!overlaps(yb.ref, r)) continue;  // it only reads r, if anything
        const DataDecl& d = dag_.data[std::size_t(r.data)];
        const bool whole = yb.ref.tile < 0 && r.tile >= 0 && d.ntile_r == 1;
        if (yb.mode != Access::write || !(yb.ref == r || whole))
          return fail(ModelEditor::task_key(t) + " writes part of " + dag_.ref_name(r));
        if (t.bindings[ed_.port_index(t, "r")].ref.data >= 0) return fail(ModelEditor::task_key(t) + " adds a residual");
        const int64_t c0 = yb.ref == r ? 0 : d.tile_col0(r.tile % d.ntile_c);
        auto [it, fresh] = c_.leaf_cols.try_emplace(j);
        if (fresh) {
          it->second.assign(std::size_t(dag_.ref_shape(yb.ref).back()), -1);
          c_.leaves.push_back(j);
        }
        for (int64_t i = 0; i < w; ++i) {
          int64_t& col = it->second[std::size_t(c0 + i)];
          if (col != -1 && col != m.col(i)) return fail("a tensor carries two different column ranges");
          col = m.col(i);
        }
        c_.tasks.insert(j);
        return true;
      }
      bool writes = false, updates = false;
      for (std::size_t p = 0; p < t.bindings.size(); ++p) {
        const Binding& b = t.bindings[p];
        if (!overlaps(b.ref, r)) continue;
        if (!(b.ref == r)) {
          if (b.mode != Access::read) return fail(ModelEditor::task_key(t) + " writes part of " + dag_.ref_name(r));
          continue;
        }
        if (b.mode == Access::write) writes = true;
        else if (b.mode == Access::read_write) updates = true;
      }
      if (!writes && !updates) continue;
      const std::string& comp = t.comp->name;
      const auto* ports = column_ports(comp);
      if (!ports) return fail(ModelEditor::task_key(t) + " (" + comp + ") mixes columns");
      c_.tasks.insert(j);
      int64_t group = 1;  // of this attention: its k and v are narrower than q and y
      if (comp == components::kAttention) {
        const int64_t heads = t.args.get_int("heads"), kv = t.args.get_int("kv_heads");
        if (t.args.get_int("head_begin") != 0 || t.args.get_int("head_end") != 0)
          return fail(ModelEditor::task_key(t) + ": a head range");
        if (kv != 0 && kv != heads) {
          if (kv <= 0 || heads % kv != 0) return fail(ModelEditor::task_key(t) + ": heads not a multiple of kv_heads");
          group = heads / kv;
          if (!m.contiguous()) return fail(ModelEditor::task_key(t) + ": grouped-query attention on keys or values");
        }
        if (c_.dh != 0 && c_.group != group) return fail("two query groupings");
        c_.group = group;
      }
      if (per_head(comp)) {
        const int64_t dh = w / t.args.get_int("heads");
        if (c_.dh != 0 && c_.dh != dh) return fail("two head sizes");
        c_.dh = dh;
      }
      for (const std::string& pn : *ports) {
        const std::size_t p = ed_.port_index(t, pn);
        const Binding& b = t.bindings[p];
        ColMap pm = m;
        int64_t pw = w;
        if (group > 1 && (pn == "k" || pn == "v")) {  // kv head g stands for query heads [g * group, (g + 1) * group)
          pm.blk = c_.dh;
          pm.step = c_.dh * group;
          pw = w / group;
        }
        if (dag_.ref_shape(b.ref).back() != pw) return fail(ModelEditor::task_key(t) + ": ports of different widths");
        pm.w = pw;
        if (!add(j, p, pm)) return false;
        if (b.mode == Access::read && !trace(b.ref, j, pm)) return false;
      }
      if (writes) return true;  // a plain write: the value starts here
      // an in-place update: the value before it comes from further up
    }
    return fail("no task makes " + dag_.ref_name(r));
  }

 private:
  const ModelEditor& ed_;
  const Dag& dag_;
  Closure& c_;
};

/// Every value a closure task writes is read by closure tasks or the consumer only.
bool closed(const ModelEditor& ed, const Closure& c, const std::vector<std::size_t>& consumer, const DataRef& x) {
  const Dag& dag = ed.dag();
  std::vector<std::pair<std::size_t, std::size_t>> written;
  for (const auto& [tp, range] : c.bindings) written.push_back(tp);
  for (std::size_t leaf : c.leaves) written.emplace_back(leaf, ed.port_index(dag.tasks[leaf], "y"));
  for (const auto& [task, port] : written) {
    const Binding& wb = dag.tasks[task].bindings[port];
    if (wb.mode == Access::read) continue;
    for (std::size_t j = task + 1; j < dag.tasks.size(); ++j) {
      const TaskNode& t = dag.tasks[j];
      bool overwritten = false;
      for (std::size_t p = 0; p < t.bindings.size(); ++p) {
        const Binding& b = t.bindings[p];
        if (!overlaps(b.ref, wb.ref)) continue;
        const bool mine = c.bindings.count({j, p}) > 0;
        const bool by_consumer = b.ref == x && std::find(consumer.begin(), consumer.end(), j) != consumer.end();
        if (b.mode == Access::write && b.ref == wb.ref && !mine) overwritten = true;
        else if (!mine && !by_consumer) return false;
      }
      if (overwritten) break;
    }
  }
  return true;
}

}  // namespace

void check_prune_units(const PassSpec& s) {
  const double sparsity = opt_num(s, "sparsity", 0.25);
  const std::string criterion = opt_str(s, "criterion", "magnitude");
  if (sparsity < 0 || sparsity >= 1) throw PassError("option 'sparsity' of " + s.name + " must be in [0, 1)");
  if (criterion != "magnitude" && criterion != "activation")
    throw PassError("option 'criterion' of " + s.name + " is '" + criterion + "': magnitude or activation");
}

/// prune.heads / prune.neurons: see the file comment.
namespace {

/// One prune.heads / prune.neurons pass over the selected consumers: for each,
/// find() traces the units back to their leaves, score() asks the component
/// which units stay, and narrow() / rewrite() build the narrower graph.
class UnitPruner {
 public:
  UnitPruner(PassContext& ctx, const PassSpec& s, bool heads)
      : ctx_(ctx), ed_(ctx.ed), dag_(ctx.ed.dag()), s_(s), heads_(heads), kind_(heads ? "heads" : "neurons") {
    check_prune_units(s);
    sparsity_ = opt_num(s, "sparsity", heads ? 0.25 : 0.5);
    criterion_ = opt_str(s, "criterion", "magnitude");
    if (criterion_ == "activation" && !ctx.calib) throw PassError(s.name + ":criterion=activation needs calibration inputs");
  }

  void run() {
    for (const WeightUse& sel : selected(ctx_, s_)) {
      Layer l;
      if (find(sel, l) && score(l) && narrow(l)) rewrite(l);
    }
    ctx_.log.push_back({{"pass", s_.text()}, {"layers", layers_}, {std::string(kind_) + "_before", before_total_},
                        {std::string(kind_) + "_after", after_total_}, {"skipped", skipped_}});
  }

 private:
  struct Leaf {
    std::size_t task;
    WeightUse use;
    int64_t r0 = 0;                 // first weight row (of [n, k]) the task uses
    const std::vector<int64_t>* hcol = nullptr;  // per output column: consumer column or -1
  };
  // One consumer and what its pruning builds.
  struct Layer {
    WeightUse u;        // the consumer: a linear reading one whole input x [m, F] (its weight [n, F])
    DataRef x;
    Closure cl;         // what feeds x (Leaf::hcol points into it)
    int64_t unit = 1, F = 0, nunits = 0, nkept = 0;
    std::vector<Leaf> leaves;
    DenseWeight wd;     // the consumer's weight
    std::vector<char> kept;  // per unit
    std::map<std::int32_t, DataRef> renamed;  // data -> its narrower tensor
    std::map<std::int32_t, std::map<std::int32_t, std::int32_t>> new_tile;  // data -> old tile -> new tile
    int64_t kept_in(int64_t h0, int64_t w) const {
      int64_t n = 0;
      for (int64_t i = h0 / unit; i < (h0 + w) / unit; ++i) n += kept[std::size_t(i)];
      return n;
    }
    // of a tensor on the way: the units it carries that are kept, and its columns per unit
    int64_t kept_units(const ColMap& m) const { return kept_in(m.h0, m.span()); }
    int64_t cols_per_unit(const ColMap& m) const { return unit * m.blk / m.step; }
    // a binding's data, renamed to its narrower tensor
    DataRef narrowed(const DataRef& r) const {
      DataRef nr = renamed.at(r.data);
      nr.tile = r.tile < 0 ? -1 : new_tile.at(r.data).at(r.tile);
      return nr;
    }
  };
  struct Slot {
    DataRef data;
    std::size_t free_after = 0;
  };

  void skip(const std::string& why) {
    if (skipped_.size() < 64) skipped_.push_back(why);
  }

  // The consumer `sel` names, the closure of its input and its leaves; false
  // when it cannot be pruned (said in skipped when it looked like a candidate).
  bool find(const WeightUse& sel, Layer& l) {
    for (const WeightUse& c : ed_.linear_weights())
      if (c.name == sel.name) l.u = c;
    const WeightUse& u = l.u;
    if (u.data < 0) return false;
    const TaskNode& c0 = dag_.tasks[u.tasks.front()];
    l.x = c0.bindings[ed_.port_index(c0, "x")].ref;
    const DataRef x = l.x;
    bool ok = x.tile < 0 && dag_.data[std::size_t(x.data)].shape.size() == 2;
    for (std::size_t t : u.tasks) ok = ok && dag_.tasks[t].bindings[ed_.port_index(dag_.tasks[t], "x")].ref == x;
    if (!ok) return false;
    const DataDecl& xd = dag_.data[std::size_t(x.data)];
    if (xd.ntile_r != 1) return false;
    Closure& cl = l.cl;
    Tracer tr(ed_, cl);
    const std::size_t first = u.tasks.front();
    if (xd.tiled()) {
      for (int64_t c = 0; c < xd.ntile_c && ok; ++c)
        ok = tr.trace(DataRef{x.data, std::int32_t(c)}, first, ColMap{xd.tile_col0(c)});
    } else {
      ok = tr.trace(x, first, ColMap{});
    }
    const bool has_attention = cl.dh > 0;
    if (!ok || has_attention != heads_ || cl.leaves.empty()) {
      // say why for the layers that looked like candidates (something column-wise on the way)
      const bool candidate = !cl.tasks.empty() && (ok ? has_attention == heads_ : true);
      if (candidate && !cl.why.empty()) skip(u.name + ": " + cl.why);
      return false;
    }
    if (!closed(ed_, cl, u.tasks, x)) {
      skip(u.name + ": a value on the way is read elsewhere");
      return false;
    }
    l.unit = heads_ ? cl.unit() : 1;
    l.F = u.k, l.nunits = l.F / l.unit;
    if (l.F % l.unit != 0) return false;
    // leaves: their weight rows, by consumer column
    const std::vector<WeightUse> weights = ed_.linear_weights();
    for (std::size_t lt : cl.leaves) {
      const TaskNode& t = dag_.tasks[lt];
      const DataRef wref = t.bindings[ed_.port_index(t, "w")].ref;
      Leaf lf{lt, {}, 0, &cl.leaf_cols.at(lt)};
      for (const WeightUse& c : weights)
        if (c.data == wref.data) lf.use = c;
      if (lf.use.data < 0 || t.args.get_string("format") != "dense") {
        skip(u.name + ": a layer on the way is not a dense weight from a file");
        return false;
      }
      if (wref.tile >= 0) {
        const DataDecl& wd = dag_.data[std::size_t(wref.data)];
        lf.r0 = (lf.use.nk ? wref.tile / wd.ntile_c : wref.tile % wd.ntile_c) * lf.use.tile_n;
      }
      l.leaves.push_back(lf);
    }
    return true;
  }

  // w1 [F, k] of prune.neurons: per neuron, the rows of every leaf making it (gate
  // and up) combined elementwise in quadrature, so that ||w1 row|| is the norm of
  // the rows side by side; false when the leaves differ in width or neurons.
  bool neuron_rows(const Layer& l, Buf& w1) {
    const int64_t k = l.leaves.front().use.k, F = l.F;
    std::vector<double> sq(std::size_t(F * k), 0.0);
    std::vector<int> count(std::size_t(F), 0);
    for (const Leaf& lf : l.leaves) {
      if (lf.use.k != k) return false;
      const DenseWeight lw = ed_.load(lf.use);
      for (std::size_t i = 0; i < lf.hcol->size(); ++i) {
        const int64_t h = (*lf.hcol)[i];
        if (h < 0) continue;
        ++count[std::size_t(h)];
        for (int64_t c = 0; c < k; ++c) {
          const double v = lw.w[std::size_t((lf.r0 + int64_t(i)) * k + c)];
          sq[std::size_t(h * k + c)] += v * v;
        }
      }
    }
    for (int n : count)
      if (n != count.front()) return false;
    std::vector<float> flat(sq.size());
    for (std::size_t i = 0; i < sq.size(); ++i) flat[i] = float(std::sqrt(sq[i]));
    w1 = Buf::of(flat, F, k);
    return true;
  }

  // The units kept, from the prune.heads / prune.neurons component's mask;
  // false when none goes (or the neurons cannot be scored).
  bool score(Layer& l) {
    const WeightUse& u = l.u;
    l.wd = ed_.load(u);
    Buf w2 = Buf::of(l.wd.w, u.n, l.F), mask(DType::i32, 1, l.nunits), act;
    std::map<std::string, Buf*> ports = {{heads_ ? "w_o" : "w2", &w2}, {"mask", &mask}};
    if (criterion_ == "activation") {
      const std::string key = ModelEditor::task_key(dag_.tasks[u.tasks.front()]);
      auto it = ctx_.calib->inputs.find(key);
      if (it == ctx_.calib->inputs.end()) throw std::runtime_error(s_.name + ": no calibration input for " + key);
      act = Buf::of(it->second.x, it->second.m, it->second.k);
      ports["act"] = &act;
    }
    Buf w1;
    if (!heads_) {
      if (!neuron_rows(l, w1)) return false;
      ports["w1"] = &w1;
    }
    const int64_t keep = std::max<int64_t>(1, l.nunits - int64_t(std::llround(sparsity_ * double(l.nunits))));
    std::map<std::string, std::string> args = {{"keep", std::to_string(keep)}, {"criterion", criterion_}, {"layout", "nk"}};
    if (heads_) args["heads"] = std::to_string(l.nunits);
    run_component(ed_.registry(), heads_ ? components::kPruneHeads : components::kPruneNeurons, ports, args);
    const auto* m = reinterpret_cast<const std::int32_t*>(mask.bytes.data());
    l.kept.resize(static_cast<std::size_t>(l.nunits));
    for (int64_t i = 0; i < l.nunits; ++i) l.kept[std::size_t(i)] = m[i] != 0;
    l.nkept = l.kept_in(0, l.F);
    return l.nkept != l.nunits;
  }

  // New, narrower tensors for every data on the way (same tiles, fewer columns),
  // reusing a scratch tensor of the same shape that is free by then; false when
  // one cannot be narrowed.
  bool narrow(Layer& l) {
    const WeightUse& u = l.u;
    std::map<std::int32_t, std::map<std::int32_t, int64_t>> widths;  // data -> tile -> kept columns
    std::size_t last_use = *std::max_element(u.tasks.begin(), u.tasks.end()), first_use = last_use;
    for (const auto& [tp, range] : l.cl.bindings) {
      const DataRef r = dag_.tasks[tp.first].bindings[tp.second].ref;
      widths[r.data][r.tile] = l.kept_units(range) * l.cols_per_unit(range);
      first_use = std::min(first_use, tp.first);
    }
    widths[l.x.data][-1] = l.nkept * l.unit;
    for (const Leaf& lf : l.leaves) {
      first_use = std::min(first_use, lf.task);
      const DataRef y = dag_.tasks[lf.task].bindings[ed_.port_index(dag_.tasks[lf.task], "y")].ref;
      if (!widths.count(y.data)) {  // read whole by the consumer only
        int64_t n = 0;
        for (int64_t h : *lf.hcol) n += h < 0 || l.kept[std::size_t(h / l.unit)];
        widths[y.data][y.tile] = n;
      }
    }
    for (auto& [data, tiles] : widths) {
      const DataDecl old = dag_.data[std::size_t(data)];
      if (old.ntile_r != 1 || old.shape.size() != 2) return false;
      // tiles left with no unit disappear: the others are renumbered
      std::vector<int64_t> split;
      if (old.tiled())
        for (int64_t c = 0; c < old.ntile_c; ++c) {
          auto it = tiles.find(std::int32_t(c));
          const int64_t w = it != tiles.end() ? it->second
                            : data == l.x.data ? l.kept_in(old.tile_col0(c), old.tile_ncols(c)) * l.unit
                                               : old.tile_ncols(c);
          if (w > 0) {
            l.new_tile[data][std::int32_t(c)] = std::int32_t(split.size());
            split.push_back(w);
          }
        }
      int64_t cols = 0;
      for (int64_t v : split) cols += v;
      if (!old.tiled()) cols = tiles.count(-1) ? tiles[-1] : old.cols;
      std::string key = std::to_string(data) + ":" + std::to_string(cols);
      for (int64_t v : split) key.append(",").append(std::to_string(v));
      Slot* slot = nullptr;
      for (Slot& sl : slots_[key])
        if (sl.free_after < first_use) slot = &sl;
      if (!slot) {
        const DataRef nr = ed_.add_scratch(old.name + "." + kind_, old.dtype, {old.rows, cols});
        if (!split.empty()) dag_.data[std::size_t(nr.data)].set_split(split);
        slots_[key].push_back({nr, 0});
        slot = &slots_[key].back();
      }
      slot->free_after = last_use;
      l.renamed[data] = slot->data;
    }
    return true;
  }

  // Leaves keep the rows of the kept units (one new weight per leaf task) and
  // write the narrower tensor; a leaf left with no row goes to `gone`.
  void rewrite_leaves(const Layer& l, std::set<std::size_t>& gone) {
    for (const Leaf& lf : l.leaves) {
      const DenseWeight lw = ed_.load(lf.use);
      TaskNode& t = dag_.tasks[lf.task];
      const DataRef bref = t.bindings[ed_.port_index(t, "b")].ref;
      const std::vector<float> ball = bref.data >= 0 ? ed_.load_values(bref.data) : std::vector<float>{};
      const int64_t b0 = bref.data < 0 || bref.tile < 0
                             ? lf.r0
                             : dag_.data[std::size_t(bref.data)].tile_col0(bref.tile % dag_.data[std::size_t(bref.data)].ntile_c);
      std::vector<float> nw, nb;
      for (std::size_t i = 0; i < lf.hcol->size(); ++i) {
        const int64_t h = (*lf.hcol)[i];
        if (h >= 0 && !l.kept[std::size_t(h / l.unit)]) continue;
        const int64_t row = lf.r0 + int64_t(i);
        nw.insert(nw.end(), lw.w.begin() + row * lf.use.k, lw.w.begin() + (row + 1) * lf.use.k);
        if (!ball.empty()) nb.push_back(ball[std::size_t(b0 + int64_t(i))]);
      }
      const int64_t rows = int64_t(nw.size()) / lf.use.k;
      if (rows == 0) {
        gone.insert(lf.task);
        continue;
      }
      const std::string base = lf.use.name + "." + kind_ + std::to_string(lf.r0);
      ed_.bind(t, "w", ed_.add_tensor(base, DType::f32, {rows, lf.use.k}, vec_bytes(nw)));
      if (!nb.empty()) ed_.bind(t, "b", ed_.add_tensor(base + "_b", DType::f32, {rows}, vec_bytes(nb)));
      ed_.set_arg(t, "transpose_w", "true");
      Binding& yb = t.bindings[ed_.port_index(t, "y")];
      yb.ref = l.narrowed(yb.ref);
      ed_.mark_graph_changed(lf.use);
    }
  }

  // The rewrite: leaves, the tensors on the way and the head counts, the
  // consumer's kept columns; the layer's entry in the log.
  void rewrite(const Layer& l) {
    std::set<std::size_t> gone;  // tasks whose every unit was removed
    rewrite_leaves(l, gone);
    for (const auto& [tp, range] : l.cl.bindings) {
      TaskNode& t = dag_.tasks[tp.first];
      Binding& b = t.bindings[tp.second];
      const int64_t units = l.kept_units(range);
      if (units == 0) {
        gone.insert(tp.first);
        continue;
      }
      b.ref = l.narrowed(b.ref);
      if (t.comp->name == components::kRope) {
        ed_.set_arg(t, "heads", std::to_string(units * l.cols_per_unit(range) / l.cl.dh));
      } else if (t.comp->name == components::kAttention && tp.second == ed_.port_index(t, "y")) {
        // a kept unit is one query head, or a kv head with its group of query heads
        ed_.set_arg(t, "heads", std::to_string(units * l.cl.group));
        if (t.args.get_int("kv_heads") != 0) ed_.set_arg(t, "kv_heads", std::to_string(units));
      }
    }
    // the consumer keeps the columns of the kept units
    const WeightUse& u = l.u;
    std::vector<float> nw;
    nw.reserve(std::size_t(u.n * l.nkept * l.unit));
    for (int64_t r = 0; r < u.n; ++r)
      for (int64_t c = 0; c < l.F; ++c)
        if (l.kept[std::size_t(c / l.unit)]) nw.push_back(l.wd.w[std::size_t(r * l.F + c)]);
    Buf nwb = Buf::of(nw, u.n, l.nkept * l.unit);
    NewTensor t = tensor("w", nwb);
    t.shape = {u.n, l.nkept * l.unit};
    const WeightUse nu = ed_.replace(u, {std::move(t)}, {{"transpose_w", "true"}});
    ed_.mark_graph_changed(u.name);
    for (std::size_t ti : nu.tasks) ed_.bind(dag_.tasks[ti], "x", l.renamed.at(l.x.data));
    for (auto it = gone.rbegin(); it != gone.rend(); ++it) ed_.remove_task(*it);
    std::vector<int> mask_out;
    for (char k : l.kept) mask_out.push_back(k);
    // the consumer as declared ([n, k] for layout nk, [k, n] for kn): enough to zero its
    // removed input columns in the original file (the tests' independent reference)
    const std::vector<int64_t> shape = u.nk ? std::vector<int64_t>{u.n, u.k} : std::vector<int64_t>{u.k, u.n};
    layers_.push_back({{"consumer", u.name}, {"layout", u.nk ? "nk" : "kn"}, {"shape", shape}, {kind_, l.nunits},
                       {"kept", l.nkept}, {"leaves", l.leaves.size()}, {"tasks_removed", gone.size()}, {"mask", mask_out}});
    if (heads_) layers_.back()["query_heads_per_unit"] = l.cl.group;  // > 1: a unit is a kv head and its query heads
    before_total_ += l.nunits;
    after_total_ += l.nkept;
  }

  PassContext& ctx_;
  ModelEditor& ed_;
  Dag& dag_;
  const PassSpec& s_;
  const bool heads_;
  const char* const kind_;
  double sparsity_ = 0;
  std::string criterion_;
  nlohmann::json layers_ = nlohmann::json::array(), skipped_ = nlohmann::json::array();
  int64_t before_total_ = 0, after_total_ = 0;
  std::map<std::string, std::vector<Slot>> slots_;
};

}  // namespace

void pass_prune_units(PassContext& ctx, const PassSpec& s, bool heads) { UnitPruner(ctx, s, heads).run(); }

void pass_prune_heads(PassContext& ctx, const PassSpec& s) { pass_prune_units(ctx, s, true); }
void pass_prune_neurons(PassContext& ctx, const PassSpec& s) { pass_prune_units(ctx, s, false); }

}  // namespace ymlopt::opt::detail
