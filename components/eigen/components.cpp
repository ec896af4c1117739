// The eigen.* components (see eigen.hpp): ports, checks, costs and CPU kernels
// on top of the solver API. f32 inputs are copied to double, solved, and the
// results rounded to f32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eigen/component_util.hpp"
#include "eigen/eigen.hpp"
#include "eigen/meram.hpp"
#include "eigen/operator_ports.hpp"
#include "eigen/tiled_components.hpp"
#include "eigen/workflow_components.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt {
namespace {

using kutil::dims;
using std::int64_t;
using std::to_string;

using kutil::kFloat;

using kutil::first_error;
using eigen_util::auto_subspace;
using eigen_util::DoubleMatrix;
using eigen_util::expect_shape;
using eigen_util::int_at_least;
using eigen_util::k_and_subspace;

/// "" when the bound port i is a vector of n elements (1 x n).
std::string expect_vector(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t n,
                          const std::string& why) {
  if (!p[i].bound()) return "";
  if (p[i].rows == 1 && p[i].cols == n) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but expected [" + to_string(n) + "] (" + why + ")";
}

/// "" when every bound port in [from, to) has the dtype of port 0.
std::string outputs_dtype(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t from,
                          std::size_t to) {
  for (std::size_t i = from; i < to; ++i)
    if (p[i].bound())
      if (auto m = kutil::same_dtype(s, p, i, 0); !m.empty()) return m;
  return "";
}

std::string positive_float(const Args& a, const char* name) {
  const double v = a.get_float(name);
  if (v > 0 && std::isfinite(v)) return "";
  return "param '" + std::string(name) + "' is " + std::to_string(v) + ": must be > 0";
}

/// out[0, j] = v[j] in the port's dtype.
void write_vector(const TensorView& out, const std::vector<double>& v) {
  kutil::dispatch_float(out.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    T* p = static_cast<T*>(out.data);
    for (std::size_t j = 0; j < v.size(); ++j) p[j] = static_cast<T>(v[j]);
  });
}

/// out[i, j] = vecs[j*n + i] (vectors stored one after the other) in the port's dtype.
void write_columns(const TensorView& out, const std::vector<double>& vecs, int64_t n, int64_t k) {
  kutil::dispatch_float(out.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t i = 0; i < n; ++i) {
      T* row = static_cast<T*>(out.data) + i * out.ld;
      for (int64_t j = 0; j < k; ++j) row[j] = static_cast<T>(vecs[static_cast<std::size_t>(j * n + i)]);
    }
  });
}

void report_result(KernelContext& ctx, const eigen::EigenResult& r) {
  ctx.report("matvecs", static_cast<double>(r.matvecs));
  ctx.report("check_matvecs", static_cast<double>(r.check_matvecs));
  ctx.report("restarts", static_cast<double>(r.restarts));
  ctx.report("residual", r.max_residual());
}

[[noreturn]] void not_converged(const char* what, const eigen::EigenResult& r, double tol, int64_t budget,
                                const char* budget_name) {
  throw KernelError(std::string(what) + " did not converge within " + budget_name + " = " + to_string(budget) +
                    ": largest residual " + std::to_string(r.max_residual()) + " (tol " + std::to_string(tol) +
                    ", " + to_string(r.matvecs) + " matvecs)");
}

// ============================================================ eigen.lanczos

enum LanczosPort : std::size_t { kLa, kLvalues, kLvectors, kLindex, kLptr };

const std::vector<PortSpec>& lanczos_ports() {
  static const std::vector<PortSpec> p = eigen_util::with_csr_ports({
      {"a", Access::read, kFloat, false, 2,
       "symmetric A [n,n] (operator=matrix; format=csr: its values), or X [m,n] (operator=gram: the operator is "
       "H = XᵀX [n,n])"},
      {"values", Access::write, kFloat, false, 1, "the k wanted eigenvalues [k], in wanted order"},
      {"vectors", Access::write, kFloat, true, 2, "their unit eigenvectors as columns [n,k] (optional)"},
  });
  return p;
}

