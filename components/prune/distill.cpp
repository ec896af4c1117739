// Layer-wise distillation (CPU, f32/f64 ports, double inside): closed-form
// least-squares refit of a compressed layer to the original layer's outputs.
//
//   distill.layerwise  x [m,k], y_target [m,n], w [n,k] -> w_fit [n,k]   (mode mask | dense)
//                      x, y_target, a [n,r], b [r,k] -> a_fit, b_fit    (mode lowrank)
//
// It minimises ||Y - X Wᵀ||_F. The normal equations use H = XᵀX + λI with
// λ = ridge · mean(diag XᵀX) and G = YᵀX [n,k]:
//   mask     each row i solves H[S,S] w_S = G[i,S] on its non-zero columns S
//            (rows sharing one support share one Cholesky factorisation); the
//            zero pattern of w is kept exactly.
//   dense    W = G H⁻¹ (ridge regression; w only gives the shape, optional).
//   lowrank  W = A B; `iters` rounds of: B = (AᵀA + μI)⁻¹ Aᵀ G H⁻¹ (A fixed), then
//            Aᵀ = (B XᵀX Bᵀ + νI)⁻¹ B XᵀY (B fixed), μ and ν = ridge · mean diag.
// layout=kn: w and w_fit are [k,n] (GPT-2 Conv1D), and a/b are the factors of
// the stored [k,n] matrix as prune.lowrank makes them (a [k,r], b [r,n]).
// Reports rel_error_before / rel_error_after = ||Y - X Wᵀ||_F / ||Y||_F.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prune/prune.hpp"
#include "prune/prune_api.hpp"
#include "prune/prune_util.hpp"

