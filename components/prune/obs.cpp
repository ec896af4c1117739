// Layer-wise OBS pruning (SparseGPT, Frantar & Alistarh 2023), CPU, f32/f64
// ports with double arithmetic inside:
//
//   prune.hessian  x [m,k] -> h [k,k] (inout): h = 2/count · XᵀX, or h += 2/count · XᵀX
//                  with accumulate=true (count = total calibration tokens, so
//                  several batches add up to 2/M Σ XᵀX; count=0 means m).
//   prune.obs      w [n,k], h [k,k] -> w_pruned [n,k]: unstructured (per-row
//                  sparsity) or N:M (e.g. 2:4), pruning column by column with
//                  the OBS error compensation on the not-yet-processed columns.
//
// Algorithm of prune.obs (our implementation of the paper's Algorithm 1):
// dead columns (H_jj == 0) get H_jj = 1 and W[:,j] = 0; H += damp·mean(diag H)·I;
// H^-1 by Cholesky (dpotrf + dpotri), then U = the upper Cholesky factor of H^-1
// (H^-1 = UᵀU). Columns are processed in blocks of `block`: at the start of a
// block the unstructured mask is chosen per row as the block's share of the
// row's zeros with the smallest w^2 / U_jj^2 (N:M: at each group's first
// column, the N smallest of the group). Within a block each column j is
// quantised to its masked value q, the error e = (w - q) / U_jj is propagated
// to the block's later columns (w -= e · U[j, j+1:]), and after the block all
// remaining columns get the lazy batch update W[:, end:] -= E · U[block, end:]
// (one GEMM).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "prune/prune.hpp"
#include "prune/prune_api.hpp"
#include "prune/prune_util.hpp"

