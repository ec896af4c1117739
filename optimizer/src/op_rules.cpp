// fuse.compose and fuse.merge stated on op.matmul: the rewrites hold for a
// product wherever its (add, mul) pair obeys the law they rest on
// (op::laws), and are refused elsewhere with the reason.
//   compose  (X B1) B2 -> X (B1 B2), B1 B2 computed once in the same semiring:
//            associativity, a semiring only ((sum, a*b), (max|min|logsumexp, a+b))
//   merge    X B1, X B2, ... -> X [B1 | B2 | ...]: columns are independent, every
//            pair. Products writing the column tiles of one row of tiles become one
//            product writing the tensor whole (B whole when the B's are its tiles in
//            order); products writing whole tensors write a split= tensor instead,
//            whose tiles their readers read
//            c ⊕= A1 B1, c ⊕= A2 B2, ... -> c ⊕= [A1 A2 ...] [B1; B2; ...]: ⊕ associative and
//            commutative (op::laws inner); a k-split product back into one
// Only products of constant operands B (stored values no task writes) are
// rewritten, and only where the intermediate or input keeps its value.
#include <algorithm>
#include <map>
#include <set>

#include "op/semiring.hpp"
#include "pass_util.hpp"
#include "component_names.hpp"

namespace ymlopt::opt::detail {
namespace {

/// An op.matmul task without transa, arg, mask or skip_zeros, f32; `first`:
/// also without accumulate and map (its result is a plain product).
bool plain_product(const ModelEditor& ed, const TaskNode& t, bool first) {
  const Dag& dag = ed.dag();
  if (t.comp->name != components::kOpMatmul || t.args.get_bool("transa") || t.args.get_bool("skip_zeros") ||
      bound(ed, t, "arg").data >= 0 || bound(ed, t, "mask").data >= 0 ||
      dag.data[std::size_t(bound(ed, t, "c").data)].dtype != DType::f32)
    return false;
  return !first || (!t.args.get_bool("accumulate") && t.args.get_string("map").empty());
}

/// Is data d a constant: stored values, written by no task (`written`: written_data of the DAG as it is)?
bool constant(const ModelEditor& ed, const std::vector<char>& written, std::int32_t d) {
  const DataDecl& dd = ed.dag().data[std::size_t(d)];
  return dd.init == InitKind::file && dd.format.empty() && !written[std::size_t(d)];
}

/// op(r) as row-major doubles: its tile, transposed when `trans`.
struct Operand {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> v;
};
Operand operand(const ModelEditor& ed, const DataRef& r, bool trans) {
  const DataDecl& d = ed.dag().data[std::size_t(r.data)];
  const std::vector<float> all = ed.load_values(r.data);
  const std::int64_t tr = r.tile < 0 ? 0 : r.tile / d.ntile_c, tc = r.tile < 0 ? 0 : r.tile % d.ntile_c;
  const std::int64_t r0 = r.tile < 0 ? 0 : d.tile_row0(tr), c0 = r.tile < 0 ? 0 : d.tile_col0(tc);
  const std::int64_t nr = r.tile < 0 ? d.rows : d.tile_nrows(tr), nc = r.tile < 0 ? d.cols : d.tile_ncols(tc);
  Operand o{trans ? nc : nr, trans ? nr : nc, {}};
  o.v.resize(std::size_t(nr * nc));
  for (std::int64_t i = 0; i < nr; ++i)
    for (std::int64_t j = 0; j < nc; ++j)
      o.v[std::size_t(trans ? j * nr + i : i * nc + j)] = all[std::size_t((r0 + i) * d.cols + c0 + j)];
  return o;
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

/// Does anything write x in tasks (from, to)?
bool changed_between(const Dag& dag, std::size_t from, std::size_t to, const DataRef& x) {
  for (std::size_t j = from + 1; j < to; ++j)
    for (const Binding& b : dag.tasks[j].bindings)
      if (overlaps(b.ref, x) && b.mode != Access::read) return true;
  return false;
}

/// The last task before `before` that writes r's data, if it writes exactly r.
std::optional<std::size_t> writer_of(const Dag& dag, std::size_t before, const DataRef& r) {
  for (std::size_t j = before; j-- > 0;)
    for (const Binding& b : dag.tasks[j].bindings)
      if (overlaps(b.ref, r) && b.mode != Access::read)
        return b.ref == r ? std::optional<std::size_t>(j) : std::nullopt;
  return std::nullopt;
}

std::string pair_text(const TaskNode& t) {
  return "(" + t.args.get_string("add") + ", " + t.args.get_string("mul") + ")";
}

void note(std::set<std::string>& seen, nlohmann::json& out, const std::string& s) {
  if (seen.insert(s).second && out.size() < 64) out.push_back(s);
}

}  // namespace

void compose_products(PassContext& ctx, double max_ratio, nlohmann::json& pairs, nlohmann::json& skipped) {
  ModelEditor& ed = ctx.ed;
  Dag& dag = ed.dag();
  std::set<std::string> seen;
  for (bool again = true; again;) {
    again = false;
    const std::vector<char> written = written_data(dag);
    for (std::size_t i = 0; i < dag.tasks.size() && !again; ++i) {
      const TaskNode& p2 = dag.tasks[i];
      if (!plain_product(ed, p2, false)) continue;
      const DataRef t = bound(ed, p2, "a");
      const std::optional<std::size_t> j = writer_of(dag, i, t);
      if (!j || !plain_product(ed, dag.tasks[*j], true)) continue;
      const TaskNode& p1 = dag.tasks[*j];
      const auto users = value_users(dag, *j, t);
      if (!users || users->size() != 1 || users->front() != std::make_pair(i, ed.port_index(p2, "a"))) continue;
      const DataRef x = bound(ed, p1, "a"), b1 = bound(ed, p1, "b"), b2 = bound(ed, p2, "b");
      if (pair_text(p1) != pair_text(p2) || !constant(ed, written, b1.data) || !constant(ed, written, b2.data) || x.data == t.data ||
          bound(ed, p2, "c").data == x.data || changed_between(dag, *j, i, x))
        continue;
      const std::string pair = ModelEditor::task_key(p1) + " -> " + ModelEditor::task_key(p2);
      const op::ElementProgram mul = op::ElementProgram::compile(p1.args.get_string("mul"), {"a", "b"});
      const op::Reduce add = op::parse_reduce(p1.args.get_string("add"));
      const op::Laws laws = op::laws(add, mul);
      if (!laws.associative) {
        note(seen, skipped, pair + ": " + pair_text(p1) + " is not associative: " + laws.why);
        continue;
      }
      const Operand w1 = operand(ed, b1, p1.args.get_bool("transb")), w2 = operand(ed, b2, p2.args.get_bool("transb"));
      const std::int64_t k1 = w1.rows, n1 = w1.cols, n2 = w2.cols;
      if (w2.rows != n1) continue;
      if (double(k1) * double(n2) > max_ratio * double(n1) * double(k1 + n2)) {
        note(seen, skipped, pair + ": composed costs more");
        continue;
      }
      op::Semiring s;
      s.mul = mul.canonical() == "a+b" ? op::Combine::add : op::Combine::mul;
      s.add = add;
      std::vector<double> w(std::size_t(k1 * n2));
      op::matmul(s, false, false, k1, n2, n1, w1.v.data(), n1, w2.v.data(), n2, w.data(), n2, false);
      const DataRef wref =
          ed.add_tensor(ModelEditor::task_key(p2) + ".composed", DType::f32, {k1, n2}, vec_bytes(to_float(w)));
      TaskNode& t2 = dag.tasks[i];
      ed.bind(t2, "a", x);
      ed.bind(t2, "b", wref);
      ed.set_arg(t2, "transb", "false");
      if (pairs.size() < 64) pairs.push_back(pair + " " + pair_text(t2));
      ed.remove_task(*j);
      again = true;
    }
  }
}

namespace {

std::string merge_key(const ModelEditor& ed, const TaskNode& t) {
  const DataRef a = bound(ed, t, "a");
  return std::to_string(a.data) + "." + std::to_string(a.tile) + pair_text(t) + "|" + t.args.get_string("map") + "|" +
         (t.args.get_bool("transb") ? "t" : "n") + (t.args.get_bool("accumulate") ? "+" : "");
}

/// The merged B: the whole tensor when the members' B are its tiles in order
/// (columns of op(B)), else [op(B1) | op(B2) | ...] as a new tensor.
DataRef merged_b(ModelEditor& ed, const std::vector<const TaskNode*>& members, bool transb, const std::string& base,
                 bool& transposed) {
  const Dag& dag = ed.dag();
  const std::int32_t d = bound(ed, *members.front(), "b").data;
  const DataDecl& dd = dag.data[std::size_t(d)];
  bool whole = dd.tiled() && std::int64_t(members.size()) == dd.ntiles() && (transb ? dd.ntile_c : dd.ntile_r) == 1;
  for (std::size_t p = 0; whole && p < members.size(); ++p)
    whole = bound(ed, *members[p], "b") == DataRef{d, std::int32_t(p)};
  transposed = whole && transb;
  if (whole) return DataRef{d, -1};
  std::vector<Operand> parts;
  std::int64_t total = 0;
  for (const TaskNode* t : members) {
    parts.push_back(operand(ed, bound(ed, *t, "b"), transb));
    total += parts.back().cols;
  }
  const std::int64_t k = parts.front().rows;
  std::vector<float> w(std::size_t(k * total));
  std::int64_t c0 = 0;
  for (const Operand& o : parts) {
    for (std::int64_t r = 0; r < k; ++r)
      for (std::int64_t c = 0; c < o.cols; ++c)
        w[std::size_t(r * total + c0 + c)] = float(o.v[std::size_t(r * o.cols + c)]);
    c0 += o.cols;
  }
  return ed.add_tensor(base + "_b", DType::f32, {k, total}, vec_bytes(w));
}

/// Does a task in (from, to), other than `skip`, touch r?
bool touched_between(const Dag& dag, std::size_t from, std::size_t to, const DataRef& r,
                     const std::set<std::size_t>& skip) {
  for (std::size_t j = from + 1; j < to; ++j)
    if (!skip.count(j))
      for (const Binding& b : dag.tasks[j].bindings)
        if (overlaps(b.ref, r)) return true;
  return false;
}

/// Puts `fused` in place of the group's first member; the others go to
/// `removed` (taken out after the round); the group's names to the log.
void install(Dag& dag, const std::vector<std::size_t>& members, TaskNode fused, std::set<std::size_t>& removed,
             nlohmann::json& groups) {
  nlohmann::json names = nlohmann::json::array();
  for (std::size_t i : members) names.push_back(ModelEditor::task_key(dag.tasks[i]));
  dag.tasks[members.front()] = std::move(fused);
  removed.insert(members.begin() + 1, members.end());
  if (groups.size() < 64) groups.push_back(names);
}

/// One round: groups of products of one input by constants, either writing
/// the column tiles of one tensor whose tiles form one row (merged into one
/// product writing it whole; its readers keep their tiles) or whole untiled
/// tensors (merged into one product writing a split= tensor whose tiles the
/// readers then read). Returns the groups merged.
std::int64_t merge_round(ModelEditor& ed, std::int64_t min_group, nlohmann::json& groups) {
  Dag& dag = ed.dag();
  const std::vector<char> written = written_data(dag);
  std::map<std::string, std::vector<std::size_t>> by_key;
  for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
    const TaskNode& t = dag.tasks[i];
    if (!plain_product(ed, t, false) || !constant(ed, written, bound(ed, t, "b").data)) continue;
    const DataRef a = bound(ed, t, "a"), c = bound(ed, t, "c");
    const DataDecl& cd = dag.data[std::size_t(c.data)];
    if (c.data == a.data) continue;
    if (c.tile >= 0 && cd.ntile_r == 1)
      by_key["row " + std::to_string(c.data) + " " + merge_key(ed, t)].push_back(i);
    else if (c.tile < 0 && !cd.tiled() && !t.args.get_bool("accumulate"))
      by_key["whole " + merge_key(ed, t)].push_back(i);
  }
  std::int64_t merged = 0;
  std::set<std::size_t> removed;
  for (auto& [key, candidates] : by_key) {
    const bool row = key.rfind("row ", 0) == 0;
    std::vector<std::size_t> members;
    std::vector<Uses> users;
    const std::set<std::size_t> all(candidates.begin(), candidates.end());
    for (std::size_t i : candidates) {
      const TaskNode& t = dag.tasks[i];
      if (!members.empty() && changed_between(dag, members.front(), i, bound(ed, t, "a"))) break;
      if (row) {
        // the tiles in order, none touched by another task before its own product
        if (bound(ed, t, "c").tile != std::int32_t(members.size()) ||
            (!members.empty() && touched_between(dag, members.front(), i, bound(ed, t, "c"), all)))
          break;
      } else {
        const auto u = value_users(dag, i, bound(ed, t, "c"));
        if (!u) continue;
        users.push_back(*u);
      }
      members.push_back(i);
    }
    if (std::int64_t(members.size()) < min_group) continue;
    const DataRef c0 = bound(ed, dag.tasks[members.front()], "c");
    if (row && std::int64_t(members.size()) != dag.data[std::size_t(c0.data)].ntile_c) continue;
    std::vector<const TaskNode*> ts;
    for (std::size_t i : members) ts.push_back(&dag.tasks[i]);
    const TaskNode proto = dag.tasks[members.front()];
    const std::string base = ModelEditor::task_key(proto) + ".merged";
    bool transposed = false;
    const DataRef b = merged_b(ed, ts, proto.args.get_bool("transb"), base, transposed);
    TaskNode fused = proto;
    fused.label = base;
    ed.bind(fused, "b", b);
    ed.set_arg(fused, "transb", transposed ? "true" : "false");
    if (row) {
      ed.bind(fused, "c", DataRef{c0.data, -1}, Access::read_write);
    } else {
      std::vector<std::int64_t> widths;
      for (const TaskNode* t : ts) widths.push_back(dag.data[std::size_t(bound(ed, *t, "c").data)].cols);
      std::int64_t total = 0;
      for (std::int64_t w : widths) total += w;
      const DataRef out = ed.add_scratch(base + "_c", DType::f32, {dag.data[std::size_t(c0.data)].rows, total});
      dag.data[std::size_t(out.data)].set_split(widths);
      dag.data[std::size_t(out.data)].init = InitKind::zeros;  // op.matmul's c is read-write
      ed.bind(fused, "c", out, Access::read_write);
      for (std::size_t p = 0; p < members.size(); ++p)
        for (const auto& [task, port] : users[p])
          dag.tasks[task].bindings[port].ref = DataRef{out.data, std::int32_t(p)};
    }
    install(dag, members, std::move(fused), removed, groups);
    ++merged;
  }
  for (auto it = removed.rbegin(); it != removed.rend(); ++it) ed.remove_task(*it);
  return merged;
}

/// Is r tile p of a tensor whose count tiles lie along one row (along_row) or one column?
bool tile_in_line(const Dag& dag, const DataRef& r, std::size_t p, std::size_t count, bool along_row) {
  const DataDecl& d = dag.data[std::size_t(r.data)];
  return r.tile == std::int32_t(p) && d.tiled() && std::size_t(d.ntiles()) == count &&
         (along_row ? d.ntile_r : d.ntile_c) == 1;
}

/// One round of the inner law: c ⊕= A1 B1, c ⊕= A2 B2, ... with the A's the
/// column tiles of one tensor and the B's the matching row tiles of another
/// (op(B)'s) is c ⊕= A B: ⊕ associative and commutative (every reduction
/// here). A k-split product back into one.
std::int64_t merge_inner_round(ModelEditor& ed, std::int64_t min_group, nlohmann::json& groups) {
  Dag& dag = ed.dag();
  std::map<std::string, std::vector<std::size_t>> by_key;
  for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
    const TaskNode& t = dag.tasks[i];
    if (!plain_product(ed, t, false) || !t.args.get_bool("accumulate") || !t.args.get_string("map").empty()) continue;
    const DataRef a = bound(ed, t, "a"), b = bound(ed, t, "b"), c = bound(ed, t, "c");
    if (a.tile < 0 || b.tile < 0 || a.data == c.data || b.data == c.data) continue;
    by_key[std::to_string(c.data) + "." + std::to_string(c.tile) + "|" + std::to_string(a.data) + "|" +
           std::to_string(b.data) + pair_text(t) + (t.args.get_bool("transb") ? "t" : "n")]
        .push_back(i);
  }
  std::int64_t merged = 0;
  std::set<std::size_t> removed;
  for (auto& [key, candidates] : by_key) {
    const TaskNode& first = dag.tasks[candidates.front()];
    const DataRef a0 = bound(ed, first, "a"), b0 = bound(ed, first, "b"), c = bound(ed, first, "c");
    const bool tb = first.args.get_bool("transb");
    const std::size_t count = std::size_t(dag.data[std::size_t(a0.data)].ntiles());
    if (candidates.size() != count || std::int64_t(count) < min_group) continue;
    const std::set<std::size_t> all(candidates.begin(), candidates.end());
    bool ok = true;
    for (std::size_t p = 0; ok && p < count; ++p) {
      const TaskNode& t = dag.tasks[candidates[p]];
      ok = tile_in_line(dag, bound(ed, t, "a"), p, count, true) && tile_in_line(dag, bound(ed, t, "b"), p, count, tb);
    }
    // nothing else touches c, or writes A or B, between the first product and the last
    ok = ok && !touched_between(dag, candidates.front(), candidates.back(), c, all) &&
         !changed_between(dag, candidates.front(), candidates.back() + 1, DataRef{a0.data, -1}) &&
         !changed_between(dag, candidates.front(), candidates.back() + 1, DataRef{b0.data, -1});
    const op::ElementProgram mul = op::ElementProgram::compile(first.args.get_string("mul"), {"a", "b"});
    if (!ok || !op::laws(op::parse_reduce(first.args.get_string("add")), mul).inner) continue;
    TaskNode fused = first;
    fused.label = ModelEditor::task_key(first) + ".merged";
    ed.bind(fused, "a", DataRef{a0.data, -1});
    ed.bind(fused, "b", DataRef{b0.data, -1});
    install(dag, candidates, std::move(fused), removed, groups);
    ++merged;
  }
  for (auto it = removed.rbegin(); it != removed.rend(); ++it) ed.remove_task(*it);
  return merged;
}

}  // namespace

void merge_products(PassContext& ctx, std::int64_t min_group, nlohmann::json& groups) {
  // merging one group can make the next one adjacent (a row's products, then its bias products)
  while (merge_round(ctx.ed, min_group, groups) + merge_inner_round(ctx.ed, min_group, groups) > 0) {
  }
}

}  // namespace ymlopt::opt::detail
