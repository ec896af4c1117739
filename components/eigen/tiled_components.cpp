// The tiled IRAM components (see tiled_components.hpp): a CSR matrix cut into
// row blocks, the product of one block, and an IRAM cycle whose matvecs are
// those products (eigen.iram_begin, eigen.arnoldi_step, eigen.iram_end).
#include "eigen/tiled_components.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "eigen/component_util.hpp"
#include "eigen/cycle_util.hpp"
#include "eigen/operator_ports.hpp"
#include "eigen/solver_util.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt {
namespace {

using eigen_util::expect_shape;
using eigen_util::f64_port;
using kutil::first_error;
using std::int64_t;
using std::size_t;
using std::to_string;

// ============================================================ eigen.csr_block

enum BlockPort : size_t { kBa, kBindex, kBptr, kBvalues, kBcols, kBrows };

const std::vector<PortSpec>& block_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kutil::kFloat, false, 2, "the matrix in CSR: its values [cap]"},
      {"a_index", Access::read, {DType::i32}, false, 2, "the column of each value [cap]"},
      {"a_ptr", Access::read, {DType::i32}, false, 2, "row pointers [n+1]"},
      {"block", Access::write, kutil::kFloat, false, 2,
       "[1, bcap]: row block b's values (a tile of the blocked values [blocks, bcap]); the tail zero"},
      {"block_index", Access::write, {DType::i32}, false, 2, "[1, bcap]: their columns (global)"},
      {"block_ptr", Access::write, {DType::i32}, false, 2,
       "[1, rows+1]: the block's row pointers into its own values (rows past n empty)"},
  };
  return p;
}

std::string block_check(const TaskShape& t) {
  const auto& s = block_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::float_dtype(s, p, kBa); !m.empty()) return m;
  const int64_t cap = p[kBa].cols, n = p[kBptr].cols - 1;
  if (p[kBa].rows != 1 || p[kBindex].rows != 1 || p[kBindex].cols != cap)
    return "ports 'a' and 'a_index' are " + kutil::dims(p[kBa]) + " and " + kutil::dims(p[kBindex]) +
           ": the values [cap] and their columns [cap]";
  if (p[kBptr].rows != 1 || n < 1) return "port 'a_ptr' is " + kutil::dims(p[kBptr]) + ": row pointers [n+1]";
  const int64_t b = t.args.get_int("row_block"), rows = p[kBrows].cols - 1, bcap = p[kBvalues].cols;
  if (p[kBrows].rows != 1 || rows < 1)
    return "port 'block_ptr' is " + kutil::dims(p[kBrows]) + ": a block's row pointers [1, rows+1]";
  if (p[kBvalues].rows != 1 || p[kBcols].rows != 1 || p[kBcols].cols != bcap)
    return "ports 'block' and 'block_index' are " + kutil::dims(p[kBvalues]) + " and " + kutil::dims(p[kBcols]) +
           ": one row of bcap values and their columns";
  if (b < 0 || b * rows >= n)
    return "param 'row_block' is " + to_string(b) + ": blocks of " + to_string(rows) + " rows cut n = " + to_string(n) +
           " into " + to_string((n + rows - 1) / rows);
  return "";
}

Cost block_cost(const TaskShape& t) {
  if (t.ports.size() != block_ports().size() || block_check(t) != "") return {};
  return kutil::io_cost(block_ports(), t, 0.0);
}