namespace ymlopt {
namespace prune {

namespace pu = prune_util;
using std::int64_t;

namespace {

std::vector<double> transpose(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<std::size_t>(c * rows + r)] = a[static_cast<std::size_t>(r * cols + c)];
  return t;
}

void add_ridge(std::vector<double>& h, int64_t k, double ridge) {
  const double lam = ridge * pu::mean_diag(h, k);
  for (int64_t i = 0; i < k; ++i) h[static_cast<std::size_t>(i * k + i)] += lam;
}

}  // namespace

std::vector<double> refit(const double* x, int64_t m, int64_t k, const double* y, int64_t n, const double* w,
                          bool mask, double ridge) {
  if (!(ridge >= 0)) throw KernelError("ridge must be >= 0");
  if (mask && !w) throw KernelError("refit with mask = true needs the weight w");
  const std::vector<double> xv(x, x + m * k);
  std::vector<double> h = pu::gram(xv, m, k);
  add_ridge(h, k, ridge);
  std::vector<double> g(static_cast<std::size_t>(n * k));
  pu::gemm(true, false, n, k, m, 1.0, y, n, x, k, 0.0, g.data(), k);  // G = YᵀX

  // Rows grouped by their support (all columns when !mask).
  std::map<std::vector<char>, std::vector<int64_t>> groups;
  std::vector<char> supp(static_cast<std::size_t>(k), 1);
  for (int64_t i = 0; i < n; ++i) {
    if (mask)
      for (int64_t j = 0; j < k; ++j) supp[static_cast<std::size_t>(j)] = w[i * k + j] != 0;
    groups[supp].push_back(i);
  }
  std::vector<double> out(static_cast<std::size_t>(n * k), 0.0);
  std::vector<int64_t> cols;
  for (const auto& [s, rows] : groups) {
    cols.clear();
    for (int64_t j = 0; j < k; ++j)
      if (s[static_cast<std::size_t>(j)]) cols.push_back(j);
    const int64_t ns = static_cast<int64_t>(cols.size()), nr = static_cast<int64_t>(rows.size());
    if (ns == 0) continue;
    std::vector<double> hs(static_cast<std::size_t>(ns * ns)), rhs(static_cast<std::size_t>(ns * nr));
    for (int64_t a = 0; a < ns; ++a)
      for (int64_t b = 0; b < ns; ++b) hs[static_cast<std::size_t>(a * ns + b)] = h[static_cast<std::size_t>(cols[a] * k + cols[b])];
    for (int64_t a = 0; a < ns; ++a)
      for (int64_t r = 0; r < nr; ++r) rhs[static_cast<std::size_t>(a * nr + r)] = g[static_cast<std::size_t>(rows[r] * k + cols[a])];
    pu::spd_solve(hs, ns, rhs.data(), nr, "XᵀX restricted to a row's support");
    for (int64_t a = 0; a < ns; ++a)
      for (int64_t r = 0; r < nr; ++r) out[static_cast<std::size_t>(rows[r] * k + cols[a])] = rhs[static_cast<std::size_t>(a * nr + r)];
  }
  return out;
}

void refit_lowrank(const double* x, int64_t m, int64_t k, const double* y, int64_t n, std::vector<double>& a,
                   std::vector<double>& b, int64_t r, int64_t iters, double ridge) {
  if (!(ridge >= 0)) throw KernelError("ridge must be >= 0");
  if (iters < 1) throw KernelError("iters must be >= 1");
  if (static_cast<int64_t>(a.size()) != n * r || static_cast<int64_t>(b.size()) != r * k)
    throw KernelError("refit_lowrank: factor sizes do not match n, r, k");
  const std::vector<double> xv(x, x + m * k);
  const std::vector<double> h0 = pu::gram(xv, m, k);
  std::vector<double> h = h0;
  add_ridge(h, k, ridge);
  std::vector<double> g(static_cast<std::size_t>(n * k));
  pu::gemm(true, false, n, k, m, 1.0, y, n, x, k, 0.0, g.data(), k);  // G = YᵀX [n,k]
  std::vector<double> ata(static_cast<std::size_t>(r * r)), p(static_cast<std::size_t>(r * k)),
      bh(static_cast<std::size_t>(r * k)), bhb(static_cast<std::size_t>(r * r)), bg(static_cast<std::size_t>(r * n));
  for (int64_t it = 0; it < iters; ++it) {
    // B step: (AᵀA + μI) B H = Aᵀ G.
    pu::gemm(true, false, r, r, n, 1.0, a.data(), r, a.data(), r, 0.0, ata.data(), r);
    add_ridge(ata, r, ridge);
    pu::gemm(true, false, r, k, n, 1.0, a.data(), r, g.data(), k, 0.0, p.data(), k);
    pu::spd_solve(ata, r, p.data(), k, "AᵀA");                 // p = (AᵀA + μI)⁻¹ Aᵀ G   [r,k]
    std::vector<double> pt = transpose(p, r, k), hh = h;       // Bᵀ = H⁻¹ pᵀ            [k,r]
    pu::spd_solve(hh, k, pt.data(), r, "XᵀX + ridge");
    b = transpose(pt, k, r);
    // A step: (B H0 Bᵀ + νI) Aᵀ = B Gᵀ.
    pu::gemm(false, false, r, k, k, 1.0, b.data(), k, h0.data(), k, 0.0, bh.data(), k);
    pu::gemm(false, true, r, r, k, 1.0, bh.data(), k, b.data(), k, 0.0, bhb.data(), r);
    add_ridge(bhb, r, ridge);
    pu::gemm(false, true, r, n, k, 1.0, b.data(), k, g.data(), k, 0.0, bg.data(), n);
    pu::spd_solve(bhb, r, bg.data(), n, "B XᵀX Bᵀ");           // Aᵀ [r,n]
    a = transpose(bg, r, n);
  }
}

}  // namespace prune

namespace {

namespace pu = prune_util;
using std::int64_t;

using kutil::kFloat;

enum Port : std::size_t { kX, kY, kW, kA, kB, kWFit, kAFit, kBFit };

const std::vector<PortSpec>& distill_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 2, "calibration inputs [m, k]"},
      {"y_target", Access::read, kFloat, false, 2, "the original layer's outputs [m, n]"},
      {"w", Access::read, kFloat, true, 2, "compressed weight [n, k] (layout kn: [k, n]); modes mask (required), dense"},
      {"a", Access::read, kFloat, true, 2, "left factor [n, r] (layout kn: [k, r]); mode lowrank"},
      {"b", Access::read, kFloat, true, 2, "right factor [r, k] (layout kn: [r, n]); mode lowrank"},
      {"w_fit", Access::write, kFloat, true, 2, "refitted weight, shape of w; modes mask, dense"},
      {"a_fit", Access::write, kFloat, true, 2, "refitted left factor, shape of a; mode lowrank"},
      {"b_fit", Access::write, kFloat, true, 2, "refitted right factor, shape of b; mode lowrank"},
  };
  return p;
}

