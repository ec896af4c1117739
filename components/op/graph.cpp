// op.random_graph and op.csr_matmul (see op.hpp): a GCN's normalised adjacency
// matrix in CSR, and the product of a CSR matrix (or one row block of it) with a
// dense matrix.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "op/op.hpp"
#include "op/semiring.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt {
namespace {

using kutil::dims;
using kutil::first_error;
using std::int64_t;
using std::size_t;
using std::to_string;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// ============================================================ op.random_graph

const std::vector<PortSpec>& graph_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::write, kutil::kFloat, false, 2, "the values [cap] (the tail past the nonzeros zero)"},
      {"a_index", Access::write, {DType::i32}, false, 2, "their columns [cap]"},
      {"a_ptr", Access::write, {DType::i32}, false, 2, "row pointers [n+1]: n vertices"},
  };
  return p;
}

std::string graph_check(const TaskShape& t) {
  const auto& s = graph_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::float_dtype(s, p, 0); !m.empty()) return m;
  if (p[0].rows != 1 || p[1].rows != 1 || p[1].cols != p[0].cols)
    return "ports 'a' and 'a_index' are " + dims(p[0]) + " and " + dims(p[1]) + ": the values [cap] and their columns";
  if (p[2].rows != 1 || p[2].cols < 2) return "port 'a_ptr' is " + dims(p[2]) + ": row pointers [n+1], n >= 1";
  const int64_t degree = t.args.get_int("degree");
  if (degree < 0 || degree >= p[2].cols - 1)
    return "param 'degree' is " + to_string(degree) + ": must be in [0, n - 1 = " + to_string(p[2].cols - 2) + "]";
  return "";
}

Cost graph_cost(const TaskShape& t) {
  if (t.ports.size() != graph_ports().size() || graph_check(t) != "") return {};
  return kutil::io_cost(graph_ports(), t, 20.0 * double(t.ports[2].cols) * double(t.args.get_int("degree") + 1));
}

/// Each vertex draws degree/2 neighbours (uniform, seeded), every edge both
/// ways, plus a self loop; Â = D^-1/2 (A + I) D^-1/2 (Kipf and Welling's GCN).
void graph_cpu(KernelContext& ctx) {
  kutil::validate(ctx, graph_ports(), graph_check);
  const TensorView &val = ctx.port(0), &col = ctx.port(1), &ptr = ctx.port(2);
  const int64_t n = ptr.cols - 1, half = ctx.arg_int("degree") / 2, cap = val.cols;
  std::mt19937_64 gen(static_cast<std::uint64_t>(ctx.arg_int("seed")));
  std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(n - 2, 0));  // unused when n = 1 (degree 0)
  std::vector<std::vector<std::int32_t>> adj(sz(n));
  for (int64_t i = 0; i < n; ++i) adj[sz(i)].push_back(static_cast<std::int32_t>(i));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t e = 0; e < half; ++e) {
      int64_t j = pick(gen);
      if (j >= i) ++j;  // never i itself
      adj[sz(i)].push_back(static_cast<std::int32_t>(j));
      adj[sz(j)].push_back(static_cast<std::int32_t>(i));
    }
  int64_t nnz = 0;
  std::vector<double> deg(sz(n));
  for (int64_t i = 0; i < n; ++i) {
    auto& row = adj[sz(i)];
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    deg[sz(i)] = double(row.size());
    nnz += static_cast<int64_t>(row.size());
  }
  if (nnz > cap || nnz > INT32_MAX)
    throw KernelError("the graph has " + to_string(nnz) + " nonzeros (edges both ways and self loops) but port 'a' has room for " +
                      to_string(cap) + ": give a, a_index at least " + to_string(nnz) + " entries");
  auto* c = static_cast<std::int32_t*>(col.data);
  auto* q = static_cast<std::int32_t*>(ptr.data);
  int64_t e = 0;
  q[0] = 0;
  kutil::dispatch_float(val.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    T* v = static_cast<T*>(val.data);
    for (int64_t i = 0; i < n; ++i) {
      for (std::int32_t j : adj[sz(i)]) {
        c[e] = j;
        v[e++] = static_cast<T>(1.0 / std::sqrt(deg[sz(i)] * deg[sz(j)]));
      }
      q[i + 1] = static_cast<std::int32_t>(e);
    }
    std::fill(v + e, v + cap, T(0));
  });
  std::fill(c + e, c + cap, 0);
  ctx.report("nnz", double(nnz));
}

// ============================================================ op.csr_matmul

enum SpmmPort : size_t { kA, kIndex, kPtr, kX, kY };

const std::vector<PortSpec>& spmm_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kutil::kFloat, false, 2,
       "values [cap] of a CSR matrix, or [1, bcap] of one row block (eigen.csr_block)"},
      {"a_index", Access::read, {DType::i32}, false, 2, "their columns (global) [cap]"},
      {"a_ptr", Access::read, {DType::i32}, false, 2, "row pointers [rows+1]"},
      {"x", Access::read, kutil::kFloat, false, 2, "X [n, f], dense"},
      {"y", Access::read_write, kutil::kFloat, false, 2,
       "Y [r, f] = the first r <= rows rows of A X (with accumulate: Y + A X)"},
  };
  return p;
}

std::string spmm_check(const TaskShape& t) {
  const auto& s = spmm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, kA), kutil::same_dtype(s, p, kX, kA), kutil::same_dtype(s, p, kY, kA)});
      !m.empty())
    return m;
  if (p[kA].rows != 1 || p[kIndex].rows != 1 || p[kIndex].cols != p[kA].cols)
    return "ports 'a' and 'a_index' are " + dims(p[kA]) + " and " + dims(p[kIndex]) + ": the values and their columns";
  const int64_t rows = p[kPtr].cols - 1;
  if (p[kPtr].rows != 1 || rows < 1) return "port 'a_ptr' is " + dims(p[kPtr]) + ": row pointers [rows+1]";
  if (p[kY].rows < 1 || p[kY].rows > rows || p[kY].cols != p[kX].cols)
    return "port 'y' is " + dims(p[kY]) + " but A has " + to_string(rows) + " rows and X is " + dims(p[kX]) +
           ": y takes at most A's rows and X's columns";
  return "";
}

