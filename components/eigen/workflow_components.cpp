// eigen.eram_cycle, eigen.iram_cycle, eigen.generate and eigen.matrix_market (see
// workflow_components.hpp): ports, checks, costs and CPU kernels.
#include "eigen/workflow_components.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "eigen/component_util.hpp"
#include "eigen/cycle_util.hpp"
#include "eigen/generators.hpp"
#include "eigen/matrix_market.hpp"
#include "eigen/operator_ports.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt::eigen {

std::vector<std::complex<double>> parse_spectrum(const std::string& text) {
  std::vector<std::complex<double>> out;
  auto fail = [&](const std::string& item, const std::string& why) -> KernelError {
    return KernelError("'top' item '" + item + "' in '" + text + "': " + why);
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    pos = comma + 1;
    if (item.empty()) {
      if (text.find_first_not_of(" \t") == std::string::npos) break;  // "" or blanks: no values
      throw fail(item, "empty item (expected e.g. \"3, 2.6+0.5i, 2.2\")");
    }
    const char* s = item.c_str();
    char* end = nullptr;
    const double re = std::strtod(s, &end);
    if (end == s) throw fail(item, "not a number (expected \"a\" or \"a+bi\")");
    double im = 0;
    if (*end != '\0') {
      const char* t = end;
      if (*t != '+' && *t != '-') throw fail(item, "not a number (expected \"a\" or \"a+bi\")");
      im = std::strtod(t, &end);
      if (end == t || *end != 'i' || end[1] != '\0') throw fail(item, "not a number (expected \"a\" or \"a+bi\")");
      if (!(im > 0))
        throw fail(item, "give each conjugate pair once, with a positive imaginary part (\"a+bi\", b > 0)");
    }
    if (!std::isfinite(re) || !std::isfinite(im)) throw fail(item, "not finite");
    out.emplace_back(re, im);
  }
  return out;
}

}  // namespace ymlopt::eigen

namespace ymlopt {
namespace {

using eigen_util::cycle_params;
using eigen_util::expect_shape;
using eigen_util::f64_port;
using eigen_util::require_finite;
using eigen_util::unpack_pairs;
using eigen_util::verify_pairs;
using eigen_util::which_of;
using eigen_util::write_pairs;
using kutil::dims;
using kutil::first_error;
using std::int64_t;
using std::size_t;
using std::to_string;

using kutil::kFloat;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

/// Zero-fills the port, then writes the CSR matrix into it (rounded to the port's dtype).
void write_dense(const TensorView& out, const eigen::CsrMatrix& m) {
  kutil::dispatch_float(out.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < out.rows; ++r) std::fill_n(&out.at<T>(r, 0), out.cols, T(0));
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t e = m.row_ptr[sz(r)]; e < m.row_ptr[sz(r + 1)]; ++e)
        out.at<T>(r, m.col[sz(e)]) = static_cast<T>(m.val[sz(e)]);
  });
}

/// The ports of a task that writes a matrix (eigen.generate, eigen.matrix_market):
/// a dense [rows, cols], or with format=csr its values [cap], a_index and a_ptr.
std::vector<PortSpec> matrix_out_ports(const char* dense_doc) {
  return {{"a", Access::write, kFloat, false, 2,
           std::string(dense_doc) + "; format=csr: the values [cap] (cap >= nonzeros, the tail zero)"},
          {"a_index", Access::write, {DType::i32}, true, 1, "format=csr: the column of each value [cap]"},
          {"a_ptr", Access::write, {DType::i32}, true, 1, "format=csr: row pointers [rows+1]"}};
}

/// "" when the ports of matrix_out_ports() suit arg format; *rows is the matrix's rows.
std::string matrix_out_check(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a,
                             int64_t* rows) {
  int64_t cols = 0;
  return first_error(
      {kutil::float_dtype(s, p, 0), eigen_util::check_matrix_ports(s, p, a, 0, 1, 2, true, rows, &cols)});
}