/// Arg operator (matrix: A dense or CSR from port 0 and the index ports at
/// `index`, index + 1; gram: X [m,n] dense, H = XᵀX): "" and the dimension *n.
std::string matrix_or_gram(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a,
                           std::size_t index, int64_t* n) {
  if (auto m = kutil::one_of(a, "operator", {"matrix", "gram"}); !m.empty()) return m;
  if (a.get_string("operator") == "matrix") return eigen_util::check_operator(s, p, a, 0, index, index + 1, n);
  if (eigen_util::format_of(a) == eigen_util::OperatorFormat::csr)
    return "format=csr needs operator=matrix (operator=gram takes a dense X [m,n])";
  for (std::size_t i : {index, index + 1})
    if (p[i].bound()) return "port '" + s[i].name + "' is only read with format=csr and operator=matrix";
  *n = p[0].cols;
  if (*n < 1) return "port 'a' is " + dims(p[0]) + ": the operator is empty";
  return "";
}

/// The operator of a task with arg operator: a PortOperator, or XᵀX of a dense X.
class TaskOperator {
 public:
  TaskOperator(KernelContext& ctx, std::size_t index) {
    if (ctx.arg_string("operator") == "gram") {
      const TensorView& x = ctx.port(0);
      gram_.emplace(x);
      op_ = eigen::gram_operator(gram_->data, x.rows, x.cols, gram_->ld);
    } else {
      matrix_ = std::make_unique<eigen_util::PortOperator>(ctx.port(0), ctx.port(index), ctx.port(index + 1),
                                                           eigen_util::format_of(ctx.args()));
      op_ = matrix_->op();
    }
  }
  const eigen::LinearOperator& op() const { return op_; }
  /// Null for operator=gram.
  const eigen_util::PortOperator* matrix() const { return matrix_.get(); }

 private:
  std::optional<DoubleMatrix> gram_;
  std::unique_ptr<eigen_util::PortOperator> matrix_;
  eigen::LinearOperator op_;
};

/// Multiply-adds of one operator application (gram: two products with X).
double op_flops(std::span<const TensorView> p, const Args& a) {
  if (a.get_string("operator") == "gram") return 4.0 * double(p[0].rows) * double(p[0].cols);
  return eigen_util::matvec_flops(p, a, 0);
}

std::string lanczos_check(const TaskShape& t) {
  const auto& s = lanczos_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), outputs_dtype(s, p, 1, kLindex),
                            kutil::one_of(a, "which", {"largest", "magnitude"}),
                            kutil::one_of(a, "reorth", {"full", "none"}), positive_float(a, "tol"),
                            int_at_least(a, "max_restarts", 0)});
      !m.empty())
    return m;
  int64_t n = 0;
  if (auto m = matrix_or_gram(s, p, a, kLindex, &n); !m.empty()) return m;
  const int64_t k = a.get_int("k");
  return first_error({k_and_subspace(a, n), expect_vector(s, p, 1, k, "k eigenvalues"),
                      expect_shape(s, p, 2, n, k, "n x k eigenvectors")});
}

Cost lanczos_cost(const TaskShape& t) {
  if (t.ports.size() != lanczos_ports().size() || lanczos_check(t) != "") return {};
  int64_t n = 0;
  matrix_or_gram(lanczos_ports(), t.ports, t.args, kLindex, &n);
  const int64_t m = auto_subspace(t.args, n);
  // A guess: three subspace fills; full reorthogonalisation 4 n m per matvec.
  const double matvecs = 3.0 * double(m);
  Cost c = kutil::io_cost(lanczos_ports(), t, matvecs * (op_flops(t.ports, t.args) + 4.0 * double(n) * double(m)));
  c.extra_bytes = 8.0 * double(n) * double(m + 1) + 16.0 * double(m) * double(m);
  return c;
}

