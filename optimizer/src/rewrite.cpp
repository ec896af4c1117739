// Graph rewrites that change which tasks and GEMMs the model runs: fuse.merge
// (several projections of one input become one GEMM writing a split= tensor
// that the readers address by tile), fuse.compose (two linear maps with
// nothing between them become one when that costs fewer flops),
// fuse.activation, fuse.ln_affine (an activation, a norm's affine, folded into
// the linears) and dce. The same compose and merge on op.matmul products: op_rules.cpp.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "pass_util.hpp"
#include "component_names.hpp"

namespace ymlopt::opt::detail {
namespace {

/// The nn.linear task that computed the value task `before` reads at r: walks
/// back over readers and in-place updates of exactly r (nn.rope). nullopt when
/// the value comes from anything else (another writer, a partial write).
std::optional<std::size_t> producer_of(const Dag& dag, std::size_t before, const DataRef& r) {
  for (std::size_t j = before; j-- > 0;) {
    const TaskNode& t = dag.tasks[j];
    bool writes = false, updates = false, clash = false;
    for (const Binding& b : t.bindings) {
      if (!overlaps(b.ref, r)) continue;
      if (b.ref == r) {
        if (b.mode == Access::write) writes = true;
        else if (b.mode == Access::read_write) updates = true;
      } else if (b.mode != Access::read) {
        clash = true;
      }
    }
    if (clash) return std::nullopt;
    if (writes) {
      if (updates || t.comp->name != components::kLinear) return std::nullopt;
      return j;
    }
  }
  return std::nullopt;
}

/// Rows [r0, r0 + nrows) of a weight's [n, k] values: the part one task uses.
struct WeightPart {
  WeightUse use;
  std::int64_t r0 = 0, nrows = 0;
};

std::optional<WeightPart> weight_part(const ModelEditor& ed, const std::vector<WeightUse>& weights, std::size_t task) {
  const TaskNode& t = ed.dag().tasks[task];
  const DataRef w = bound(ed, t, "w");
  for (const WeightUse& u : weights) {
    if (u.data != w.data) continue;
    if (w.tile < 0) return WeightPart{u, 0, u.n};
    const DataDecl& d = ed.dag().data[std::size_t(w.data)];
    const std::int64_t tn = u.nk ? w.tile / d.ntile_c : w.tile % d.ntile_c;
    return WeightPart{u, tn * u.tile_n, std::min(u.tile_n, u.n - tn * u.tile_n)};
  }
  return std::nullopt;
}

/// The bias values of one task (its tile of the bias vector), or empty.
std::vector<float> bias_part(const ModelEditor& ed, const TaskNode& t, std::int64_t n) {
  const DataRef b = bound(ed, t, "b");
  if (b.data < 0) return {};
  const std::vector<float> all = ed.load_values(b.data);
  const DataDecl& d = ed.dag().data[std::size_t(b.data)];
  const std::int64_t c0 = b.tile < 0 ? 0 : d.tile_col0(b.tile % d.ntile_c);
  return std::vector<float>(all.begin() + c0, all.begin() + c0 + n);
}

int64_t rows_of(const Dag& dag, const DataRef& r) {
  const Shape s = dag.ref_shape(r);
  int64_t m = 1;
  for (std::size_t i = 0; i + 1 < s.size(); ++i) m *= s[i];
  return s.size() == 1 ? 1 : m;
}

}  // namespace

/// fuse.merge: linear tasks that read the same input and whose results one
/// task consumes together (q, k, v read by one attention; gate and up read by
/// one SwiGLU) become one GEMM over the stacked weights. It writes a tensor
/// split= into the old outputs' widths; every reader of an old output reads
/// its tile instead. Tensors of identical groups (the same heads in every
/// layer) are shared, as the original workflow shared q, k and v.
void pass_fuse_merge(PassContext& ctx, const PassSpec& s) {
  ModelEditor& ed = ctx.ed;
  Dag& dag = ed.dag();
  const std::vector<WeightUse> weights = ed.linear_weights();
  const int64_t min_group = std::max<int64_t>(2, int64_t(opt_num(s, "min", 2)));
  struct Group {
    std::vector<std::size_t> producers;  // program order
    std::vector<WeightPart> parts;
    std::vector<Uses> users;  // per producer
    std::size_t last_use = 0;
  };
  std::vector<Group> groups;
  std::set<std::size_t> taken;
  for (std::size_t c = 0; c < dag.tasks.size(); ++c) {
    const TaskNode& consumer = dag.tasks[c];
    std::vector<std::size_t> prods;
    bool ok = true;
    for (const Binding& b : consumer.bindings) {
      if (b.ref.data < 0 || b.mode == Access::write) continue;
      if (auto p = producer_of(dag, c, b.ref)) prods.push_back(*p);
    }
    std::sort(prods.begin(), prods.end());
    prods.erase(std::unique(prods.begin(), prods.end()), prods.end());
    if (int64_t(prods.size()) < min_group) continue;
    Group g;
    const TaskNode& first = dag.tasks[prods.front()];
    const DataRef x = bound(ed, first, "x");
    for (std::size_t p : prods) {
      const TaskNode& t = dag.tasks[p];
      auto part = weight_part(ed, weights, p);
      ok = ok && !taken.count(p) && part && bound(ed, t, "x") == x && bound(ed, t, "r").data < 0 &&
           t.args.get_string("format") == "dense" &&
           t.args.get_string("activation") == first.args.get_string("activation") &&
           bound(ed, t, "y").data != x.data;
      if (!ok) break;
      g.parts.push_back(*part);
      auto users = value_users(dag, p, bound(ed, t, "y"));
      ok = users.has_value();
      if (!ok) break;
      g.users.push_back(*users);
      for (const auto& use : *users) g.last_use = std::max(g.last_use, use.first);
    }
    // the input must hold the same value for every producer
    for (std::size_t j = prods.front() + 1; ok && j <= prods.back(); ++j)
      for (const Binding& b : dag.tasks[j].bindings)
        if (overlaps(b.ref, x) && b.mode != Access::read) ok = false;
    if (!ok) continue;
    g.producers = prods;
    taken.insert(prods.begin(), prods.end());
    groups.push_back(std::move(g));
  }

  // tensors: one per distinct (input, outputs) signature, reused while free
  struct Slot {
    DataRef data;
    std::size_t free_after = 0;
  };
  std::map<std::string, std::vector<Slot>> slots;
  std::set<std::size_t> removed;
  int64_t merged_tasks = 0;
  nlohmann::json merged = nlohmann::json::array();
  for (Group& g : groups) {
    const TaskNode proto = dag.tasks[g.producers.front()];
    const int64_t k = g.parts.front().use.k, m = rows_of(dag, bound(ed, proto, "x"));
    std::vector<int64_t> widths;
    std::string signature = std::to_string(bound(ed, proto, "x").data);
    int64_t total = 0;
    bool any_bias = false;
    for (std::size_t i = 0; i < g.producers.size(); ++i) {
      widths.push_back(g.parts[i].nrows);
      total += g.parts[i].nrows;
      const DataRef y = bound(ed, dag.tasks[g.producers[i]], "y");
      signature += '|';  // appended piecewise: GCC 12 warns (-Wrestrict) on "|" + std::to_string()
      signature += std::to_string(y.data);
      signature += '.';
      signature += std::to_string(y.tile);
      any_bias = any_bias || bound(ed, dag.tasks[g.producers[i]], "b").data >= 0;
    }
    // stacked weights [total, k] and bias
    std::vector<float> w(std::size_t(total * k)), bias(any_bias ? std::size_t(total) : 0, 0.0f);
    int64_t row = 0;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < g.producers.size(); ++i) {
      const WeightPart& part = g.parts[i];
      const DenseWeight dw = ed.load(part.use);
      std::copy(dw.w.begin() + part.r0 * k, dw.w.begin() + (part.r0 + part.nrows) * k, w.begin() + row * k);
      if (any_bias) {
        const std::vector<float> b = bias_part(ed, dag.tasks[g.producers[i]], part.nrows);
        std::copy(b.begin(), b.end(), bias.begin() + row);
      }
      row += part.nrows;
      names.push_back(ModelEditor::task_key(dag.tasks[g.producers[i]]));
    }
    Slot* slot = nullptr;
    for (Slot& sl : slots[signature])
      if (sl.free_after < g.producers.front()) slot = &sl;
    if (!slot) {
      const DataRef out = ed.add_scratch(g.parts.front().use.name + ".merged_y", DType::f32, {m, total});
      dag.data[std::size_t(out.data)].set_split(widths);
      slots[signature].push_back({out, 0});
      slot = &slots[signature].back();
    }
    slot->free_after = g.last_use;
    const std::string base = g.parts.front().use.name + ".merged" + std::to_string(g.parts.front().r0);
    const DataRef wref = ed.add_tensor(base, DType::f32, {total, k}, vec_bytes(w));
    TaskNode fused = proto;
    fused.label = ModelEditor::task_key(proto) + "+merged";
    ed.bind(fused, "w", wref);
    if (any_bias) ed.bind(fused, "b", ed.add_tensor(base + "_b", DType::f32, {total}, vec_bytes(bias)));
    else ed.unbind(fused, "b");
    ed.bind(fused, "y", slot->data, Access::write);
    ed.set_arg(fused, "transpose_w", "true");
    // readers of each old output read their tile of the merged result
    for (std::size_t i = 0; i < g.producers.size(); ++i) {
      DataRef tile = slot->data;
      tile.tile = std::int32_t(i);
      for (const auto& [task, port] : g.users[i]) dag.tasks[task].bindings[port].ref = tile;
      ed.mark_graph_changed(g.parts[i].use);
    }
    dag.tasks[g.producers.front()] = std::move(fused);
    removed.insert(g.producers.begin() + 1, g.producers.end());
    merged_tasks += int64_t(g.producers.size());
    if (merged.size() < 64) merged.push_back(names);
  }
  for (auto it = removed.rbegin(); it != removed.rend(); ++it) ed.remove_task(*it);
  nlohmann::json products = nlohmann::json::array();
  merge_products(ctx, min_group, products);
  ctx.log.push_back({{"pass", s.text()}, {"groups", groups.size()}, {"tasks_merged", merged_tasks}, {"merged", merged},
                     {"product_groups", products.size()}, {"products", products}});
}