/// Writes m into the ports of matrix_out_ports() (dense: zero-filled, then the
/// entries; csr: the arrays, the unused tail zero). `who` starts each error.
void write_matrix(KernelContext& ctx, const eigen::CsrMatrix& m, const std::string& who) {
  const TensorView &a = ctx.port(0), &index = ctx.port(1), &ptr = ctx.port(2);
  if (eigen_util::format_of(ctx.args()) == eigen_util::OperatorFormat::dense) {
    if (m.rows != a.rows || m.cols != a.cols)
      throw KernelError(who + ": the matrix is " + to_string(m.rows) + "x" + to_string(m.cols) + " but port 'a' is " +
                        dims(a));
    write_dense(a, m);
  } else {
    if (m.rows + 1 != ptr.cols)
      throw KernelError(who + ": the matrix has " + to_string(m.rows) + " rows but port 'a_ptr' is " + dims(ptr) +
                        " (rows + 1 = " + to_string(m.rows + 1) + " pointers)");
    if (m.nnz() > a.cols)
      throw KernelError(who + ": the matrix has " + to_string(m.nnz()) + " nonzeros but ports 'a' and 'a_index' hold " +
                        to_string(a.cols) + ": size them [" + to_string(m.nnz()) + "] or more");
    if (m.cols > INT32_MAX || m.nnz() > INT32_MAX)
      throw KernelError(who + ": " + to_string(m.cols) + " columns and " + to_string(m.nnz()) +
                        " nonzeros do not fit format=csr's i32 indices");
    auto* rp = static_cast<std::int32_t*>(ptr.data);
    auto* ci = static_cast<std::int32_t*>(index.data);
    for (int64_t i = 0; i <= m.rows; ++i) rp[i] = static_cast<std::int32_t>(m.row_ptr[sz(i)]);
    for (int64_t e = 0; e < a.cols; ++e) ci[e] = e < m.nnz() ? static_cast<std::int32_t>(m.col[sz(e)]) : 0;
    kutil::dispatch_float(a.dtype, [&](auto tg) {
      using T = typename decltype(tg)::type;
      T* v = static_cast<T*>(a.data);
      for (int64_t e = 0; e < a.cols; ++e) v[e] = e < m.nnz() ? static_cast<T>(m.val[sz(e)]) : T(0);
    });
  }
  ctx.report("nnz", static_cast<double>(m.nnz()));
}

// ============================================================ eigen.eram_cycle

enum CyclePort : std::size_t { kCa, kCvectors, kCvalues, kCresidual, kCindex, kCptr };

/// eigen.eram_cycle's ports; eigen.iram_cycle's start with the first four.
const std::vector<PortSpec>& cycle_ports() {
  static const std::vector<PortSpec> p = eigen_util::with_csr_ports({
      {"a", Access::read, kFloat, false, 2, "A [n,n] (need not be symmetric); format=csr: its values"},
      {"vectors", Access::read_write, {DType::f64}, false, 2,
       "Ritz vectors [n,k], dgeev style (a conjugate pair: re and im in two columns); all zero: fresh start"},
      {"values", Access::read_write, {DType::f64}, false, 2,
       "Ritz values [k,3]: re, im, residual estimate ||A x - θ x||, in wanted order"},
      {"residual", Access::write, {DType::f64}, false, 2,
       "[1]: largest relative residual of the k pairs (ARPACK floor): <= tol means eigen.arnoldi converged"},
  });
  return p;
}

/// The checks eigen.eram_cycle and eigen.iram_cycle share: their first four
/// ports (a, vectors, values, residual), the CSR ports from `index` on, and
/// args k, subspace, which, seed and format.
std::string pairs_check(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a,
                        std::size_t index) {
  if (auto m = first_error({kutil::float_dtype(s, p, 0), f64_port(s, p, 1, "the Ritz vectors are kept in double"),
                            f64_port(s, p, 2, "the Ritz values are kept in double"),
                            f64_port(s, p, 3, "a double residual"), kutil::one_of(a, "which", {"magnitude", "real"}),
                            eigen_util::int_at_least(a, "seed", 0)});
      !m.empty())
    return m;
  if (!(a.get_float("tol") > 0)) return "param 'tol' must be > 0";
  int64_t n = 0;
  if (auto m = eigen_util::check_operator(s, p, a, 0, index, index + 1, &n); !m.empty()) return m;
  const int64_t k = a.get_int("k");
  return first_error({eigen_util::k_and_subspace(a, n), expect_shape(s, p, 1, n, k, "n x k Ritz vectors"),
                      expect_shape(s, p, 2, k, 3, "k rows of re, im, residual"),
                      expect_shape(s, p, 3, 1, 1, "one residual")});
}

std::string cycle_check(const TaskShape& t) {
  if (auto m = kutil::ports_present(cycle_ports(), t.ports); !m.empty()) return m;
  return pairs_check(cycle_ports(), t.ports, t.args, kCindex);
}