std::string need(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, const std::string& mode) {
  if (p[i].bound()) return "";
  return "mode '" + mode + "' needs port '" + s[i].name + "'";
}

std::string distill_check(const TaskShape& t) {
  const auto& s = distill_ports();
  const auto p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "mode", {"mask", "dense", "lowrank"}); !m.empty()) return m;
  if (auto m = pu::layout_arg(t.args); !m.empty()) return m;
  if (!(t.args.get_float("ridge") >= 0)) return "param 'ridge' is " + std::to_string(t.args.get_float("ridge")) + ": must be >= 0";
  if (t.args.get_int("iters") < 1) return "param 'iters' is " + std::to_string(t.args.get_int("iters")) + ": must be >= 1";
  const std::string mode = t.args.get_string("mode");
  const bool kn = pu::is_kn(t.args);
  const int64_t m = p[kX].rows, k = p[kX].cols, n = p[kY].cols;
  std::vector<std::string> errs = {pu::expect_shape(s, p, kY, m, p[kY].cols, "rows = tokens of x")};
  auto wshape = [&](std::size_t i) {
    return kn ? pu::expect_shape(s, p, i, k, n, "[k, n] for layout kn: k = columns of x, n = columns of y_target")
              : pu::expect_shape(s, p, i, n, k, "[n, k]: n = columns of y_target, k = columns of x");
  };
  if (mode == "lowrank") {
    errs.push_back(need(s, p, kA, mode));
    errs.push_back(need(s, p, kB, mode));
    errs.push_back(need(s, p, kAFit, mode));
    errs.push_back(need(s, p, kBFit, mode));
    if (p[kA].bound() && p[kB].bound()) {
      const int64_t r = p[kA].cols;
      if (r < 1) errs.push_back("port 'a' has no columns (rank 0)");
      errs.push_back(kn ? pu::expect_shape(s, p, kA, k, r, "[k, r] for layout kn")
                        : pu::expect_shape(s, p, kA, n, r, "[n, r]: n = columns of y_target"));
      errs.push_back(kn ? pu::expect_shape(s, p, kB, r, n, "[r, n] for layout kn")
                        : pu::expect_shape(s, p, kB, r, k, "[r, k]: r = columns of a, k = columns of x"));
      if (p[kAFit].bound()) errs.push_back(kutil::same_shape(s, p, kAFit, kA));
      if (p[kBFit].bound()) errs.push_back(kutil::same_shape(s, p, kBFit, kB));
    }
  } else {
    if (mode == "mask") errs.push_back(need(s, p, kW, mode));
    errs.push_back(need(s, p, kWFit, mode));
    if (p[kW].bound()) errs.push_back(wshape(kW));
    if (p[kWFit].bound()) errs.push_back(wshape(kWFit));
  }
  for (std::size_t i = 1; i < s.size(); ++i) errs.push_back(pu::same_dtype_opt(s, p, i, kX));
  for (const std::string& e : errs)
    if (!e.empty()) return e;
  return "";
}

Cost distill_cost(const TaskShape& t) {
  const double m = double(t.ports[kX].rows), k = double(t.ports[kX].cols), n = double(t.ports[kY].cols);
  const std::string& mode = t.args.get_string("mode");
  double f = m * k * k + 2 * m * n * k + 4 * m * n * k;  // gram, G, two error evaluations
  if (mode == "mask") f += n * k * k * k / 3;           // worst case: one factorisation per row
  else if (mode == "dense") f += k * k * k / 3 + 2 * n * k * k;
  else {
    const double r = double(t.ports[kA].cols), it = double(std::max<int64_t>(1, t.args.get_int("iters")));
    f += it * (k * k * k / 3 + 2 * r * k * k + 4 * n * r * k);
  }
  Cost c = kutil::io_cost(distill_ports(), t, f);
  c.extra_bytes = 8.0 * (k * k + 2 * n * k);
  return c;
}