namespace ymlopt {
namespace prune {

namespace pu = prune_util;
using std::int64_t;

template <class T>
static std::vector<double> hessian_impl(const T* x, int64_t m, int64_t k, int64_t ldx, double scale) {
  std::vector<double> xd(static_cast<std::size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) xd[static_cast<std::size_t>(i * k + j)] = static_cast<double>(x[i * ldx + j]);
  std::vector<double> h = pu::gram(xd, m, k);
  const double s = scale >= 0 ? scale : (m > 0 ? 2.0 / static_cast<double>(m) : 0.0);
  for (double& v : h) v *= s;
  return h;
}

std::vector<double> hessian(const float* x, int64_t m, int64_t k, int64_t ldx, double scale) {
  return hessian_impl(x, m, k, ldx, scale);
}
std::vector<double> hessian(const double* x, int64_t m, int64_t k, int64_t ldx, double scale) {
  return hessian_impl(x, m, k, ldx, scale);
}

/// Indices (ascending) of the `count` smallest of score[0..len) (ties: lower index).
static void smallest(const double* score, int64_t len, int64_t count, std::vector<int64_t>& idx) {
  idx.resize(static_cast<std::size_t>(len));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto less = [&](int64_t a, int64_t b) { return score[a] < score[b] || (score[a] == score[b] && a < b); };
  if (count < len) std::nth_element(idx.begin(), idx.begin() + count, idx.end(), less);
  idx.resize(static_cast<std::size_t>(count));
}

std::vector<double> obs_prune(const double* w_in, int64_t n, int64_t k, int64_t ldw, const double* h_in,
                              const ObsOptions& opt, ObsStats* stats) {
  const bool nm = opt.prune_n > 0 && opt.prune_m > 0;
  if (nm && (opt.prune_n > opt.prune_m || k % opt.prune_m != 0))
    throw KernelError("N:M pattern " + std::to_string(opt.prune_n) + ":" + std::to_string(opt.prune_m) +
                      " needs N <= M and k (" + std::to_string(k) + ") a multiple of M");
  if (!nm && !(opt.sparsity >= 0 && opt.sparsity <= 1))
    throw KernelError("sparsity " + std::to_string(opt.sparsity) + " is outside [0, 1]");
  if (opt.block < 1) throw KernelError("block must be >= 1");
  if (!(opt.damp >= 0)) throw KernelError("damp must be >= 0");

  std::vector<double> w(static_cast<std::size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w[static_cast<std::size_t>(r * k + c)] = w_in[r * ldw + c];
  std::vector<double> h(h_in, h_in + k * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      if (!std::isfinite(w[static_cast<std::size_t>(r * k + c)]))
        throw KernelError("w has a non-finite value at (" + std::to_string(r) + ", " + std::to_string(c) + ")");
  for (double v : h)
    if (!std::isfinite(v)) throw KernelError("h has a non-finite value");
  ObsStats st;
  for (int64_t j = 0; j < k; ++j) {
    if (h[static_cast<std::size_t>(j * k + j)] != 0) continue;
    ++st.dead_columns;
    h[static_cast<std::size_t>(j * k + j)] = 1;
    for (int64_t r = 0; r < n; ++r) w[static_cast<std::size_t>(r * k + j)] = 0;
  }
  const double damp = opt.damp * pu::mean_diag(h, k);
  for (int64_t j = 0; j < k; ++j) h[static_cast<std::size_t>(j * k + j)] += damp;

  // H^-1 = (UᵀU)^-1, then its own upper Cholesky factor.
  pu::cholesky_upper(h, k, "the damped Hessian");
  if (k > 0) {
    const lapack_int info = LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', static_cast<lapack_int>(k), h.data(),
                                           static_cast<lapack_int>(k));
    if (info != 0) throw KernelError("dpotri failed on the damped Hessian (info " + std::to_string(info) + ")");
  }
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < i; ++j) h[static_cast<std::size_t>(i * k + j)] = h[static_cast<std::size_t>(j * k + i)];
  pu::cholesky_upper(h, k, "the inverse Hessian");
  const std::vector<double>& u = h;
  auto U = [&](int64_t i, int64_t j) { return u[static_cast<std::size_t>(i * k + j)]; };

  int64_t bs = opt.block;
  if (nm) bs = std::max<int64_t>(opt.prune_m, bs / opt.prune_m * opt.prune_m);
  std::vector<double> w1, err1, score;
  std::vector<char> mask;
  std::vector<int64_t> idx;
  for (int64_t i1 = 0; i1 < k; i1 += bs) {
    const int64_t i2 = std::min(k, i1 + bs), cnt = i2 - i1;
    w1.assign(static_cast<std::size_t>(n * cnt), 0.0);
    err1.assign(static_cast<std::size_t>(n * cnt), 0.0);
    mask.assign(static_cast<std::size_t>(n * cnt), 0);
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(&w[static_cast<std::size_t>(r * k + i1)], cnt, &w1[static_cast<std::size_t>(r * cnt)]);
    if (!nm) {
      // This block's share of each row's zeros, so that every row ends with round(sparsity·k).
      const int64_t share = std::llround(opt.sparsity * static_cast<double>(i2)) -
                            std::llround(opt.sparsity * static_cast<double>(i1));
      score.resize(static_cast<std::size_t>(cnt));
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < cnt; ++j) {
          const double v = w1[static_cast<std::size_t>(r * cnt + j)], d = U(i1 + j, i1 + j);
          score[static_cast<std::size_t>(j)] = v * v / (d * d);
        }
        smallest(score.data(), cnt, share, idx);
        for (int64_t j : idx) mask[static_cast<std::size_t>(r * cnt + j)] = 1;
      }
    }
    for (int64_t i = 0; i < cnt; ++i) {
      if (nm && i % opt.prune_m == 0) {
        score.resize(static_cast<std::size_t>(opt.prune_m));
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t j = 0; j < opt.prune_m; ++j) {
            const double v = w1[static_cast<std::size_t>(r * cnt + i + j)], d = U(i1 + i + j, i1 + i + j);
            score[static_cast<std::size_t>(j)] = v * v / (d * d);
          }
          smallest(score.data(), opt.prune_m, opt.prune_n, idx);
          for (int64_t j : idx) mask[static_cast<std::size_t>(r * cnt + i + j)] = 1;
        }
      }
      const double d = U(i1 + i, i1 + i);
      const double* urow = &u[static_cast<std::size_t>((i1 + i) * k + i1)];
      for (int64_t r = 0; r < n; ++r) {
        double* wr = &w1[static_cast<std::size_t>(r * cnt)];
        if (!mask[static_cast<std::size_t>(r * cnt + i)]) continue;  // kept: no error to propagate
        const double e = wr[i] / d;
        st.loss += e * e / 2;
        wr[i] = 0;
        err1[static_cast<std::size_t>(r * cnt + i)] = e;
        for (int64_t j = i + 1; j < cnt; ++j) wr[j] -= e * urow[j];
      }
    }
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(&w1[static_cast<std::size_t>(r * cnt)], cnt, &w[static_cast<std::size_t>(r * k + i1)]);
    if (i2 < k)
      pu::gemm(false, false, n, k - i2, cnt, -1.0, err1.data(), cnt, &u[static_cast<std::size_t>(i1 * k + i2)], k,
               1.0, &w[static_cast<std::size_t>(i2)], k);
  }
  if (stats) *stats = st;
  return w;
}

}  // namespace prune