Cost cycle_cost(const TaskShape& t) {
  if (t.ports.size() != cycle_ports().size() || cycle_check(t) != "") return {};
  const int64_t n = t.ports[kCvectors].rows, m = eigen_util::auto_subspace(t.args, n), k = t.args.get_int("k");
  const double dn = double(n), dm = double(m);
  // m matvecs, MGS with one reorthogonalisation (4 n j per step), dgeev (~10 m³), Ritz vectors (4 n m k).
  Cost c = kutil::io_cost(cycle_ports(), t,
                          dm * eigen_util::matvec_flops(t.ports, t.args, kCa) + 4 * dn * dm * dm + 10 * dm * dm * dm +
                              4 * dn * dm * double(k));
  c.extra_bytes = 8.0 * dn * double(m + 1) + 32.0 * dm * dm;
  return c;
}

void cycle_cpu(KernelContext& ctx) {
  kutil::validate(ctx, cycle_ports(), cycle_check);
  const TensorView &vectors = ctx.port(kCvectors), &values = ctx.port(kCvalues), &residual = ctx.port(kCresidual);
  const eigen_util::PortOperator a(ctx.port(kCa), ctx.port(kCindex), ctx.port(kCptr), eigen_util::format_of(ctx.args()));
  const int64_t n = a.n(), k = ctx.arg_int("k");
  const auto seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
  const eigen::Which which = which_of(ctx);
  bool fresh = true;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const double x = vectors.at<double>(i, j);
      if (!std::isfinite(x))
        throw KernelError("port 'vectors' holds a non-finite value at (" + to_string(i) + ", " + to_string(j) + ")");
      fresh = fresh && x == 0;
    }
  for (int64_t j = 0; j < k; ++j)
    for (int64_t c = 0; c < 3; ++c) {
      const double x = values.at<double>(j, c);
      if (!std::isfinite(x) || (c == 2 && x < 0))
        throw KernelError("port 'values' row " + to_string(j) + " column " + to_string(c) + " is " +
                          std::to_string(x) + ": values must be finite and residuals >= 0");
    }
  std::vector<double> start;
  if (fresh) {
    // arnoldi()'s first start vector, normalised the same way.
    start = eigen::random_vector(n, seed);
    cblas_dscal(static_cast<blasint>(n), 1.0 / cblas_dnrm2(static_cast<blasint>(n), start.data(), 1), start.data(), 1);
  } else {
    start = eigen::ritz_restart_vector(unpack_pairs(vectors, values, n, k), n, true);
  }
  double ritz_norm = 0;
  const eigen::LinearOperator& op = a.op();
  const eigen::EigenResult c = eigen::arnoldi_cycle(op, start, k, ctx.arg_int("subspace"), which, seed, &ritz_norm);
  const double worst =
      verify_pairs(ctx, op, c, write_pairs(c, ritz_norm, n, k, vectors, values, residual), which, vectors, values,
                   residual);
  ctx.report("matvecs", static_cast<double>(c.matvecs));
  ctx.report("restarts", fresh ? 0.0 : 1.0);
  ctx.report("residual", worst);
}

// ============================================================ eigen.ritz_select

const std::vector<PortSpec>& select_ports() {
  static const std::vector<PortSpec> p = {
      {"vectors", Access::read_write, {DType::f64}, false, 2, "own Ritz vectors [n,k] (eigen.eram_cycle's)"},
      {"values", Access::read_write, {DType::f64}, false, 2, "own Ritz values [k,3]: re, im, residual"},
      {"residual", Access::read_write, {DType::f64}, false, 2, "[1]: own largest relative residual"},
      {"gathered_vectors", Access::read, {DType::f64}, false, 2, "another co-method's Ritz vectors [n,k]"},
      {"gathered_values", Access::read, {DType::f64}, false, 2, "its Ritz values [k,3]"},
      {"gathered_residual", Access::read, {DType::f64}, false, 2, "[1]: its largest relative residual"},
  };
  return p;
}

std::string float_in(const Args& a, const char* name, double lo, double hi) {
  const double v = a.get_float(name);
  if (v >= lo && v <= hi) return "";
  return "param '" + std::string(name) + "' is " + std::to_string(v) + ": must be in [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]";
}

std::string select_check(const TaskShape& t) {
  const auto& s = select_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  for (size_t i = 0; i < s.size(); ++i)
    if (auto m = f64_port(s, p, i, "Ritz pairs are kept in double"); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "which", {"magnitude", "real"}); !m.empty()) return m;
  if (auto m = float_in(t.args, "factor", 1, HUGE_VAL); !m.empty()) return m;
  const int64_t n = p[0].rows, k = p[0].cols;
  return first_error({expect_shape(s, p, 1, k, 3, "k rows of re, im, residual"), expect_shape(s, p, 2, 1, 1, "one residual"),
                      expect_shape(s, p, 3, n, k, "the shape of 'vectors'"),
                      expect_shape(s, p, 4, k, 3, "the shape of 'values'"), expect_shape(s, p, 5, 1, 1, "one residual")});
}