void block_cpu(KernelContext& ctx) {
  kutil::validate(ctx, block_ports(), block_check);
  // Only this block's rows are checked and copied (a task per block: the whole matrix once in all).
  const TensorView &a = ctx.port(kBa), &vals = ctx.port(kBvalues), &cols = ctx.port(kBcols), &ptr = ctx.port(kBrows);
  const int64_t n = ctx.port(kBptr).cols - 1, rows = ptr.cols - 1, bcap = vals.cols;
  const int64_t r0 = ctx.arg_int("row_block") * rows, r1 = std::min(n, r0 + rows);
  const auto* rp = static_cast<const std::int32_t*>(ctx.port(kBptr).data);
  const auto* ci = static_cast<const std::int32_t*>(ctx.port(kBindex).data);
  eigen_util::check_csr_rows(rp, ci, n, a.cols, n, r0, r1);
  const int64_t first = rp[r0], count = rp[r1] - first;
  if (count > bcap)
    throw KernelError("row block " + to_string(ctx.arg_int("row_block")) + " (rows " + to_string(r0) + ".." +
                      to_string(r1 - 1) + ") holds " + to_string(count) + " nonzeros but 'block' has room for " +
                      to_string(bcap) + ": give the blocked values at least " + to_string(count) + " columns");
  auto* c = static_cast<std::int32_t*>(cols.data);
  auto* q = static_cast<std::int32_t*>(ptr.data);
  kutil::dispatch_float(vals.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    T* v = static_cast<T*>(vals.data);
    kutil::dispatch_float(a.dtype, [&](auto sg) {
      using S = typename decltype(sg)::type;
      const S* src = static_cast<const S*>(a.data) + first;
      std::transform(src, src + count, v, [](S x) { return static_cast<T>(x); });
    });
    std::fill(v + count, v + bcap, T(0));
  });
  std::copy_n(ci + first, count, c);
  std::fill(c + count, c + bcap, 0);
  for (int64_t r = 0; r <= rows; ++r) q[r] = static_cast<std::int32_t>(rp[std::min(r0 + r, r1)] - first);
  ctx.report("nnz", static_cast<double>(count));
}

// ============================================================ eigen.block_matvec

enum MatvecPort : size_t { kMa, kMindex, kMptr, kMx, kMy, kMcursor };

const std::vector<PortSpec>& matvec_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, {DType::f64}, false, 2, "[1, bcap]: the row block's values (eigen.csr_block)"},
      {"a_index", Access::read, {DType::i32}, false, 2, "[1, bcap]: their columns"},
      {"a_ptr", Access::read, {DType::i32}, false, 2, "[1, rows+1]: the block's row pointers"},
      {"x", Access::read, {DType::f64}, false, 2, "[1, n]: the vector"},
      {"y", Access::write, {DType::f64}, false, 2, "[1, r]: the block's r <= rows entries of A x"},
      {"cursor", Access::read, {DType::f64}, true, 2,
       "[1]: the next column of a tiled IRAM factorisation; with arg step >= 0 the product is skipped when step < "
       "cursor (a column the implicit restart kept)"},
  };
  return p;
}

std::string matvec_check(const TaskShape& t) {
  const auto& s = matvec_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  const int64_t bcap = p[kMa].cols, rows = p[kMptr].cols - 1;
  if (p[kMa].rows != 1 || p[kMindex].rows != 1 || p[kMindex].cols != bcap)
    return "ports 'a' and 'a_index' are " + kutil::dims(p[kMa]) + " and " + kutil::dims(p[kMindex]) +
           ": one row of values and their columns";
  if (p[kMptr].rows != 1 || rows < 1) return "port 'a_ptr' is " + kutil::dims(p[kMptr]) + ": row pointers [1, rows+1]";
  if (p[kMx].rows != 1) return "port 'x' is " + kutil::dims(p[kMx]) + ": a row vector [1, n]";
  if (p[kMy].rows != 1 || p[kMy].cols < 1 || p[kMy].cols > rows)
    return "port 'y' is " + kutil::dims(p[kMy]) + ": a row of at most the block's " + to_string(rows) + " rows";
  if (p[kMcursor].bound() && p[kMcursor].size() != 1)
    return "port 'cursor' is " + kutil::dims(p[kMcursor]) + ": one value";
  if (t.args.get_int("step") >= 0 && !p[kMcursor].bound()) return "param 'step' needs port 'cursor'";
  return "";
}

Cost matvec_cost(const TaskShape& t) {
  if (t.ports.size() != matvec_ports().size() || matvec_check(t) != "") return {};
  return kutil::io_cost(matvec_ports(), t, 2.0 * double(t.ports[kMa].cols));
}