namespace {

namespace pu = prune_util;
using std::int64_t;

using kutil::kFloat;

// ============================================================ prune.hessian

const std::vector<PortSpec>& hessian_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 2, "calibration activations [m, k] (m tokens)"},
      {"h", Access::read_write, kFloat, false, 2,
       "Hessian [k, k]: overwritten with 2/count XᵀX, or accumulated into when accumulate=true"},
  };
  return p;
}

std::string hessian_check(const TaskShape& t) {
  const auto& s = hessian_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  if (t.args.get_int("count") < 0)
    return "param 'count' is " + std::to_string(t.args.get_int("count")) + ": must be >= 0 (0: the rows of x)";
  return pu::first_error({pu::expect_shape(s, t.ports, 1, t.ports[0].cols, t.ports[0].cols, "k x k, k = columns of x")});
}

Cost hessian_cost(const TaskShape& t) {
  const double m = double(t.ports[0].rows), k = double(t.ports[0].cols);
  return kutil::io_cost(hessian_ports(), t, m * k * (k + 1));
}

void hessian_cpu(KernelContext& ctx) {
  kutil::validate(ctx, hessian_ports(), hessian_check);
  const TensorView &x = ctx.port(0), &hv = ctx.port(1);
  const int64_t m = x.rows, k = x.cols;
  const int64_t count = ctx.arg_int("count") > 0 ? ctx.arg_int("count") : m;
  std::vector<double> h = pu::gram(pu::load(x), m, k);
  const double scale = count > 0 ? 2.0 / static_cast<double>(count) : 0.0;
  if (ctx.arg_bool("accumulate")) {
    const std::vector<double> prev = pu::load(hv);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = prev[i] + scale * h[i];
  } else {
    for (double& v : h) v *= scale;
  }
  pu::store(h, hv);
}

// ============================================================ prune.obs

const std::vector<PortSpec>& obs_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, kFloat, false, 2, "weight [n, k] (layout nk) or [k, n] (layout kn)"},
      {"h", Access::read, kFloat, false, 2, "layer Hessian [k, k] (prune.hessian)"},
      {"w_pruned", Access::write, kFloat, false, 2, "pruned weight, shape and dtype of w"},
  };
  return p;
}

/// N:M of the pattern arg: {0, 0} for unstructured, {-1, -1} when unparsable.
std::pair<int64_t, int64_t> nm_of(const Args& a) {
  const std::string& p = a.get_string("pattern");
  if (p == "unstructured") return {0, 0};
  if (p == "nm") return {a.get_int("n"), a.get_int("m")};
  const auto colon = p.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == p.size()) return {-1, -1};
  const std::string ns = p.substr(0, colon), ms = p.substr(colon + 1);
  auto digits = [](const std::string& s) {
    return s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(ns) || !digits(ms)) return {-1, -1};
  return {std::stoll(ns), std::stoll(ms)};
}

std::string obs_check(const TaskShape& t) {
  const auto& s = obs_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  if (auto m = pu::layout_arg(t.args); !m.empty()) return m;
  const bool kn = pu::is_kn(t.args);
  const int64_t k = pu::w_k(t.ports[0], kn);
  const auto [pn, pm] = nm_of(t.args);
  if (pn < 0) return "param 'pattern' is '" + t.args.get_string("pattern") + "': expected 'unstructured', 'nm' or 'N:M' (e.g. '2:4')";
  if (pm > 0 || pn > 0) {
    if (pn < 1 || pm < 1 || pn > pm)
      return "N:M pattern " + std::to_string(pn) + ":" + std::to_string(pm) + ": needs 1 <= N <= M";
    if (k % pm != 0)
      return "N:M pattern " + std::to_string(pn) + ":" + std::to_string(pm) + ": k = " + std::to_string(k) +
             " input features is not a multiple of M";
  }
  const double sp = t.args.get_float("sparsity");
  if (!(sp >= 0 && sp <= 1)) return "param 'sparsity' is " + std::to_string(sp) + ": must be in [0, 1]";
  if (t.args.get_int("block") < 1) return "param 'block' is " + std::to_string(t.args.get_int("block")) + ": must be >= 1";
  if (!(t.args.get_float("damp") >= 0)) return "param 'damp' is " + std::to_string(t.args.get_float("damp")) + ": must be >= 0";
  return pu::first_error({pu::expect_shape(s, t.ports, 1, k, k, "k x k, k = input features of w"),
                          kutil::same_shape(s, t.ports, 2, 0), kutil::same_dtype(s, t.ports, 2, 0)});
}