/// MERAM's restart choice (Emad, Petiton & Edjlali): the gathered set
/// replaces the own one when its largest relative residual is lower by the
/// factor (2: at most half the own) and it is,
/// pair by pair, at least as wanted (key_j >= own key_j; key = |θ| or Re θ),
/// so that a set converged to less wanted eigenvalues never displaces one still
/// approaching the wanted ones. (meram.hpp's best_set allows the own residual
/// as slack; on the asynchronous workflow that let an early, far-off own set
/// adopt a converged unwanted one and win in 4 of 6 runs.)
void select_cpu(KernelContext& ctx) {
  kutil::validate(ctx, select_ports(), select_check);
  const TensorView &v = ctx.port(0), &vals = ctx.port(1), &res = ctx.port(2);
  const TensorView &gv = ctx.port(3), &gvals = ctx.port(4), &gres = ctx.port(5);
  const bool real = ctx.arg_string("which") == "real";
  const int64_t n = v.rows, k = v.cols;
  auto key = [&](const TensorView& x, int64_t j) {
    return real ? x.at<double>(j, 0) : std::hypot(x.at<double>(j, 0), x.at<double>(j, 1));
  };
  // A set only slightly better is not taken: co-methods would swap near-equal
  // sets back and forth, each restart discarding the own Krylov progress for
  // little (on cd900, factor 1 -> 2 took MERAM's busiest co-method from 0.78x
  // to 0.46x the matvecs of the best single ERAM; BENCHMARKS "MERAM as a workflow").
  bool take = gres.at<double>(0, 0) * ctx.arg_float("factor") < res.at<double>(0, 0) && std::isfinite(gres.at<double>(0, 0));
  for (int64_t j = 0; take && j < k; ++j)  // (a relative 1e-9 allowance: the same value from another subspace)
    take = key(gvals, j) >= key(vals, j) - 1e-9 * std::abs(key(vals, j));
  if (take) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(&gv.at<double>(i, 0), k, &v.at<double>(i, 0));
    for (int64_t j = 0; j < k; ++j) std::copy_n(&gvals.at<double>(j, 0), 3, &vals.at<double>(j, 0));
    res.at<double>(0, 0) = gres.at<double>(0, 0);
  }
  ctx.report("adopted", take ? 1.0 : 0.0);
}

// ============================================================ eigen.generate

const std::vector<PortSpec>& generate_ports() {
  static const std::vector<PortSpec> p = matrix_out_ports("the generated matrix A [n,n]");
  return p;
}

/// The m of a Markov walk with (m+1)(m+2)/2 = n states, or -1.
int64_t markov_m(int64_t n) {
  for (int64_t m = 1; (m + 1) * (m + 2) / 2 <= n; ++m)
    if ((m + 1) * (m + 2) / 2 == n) return m;
  return -1;
}

/// nx with nx² = n, or -1.
int64_t grid_side(int64_t n) {
  auto nx = static_cast<int64_t>(std::llround(std::sqrt(double(n))));
  return nx >= 1 && nx * nx == n ? nx : -1;
}