void lanczos_cpu(KernelContext& ctx) {
  kutil::validate(ctx, lanczos_ports(), lanczos_check);
  const TensorView &values = ctx.port(kLvalues), &vectors = ctx.port(kLvectors);
  const TaskOperator a(ctx, kLindex);
  if (a.matrix()) a.matrix()->require_symmetric("use operator=gram for XᵀX, or eigen.arnoldi for a non-symmetric matrix");
  const eigen::LinearOperator& op = a.op();
  const int64_t n = op.n;
  eigen::LanczosOptions o;
  o.k = ctx.arg_int("k");
  o.subspace = ctx.arg_int("subspace");
  o.tol = ctx.arg_float("tol");
  o.max_restarts = ctx.arg_int("max_restarts");
  o.which = ctx.arg_string("which") == "magnitude" ? eigen::Which::largest_magnitude : eigen::Which::largest_algebraic;
  o.full_reorth = ctx.arg_string("reorth") == "full";
  o.seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
  const eigen::EigenResult r = eigen::lanczos(op, o);
  report_result(ctx, r);
  if (!r.converged) not_converged("eigen.lanczos", r, o.tol, o.max_restarts, "max_restarts");
  write_vector(values, r.values_re);
  if (vectors.bound()) write_columns(vectors, r.vectors_re, n, o.k);
}

// ============================================================ eigen.arnoldi

enum ArnoldiPort : std::size_t { kAa, kAvaluesRe, kAvaluesIm, kAvectorsRe, kAvectorsIm, kAindex, kAptr };

const std::vector<PortSpec>& arnoldi_ports() {
  static const std::vector<PortSpec> p = eigen_util::with_csr_ports({
      {"a", Access::read, kFloat, false, 2, "A [n,n] (need not be symmetric); format=csr: its values"},
      {"values_re", Access::write, kFloat, false, 1, "real parts of the k wanted eigenvalues [k]"},
      {"values_im", Access::write, kFloat, false, 1, "imaginary parts [k]; a conjugate pair is listed +im first"},
      {"vectors_re", Access::write, kFloat, true, 2,
       "real parts of the unit eigenvectors, as columns [n,k] (optional)"},
      {"vectors_im", Access::write, kFloat, true, 2, "imaginary parts of the eigenvectors [n,k] (optional)"},
  });
  return p;
}

/// "" unless restart=implicit and a subspace size m < n leaves fewer than 2 shifts (k >= m - 1).
std::string implicit_sizes(const Args& a, int64_t n, const std::vector<int64_t>& sizes, const char* param) {
  if (a.get_string("restart") != "implicit") return "";
  const int64_t k = a.get_int("k");
  for (int64_t m : sizes)
    if (std::min(m, n) < n && k >= std::min(m, n) - 1)
      return std::string("param '") + param + "' has " + to_string(m) +
             ": restart=implicit needs every subspace > k + 1 = " + to_string(k + 1) + " (at least 2 shifts)";
  return "";
}

std::string arnoldi_check(const TaskShape& t) {
  const auto& s = arnoldi_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), outputs_dtype(s, p, 1, kAindex),
                            kutil::one_of(a, "which", {"magnitude", "real"}),
                            kutil::one_of(a, "restart", {"explicit", "implicit"}), positive_float(a, "tol"),
                            int_at_least(a, "max_restarts", 0)});
      !m.empty())
    return m;
  int64_t n = 0;
  if (auto m = eigen_util::check_operator(s, p, a, kAa, kAindex, kAptr, &n); !m.empty()) return m;
  const int64_t k = a.get_int("k");
  const int64_t sub = a.get_int("subspace");
  const int64_t m_eff = sub == 0 ? std::max<int64_t>(2 * k + 1, k + 20) : sub;
  return first_error({k_and_subspace(a, n), implicit_sizes(a, n, {m_eff}, "subspace"),
                      expect_vector(s, p, 1, k, "k eigenvalues"),
                      expect_vector(s, p, 2, k, "k eigenvalues"), expect_shape(s, p, 3, n, k, "n x k eigenvectors"),
                      expect_shape(s, p, 4, n, k, "n x k eigenvectors")});
}

/// The operator's dimension of a checked eram/meram task.
int64_t arnoldi_dim(const TaskShape& t) {
  int64_t n = 0;
  eigen_util::check_operator(arnoldi_ports(), t.ports, t.args, kAa, kAindex, kAptr, &n);
  return n;
}