/// y = A_b x with every pointer and column checked as it is read.
void block_product(const TensorView& vals, const TensorView& cols, const TensorView& ptr, const TensorView& x,
                   const TensorView& y) {
  const auto* v = static_cast<const double*>(vals.data);
  const auto* c = static_cast<const std::int32_t*>(cols.data);
  const auto* q = static_cast<const std::int32_t*>(ptr.data);
  const auto* xv = static_cast<const double*>(x.data);
  auto* yv = static_cast<double*>(y.data);
  const int64_t n = x.cols, bcap = vals.cols, rows = ptr.cols - 1;
  if (q[0] != 0) throw KernelError("port 'a_ptr' entry 0 is " + to_string(q[0]) + ": must be 0");
  for (int64_t r = 0; r < rows; ++r)
    if (q[r + 1] < q[r] || q[r + 1] > bcap)
      throw KernelError("port 'a_ptr' entry " + to_string(r + 1) + " is " + to_string(q[r + 1]) +
                        ": row pointers must not decrease and stay <= " + to_string(bcap));
  for (int64_t r = 0; r < y.cols; ++r) {
    double acc = 0;
    for (std::int32_t e = q[r]; e < q[r + 1]; ++e) {
      const std::int32_t j = c[e];
      if (j < 0 || j >= n)
        throw KernelError("port 'a_index' entry " + to_string(e) + " is " + to_string(j) + ": columns are in [0, " +
                          to_string(n) + ")");
      acc += v[e] * xv[j];
    }
    yv[r] = acc;
  }
}

void matvec_cpu(KernelContext& ctx) {
  kutil::validate(ctx, matvec_ports(), matvec_check);
  const int64_t step = ctx.arg_int("step");
  if (step >= 0 && static_cast<double>(step) < ctx.port(kMcursor).at<double>(0, 0)) return;  // a kept column
  block_product(ctx.port(kMa), ctx.port(kMindex), ctx.port(kMptr), ctx.port(kMx), ctx.port(kMy));
}

// ============================================================ the tiled IRAM cycle

// eigen.iram_end's ports in order (kVectors..kPtr); eigen.iram_begin and eigen.arnoldi_step take a selection, and kW.
enum CyclePort : size_t { kVectors, kValues, kResidual, kBasis, kHess, kState, kCursor, kX, kA, kIndex, kPtr, kW };

PortSpec port_of(CyclePort i) {
  switch (i) {
    case kVectors: return {"vectors", Access::read_write, {DType::f64}, false, 2, "Ritz vectors [n,k] (dgeev style)"};
    case kValues: return {"values", Access::read_write, {DType::f64}, false, 2, "Ritz values [k,3]: re, im, residual"};
    case kResidual:
      return {"residual", Access::write, {DType::f64}, false, 2, "[1]: largest relative residual of the k pairs"};
    case kBasis:
      return {"basis", Access::read_write, {DType::f64}, false, 2, "[m+1, n]: V_m a vector per row, f in row m"};
    case kHess: return {"hessenberg", Access::read_write, {DType::f64}, false, 2, "[m+1, m]: H_m"};
    case kState:
      return {"state", Access::read_write, {DType::f64}, false, 2,
              "[k+1, 3]: row 0 (started, ||A|| estimate, next seed), rows 1..k the values the cycle last wrote"};
    case kCursor:
      return {"cursor", Access::read_write, {DType::f64}, false, 2,
              "[1]: the next column to extend (m: the factorisation is complete)"};
    case kX: return {"x", Access::read_write, {DType::f64}, false, 2, "[1, n]: the vector the next products take"};
    case kW: return {"w", Access::read, {DType::f64}, false, 2, "[1, n]: A x (eigen.block_matvec's tiles)"};
    case kA:
      return {"a", Access::read, kutil::kFloat, true, 2,
              "verify: the whole operator (A [n,n], or format=csr its values) for the check of a converged set"};
    case kIndex: return {"a_index", Access::read, {DType::i32}, true, 1, "format=csr: the columns of a"};
    case kPtr: return {"a_ptr", Access::read, {DType::i32}, true, 1, "format=csr: row pointers [n+1]"};
  }
  return {};
}