/// ||Y - X Wᵀ||_F / ||Y||_F for dense row-major X [m,k], Y [m,n], W [n,k].
double rel_error(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w, int64_t m,
                 int64_t k, int64_t n) {
  std::vector<double> res = y;
  pu::gemm(false, true, m, n, k, -1.0, x.data(), k, w.data(), k, 1.0, res.data(), n);
  const double ny = pu::fro(y);
  return ny > 0 ? pu::fro(res) / ny : pu::fro(res);
}

std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t r,
                            int64_t k) {
  std::vector<double> w(static_cast<std::size_t>(n * k));
  pu::gemm(false, false, n, k, r, 1.0, a.data(), r, b.data(), k, 0.0, w.data(), k);
  return w;
}

void distill_cpu(KernelContext& ctx) {
  const auto& s = distill_ports();
  kutil::validate(ctx, s, distill_check);
  const bool kn = pu::is_kn(ctx.args());
  const std::string mode = ctx.arg_string("mode");
  const double ridge = ctx.arg_float("ridge");
  const int64_t m = ctx.port(kX).rows, k = ctx.port(kX).cols, n = ctx.port(kY).cols;
  const std::vector<double> x = pu::load(ctx.port(kX)), y = pu::load(ctx.port(kY));
  if (mode == "lowrank") {
    // Logical W = A B with A [n,r], B [r,k]; for kn the stored factors are Bᵀ (port a) and Aᵀ (port b).
    const int64_t r = ctx.port(kA).cols;
    std::vector<double> a = kn ? pu::load(ctx.port(kB), true) : pu::load(ctx.port(kA));
    std::vector<double> b = kn ? pu::load(ctx.port(kA), true) : pu::load(ctx.port(kB));
    ctx.report("rel_error_before", rel_error(x, y, product(a, b, n, r, k), m, k, n));
    prune::refit_lowrank(x.data(), m, k, y.data(), n, a, b, r, ctx.arg_int("iters"), ridge);
    ctx.report("rel_error_after", rel_error(x, y, product(a, b, n, r, k), m, k, n));
    if (kn) {
      pu::store(b, ctx.port(kAFit), true);
      pu::store(a, ctx.port(kBFit), true);
    } else {
      pu::store(a, ctx.port(kAFit));
      pu::store(b, ctx.port(kBFit));
    }
    return;
  }
  std::vector<double> w;
  if (ctx.port(kW).bound()) {
    w = pu::load(ctx.port(kW), kn);
    ctx.report("rel_error_before", rel_error(x, y, w, m, k, n));
  }
  const std::vector<double> wf = prune::refit(x.data(), m, k, y.data(), n, w.data(), mode == "mask", ridge);
  ctx.report("rel_error_after", rel_error(x, y, wf, m, k, n));
  pu::store(wf, ctx.port(kWFit), kn);
}

}  // namespace

/// Registers distill.layerwise.
///
///   <task component="distill.layerwise" x="acts" y_target="fc1.out" w="fc1.sparse" w_fit="fc1.fit"/>
///   <task component="distill.layerwise" mode="lowrank" x="acts" y_target="fc1.out" a="fc1.a" b="fc1.b"
///         a_fit="fc1.a2" b_fit="fc1.b2" iters="2"/>
void register_distill(Registry& reg) {
  kutil::add_component(
      reg, "distill.layerwise",
      "closed-form least-squares refit of a compressed layer to the original outputs y_target on inputs x: "
      "mask (keep w's zeros), dense (ridge regression) or lowrank (alternating refit of a, b)",
      distill_ports(),
      {{"mode", ParamType::string_, "mask", false, "'mask', 'dense' or 'lowrank'"},
       {"ridge", ParamType::float_, "1e-4", false, "ridge, relative to the mean diagonal of the Gram matrix"},
       {"iters", ParamType::int_, "1", false, "alternations of the lowrank refit"},
       {"layout", ParamType::string_, "nk", false, "'nk' (torch Linear) or 'kn' (GPT-2 Conv1D)"}},
      distill_cpu, distill_check, distill_cost);
}

}  // namespace ymlopt