Cost arnoldi_cost(const TaskShape& t) {
  if (t.ports.size() != arnoldi_ports().size() || arnoldi_check(t) != "") return {};
  const int64_t n = arnoldi_dim(t), m = auto_subspace(t.args, n);
  const double matvecs = 10.0 * double(m);  // a guess: ten cycles
  Cost c = kutil::io_cost(arnoldi_ports(), t,
                          matvecs * (eigen_util::matvec_flops(t.ports, t.args, kAa) + 4.0 * double(n) * double(m)));
  c.extra_bytes = 8.0 * double(n) * double(m + 1) + 32.0 * double(m) * double(m);
  return c;
}

void arnoldi_cpu(KernelContext& ctx) {
  kutil::validate(ctx, arnoldi_ports(), arnoldi_check);
  const eigen_util::PortOperator a(ctx.port(kAa), ctx.port(kAindex), ctx.port(kAptr), eigen_util::format_of(ctx.args()));
  const int64_t n = a.n();
  eigen::ArnoldiOptions o;
  o.k = ctx.arg_int("k");
  o.subspace = ctx.arg_int("subspace");
  o.tol = ctx.arg_float("tol");
  o.max_restarts = ctx.arg_int("max_restarts");
  o.which = ctx.arg_string("which") == "real" ? eigen::Which::largest_real : eigen::Which::largest_magnitude;
  o.seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
  o.restart = eigen::parse_restart(ctx.arg_string("restart"));
  const eigen::EigenResult r = eigen::arnoldi(a.op(), o);
  report_result(ctx, r);
  if (!r.converged) not_converged("eigen.arnoldi", r, o.tol, o.max_restarts, "max_restarts");
  write_vector(ctx.port(1), r.values_re);
  write_vector(ctx.port(2), r.values_im);
  if (ctx.port(3).bound()) write_columns(ctx.port(3), r.vectors_re, n, o.k);
  if (ctx.port(4).bound()) write_columns(ctx.port(4), r.vectors_im, n, o.k);
}

// ============================================================ eigen.meram

/// "" when param 'subspaces' parses and every size exceeds k (or reaches n).
std::string subspaces_check(const Args& a, int64_t n) {
  std::vector<int64_t> ms;
  try {
    ms = eigen::parse_subspaces(a.get_string("subspaces"));
  } catch (const KernelError& e) {
    return "param " + std::string(e.what());
  }
  const int64_t k = a.get_int("k");
  for (int64_t m : ms)
    if (std::min(m, n) <= k && m < n)
      return "param 'subspaces' has " + to_string(m) + ": every size must exceed k = " + to_string(k) +
             " (or be >= n = " + to_string(n) + ")";
  return "";
}

std::string meram_check(const TaskShape& t) {
  const auto& s = arnoldi_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), outputs_dtype(s, p, 1, kAindex),
                            kutil::one_of(a, "which", {"magnitude", "real"}),
                            kutil::one_of(a, "policy", {"best_set", "per_eigenvalue"}),
                            kutil::one_of(a, "restart", {"explicit", "implicit"}), positive_float(a, "tol"),
                            int_at_least(a, "max_restarts", 0), int_at_least(a, "stall_window", 0)});
      !m.empty())
    return m;
  int64_t n = 0;
  if (auto m = eigen_util::check_operator(s, p, a, kAa, kAindex, kAptr, &n); !m.empty()) return m;
  const int64_t k = a.get_int("k");
  if (k < 1 || k > n) return "param 'k' is " + to_string(k) + ": must be in [1, n = " + to_string(n) + "]";
  std::string sizes_error = subspaces_check(a, n);
  if (sizes_error.empty()) sizes_error = implicit_sizes(a, n, eigen::parse_subspaces(a.get_string("subspaces")), "subspaces");
  return first_error({sizes_error, expect_vector(s, p, 1, k, "k eigenvalues"),
                      expect_vector(s, p, 2, k, "k eigenvalues"), expect_shape(s, p, 3, n, k, "n x k eigenvectors"),
                      expect_shape(s, p, 4, n, k, "n x k eigenvectors")});
}