std::string generate_check(const TaskShape& t) {
  const auto& s = generate_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  int64_t n = 0;
  if (auto m = first_error({matrix_out_check(s, p, a, &n),
                            kutil::one_of(a, "kind", {"disc", "box", "schur", "convection_diffusion", "markov"})});
      !m.empty())
    return m;
  const bool csr = eigen_util::format_of(a) == eigen_util::OperatorFormat::csr;
  if (!csr)
    if (auto m = kutil::square(s, p, 0); !m.empty()) return m;
  const std::string& kind = a.get_string("kind");
  if (csr && kind == "schur") return "kind 'schur' makes a dense matrix (Q T Qᵀ): use format=dense";
  if (kind == "convection_diffusion") {
    if (grid_side(n) < 0)
      return "kind 'convection_diffusion' needs n = nx² (an nx x nx grid) but n is " + to_string(n);
    return "";
  }
  if (kind == "markov") {
    if (markov_m(n) < 0)
      return "kind 'markov' needs n = (m+1)(m+2)/2 states (3, 6, 10, 15, ...) but n is " + to_string(n);
    return "";
  }
  std::vector<std::complex<double>> top;
  try {
    top = eigen::parse_spectrum(a.get_string("top"));
  } catch (const KernelError& e) {
    return "param " + std::string(e.what());
  }
  const int64_t filled = eigen::spectrum_dims(top);
  if (filled > n)
    return "param 'top' fills " + to_string(filled) + " dimensions but n is " + to_string(n);
  if (auto m = first_error({float_in(a, "complex_fraction", 0, 1), eigen_util::int_at_least(a, "upper_per_row", 0),
                            eigen_util::int_at_least(a, "seed", 0), eigen_util::int_at_least(a, "matrix_seed", 0)});
      !m.empty())
    return m;
  if (kind == "disc" || kind == "schur") return float_in(a, "radius", 0, HUGE_VAL);
  if (!(a.get_float("re_lo") <= a.get_float("re_hi")))
    return "param 're_lo' is " + std::to_string(a.get_float("re_lo")) + ": must be <= re_hi = " +
           std::to_string(a.get_float("re_hi"));
  return float_in(a, "im_max", 0, HUGE_VAL);
}

Cost generate_cost(const TaskShape& t) {
  if (t.ports.size() != generate_ports().size() || generate_check(t) != "") return {};
  int64_t rows = 0;
  matrix_out_check(generate_ports(), t.ports, t.args, &rows);
  const double n = double(rows);
  // schur: a QR and two n³ products; the others build a sparse matrix
  Cost c = kutil::io_cost(generate_ports(), t, t.args.get_string("kind") == "schur" ? 6.0 * n * n * n : 20.0 * n);
  c.extra_bytes = 64.0 * n;  // the CSR matrix before it is written out
  if (eigen_util::format_of(t.args) == eigen_util::OperatorFormat::dense) c.extra_bytes += 8.0 * n * n;
  return c;
}

void generate_cpu(KernelContext& ctx) {
  kutil::validate(ctx, generate_ports(), generate_check);
  const TensorView& a = ctx.port(0);
  int64_t n = 0;
  matrix_out_check(generate_ports(), ctx.ports(), ctx.args(), &n);
  const std::string& kind = ctx.arg_string("kind");
  eigen::CsrMatrix m;
  if (kind == "schur") {
    const auto top = eigen::parse_spectrum(ctx.arg_string("top"));
    const auto eigs = eigen::random_spectrum(top, n - eigen::spectrum_dims(top), ctx.arg_float("radius"),
                                             ctx.arg_float("complex_fraction"),
                                             static_cast<std::uint64_t>(ctx.arg_int("seed")));
    const std::vector<double> d =
        eigen::schur_matrix(eigs, ctx.arg_float("upper_scale"), static_cast<std::uint64_t>(ctx.arg_int("matrix_seed")));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (a.dtype == DType::f64) a.at<double>(i, j) = d[sz(i * n + j)];
        else a.at<float>(i, j) = static_cast<float>(d[sz(i * n + j)]);
      }
    ctx.report("nnz", static_cast<double>(n * n));
    return;
  }
  if (kind == "convection_diffusion") {
    m = eigen::convection_diffusion_2d(grid_side(n), ctx.arg_float("rho"));
  } else if (kind == "markov") {
    m = eigen::markov_random_walk(markov_m(n));
  } else {
    const auto top = eigen::parse_spectrum(ctx.arg_string("top"));
    const int64_t bulk = n - eigen::spectrum_dims(top);
    const auto seed = static_cast<std::uint64_t>(ctx.arg_int("seed"));
    const double cf = ctx.arg_float("complex_fraction");
    const auto eigs = kind == "disc" ? eigen::random_spectrum(top, bulk, ctx.arg_float("radius"), cf, seed)
                                     : eigen::random_spectrum_box(top, bulk, ctx.arg_float("re_lo"),
                                                                  ctx.arg_float("re_hi"), ctx.arg_float("im_max"), cf,
                                                                  seed);
    eigen::SpectrumMatrixOptions o;
    o.seed = static_cast<std::uint64_t>(ctx.arg_int("matrix_seed"));
    o.upper_per_row = ctx.arg_int("upper_per_row");
    o.upper_scale = ctx.arg_float("upper_scale");
    o.permute = ctx.arg_bool("permute");
    m = eigen::matrix_with_spectrum(eigs, o);
  }
  write_matrix(ctx, m, "eigen.generate kind '" + kind + "'");
}

// ============================================================ eigen.matrix_market