Cost obs_cost(const TaskShape& t) {
  const bool kn = t.args.get_string("layout") == "kn";
  const double n = double(pu::w_n(t.ports[0], kn)), k = double(pu::w_k(t.ports[0], kn));
  Cost c = kutil::io_cost(obs_ports(), t, 4.0 / 3.0 * k * k * k + 2.0 * n * k * k);
  c.extra_bytes = 8.0 * (k * k + n * k);
  return c;
}

void obs_cpu(KernelContext& ctx) {
  kutil::validate(ctx, obs_ports(), obs_check);
  const bool kn = pu::is_kn(ctx.args());
  const TensorView &wv = ctx.port(0), &hv = ctx.port(1), &out = ctx.port(2);
  const int64_t n = pu::w_n(wv, kn), k = pu::w_k(wv, kn);
  const std::vector<double> w = pu::load(wv, kn), h = pu::load(hv);
  prune::ObsOptions o;
  const auto [pn, pm] = nm_of(ctx.args());
  o.prune_n = pn;
  o.prune_m = pm;
  o.sparsity = ctx.arg_float("sparsity");
  o.block = ctx.arg_int("block");
  o.damp = ctx.arg_float("damp");
  prune::ObsStats st;
  const std::vector<double> wp = prune::obs_prune(w.data(), n, k, k, h.data(), o, &st);
  pu::store(wp, out, kn);
  const auto zeros = std::count(wp.begin(), wp.end(), 0.0);
  ctx.report("sparsity", n * k > 0 ? double(zeros) / double(n * k) : 0.0);
  ctx.report("obs_loss", st.loss);
  ctx.report("dead_columns", double(st.dead_columns));
}

}  // namespace

/// Registers prune.hessian and prune.obs.
///
///   <task component="prune.hessian" x="acts" h="H"/>
///   <task component="prune.obs" w="fc1.weight" h="H" w_pruned="fc1.sparse" pattern="2:4"/>
void register_prune_obs(Registry& reg) {
  kutil::add_component(reg, "prune.hessian",
                       "layer-wise OBS Hessian h = 2/count XᵀX of calibration activations x [m,k]; "
                       "accumulate=true adds into h (count = total tokens over all batches, 0 = m)",
                       hessian_ports(),
                       {{"accumulate", ParamType::bool_, "false", false, "add into h instead of overwriting it"},
                        {"count", ParamType::int_, "0", false, "normalisation 2/count (0: rows of x)"}},
                       hessian_cpu, hessian_check, hessian_cost);
  kutil::add_component(
      reg, "prune.obs",
      "SparseGPT-style OBS pruning of w [n,k] given h [k,k]: unstructured (per-row sparsity) or N:M, "
      "with error compensation on the remaining columns",
      obs_ports(),
      {{"sparsity", ParamType::float_, "0.5", false, "fraction of zeros per row (unstructured)"},
       {"pattern", ParamType::string_, "unstructured", false, "'unstructured', 'nm' (args n, m) or 'N:M' e.g. '2:4'"},
       {"n", ParamType::int_, "2", false, "zeros per group of m (pattern 'nm')"},
       {"m", ParamType::int_, "4", false, "group size (pattern 'nm')"},
       {"block", ParamType::int_, "128", false, "column block size of the lazy batch updates"},
       {"damp", ParamType::float_, "0.01", false, "fraction of mean(diag h) added to the diagonal"},
       {"layout", ParamType::string_, "nk", false, "'nk' (w is [n,k], torch Linear) or 'kn' (GPT-2 Conv1D)"}},
      obs_cpu, obs_check, obs_cost);
}

}  // namespace ymlopt