/// fuse.compose: y = (x W1ᵀ + b1) W2ᵀ + b2, the first result read by the
/// second linear only and no activation between, becomes y = x (W2 W1)ᵀ +
/// (W2 b1 + b2) when k1·n2 <= max_ratio · n1·(k1 + n2) multiply-adds per row.
void pass_fuse_compose(PassContext& ctx, const PassSpec& s) {
  ModelEditor& ed = ctx.ed;
  Dag& dag = ed.dag();
  const double max_ratio = opt_num(s, "max_ratio", 1.0);
  int64_t composed = 0;
  nlohmann::json pairs = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (bool again = true; again;) {
    again = false;
    const std::vector<WeightUse> weights = ed.linear_weights();
    for (const WeightUse& u1 : weights) {
      // the first layer: its tasks write all of y1, each its rows of W1 as y1's columns
      const TaskNode& t0 = dag.tasks[u1.tasks.front()];
      const DataRef x1 = bound(ed, t0, "x");
      const std::int32_t y1 = bound(ed, t0, "y").data;
      if (y1 < 0 || y1 == x1.data) continue;
      const DataDecl& yd = dag.data[std::size_t(y1)];
      bool ok = yd.ntile_r == 1 && int64_t(u1.tasks.size()) == (yd.tiled() ? yd.ntile_c : 1);
      for (std::size_t i : u1.tasks) {
        const TaskNode& t = dag.tasks[i];
        const DataRef y = bound(ed, t, "y");
        auto part = weight_part(ed, weights, i);
        ok = ok && part && y.data == y1 && bound(ed, t, "x") == x1 && bound(ed, t, "r").data < 0 &&
             t.args.get_string("activation") == "none" && t.args.get_string("format") == "dense";
        if (!ok) break;
        const int64_t c0 = y.tile < 0 ? 0 : yd.tile_col0(y.tile % yd.ntile_c);
        const int64_t nc = y.tile < 0 ? yd.cols : yd.tile_ncols(y.tile % yd.ntile_c);
        ok = c0 == part->r0 && nc == part->nrows;
      }
      if (!ok || yd.cols != u1.n) continue;
      const std::size_t last1 = *std::max_element(u1.tasks.begin(), u1.tasks.end());
      auto users = value_users(dag, last1, DataRef{y1, -1});
      if (!users || users->empty()) continue;
      // ... read whole as x by the tasks of one other weight, and by nothing else
      std::vector<std::size_t> readers;
      for (const auto& use : *users) readers.push_back(use.first);
      const WeightUse* u2 = nullptr;
      for (const WeightUse& c : weights)
        if (std::find(c.tasks.begin(), c.tasks.end(), readers.front()) != c.tasks.end()) u2 = &c;
      if (!u2 || u2->data == u1.data || u2->tasks != readers) continue;
      const TaskNode& s0 = dag.tasks[u2->tasks.front()];
      for (std::size_t i : u2->tasks) {
        const TaskNode& t = dag.tasks[i];
        ok = ok && bound(ed, t, "x") == DataRef{y1, -1} && bound(ed, t, "r").data != y1 &&
             t.args.get_string("format") == "dense" && bound(ed, t, "b").data == bound(ed, s0, "b").data;
      }
      // x1 keeps its value until the last reader of the composed product
      for (std::size_t j = u1.tasks.front() + 1; ok && j <= u2->tasks.back(); ++j)
        for (const Binding& b : dag.tasks[j].bindings)
          if (overlaps(b.ref, x1) && b.mode != Access::read) ok = false;
      if (!ok) continue;
      const int64_t n1 = u1.n, k1 = u1.k, n2 = u2->n;
      const std::string pair = u1.name + " -> " + u2->name;
      if (double(k1) * double(n2) > max_ratio * double(n1) * double(k1 + n2)) {
        if (skipped.size() < 64) skipped.push_back(pair + ": composed costs more");
        continue;
      }
      const DenseWeight w1 = ed.load(u1), w2 = ed.load(*u2);
      Buf a(DType::f64, n2, n1), b(DType::f64, n1, k1), c(DType::f64, n2, k1);
      auto* ap = reinterpret_cast<double*>(a.bytes.data());
      auto* bp = reinterpret_cast<double*>(b.bytes.data());
      for (std::size_t i = 0; i < w2.w.size(); ++i) ap[i] = w2.w[i];
      for (std::size_t i = 0; i < w1.w.size(); ++i) bp[i] = w1.w[i];
      run_component(ed.registry(), components::kGemm, {{"a", &a}, {"b", &b}, {"c", &c}}, {});
      const auto* cp = reinterpret_cast<const double*>(c.bytes.data());
      std::vector<float> w(std::size_t(n2 * k1)), bias(std::size_t(n2), 0.0f);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(cp[i]);
      const DataRef b1 = bound(ed, t0, "b"), b2 = bound(ed, s0, "b");
      const std::vector<float> bv1 = b1.data >= 0 ? ed.load_values(b1.data) : std::vector<float>{};
      const std::vector<float> bv2 = b2.data >= 0 ? ed.load_values(b2.data) : std::vector<float>{};
      for (int64_t r = 0; r < n2; ++r) {
        double acc = bv2.empty() ? 0.0 : bv2[std::size_t(r)];
        for (int64_t l = 0; l < int64_t(bv1.size()); ++l) acc += double(w2.w[std::size_t(r * n1 + l)]) * bv1[std::size_t(l)];
        bias[std::size_t(r)] = float(acc);
      }
      const bool has_bias = !bv1.empty() || !bv2.empty();
      Buf wb = Buf::of(w, n2, k1), bb = Buf::of(bias, 1, n2);
      std::vector<NewTensor> made = {tensor("w", wb)};
      made[0].shape = {n2, k1};
      if (has_bias) {
        made.push_back(tensor("b", bb));
        made.back().shape = {n2};
      }
      const WeightUse second = *u2;
      const std::vector<std::size_t> first_tasks = u1.tasks;
      ed.mark_graph_changed(u1);
      ed.replace(second, std::move(made), {{"transpose_w", "true"}});
      ed.mark_graph_changed(second.name);
      for (std::size_t i : second.tasks) ed.bind(dag.tasks[i], "x", x1);
      for (auto it = first_tasks.rbegin(); it != first_tasks.rend(); ++it) ed.remove_task(*it);
      ++composed;
      if (pairs.size() < 64) pairs.push_back(pair);
      again = true;  // indices changed: look again
      break;
    }
  }
  nlohmann::json products = nlohmann::json::array();
  compose_products(ctx, max_ratio, products, skipped);
  ctx.log.push_back({{"pass", s.text()}, {"composed", composed}, {"pairs", pairs}, {"products_composed", products.size()},
                     {"products", products}, {"skipped", skipped}});
}