Cost meram_cost(const TaskShape& t) {
  if (t.ports.size() != arnoldi_ports().size() || meram_check(t) != "") return {};
  const int64_t n = arnoldi_dim(t);
  double msum = 0, mmax = 0;
  for (int64_t m : eigen::parse_subspaces(t.args.get_string("subspaces"))) {
    msum += double(std::min(m, n));
    mmax = std::max(mmax, double(std::min(m, n)));
  }
  const double matvecs = 10.0 * msum;  // a guess: ten cycles of every co-method
  Cost c = kutil::io_cost(arnoldi_ports(), t,
                          matvecs * (eigen_util::matvec_flops(t.ports, t.args, kAa) + 4.0 * double(n) * mmax));
  c.extra_bytes = 8.0 * double(n) * (msum + 1) + 32.0 * mmax * mmax;
  return c;
}

void meram_cpu(KernelContext& ctx) {
  kutil::validate(ctx, arnoldi_ports(), meram_check);
  const eigen_util::PortOperator a(ctx.port(kAa), ctx.port(kAindex), ctx.port(kAptr), eigen_util::format_of(ctx.args()));
  const int64_t n = a.n();
  eigen::MeramOptions o;
  o.k = ctx.arg_int("k");
  o.subspaces = eigen::parse_subspaces(ctx.arg_string("subspaces"));
  o.tol = ctx.arg_float("tol");
  o.max_restarts = ctx.arg_int("max_restarts");
  o.which = ctx.arg_string("which") == "real" ? eigen::Which::largest_real : eigen::Which::largest_magnitude;
  o.seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
  o.policy = ctx.arg_string("policy") == "per_eigenvalue" ? eigen::MeramPolicy::per_eigenvalue
                                                          : eigen::MeramPolicy::best_set;
  o.stall_window = ctx.arg_int("stall_window");
  o.deterministic = ctx.arg_bool("deterministic");
  o.restart = eigen::parse_restart(ctx.arg_string("restart"));
  const eigen::MeramResult m = eigen::meram(a.op(), o);
  const eigen::EigenResult& r = m.result;
  report_result(ctx, r);
  ctx.report("critical_matvecs", static_cast<double>(m.critical_matvecs));
  ctx.report("comethods_failed",
             static_cast<double>(std::count_if(m.comethods.begin(), m.comethods.end(), [](const auto& c) { return c.failed; })));
  for (const auto& c : m.comethods) {
    ctx.report(c.name + ".matvecs", static_cast<double>(c.matvecs));
    ctx.report(c.name + ".restarts", static_cast<double>(c.restarts));
    ctx.report(c.name + ".adopted", static_cast<double>(c.adopted));
    ctx.report(c.name + ".missed", static_cast<double>(c.missed));        // converged sets its check rejected
    ctx.report(c.name + ".unverified", static_cast<double>(c.unverified));  // taken with an inconclusive check
  }
  if (!r.converged) not_converged("eigen.meram", r, o.tol, o.max_restarts, "max_restarts (per co-method)");
  write_vector(ctx.port(1), r.values_re);
  write_vector(ctx.port(2), r.values_im);
  if (ctx.port(3).bound()) write_columns(ctx.port(3), r.vectors_re, n, o.k);
  if (ctx.port(4).bound()) write_columns(ctx.port(4), r.vectors_im, n, o.k);
}

// ============================================================ eigen.svd_topk

enum SvdPort : std::size_t { kSa, kSs, kSu, kSvt, kSindex, kSptr };

const std::vector<PortSpec>& svd_ports() {
  static const std::vector<PortSpec> p = eigen_util::with_csr_ports({
      {"a", Access::read, kFloat, false, 2, "A [m,n]; format=csr: its values"},
      {"s", Access::write, kFloat, false, 1, "the k largest singular values [k], descending"},
      {"u", Access::write, kFloat, true, 2, "left singular vectors [m,k] (optional)"},
      {"vt", Access::write, kFloat, true, 2, "right singular vectors as rows [k,n] (optional)"},
  });
  return p;
}