Cost spmm_cost(const TaskShape& t) {
  if (t.ports.size() != spmm_ports().size() || spmm_check(t) != "") return {};
  return kutil::io_cost(spmm_ports(), t, 2.0 * double(t.ports[kA].cols) * double(t.ports[kX].cols));
}

void spmm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, spmm_ports(), spmm_check);
  kutil::dispatch_float(ctx.port(kA).dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const TensorView &a = ctx.port(kA), &x = ctx.port(kX), &y = ctx.port(kY);
    op::csr_matmul(a.ptr<T>(), static_cast<const std::int32_t*>(ctx.port(kIndex).data),
                   static_cast<const std::int32_t*>(ctx.port(kPtr).data), y.rows, a.cols, x.ptr<T>(), x.ld, x.rows,
                   x.cols, y.ptr<T>(), y.ld, ctx.arg_bool("accumulate"));
  });
}

// ============================================================ op.backtrack

const std::vector<PortSpec>& backtrack_ports() {
  static const std::vector<PortSpec> p = {
      {"arg", Access::read, {DType::i32}, false, 2,
       "[T, S]: row t the back-pointers of step t (op.matmul's arg: the state at t-1 each state at t came from; row 0 "
       "unused)"},
      {"last", Access::read, kutil::kFloat, false, 2, "[1, S]: the scores of the last step"},
      {"path", Access::write, {DType::i32}, false, 2, "[1, T]: the best state of each step"},
  };
  return p;
}

std::string backtrack_check(const TaskShape& t) {
  const auto& s = backtrack_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 1), kutil::one_of(t.args, "want", {"max", "min"})}); !m.empty())
    return m;
  if (p[0].rows < 1 || p[0].cols < 1) return "port 'arg' is " + dims(p[0]) + ": at least one step and one state";
  if (p[1].rows != 1 || p[1].cols != p[0].cols)
    return "port 'last' is " + dims(p[1]) + " but port 'arg' is " + dims(p[0]) + ": one score per state";
  if (p[2].rows != 1 || p[2].cols != p[0].rows)
    return "port 'path' is " + dims(p[2]) + " but port 'arg' has " + to_string(p[0].rows) + " steps";
  return "";
}

/// path[T-1] = the best state of `last`; path[t-1] = arg[t][path[t]].
void backtrack_cpu(KernelContext& ctx) {
  kutil::validate(ctx, backtrack_ports(), backtrack_check);
  const TensorView &arg = ctx.port(0), &last = ctx.port(1), &path = ctx.port(2);
  const int64_t steps = arg.rows, states = arg.cols;
  const bool want_max = ctx.arg_string("want") == "max";
  auto* out = static_cast<std::int32_t*>(path.data);
  const auto* back = static_cast<const std::int32_t*>(arg.data);
  double best = 0;
  kutil::dispatch_float(last.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T* sc = last.ptr<T>();
    int64_t at = 0;
    for (int64_t j = 1; j < states; ++j)
      if (want_max ? sc[j] > sc[at] : sc[j] < sc[at]) at = j;
    out[steps - 1] = static_cast<std::int32_t>(at);
    best = double(sc[at]);
  });
  for (int64_t t = steps - 1; t > 0; --t) {
    const std::int32_t from = back[t * arg.ld + out[t]];
    if (from < 0 || from >= states)
      throw KernelError("port 'arg' step " + to_string(t) + " state " + to_string(out[t]) + " points to " +
                        to_string(from) + ": not a state in [0, " + to_string(states) + ")");
    out[t - 1] = from;
  }
  ctx.report("score", best);
}

}  // namespace

void register_op_graph(Registry& reg) {
  kutil::add_component(
      reg, "op.random_graph",
      "a random undirected graph's GCN adjacency in CSR: each of the n vertices (a_ptr's columns - 1) draws degree/2 "
      "uniform neighbours (seeded), every edge both ways plus a self loop, values D^-1/2 (A + I) D^-1/2; names the "
      "nonzero count when a is too small",
      graph_ports(),
      {{"degree", ParamType::int_, "8", false, "average number of neighbours drawn per vertex (both ways: ~degree)"},
       {"seed", ParamType::int_, "1", false, "random seed"}},
      graph_cpu, graph_check, graph_cost);
  kutil::add_component(
      reg, "op.csr_matmul",
      "Y = A X for a CSR matrix A (or one row block of it, eigen.csr_block) and a dense X [n, f]: a GCN layer's "
      "aggregation; every pointer and column checked as read",
      spmm_ports(), {{"accumulate", ParamType::bool_, "false", false, "Y += A X instead of Y = A X"}}, spmm_cpu,
      spmm_check, spmm_cost);
  kutil::add_component(
      reg, "op.backtrack",
      "the best path of a max-plus (or min-plus) recurrence from its back-pointers: path[T-1] the best state of "
      "last, path[t-1] = arg[t][path[t]] (Viterbi decoding after op.matmul add=max with port arg); reports score",
      backtrack_ports(), {{"want", ParamType::string_, "max", false, "max (Viterbi) or min (shortest paths)"}},
      backtrack_cpu, backtrack_check,
      [](const TaskShape& t) { return t.ports.size() == 3 ? kutil::io_cost(backtrack_ports(), t, 0.0) : Cost{}; });
}

}  // namespace ymlopt