const std::vector<PortSpec>& mm_ports() {
  static const std::vector<PortSpec> p = matrix_out_ports("the file's matrix, dense [rows,cols] (the file's size)");
  return p;
}

/// The file a task's arg `path` names: as given (absolute, or from the current
/// directory), else under the run directory when there is one.
std::string mm_path(const std::string& arg, const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::path(arg).is_absolute() || run_dir.empty() || fs::exists(arg, ec)) return arg;
  const std::string under = (fs::path(run_dir) / arg).string();
  return fs::exists(under, ec) ? under : arg;
}

std::string mm_check(const TaskShape& t) {
  const auto& s = mm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  int64_t rows = 0;
  if (auto m = matrix_out_check(s, p, t.args, &rows); !m.empty()) return m;
  const std::string& path = t.args.get_string("path");
  if (path.empty()) return "param 'path' is empty";
  // A file already there is sized from its size line before the run (else when the task runs).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "";
  eigen::MatrixMarketSize z;
  try {
    z = eigen::read_matrix_market_size(path);
  } catch (const eigen::MatrixMarketError& e) {
    return e.what();
  }
  const std::string what = path + " holds a " + to_string(z.rows) + "x" + to_string(z.cols) + " matrix (" +
                           to_string(z.entries) + " entries stored, up to " + to_string(z.max_nonzeros()) +
                           " nonzeros)";
  if (eigen_util::format_of(t.args) == eigen_util::OperatorFormat::dense)
    return p[0].rows == z.rows && p[0].cols == z.cols ? "" : what + " but port 'a' is " + dims(p[0]);
  if (rows != z.rows)
    return what + " but port 'a_ptr' is " + dims(p[2]) + ": it needs rows + 1 = " + to_string(z.rows + 1) +
           " pointers";
  return "";
}

Cost mm_cost(const TaskShape& t) {
  if (t.ports.size() != mm_ports().size() || mm_check(t) != "") return {};
  Cost c = kutil::io_cost(mm_ports(), t, 0);
  c.bytes *= 3;  // the text file is read too (about 3x the bytes written)
  return c;
}

void mm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, mm_ports(), mm_check);
  const std::string path = mm_path(ctx.arg_string("path"), ctx.run_dir());
  const eigen::CsrMatrix m = eigen::read_matrix_market(path);  // MatrixMarketError: "PATH:LINE: reason"
  write_matrix(ctx, m, path);
}

// ============================================================ eigen.iram_cycle

enum IramPort : size_t { kIa, kIvectors, kIvalues, kIresidual, kIbasis, kIhess, kIstate, kIindex, kIptr };

const std::vector<PortSpec>& iram_ports() {
  static const std::vector<PortSpec> p = {
      cycle_ports()[0],
      cycle_ports()[1],
      cycle_ports()[2],
      cycle_ports()[3],
      {"basis",
       Access::read_write,
       {DType::f64},
       false,
       2,
       "[m+1, n]: the Krylov basis V_m, a vector per row, and in row m the residual f (the factorisation kept "
       "between cycles)"},
      {"hessenberg", Access::read_write, {DType::f64}, false, 2, "[m+1, m]: H_m of the kept factorisation"},
      {"state",
       Access::read_write,
       {DType::f64},
       false,
       2,
       "[k+1, 3]: row 0 (started, ||A|| estimate, next seed), rows 1..k the values this cycle last wrote; all zero: "
       "no factorisation yet"},
      cycle_ports()[kCindex],
      cycle_ports()[kCptr],
  };
  return p;
}

std::string iram_check(const TaskShape& t) {
  const auto& s = iram_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = pairs_check(s, p, a, kIindex); !m.empty()) return m;
  if (auto m = first_error({f64_port(s, p, kIbasis, "the factorisation is kept in double"),
                            f64_port(s, p, kIhess, "the factorisation is kept in double"),
                            f64_port(s, p, kIstate, "the state is kept in double")});
      !m.empty())
    return m;
  const int64_t n = p[kIvectors].rows, k = a.get_int("k"), m = eigen_util::auto_subspace(a, n);
  if (m < n && k >= m - 1)
    return "param 'k' is " + to_string(k) + ": an implicit restart needs k < subspace - 1 = " + to_string(m - 1) +
           " (at least 2 shifts)";
  return first_error({expect_shape(s, p, kIbasis, m + 1, n, "(subspace + 1) x n: V_m and f, a vector per row"),
                      expect_shape(s, p, kIhess, m + 1, m, "(subspace + 1) x subspace"),
                      expect_shape(s, p, kIstate, k + 1, 3, "(k + 1) x 3")});
}