std::string svd_check(const TaskShape& t) {
  const auto& s = svd_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), outputs_dtype(s, p, 1, kSindex), int_at_least(a, "oversample", 0),
                            int_at_least(a, "power_iters", 0)});
      !m.empty())
    return m;
  int64_t rows = 0, cols = 0;
  if (auto m = eigen_util::check_matrix(s, p, a, kSa, kSindex, kSptr, &rows, &cols); !m.empty()) return m;
  const int64_t k = a.get_int("k"), mn = std::min(rows, cols);
  if (k < 1 || k > mn)
    return "param 'k' is " + to_string(k) + ": must be in [1, min(m, n) = " + to_string(mn) + "] for a " +
           to_string(rows) + "x" + to_string(cols) + " matrix";
  return first_error({expect_vector(s, p, 1, k, "k singular values"), expect_shape(s, p, 2, rows, k, "m x k"),
                      expect_shape(s, p, 3, k, cols, "k x n")});
}

Cost svd_cost(const TaskShape& t) {
  if (t.ports.size() != svd_ports().size() || svd_check(t) != "") return {};
  int64_t rows = 0, cols = 0;
  eigen_util::check_matrix(svd_ports(), t.ports, t.args, kSa, kSindex, kSptr, &rows, &cols);
  const double m = double(rows), n = double(cols);
  const double l = std::min(double(t.args.get_int("k") + t.args.get_int("oversample")), std::min(m, n));
  const double q = double(t.args.get_int("power_iters"));
  // a product with a block of l vectors: 2 m n l dense, 2 nnz l sparse
  const double product = eigen_util::format_of(t.args) == eigen_util::OperatorFormat::csr
                             ? 2.0 * double(t.ports[kSa].cols) * l
                             : 2.0 * m * n * l;
  Cost c = kutil::io_cost(svd_ports(), t, (2 * q + 2) * product + 8 * (m + n) * l * l + 4 * n * l * l);
  c.extra_bytes = 8.0 * (2 * m * l + 3 * n * l + l * l);
  return c;
}

void svd_cpu(KernelContext& ctx) {
  kutil::validate(ctx, svd_ports(), svd_check);
  const eigen_util::OperatorFormat f = eigen_util::format_of(ctx.args());
  const eigen_util::PortOperator a(ctx.port(kSa), ctx.port(kSindex), ctx.port(kSptr), f,
                                   f == eigen_util::OperatorFormat::csr ? ctx.arg_int("cols") : 0);
  const eigen::BlockOperator op = a.block();
  const int64_t rows = op.rows, cols = op.cols;
  eigen::SvdOptions o;
  o.k = ctx.arg_int("k");
  o.oversample = ctx.arg_int("oversample");
  o.power_iters = ctx.arg_int("power_iters");
  o.seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
  const eigen::SvdResult r = eigen::svd_topk(op, o);
  // Residual: max_j ||A v_j - s_j u_j|| (one product with the k vectors).
  std::vector<double> v(static_cast<std::size_t>(cols * o.k)), av(static_cast<std::size_t>(rows * o.k));
  for (int64_t j = 0; j < o.k; ++j)
    for (int64_t c = 0; c < cols; ++c) v[static_cast<std::size_t>(c * o.k + j)] = r.vt[static_cast<std::size_t>(j * cols + c)];
  op.times(v.data(), o.k, av.data());
  double resid = 0;
  for (int64_t j = 0; j < o.k; ++j) {
    double sq = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const std::size_t at = static_cast<std::size_t>(i * o.k + j);
      const double e = av[at] - r.s[static_cast<std::size_t>(j)] * r.u[at];
      sq += e * e;
    }
    resid = std::max(resid, std::sqrt(sq));
  }
  ctx.report("matvecs", static_cast<double>(r.matvecs + o.k));
  ctx.report("restarts", static_cast<double>(o.power_iters));
  ctx.report("residual", resid);
  write_vector(ctx.port(kSs), r.s);
  kutil::dispatch_float(ctx.port(kSs).dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if (const TensorView& u = ctx.port(kSu); u.bound())
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < o.k; ++j) u.at<T>(i, j) = static_cast<T>(r.u[static_cast<std::size_t>(i * o.k + j)]);
    if (const TensorView& vt = ctx.port(kSvt); vt.bound())
      for (int64_t j = 0; j < o.k; ++j)
        for (int64_t c = 0; c < cols; ++c) vt.at<T>(j, c) = static_cast<T>(r.vt[static_cast<std::size_t>(j * cols + c)]);
  });
}

