// See cycle_util.hpp.
#include "eigen/cycle_util.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "eigen/operator_ports.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt::eigen_util {
namespace {
std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
}  // namespace

using std::int64_t;
using std::size_t;
using std::to_string;

std::string f64_port(const std::vector<PortSpec>& s, std::span<const TensorView> p, size_t i, const char* why) {
  if (!p[i].bound() || p[i].dtype == DType::f64) return "";
  return "port '" + s[i].name + "' has dtype " + dtype_name(p[i].dtype) + ": must be f64 (" + why + ")";
}

std::vector<ParamSpec> cycle_params(const char* subspace_doc) {
  return {{"k", ParamType::int_, "4", false, "number of Ritz pairs (the columns of vectors, the rows of values)"},
          {"subspace", ParamType::int_, "0", false, subspace_doc},
          {"which", ParamType::string_, "magnitude", false, "magnitude (largest |λ|) or real (largest Re λ)"},
          {"seed", ParamType::int_, "1", false, "seed of the random start vector (first cycle)"},
          {"tol", ParamType::float_, "1e-8", false,
           "the convergence tolerance of the loop: a set whose largest relative residual is under it is checked "
           "(verify) before the residual port says so; eigen.iram_cycle: pairs under it also count as converged in "
           "k' (ARPACK's anti-stagnation)"},
          {"verify", ParamType::bool_, "true", false,
           "check a converged set against the operator deflated by it (eigen::check_wanted): a more wanted "
           "eigenvalue outside the set replaces its least wanted pair and the residual port says 1 (not converged)"},
          format_param()};
}

eigen::EigenResult unpack_pairs(const TensorView& vectors, const TensorView& values, int64_t n, int64_t k) {
  eigen::EigenResult r;
  r.values_re.resize(sz(k));
  r.values_im.resize(sz(k));
  r.residuals.resize(sz(k));
  for (int64_t j = 0; j < k; ++j) {
    r.values_re[sz(j)] = values.at<double>(j, 0);
    r.values_im[sz(j)] = values.at<double>(j, 1);
    r.residuals[sz(j)] = values.at<double>(j, 2);
  }
  r.vectors_re.assign(sz(n * k), 0.0);
  r.vectors_im.assign(sz(n * k), 0.0);
  auto column = [&](int64_t j, std::vector<double>& dst, int64_t slot, double sign) {
    for (int64_t i = 0; i < n; ++i) dst[sz(slot * n + i)] = sign * vectors.at<double>(i, j);
  };
  for (int64_t j = 0; j < k;) {
    const bool pair = r.values_im[sz(j)] > 0 && j + 1 < k && r.values_re[sz(j + 1)] == r.values_re[sz(j)] &&
                      r.values_im[sz(j + 1)] == -r.values_im[sz(j)];
    column(j, r.vectors_re, j, 1.0);
    if (pair) {
      column(j + 1, r.vectors_im, j, 1.0);
      column(j, r.vectors_re, j + 1, 1.0);
      column(j + 1, r.vectors_im, j + 1, -1.0);
      j += 2;
    } else {
      ++j;  // a real value, or a lone +im value whose column is Re x + Im x (its vectors_im stays 0)
    }
  }
  return r;
}

void pack_pairs(const eigen::EigenResult& r, int64_t n, int64_t k, const TensorView& vectors,
                const TensorView& values) {
  for (int64_t j = 0; j < k; ++j) {
    values.at<double>(j, 0) = r.values_re[sz(j)];
    values.at<double>(j, 1) = r.values_im[sz(j)];
    values.at<double>(j, 2) = r.residuals[sz(j)];
  }
  const double* xr = r.vectors_re.data();
  const double* xi = r.vectors_im.data();
  for (int64_t j = 0; j < k;) {
    const double im = r.values_im[sz(j)];
    const bool pair = im > 0 && j + 1 < k && r.values_re[sz(j + 1)] == r.values_re[sz(j)] &&
                      r.values_im[sz(j + 1)] == -im;
    if (pair) {
      for (int64_t i = 0; i < n; ++i) {
        vectors.at<double>(i, j) = xr[j * n + i];
        vectors.at<double>(i, j + 1) = xi[j * n + i];
      }
      j += 2;
    } else {
      // Real: x. Lone +im: Re x + Im x. Lone -im (a tie broke the pair): Re x.
      for (int64_t i = 0; i < n; ++i) vectors.at<double>(i, j) = xr[j * n + i] + (im > 0 ? xi[j * n + i] : 0.0);
      ++j;
    }
  }
}