Cost iram_cost(const TaskShape& t) {
  if (t.ports.size() != iram_ports().size() || iram_check(t) != "") return {};
  const int64_t n = t.ports[kIvectors].rows, m = eigen_util::auto_subspace(t.args, n), k = t.args.get_int("k");
  const double dn = double(n), dm = double(m);
  // An implicit restart takes p = m - k' matvecs (the first cycle m): priced at m - k; CGS2 (4 n j per step),
  // two dgeev and the QR sweeps on H (~30 m³), the kept basis (2 n m²) and the Ritz vectors (4 n m k).
  Cost c = kutil::io_cost(iram_ports(), t,
                          double(m - k) * (eigen_util::matvec_flops(t.ports, t.args, kIa) + 4 * dn * dm) +
                              30 * dm * dm * dm + 2 * dn * dm * dm + 4 * dn * dm * double(k));
  c.extra_bytes = 8.0 * dn * double(2 * m + 3) + 40.0 * dm * dm;
  return c;
}

void iram_cpu(KernelContext& ctx) {
  kutil::validate(ctx, iram_ports(), iram_check);
  const TensorView &vectors = ctx.port(kIvectors), &values = ctx.port(kIvalues), &residual = ctx.port(kIresidual),
                   &basis = ctx.port(kIbasis), &hess = ctx.port(kIhess), &state = ctx.port(kIstate);
  const eigen_util::PortOperator a(ctx.port(kIa), ctx.port(kIindex), ctx.port(kIptr), eigen_util::format_of(ctx.args()));
  const int64_t n = a.n(), k = ctx.arg_int("k");
  const eigen::Which which = which_of(ctx);
  for (size_t port : {kIvectors, kIvalues, kIbasis, kIhess, kIstate})
    require_finite(ctx.port(port), iram_ports()[port].name);
  const bool started = state.at<double>(0, 0) != 0;
  const bool given = eigen_util::pairs_given(vectors, values, state, k);
  eigen_util::PortFactor fac(basis, hess, state, static_cast<std::uint64_t>(ctx.arg_int("seed")));
  std::vector<double> restart;
  if (given) restart = eigen::ritz_restart_vector(unpack_pairs(vectors, values, n, k), n, true);
  double ritz_norm = 0;
  const eigen::LinearOperator& op = a.op();
  const eigen::EigenResult c =
      eigen::iram_cycle(op, fac.span, fac.st, restart, k, which, ctx.arg_float("tol"), &ritz_norm);
  double worst = write_pairs(c, ritz_norm, n, k, vectors, values, residual);
  fac.store(hess, state);
  eigen_util::remember_pairs(values, state, k);
  // After the state: corrected pairs differ from its rows, so the next cycle restarts explicitly from them.
  worst = verify_pairs(ctx, op, c, worst, which, vectors, values, residual);
  ctx.report("matvecs", static_cast<double>(c.matvecs));
  ctx.report("restarts", started ? 1.0 : 0.0);
  ctx.report("explicit", given ? 1.0 : 0.0);
  ctx.report("residual", worst);
}

}  // namespace