/// fuse.activation: nn.linear followed by an element-wise activation task on its
/// output becomes one nn.linear with the activation fused in its epilogue.
void pass_fuse_activation(PassContext& ctx, const PassSpec& s) {
  static const std::map<std::string, std::string> acts = {{components::kRelu, "relu"}, {components::kSilu, "silu"}, {components::kGelu, ""}};
  Dag& dag = ctx.ed.dag();
  int64_t fused = 0;
  for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
    TaskNode& lin = dag.tasks[i];
    if (lin.comp->name != components::kLinear || lin.args.get_string("activation") != "none") continue;
    if (lin.bindings[ctx.ed.port_index(lin, "r")].ref.data >= 0) continue;  // act(z) + r != act(z + r)
    const DataRef y = lin.bindings[ctx.ed.port_index(lin, "y")].ref;
    // the next task touching y's data must be the activation reading exactly y
    std::size_t j = i + 1;
    while (j < dag.tasks.size() && !touches(dag.tasks[j], y.data)) ++j;
    if (j == dag.tasks.size()) continue;
    const TaskNode& act = dag.tasks[j];
    auto it = acts.find(act.comp->name);
    if (it == acts.end() || act.bindings.size() < 2 || !(act.bindings[0].ref == y)) continue;
    std::string a = it->second;
    if (act.comp->name == components::kGelu) a = act.args.get_string("approximate") == "tanh" ? "gelu_tanh" : "gelu";
    const DataRef z = act.bindings[1].ref;
    // y itself must not be needed afterwards unless the activation wrote it in place
    if (!(z == y) && read_later(dag, j, y.data)) continue;
    // nothing between i and j may touch z
    bool clash = false;
    for (std::size_t m = i + 1; m < j && !clash; ++m) clash = touches(dag.tasks[m], z.data);
    if (clash) continue;
    ctx.ed.set_arg(lin, "activation", a);
    ctx.ed.bind(lin, "y", z, Access::write);
    ctx.ed.remove_task(j);
    ++fused;
  }
  ctx.log.push_back({{"pass", s.text()}, {"fused", fused}});
}