std::vector<PortSpec> ports_of(std::initializer_list<CyclePort> list) {
  std::vector<PortSpec> p;
  for (CyclePort i : list) p.push_back(port_of(i));
  return p;
}

const std::vector<PortSpec>& begin_ports() {
  static const std::vector<PortSpec> p = [] {
    std::vector<PortSpec> q = ports_of({kVectors, kValues, kBasis, kHess, kState, kCursor, kX});
    q[0].access = q[1].access = Access::read;  // the pairs an explicit restart starts from
    return q;
  }();
  return p;
}
const std::vector<PortSpec>& step_ports() {
  static const std::vector<PortSpec> p = ports_of({kW, kBasis, kHess, kState, kCursor, kX});
  return p;
}
const std::vector<PortSpec>& end_ports() {
  static const std::vector<PortSpec> p =
      ports_of({kVectors, kValues, kResidual, kBasis, kHess, kState, kCursor, kX, kA, kIndex, kPtr});
  return p;
}

/// The factorisation's ports of a component (their index in its port list).
struct FactorPorts {
  size_t basis, hess, state, cursor, x;
};

/// "" when the factorisation's ports fit n, m = subspace and k; *n from basis.
std::string factor_check(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a,
                         const FactorPorts& f, int64_t* n) {
  for (size_t i : {f.basis, f.hess, f.state, f.cursor, f.x})
    if (auto m = f64_port(s, p, i, "the factorisation is kept in double"); !m.empty()) return m;
  const int64_t k = a.get_int("k"), m = a.get_int("subspace");
  *n = p[f.basis].cols;
  if (m < 3 || m >= *n)
    return "param 'subspace' is " + to_string(m) + ": the tiled IRAM needs 3 <= subspace < n = " + to_string(*n);
  if (k < 1 || k >= m - 1)
    return "param 'k' is " + to_string(k) + ": an implicit restart needs 1 <= k < subspace - 1 = " + to_string(m - 1);
  if (p[f.cursor].size() != 1) return "port 'cursor' is " + kutil::dims(p[f.cursor]) + ": one value";
  return first_error({expect_shape(s, p, f.basis, m + 1, *n, "(subspace + 1) x n: V_m and f, a vector per row"),
                      expect_shape(s, p, f.hess, m + 1, m, "(subspace + 1) x subspace"),
                      expect_shape(s, p, f.state, k + 1, 3, "(k + 1) x 3"),
                      expect_shape(s, p, f.x, 1, *n, "the vector of the next products")});
}

/// "" when vectors [n,k], values [k,3] (and residual [1]) are f64 and fit.
std::string pairs_check(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a, int64_t n,
                        size_t vectors, size_t values) {
  const int64_t k = a.get_int("k");
  return first_error({f64_port(s, p, vectors, "the Ritz vectors are kept in double"),
                      f64_port(s, p, values, "the Ritz values are kept in double"),
                      kutil::one_of(a, "which", {"magnitude", "real"}), eigen_util::int_at_least(a, "seed", 0),
                      expect_shape(s, p, vectors, n, k, "n x k Ritz vectors"),
                      expect_shape(s, p, values, k, 3, "k rows of re, im, residual")});
}

void copy_row(const TensorView& from, int64_t row, const TensorView& to) {
  std::copy_n(&from.at<double>(row, 0), from.cols, &to.at<double>(0, 0));
}

// ------------------------------------------------------------ eigen.iram_begin

enum BeginPort : size_t { kGvectors, kGvalues, kGbasis, kGhess, kGstate, kGcursor, kGx };

std::string begin_check(const TaskShape& t) {
  const auto& s = begin_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  int64_t n = 0;
  if (auto m = factor_check(s, t.ports, t.args, {kGbasis, kGhess, kGstate, kGcursor, kGx}, &n); !m.empty()) return m;
  return pairs_check(s, t.ports, t.args, n, kGvectors, kGvalues);
}