// ============================================================ eigen.power

enum PowerPort : std::size_t { kPa, kPvalue, kPvector, kPindex, kPptr };

const std::vector<PortSpec>& power_ports() {
  static const std::vector<PortSpec> p = eigen_util::with_csr_ports({
      {"a", Access::read, kFloat, false, 2,
       "A [n,n] (operator=matrix; format=csr: its values), or X [m,n] (operator=gram: H = XᵀX)"},
      {"value", Access::write, kFloat, false, 1, "the eigenvalue of largest modulus [1] (Rayleigh quotient)"},
      {"vector", Access::write, kFloat, true, 1, "its unit eigenvector [n] (optional)"},
  });
  return p;
}

std::string power_check(const TaskShape& t) {
  const auto& s = power_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), outputs_dtype(s, p, 1, kPindex), positive_float(a, "tol"),
                            int_at_least(a, "max_iter", 1)});
      !m.empty())
    return m;
  int64_t n = 0;
  if (auto m = matrix_or_gram(s, p, a, kPindex, &n); !m.empty()) return m;
  return first_error({expect_vector(s, p, 1, 1, "one eigenvalue"), expect_vector(s, p, 2, n, "n")});
}

Cost power_cost(const TaskShape& t) {
  if (t.ports.size() != power_ports().size() || power_check(t) != "") return {};
  int64_t n = 0;
  matrix_or_gram(power_ports(), t.ports, t.args, kPindex, &n);
  Cost c = kutil::io_cost(power_ports(), t,
                          op_flops(t.ports, t.args) * std::min<double>(100.0, double(t.args.get_int("max_iter"))));
  c.extra_bytes = 16.0 * double(n) + 8.0 * double(t.ports[0].rows);
  return c;
}

void power_cpu(KernelContext& ctx) {
  kutil::validate(ctx, power_ports(), power_check);
  const TaskOperator a(ctx, kPindex);
  const eigen::LinearOperator& op = a.op();
  eigen::PowerOptions o;
  o.tol = ctx.arg_float("tol");
  o.max_iter = ctx.arg_int("max_iter");
  o.seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
  const eigen::EigenResult r = eigen::power_iteration(op, o);
  report_result(ctx, r);
  if (!r.converged) not_converged("eigen.power", r, o.tol, o.max_iter, "max_iter");
  write_vector(ctx.port(1), r.values_re);
  if (ctx.port(2).bound()) write_vector(ctx.port(2), r.vectors_re);
}

}  // namespace