double write_pairs(const eigen::EigenResult& c, double ritz_norm, int64_t n, int64_t k, const TensorView& vectors,
                   const TensorView& values, const TensorView& residual) {
  double worst = 0;
  for (int64_t j = 0; j < k; ++j)
    worst = std::max(worst, eigen::relative_residual(c.residuals[sz(j)],
                                                     std::hypot(c.values_re[sz(j)], c.values_im[sz(j)]), ritz_norm));
  pack_pairs(c, n, k, vectors, values);
  residual.at<double>(0, 0) = worst;
  return worst;
}

double verify_pairs(KernelContext& ctx, const eigen::LinearOperator& op, const eigen::EigenResult& c, double worst,
                    eigen::Which which, const TensorView& vectors, const TensorView& values,
                    const TensorView& residual) {
  const int64_t n = op.n, k = ctx.arg_int("k");
  if (!ctx.arg_bool("verify") || !(worst <= ctx.arg_float("tol")) || n <= k) return worst;
  const eigen::WantedCheck w =
      eigen::check_wanted(op, c, which, eigen::check_seed(static_cast<std::uint64_t>(ctx.arg_int("seed"))));
  const bool missed = w.verdict == eigen::WantedCheck::Verdict::missed;
  ctx.report("missed", missed ? 1.0 : 0.0);
  ctx.report("unverified", w.verdict == eigen::WantedCheck::Verdict::inconclusive ? 1.0 : 0.0);
  if (!missed) {
    ctx.report("verify_matvecs", static_cast<double>(w.matvecs));
    return worst;
  }
  const eigen::EigenResult fixed = eigen::with_missed(op, c, w, which);
  ctx.report("verify_matvecs", static_cast<double>(w.matvecs + fixed.matvecs - c.matvecs));
  pack_pairs(fixed, n, k, vectors, values);
  residual.at<double>(0, 0) = 1.0;
  return 1.0;
}

eigen::Which which_of(const KernelContext& ctx) {
  return ctx.arg_string("which") == "real" ? eigen::Which::largest_real : eigen::Which::largest_magnitude;
}

PortFactor::PortFactor(const TensorView& basis, const TensorView& hess, const TensorView& state, std::uint64_t seed,
                       bool read_beta) {
  const int64_t m = hess.cols, n = basis.cols;
  if (basis.ld != n) throw KernelError("port 'basis' must be a whole tensor (its rows contiguous)");
  H_.assign(sz((m + 1) * m), 0.0);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i <= m; ++i) H_[sz(i + j * (m + 1))] = hess.at<double>(i, j);
  auto* v = static_cast<double*>(basis.data);
  span = {n, m, v, v + m * n, H_.data()};
  st.seed = seed;
  if (state.at<double>(0, 0) == 0) return;
  st.started = true;
  st.anorm_est = state.at<double>(0, 1);
  st.seed = static_cast<std::uint64_t>(state.at<double>(0, 2));
  if (read_beta) st.beta = cblas_dnrm2(static_cast<int>(n), span.f, 1);
}

void PortFactor::store(const TensorView& hess, const TensorView& state) const {
  const int64_t m = hess.cols;
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i <= m; ++i) hess.at<double>(i, j) = H_[sz(i + j * (m + 1))];
  state.at<double>(0, 0) = st.started ? 1 : 0;
  state.at<double>(0, 1) = st.anorm_est;
  state.at<double>(0, 2) = static_cast<double>(st.seed);
}

void remember_pairs(const TensorView& values, const TensorView& state, int64_t k) {
  for (int64_t j = 0; j < k; ++j)
    for (int64_t c = 0; c < 3; ++c) state.at<double>(j + 1, c) = values.at<double>(j, c);
}

bool pairs_given(const TensorView& vectors, const TensorView& values, const TensorView& state, int64_t k) {
  if (state.at<double>(0, 0) != 0) {
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < 3; ++c)
        if (values.at<double>(j, c) != state.at<double>(j + 1, c)) return true;
    return false;
  }
  for (int64_t i = 0; i < vectors.rows; ++i)
    for (int64_t j = 0; j < k; ++j)
      if (vectors.at<double>(i, j) != 0) return true;
  return false;
}

void require_finite(const TensorView& v, const std::string& port) {
  for (int64_t i = 0; i < v.rows; ++i)
    for (int64_t j = 0; j < v.cols; ++j)
      if (!std::isfinite(v.at<double>(i, j)))
        throw KernelError("port '" + port + "' holds a non-finite value at (" + to_string(i) + ", " + to_string(j) +
                          ")");
}

}  // namespace ymlopt::eigen_util