Cost begin_cost(const TaskShape& t) {
  if (t.ports.size() != begin_ports().size() || begin_check(t) != "") return {};
  return kutil::io_cost(begin_ports(), t, 4.0 * double(t.ports[kGbasis].cols) * double(t.args.get_int("k")));
}

void begin_cpu(KernelContext& ctx) {
  kutil::validate(ctx, begin_ports(), begin_check);
  const TensorView &vectors = ctx.port(kGvectors), &values = ctx.port(kGvalues), &basis = ctx.port(kGbasis),
                   &hess = ctx.port(kGhess), &state = ctx.port(kGstate), &cursor = ctx.port(kGcursor);
  const int64_t n = basis.cols, k = ctx.arg_int("k");
  for (size_t port : {kGvectors, kGvalues, kGstate, kGcursor}) eigen_util::require_finite(ctx.port(port), begin_ports()[port].name);
  const bool started = state.at<double>(0, 0) != 0;
  const bool given = eigen_util::pairs_given(vectors, values, state, k);
  if (started && !given) return;  // eigen.iram_end left the next column in x
  eigen_util::PortFactor fac(basis, hess, state, static_cast<std::uint64_t>(ctx.arg_int("seed")), false);
  const std::vector<double> start =
      given ? eigen::ritz_restart_vector(eigen_util::unpack_pairs(vectors, values, n, k), n, true)
            : eigen::detail::start_vector(n, {}, fac.st.seed++);
  eigen::iram_start(fac.span, fac.st, start);
  ctx.report("explicit", given ? 1.0 : 0.0);
  fac.store(hess, state);
  copy_row(basis, 0, ctx.port(kGx));
  cursor.at<double>(0, 0) = 0;
}

// ------------------------------------------------------------ eigen.arnoldi_step

enum StepPort : size_t { kSw, kSbasis, kShess, kSstate, kScursor, kSx };

std::string step_check(const TaskShape& t) {
  const auto& s = step_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  int64_t n = 0;
  if (auto m = factor_check(s, p, t.args, {kSbasis, kShess, kSstate, kScursor, kSx}, &n); !m.empty()) return m;
  if (auto m = first_error({f64_port(s, p, kSw, "the products are double"),
                            expect_shape(s, p, kSw, 1, n, "A x, a row vector")});
      !m.empty())
    return m;
  const int64_t j = t.args.get_int("step"), m = t.args.get_int("subspace");
  if (j < 0 || j >= m)
    return "param 'step' is " + to_string(j) + ": the factorisation's columns are 0.." + to_string(m - 1);
  return "";
}

Cost step_cost(const TaskShape& t) {
  if (t.ports.size() != step_ports().size() || step_check(t) != "") return {};
  // CGS2 against j + 1 columns: 8 n (j + 1).
  return kutil::io_cost(step_ports(), t,
                        8.0 * double(t.ports[kSw].cols) * double(t.args.get_int("step") + 1));
}

void step_cpu(KernelContext& ctx) {
  kutil::validate(ctx, step_ports(), step_check);
  const TensorView &basis = ctx.port(kSbasis), &hess = ctx.port(kShess), &state = ctx.port(kSstate),
                   &cursor = ctx.port(kScursor);
  const int64_t j = ctx.arg_int("step"), m = ctx.arg_int("subspace"), n = basis.cols;
  const double at = cursor.at<double>(0, 0);
  if (state.at<double>(0, 0) == 0 || !(at >= 0 && at <= double(m)))
    throw KernelError("the factorisation is not started (state row 0) or port 'cursor' holds " + std::to_string(at) +
                      ": run eigen.iram_begin before the steps");
  if (double(j) < at) return;  // a column the implicit restart kept
  if (double(j) > at)
    throw KernelError("step " + to_string(j) + " but the factorisation's next column is " + std::to_string(at) +
                      ": the steps of a cycle run in order");
  const TensorView& w = ctx.port(kSw);
  eigen_util::require_finite(w, "w");
  eigen_util::PortFactor f(basis, hess, state, 0, false);
  std::copy_n(&w.at<double>(0, 0), n, f.span.f);
  f.st.beta = eigen::arnoldi_absorb(f.span, j, f.st.anorm_est);
  if (j + 1 < m) {
    eigen::arnoldi_next(f.span, j + 1, f.st.beta, f.st.seed);
    copy_row(basis, j + 1, ctx.port(kSx));
  }
  f.store(hess, state);
  cursor.at<double>(0, 0) = double(j + 1);
  ctx.report("matvecs", 1.0);
}