void register_eigen(Registry& reg) {
  const ParamSpec k = {"k", ParamType::int_, "6", false, "number of eigenpairs wanted"};
  const ParamSpec subspace = {"subspace", ParamType::int_, "0", false,
                              "largest Krylov basis (restart size); 0: min(n, max(2k+1, k+20))"};
  const ParamSpec tol = {"tol", ParamType::float_, "1e-10", false,
                         "converged when ||A x - λ x|| <= tol * |λ| for every wanted pair"};
  const ParamSpec seed = {"seed", ParamType::int_, "1", false, "seed of the random start vector"};
  const ParamSpec op = {"operator", ParamType::string_, "matrix", false,
                        "matrix: port a is A; gram: port a is X and the operator is XᵀX (never formed)"};
  const ParamSpec format = eigen_util::format_param();

  kutil::add_component(
      reg, "eigen.lanczos",
      "top-k eigenpairs of a symmetric operator by thick-restarted Lanczos (full reorthogonalisation by default); "
      "reports matvecs, restarts, residual; not converging within max_restarts is an error naming the residual",
      lanczos_ports(),
      {k, subspace, tol, {"max_restarts", ParamType::int_, "300", false, "restart budget"},
       {"which", ParamType::string_, "largest", false, "largest (algebraic) or magnitude"},
       {"reorth", ParamType::string_, "full", false, "full or none (three-term recurrence only)"}, op, format, seed},
      lanczos_cpu, lanczos_check, lanczos_cost);
  kutil::add_component(
      reg, "eigen.arnoldi",
      "top-k eigenpairs of a non-symmetric matrix by explicitly restarted Arnoldi (ERAM): MGS with one "
      "reorthogonalisation pass, Ritz pairs by dgeev, restart from the sum of the wanted Ritz vectors; "
      "restart=implicit: IRAM (Sorensen), the unwanted Ritz values as exact shifts",
      arnoldi_ports(),
      {{"k", ParamType::int_, "4", false, "number of eigenpairs wanted"}, subspace, tol,
       {"max_restarts", ParamType::int_, "1000", false, "restart budget"},
       {"which", ParamType::string_, "magnitude", false, "magnitude (largest |λ|) or real (largest Re λ)"},
       {"restart", ParamType::string_, "explicit", false,
        "explicit (ERAM) or implicit (IRAM: exact shifts by implicit QR, subspace > k + 1)"},
       format, seed},
      arnoldi_cpu, arnoldi_check, arnoldi_cost);
  kutil::add_component(
      reg, "eigen.meram",
      "top-k eigenpairs of a non-symmetric matrix by MERAM (Emad-Petiton): one ERAM co-method per subspace size, "
      "run concurrently (one thread each); at each restart a co-method publishes its Ritz pairs and restarts from "
      "the lowest-residual pair of every wanted eigenvalue over all co-methods; the first to converge stops all",
      arnoldi_ports(),
      {{"k", ParamType::int_, "4", false, "number of eigenpairs wanted"},
       {"subspaces", ParamType::string_, "5,7,10", false, "co-method subspace sizes, comma-separated (each > k)"},
       {"tol", ParamType::float_, "1e-8", false, "converged when every residual <= tol * |λ|"},
       {"max_restarts", ParamType::int_, "1000", false, "restart budget of each co-method"},
       {"which", ParamType::string_, "magnitude", false, "magnitude (largest |λ|) or real (largest Re λ)"},
       {"policy", ParamType::string_, "best_set", false,
        "best_set (restart from the lowest-residual set of any co-method) or per_eigenvalue (pair by pair)"},
       {"stall_window", ParamType::int_, "0", false,
        "> 0: adopt gathered pairs only while stalled over that many restarts (advised for per_eigenvalue)"},
       {"deterministic", ParamType::bool_, "false", false,
        "exchanges in matvec-time order (reproducible counts) instead of fully asynchronous"},
       {"restart", ParamType::string_, "explicit", false,
        "explicit (ERAM co-methods: MERAM) or implicit (IRAM co-methods: MIRAM; every subspace > k + 1)"},
       format, seed},
      meram_cpu, meram_check, meram_cost);
  kutil::add_component(
      reg, "eigen.svd_topk",
      "top-k singular triplets by randomized subspace iteration (Gaussian start, power_iters rounds, QR by "
      "dgeqrf/dorgqr, dgesdd of the projected matrix); reports residual max ||A v - s u||",
      svd_ports(),
      {k, {"oversample", ParamType::int_, "10", false, "extra columns of the random subspace"},
       {"power_iters", ParamType::int_, "2", false, "rounds of A Aᵀ applied to the subspace"}, format,
       {"cols", ParamType::int_, "0", false, "format=csr: the matrix's columns (0: as many as rows)"}, seed},
      svd_cpu, svd_check, svd_cost);
  kutil::add_component(
      reg, "eigen.power", "the eigenvalue of largest modulus by power iteration (Rayleigh quotient)", power_ports(),
      {{"tol", ParamType::float_, "1e-8", false, "converged when ||A v - λ v|| <= tol * |λ|"},
       {"max_iter", ParamType::int_, "1000", false, "iteration budget"}, op, format, seed},
      power_cpu, power_check, power_cost);
  register_eigen_workflow(reg);
  register_eigen_tiled(reg);
}

}  // namespace ymlopt