/// fuse.ln_affine: y = LN(x) γ + β read only by linear layers becomes y = LN(x)
/// and every such layer W' = W diag(γ), b' = b + W β (the affine folded into
/// the next GEMM). Changes the graph: the compressed file alone no longer
/// describes the model, run the rewritten workflow.
void pass_fuse_ln_affine(PassContext& ctx, const PassSpec& s) {
  Dag& dag = ctx.ed.dag();
  int64_t folded = 0, layers = 0;
  for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
    const TaskNode& ln = dag.tasks[i];
    if (ln.comp->name != components::kLayerNorm && ln.comp->name != components::kRmsNorm) continue;
    const bool has_beta = ln.comp->name == components::kLayerNorm;
    const std::size_t pg = ctx.ed.port_index(ln, has_beta ? "gamma" : "weight");
    const std::size_t pb = has_beta ? ctx.ed.port_index(ln, "beta") : pg;
    const DataRef g = ln.bindings[pg].ref, b = has_beta ? ln.bindings[pb].ref : DataRef{};
    if (g.data < 0 && b.data < 0) continue;
    const DataRef y = ln.bindings[ctx.ed.port_index(ln, "y")].ref;
    if (y.tile >= 0) continue;
    // every reader of this value must be a dense linear reading it whole as x
    std::vector<std::size_t> readers;
    bool ok = true;
    for (std::size_t j = i + 1; j < dag.tasks.size() && ok; ++j) {
      const TaskNode& t = dag.tasks[j];
      bool reads = false, overwrites = false;
      for (std::size_t p = 0; p < t.bindings.size(); ++p) {
        if (t.bindings[p].ref.data != y.data) continue;
        if (t.bindings[p].mode == Access::write && t.bindings[p].ref.tile < 0) overwrites = true;
        else if (t.comp->name == components::kLinear && t.comp->ports[p].name == "x" && t.bindings[p].ref == y) reads = true;
        else ok = false;
      }
      if (!ok) break;
      if (reads) readers.push_back(j);
      if (overwrites && !reads) break;
    }
    if (!ok || readers.empty()) continue;
    // the weights of those readers, each read by them only
    std::vector<WeightUse> uses;
    for (const WeightUse& u : ctx.ed.linear_weights()) {
      bool mine = false, other = false;
      for (std::size_t t : u.tasks) (std::find(readers.begin(), readers.end(), t) != readers.end() ? mine : other) = true;
      if (mine && other) ok = false;
      if (mine) uses.push_back(u);
    }
    std::size_t covered = 0;
    for (const WeightUse& u : uses) covered += u.tasks.size();
    if (!ok || covered != readers.size()) continue;
    const std::vector<float> gamma = g.data >= 0 ? ctx.ed.load_values(g.data) : std::vector<float>{};
    const std::vector<float> beta = b.data >= 0 ? ctx.ed.load_values(b.data) : std::vector<float>{};
    for (const WeightUse& u : uses) {
      if ((!gamma.empty() && int64_t(gamma.size()) != u.k) || (!beta.empty() && int64_t(beta.size()) != u.k)) ok = false;
      // biases: one tensor (whole or tiled like the weight) or none
      for (std::size_t t : u.tasks) {
        const DataRef bb = dag.tasks[t].bindings[ctx.ed.port_index(dag.tasks[t], "b")].ref;
        const DataRef b0 = dag.tasks[u.tasks.front()].bindings[ctx.ed.port_index(dag.tasks[u.tasks.front()], "b")].ref;
        if (bb.data != b0.data) ok = false;
      }
    }
    if (!ok) continue;
    for (const WeightUse& u : uses) {
      const DenseWeight dw = ctx.ed.load(u);
      const TaskNode& t0 = dag.tasks[u.tasks.front()];
      const DataRef b0 = t0.bindings[ctx.ed.port_index(t0, "b")].ref;
      std::vector<float> bias = b0.data >= 0 ? ctx.ed.load_values(b0.data) : std::vector<float>(std::size_t(u.n), 0.0f);
      if (int64_t(bias.size()) != u.n) continue;
      std::vector<float> w(dw.w.size());
      for (int64_t r = 0; r < u.n; ++r) {
        double acc = 0;
        for (int64_t c = 0; c < u.k; ++c) {
          const float v = dw.w[std::size_t(r * u.k + c)];
          w[std::size_t(r * u.k + c)] = gamma.empty() ? v : v * gamma[std::size_t(c)];
          if (!beta.empty()) acc += double(v) * beta[std::size_t(c)];
        }
        bias[std::size_t(r)] = float(double(bias[std::size_t(r)]) + acc);
      }
      Buf wb = Buf::of(w, u.n, u.k), bb = Buf::of(bias, 1, u.n);
      NewTensor tw = tensor("w", wb), tb = tensor("b", bb);
      tw.shape = {u.n, u.k};
      tb.shape = {u.n};
      ctx.ed.replace(u, {std::move(tw), std::move(tb)}, {{"transpose_w", "true"}});
      ctx.ed.mark_graph_changed(u.name);
      ++layers;
    }
    TaskNode& lnm = dag.tasks[i];
    ctx.ed.unbind(lnm, has_beta ? "gamma" : "weight");
    if (has_beta) ctx.ed.unbind(lnm, "beta");
    ++folded;
  }
  ctx.log.push_back({{"pass", s.text()}, {"folded", folded}, {"layers", layers}});
}

/// dce: removes tasks whose outputs nobody reads afterwards (tasks without
/// outputs, like io.save, are kept: they are the workflow's effects).
void pass_dce(PassContext& ctx, const PassSpec& s) {
  Dag& dag = ctx.ed.dag();
  int64_t removed = 0;
  for (bool again = true; again;) {
    again = false;
    for (std::size_t i = dag.tasks.size(); i-- > 0;) {
      const TaskNode& t = dag.tasks[i];
      bool has_output = false, live = false;
      for (const Binding& b : t.bindings) {
        if (b.ref.data < 0 || b.mode == Access::read) continue;
        has_output = true;
        live = live || read_later(dag, i, b.ref.data);
      }
      if (!has_output || live) continue;
      ctx.ed.remove_task(i);
      ++removed;
      again = true;
    }
  }
  ctx.log.push_back({{"pass", s.text()}, {"removed", removed}});
}

}  // namespace ymlopt::opt::detail