// ------------------------------------------------------------ eigen.iram_end

std::string end_check(const TaskShape& t) {
  const auto& s = end_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  int64_t n = 0;
  if (auto m = factor_check(s, p, t.args, {kBasis, kHess, kState, kCursor, kX}, &n); !m.empty()) return m;
  if (auto m = pairs_check(s, p, t.args, n, kVectors, kValues); !m.empty()) return m;
  if (auto m = first_error({f64_port(s, p, kResidual, "a double residual"),
                            expect_shape(s, p, kResidual, 1, 1, "one residual")});
      !m.empty())
    return m;
  if (!(t.args.get_float("tol") > 0)) return "param 'tol' must be > 0";
  if (!p[kA].bound()) {
    if (t.args.get_bool("verify"))
      return "verify needs the operator: bind port 'a' (with a_index and a_ptr for format=csr), or set verify=false";
    return "";
  }
  int64_t an = 0;
  if (auto m = eigen_util::check_operator(s, p, t.args, kA, kIndex, kPtr, &an); !m.empty()) return m;
  if (an != n) return "port 'a' is an operator of n = " + to_string(an) + " but the basis has n = " + to_string(n);
  return "";
}

Cost end_cost(const TaskShape& t) {
  if (t.ports.size() != end_ports().size() || end_check(t) != "") return {};
  const double dn = double(t.ports[kBasis].cols), dm = double(t.args.get_int("subspace")),
               dk = double(t.args.get_int("k"));
  // Two dgeev and the QR sweeps (~30 m³), the kept basis (2 n m²), the Ritz vectors (4 n m k).
  Cost c = kutil::io_cost(end_ports(), t, 30 * dm * dm * dm + 2 * dn * dm * dm + 4 * dn * dm * dk);
  c.extra_bytes = 8.0 * dn * double(2 * dm + 3);
  return c;
}

void end_cpu(KernelContext& ctx) {
  kutil::validate(ctx, end_ports(), end_check);
  const TensorView &vectors = ctx.port(kVectors), &values = ctx.port(kValues), &residual = ctx.port(kResidual),
                   &basis = ctx.port(kBasis), &hess = ctx.port(kHess), &state = ctx.port(kState),
                   &cursor = ctx.port(kCursor);
  const int64_t n = basis.cols, k = ctx.arg_int("k"), m = ctx.arg_int("subspace");
  const double tol = ctx.arg_float("tol");
  const eigen::Which which = eigen_util::which_of(ctx);
  if (cursor.at<double>(0, 0) != double(m) || state.at<double>(0, 0) == 0)
    throw KernelError("the factorisation has " + std::to_string(cursor.at<double>(0, 0)) + " of its " +
                      to_string(m) + " columns: eigen.iram_end runs after the cycle's last eigen.arnoldi_step");
  for (size_t port : {kHess, kState}) eigen_util::require_finite(ctx.port(port), end_ports()[port].name);
  eigen_util::PortFactor fac(basis, hess, state, 0);
  double ritz_norm = 0;
  const eigen::EigenResult c = eigen::iram_ritz(fac.span, fac.st.beta, k, which, tol, &ritz_norm);
  double worst = eigen_util::write_pairs(c, ritz_norm, n, k, vectors, values, residual);
  eigen_util::remember_pairs(values, state, k);
  if (ctx.port(kA).bound()) {
    const eigen_util::PortOperator a(ctx.port(kA), ctx.port(kIndex), ctx.port(kPtr), eigen_util::format_of(ctx.args()));
    worst = eigen_util::verify_pairs(ctx, a.op(), c, worst, which, vectors, values, residual);
  }
  ctx.report("residual", worst);
  if (worst <= tol) return;  // converged: the loop ends here
  // The implicit restart for the next cycle: k' columns kept, column k' made from f.
  const int64_t kk = eigen::iram_contract(fac.span, fac.st, k, which, tol);
  eigen::arnoldi_next(fac.span, kk, fac.st.beta, fac.st.seed);
  fac.store(hess, state);
  copy_row(basis, kk, ctx.port(kX));
  cursor.at<double>(0, 0) = double(kk);
  ctx.report("kept", double(kk));
}