void register_eigen_workflow(Registry& reg) {
  kutil::add_component(
      reg, "eigen.eram_cycle",
      "one explicit restart cycle of ERAM (Arnoldi factorisation of size subspace, Ritz pairs by dgeev) on inout "
      "Ritz vectors [n,k] (dgeev style) and values [k,3] (re, im, residual); all-zero vectors start from the seeded "
      "random vector, else the cycle restarts from the residual-weighted sum of the given pairs (a MERAM co-method "
      "gathers another's pairs into them); writes the largest relative residual [1] for an <until> test",
      cycle_ports(), cycle_params("Arnoldi factorisation size m (> k); 0: min(n, max(2k+1, k+20))"), cycle_cpu,
      cycle_check, cycle_cost);
  kutil::add_component(
      reg, "eigen.iram_cycle",
      "one cycle of IRAM on a factorisation kept in inout tensors (basis [m+1,n], hessenberg [m+1,m], state "
      "[k+1,3]; all zero: none yet): the first cycle factorises from the seeded random vector (m matvecs), later "
      "ones restart implicitly with exact shifts (m - k' matvecs, as eigen.arnoldi restart=implicit), and Ritz pairs "
      "this cycle did not write (a set eigen.ritz_select adopted) restart it explicitly from their residual-weighted "
      "sum; writes the pairs like eigen.eram_cycle and the largest relative residual [1] (MIRAM's co-method step)",
      iram_ports(),
      cycle_params("Arnoldi factorisation size m (> k + 1); 0: min(n, max(2k+1, k+20)); sizes basis and hessenberg"),
      iram_cpu, iram_check, iram_cost);
  kutil::add_component(
      reg, "eigen.ritz_select",
      "MERAM's restart choice between a co-method's own Ritz pairs and pairs gathered from another: the gathered "
      "set replaces the own one (vectors, values, residual) when its residual times factor is below the own one and "
      "it is pair by pair at least as wanted (|θ| or Re θ no smaller than the own value); reports adopted 0/1",
      select_ports(),
      {{"which", ParamType::string_, "magnitude", false, "magnitude (largest |λ|) or real (largest Re λ)"},
       {"factor", ParamType::float_, "2", false,
        "the gathered set is taken when its residual is below the own one divided by factor (>= 1; 1: any lower)"}},
      select_cpu, select_check, [](const TaskShape& t) {
        return t.ports.size() == select_ports().size() ? kutil::io_cost(select_ports(), t, 0.0) : Cost{};
      });
  kutil::add_component(
      reg, "eigen.generate",
      "a test matrix A [n,n] (n from the port; format=csr: kept sparse, n from a_ptr): kind disc or box (a sparse non-normal matrix with the exact "
      "spectrum 'top' plus a random bulk in a disc or box, eigen::matrix_with_spectrum), schur (dense Q T Qᵀ, Q "
      "random orthogonal, T upper triangular with that spectrum, disc bulk, couplings upper_scale: "
      "eigen::schur_matrix; a value given twice is defective), convection_diffusion "
      "(ARPACK's dndrv1 operator, n = nx²) or markov (Saad's random walk, n = (m+1)(m+2)/2)",
      generate_ports(),
      {{"kind", ParamType::string_, "disc", false, "disc, box, schur, convection_diffusion or markov"},
       {"top", ParamType::string_, "1", false,
        "disc/box/schur: the prescribed eigenvalues, e.g. \"3, 2.6+0.5i, 2.2\" (a pair a±bi given once as a+bi)"},
       {"radius", ParamType::float_, "0.9", false, "disc/schur: the bulk is uniform in |z| <= radius"},
       {"re_lo", ParamType::float_, "-1", false, "box: the bulk's real parts are in [re_lo, re_hi]"},
       {"re_hi", ParamType::float_, "0.9", false, "box: upper end of the bulk's real parts"},
       {"im_max", ParamType::float_, "0.5", false, "box: the bulk's |imaginary parts| are <= im_max"},
       {"complex_fraction", ParamType::float_, "0.3", false, "disc/box/schur: share of the bulk drawn as conjugate pairs"},
       {"seed", ParamType::int_, "1", false, "disc/box/schur: seed of the bulk eigenvalues"},
       {"matrix_seed", ParamType::int_, "2", false,
        "disc/box/schur: seed of the couplings, scaling and permutation (schur: of T and Q)"},
       {"upper_per_row", ParamType::int_, "3", false, "disc/box: non-normal couplings per first-level row"},
       {"upper_scale", ParamType::float_, "0.5", false, "disc/box/schur: size of the couplings"},
       {"permute", ParamType::bool_, "true", false, "disc/box: hide the block triangular structure"},
       {"rho", ParamType::float_, "10", false, "convection_diffusion: the convection coefficient"},
       {"format", ParamType::string_, "dense", false,
        "dense (port a is A [n,n]) or csr (a: values [cap], a_index: i32 columns [cap], a_ptr: i32 [n+1]; not for "
        "kind schur)"}},
      generate_cpu, generate_check, generate_cost);
  kutil::add_component(
      reg, "eigen.matrix_market",
      "reads a Matrix Market file (coordinate or array; real, integer or pattern; general, symmetric or "
      "skew-symmetric, the stored half mirrored; duplicates summed) into a dense matrix of the file's size, or with "
      "format=csr kept sparse (values, columns, row pointers; the error names the nonzero count when a and a_index "
      "are too small)",
      mm_ports(),
      {{"path", ParamType::string_, "", true,
        "the .mtx file (a relative path: from the current directory, else under the run directory; a file there "
        "before the run is sized from its size line when the workflow compiles)"},
       {"format", ParamType::string_, "dense", false,
        "dense (port a is [rows,cols]) or csr (a: values [cap], a_index: i32 columns [cap], a_ptr: i32 [rows+1])"}},
      mm_cpu, mm_check, mm_cost);
}

}  // namespace ymlopt