/// The cycle components' parameters named in `names` (and `step`).
std::vector<ParamSpec> iram_params(std::initializer_list<const char*> names) {
  std::vector<ParamSpec> p;
  for (const ParamSpec& q : eigen_util::cycle_params("Arnoldi factorisation size m (3 <= m < n, > k + 1)"))
    for (const char* name : names)
      if (q.name == name) p.push_back(q);
  for (const char* name : names)
    if (std::string(name) == "step")
      p.push_back({"step", ParamType::int_, "0", true, "the column j this step extends"});
  return p;
}

}  // namespace

void register_eigen_tiled(Registry& reg) {
  kutil::add_component(
      reg, "eigen.csr_block",
      "row block b of a CSR matrix (rows b*rows .. b*rows+rows-1, rows = block_ptr's columns - 1) as one tile of a "
      "blocked CSR: its values and global columns in [1, bcap] rows of [blocks, bcap] tensors, its row pointers "
      "local; a block with more nonzeros than bcap is an error naming the count",
      block_ports(), {{"row_block", ParamType::int_, "0", false, "the row block b"}}, block_cpu, block_check, block_cost);
  kutil::add_component(
      reg, "eigen.block_matvec",
      "y = A_b x for one row block of a blocked CSR (eigen.csr_block), every pointer and column checked as read; "
      "the products of a tiled IRAM cycle (with step >= 0 and port cursor: skipped for a column the restart kept)",
      matvec_ports(), {{"step", ParamType::int_, "-1", false, "the factorisation column this product is for (-1: always)"}},
      matvec_cpu, matvec_check, matvec_cost);
  kutil::add_component(
      reg, "eigen.iram_begin",
      "a tiled IRAM cycle's start: before the first cycle, or when the Ritz pairs are not the ones the last cycle "
      "wrote (eigen.ritz_select adopted a set), a new factorisation from the seeded random vector or the pairs' "
      "residual-weighted sum (column 0 into x, cursor 0); otherwise nothing (eigen.iram_end left the implicit "
      "restart's next column in x)",
      begin_ports(), iram_params({"k", "subspace", "which", "seed"}), begin_cpu, begin_check, begin_cost);
  kutil::add_component(
      reg, "eigen.arnoldi_step",
      "step j of a tiled IRAM cycle: w = A x (the eigen.block_matvec tiles) orthogonalised against the basis "
      "(classical Gram-Schmidt with DGKS reorthogonalisation) into hessenberg column j, the next column into x; a column the restart kept "
      "(j < cursor) is skipped",
      step_ports(), iram_params({"k", "subspace", "step"}), step_cpu, step_check, step_cost);
  kutil::add_component(
      reg, "eigen.iram_end",
      "a tiled IRAM cycle's end: the k wanted Ritz pairs of the complete factorisation and their largest relative "
      "residual (as eigen.iram_cycle writes them; verify checks a converged set against the whole operator of "
      "ports a), then, unless converged, the implicit restart (exact shifts, k' columns kept) and column k' into x",
      end_ports(), iram_params({"k", "subspace", "which", "seed", "tol", "verify", "format"}), end_cpu, end_check, end_cost);
}

}  // namespace ymlopt
