// The pass `smooth` (see ymlopt/optimizer/smooth.hpp): SmoothQuant / AWQ per-input-channel
// scales, folded exactly into the op that makes the scaled linear layers' input.
//
// Per producer task P (in program order) whose output x is read, before x is next
// overwritten, only by dense nn.linear layers reading x whole as their input (the
// "consumers", e.g. one qkv layer, or q, k and v):
//   P = nn.layernorm:            gamma' = gamma / s, beta' = beta / s
//   P = nn.linear (no residual, activation none or relu, writing x whole, its own weight
//       dense and whole): its weight rows and bias / s
// and every consumer W' = W diag(s). Other inputs (a residual stream, an attention
// output, a pooled state) have no exact fold and are listed under "skipped". The
// calibration inputs of the consumers are divided by s as well, so that a calibrating
// quantizer after this pass (quant.gptq) sees the inputs of the scaled model.
#include "ymlopt/optimizer/smooth.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "pass_util.hpp"
#include "smooth_pass.hpp"
#include "component_names.hpp"

namespace ymlopt::opt {

std::vector<double> smooth_scales(const std::vector<double>& act_absmax, const std::vector<double>& w_absmax,
                                  double alpha) {
  if (act_absmax.size() != w_absmax.size()) throw std::invalid_argument("smooth_scales: sizes differ");
  std::vector<double> s(act_absmax.size(), 1.0);
  for (std::size_t j = 0; j < s.size(); ++j)
    if (act_absmax[j] > 0 && w_absmax[j] > 0) s[j] = std::pow(act_absmax[j], alpha) / std::pow(w_absmax[j], 1 - alpha);
  return s;
}

std::vector<double> awq_scales(const std::vector<double>& act_absmean, double alpha) {
  std::vector<double> s(act_absmean.size(), 1.0);
  double hi = 0, lo = 0;
  bool any = false;
  for (std::size_t j = 0; j < s.size(); ++j) {
    if (!(act_absmean[j] > 0)) continue;
    s[j] = std::pow(act_absmean[j], alpha);
    hi = any ? std::max(hi, s[j]) : s[j];
    lo = any ? std::min(lo, s[j]) : s[j];
    any = true;
  }
  if (!any) return s;
  const double norm = std::sqrt(hi * lo);
  for (std::size_t j = 0; j < s.size(); ++j)
    if (act_absmean[j] > 0) s[j] /= norm;
  return s;
}

void fake_quantize(std::vector<float>& w, std::int64_t n, std::int64_t k, int bits, std::int64_t group,
                   bool symmetric) {
  const std::int64_t g = group > 0 ? group : k;
  if (k % g != 0) throw std::invalid_argument("fake_quantize: k is not a multiple of the group");
  const float qmax = bits == 8 ? 255.0f : 15.0f;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c0 = 0; c0 < k; c0 += g) {
      float* x = w.data() + r * k + c0;
      if (symmetric && bits == 8) {  // d = amax / 127, q = roundf(x / d)
        float amax = 0;
        for (std::int64_t c = 0; c < g; ++c) amax = std::max(amax, std::fabs(x[c]));
        const float d = amax / 127.0f, inv = d != 0 ? 1.0f / d : 0.0f;
        for (std::int64_t c = 0; c < g; ++c) x[c] = std::roundf(x[c] * inv) * d;
      } else if (symmetric) {  // Q4_0: d = m / -8, q = min(15, (int)(x / d + 8.5))
        float amax = 0, m = 0;
        for (std::int64_t c = 0; c < g; ++c)
          if (std::fabs(x[c]) > amax) amax = std::fabs(x[c]), m = x[c];
        const float d = m / -8.0f, inv = d != 0 ? 1.0f / d : 0.0f;
        for (std::int64_t c = 0; c < g; ++c) {
          const int q = std::min(15, static_cast<int>(x[c] * inv + 8.5f));
          x[c] = float(q - 8) * d;
        }
      } else {  // lo/hi range, zero = -lo / scale
        float lo = x[0], hi = x[0];
        for (std::int64_t c = 0; c < g; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]);
        if (hi == lo) continue;  // a constant group is exact
        const float scale = (hi - lo) / qmax, inv = 1.0f / scale, zero = -lo / scale;
        for (std::int64_t c = 0; c < g; ++c) {
          const float q = std::clamp(std::roundf((x[c] - lo) * inv), 0.0f, qmax);
          x[c] = (q - zero) * scale;
        }
      }
    }
}

}  // namespace ymlopt::opt

namespace ymlopt::opt::detail {
namespace {

struct Options {
  std::string mode = "smooth";
  double alpha = 0.5;  // smooth: the exponent; awq: < 0 = search the grid
  int grid = 20, bits = 4;
  std::int64_t group = 128;
  bool symmetric = true;
};

Options options(const PassSpec& s) {
  Options o;
  o.mode = opt_str(s, "mode", "smooth");
  if (o.mode != "smooth" && o.mode != "awq") throw PassError("option 'mode' of smooth must be smooth or awq, not '" + o.mode + "'");
  const std::string a = opt_str(s, "alpha", o.mode == "awq" ? "search" : "0.5");
  if (a == "search") {
    o.alpha = -1;
  } else {
    o.alpha = opt_num(s, "alpha", 0.5);
    if (!(o.alpha >= 0 && o.alpha <= 1)) throw PassError("option 'alpha' of smooth must be in [0, 1] or search");
  }
  const double grid = opt_num(s, "grid", 20);
  if (!(grid >= 1 && grid <= 1000 && grid == std::floor(grid))) throw PassError("option 'grid' of smooth must be an integer in [1, 1000]");
  o.grid = int(grid);
  o.bits = int(opt_num(s, "bits", 4));
  if (o.bits != 4 && o.bits != 8) throw PassError("option 'bits' of smooth must be 4 or 8");
  o.group = std::int64_t(opt_num(s, "group", 128));
  if (o.group != 0 && o.group != 32 && o.group != 64 && o.group != 128)
    throw PassError("option 'group' of smooth must be 0 (per channel), 32, 64 or 128");
  const std::string sym = opt_str(s, "symmetric", "true");
  if (sym != "true" && sym != "false") throw PassError("option 'symmetric' of smooth must be true or false");
  o.symmetric = sym == "true";
  if (o.bits == 4 && o.group == 0) throw PassError("option 'group' of smooth: 4-bit weights need a group (32, 64 or 128)");
  return o;
}

/// A producer's output and the linear layers that read it.
struct Group {
  std::size_t producer = 0;
  DataRef x;
  std::vector<std::size_t> consumers;  // task indices
  std::string why;                     // why it cannot be scaled ("" = it can)
};

bool reads_only(const TaskNode& t, std::int32_t d, const ModelEditor& ed, std::size_t port) {
  for (std::size_t p = 0; p < t.bindings.size(); ++p)
    if (t.bindings[p].ref.data == d && (p != port || t.bindings[p].mode != Access::read)) return false;
  (void)ed;
  return true;
}

/// The tasks that read the value producer `p` writes to x, up to its next full overwrite.
Group group_of(const ModelEditor& ed, std::size_t p, const DataRef& x) {
  const Dag& dag = ed.dag();
  Group g{p, x, {}, ""};
  for (std::size_t j = p + 1; j < dag.tasks.size(); ++j) {
    const TaskNode& t = dag.tasks[j];
    if (!touches(t, x.data)) continue;
    if (t.comp->name == components::kLinear) {
      const std::size_t px = ed.port_index(t, "x");
      if (t.bindings[px].ref == x && reads_only(t, x.data, ed, px)) {
        g.consumers.push_back(j);
        continue;
      }
    }
    // a plain overwrite of x ends the value's life; anything else reads it otherwise
    bool overwrite = false, other = false;
    for (const Binding& b : t.bindings) {
      if (b.ref.data != x.data) continue;
      if (b.mode == Access::write && b.ref == x) overwrite = true;
      else other = true;
    }
    if (overwrite && !other) break;
    g.why = ModelEditor::task_key(t) + " (" + t.comp->name + ") also reads " + dag.ref_name(x);
    return g;
  }
  if (g.consumers.empty()) g.why = "no linear layer reads " + dag.ref_name(x);
  return g;
}

/// The WeightUse of a task's weight (by the data it reads), or data = -1.
WeightUse use_of(const ModelEditor& ed, std::size_t task) {
  const TaskNode& t = ed.dag().tasks[task];
  const DataRef w = t.bindings[ed.port_index(t, "w")].ref;
  for (WeightUse& u : ed.linear_weights())
    if (u.data == w.data) return u;
  return {};
}

/// Can the 1-D f32 tensor bound to (task, port) be replaced under its own key? It must
/// be a whole file-backed vector read by that task only, its key read by no other data.
std::string vector_ok(const ModelEditor& ed, std::size_t task, const std::string& port, std::int64_t k) {
  const Dag& dag = ed.dag();
  const TaskNode& t = dag.tasks[task];
  const DataRef r = t.bindings[ed.port_index(t, port)].ref;
  if (r.data < 0) return "";
  const DataDecl& d = dag.data[std::size_t(r.data)];
  if (r.tile >= 0 || d.init != InitKind::file || d.rows * d.cols != k || !d.format.empty())
    return port + " of " + ModelEditor::task_key(t) + " is not a whole stored vector of " + std::to_string(k);
  for (std::size_t j = 0; j < dag.tasks.size(); ++j)
    for (std::size_t p = 0; p < dag.tasks[j].bindings.size(); ++p) {
      const DataRef& o = dag.tasks[j].bindings[p].ref;
      if (o.data < 0 || (j == task && o.data == r.data)) continue;
      const DataDecl& od = dag.data[std::size_t(o.data)];
      if (o.data == r.data || (od.init == InitKind::file && od.key == d.key && od.src == d.src))
        return port + " of " + ModelEditor::task_key(t) + " is also read by " + ModelEditor::task_key(dag.tasks[j]);
    }
  return "";
}

/// Replaces the vector bound to (task, port) by v, stored under the same key, so the
/// original workflow reads the new values from the written weights file.
void replace_vector(ModelEditor& ed, std::size_t task, const std::string& port, const std::vector<float>& v) {
  TaskNode& t = ed.dag().tasks[task];
  const DataRef r = t.bindings[ed.port_index(t, port)].ref;
  if (r.data < 0) return;
  const DataDecl d = ed.dag().data[std::size_t(r.data)];
  ed.bind(t, port, ed.add_tensor(d.key.empty() ? d.name : d.key, DType::f32, d.shape, vec_bytes(v)));
}

/// Why producer task p's output cannot take the 1/s fold ("" = it can).
std::string producer_ok(const ModelEditor& ed, std::size_t p, std::int64_t k) {
  const TaskNode& t = ed.dag().tasks[p];
  const std::string key = ModelEditor::task_key(t);
  if (t.comp->name == components::kLayerNorm) {
    if (t.bindings[ed.port_index(t, "gamma")].ref.data < 0) return key + " has no gamma to fold into";
    for (const char* port : {"gamma", "beta"})
      if (auto w = vector_ok(ed, p, port, k); !w.empty()) return w;
    return "";
  }
  if (t.comp->name == components::kLinear) {
    const std::string act = t.args.get_string("activation");
    if (act != "none" && act != "relu") return key + " has activation " + act + " (only none and relu commute with 1/s)";
    if (t.bindings[ed.port_index(t, "r")].ref.data >= 0) return key + " adds a residual";
    if (t.args.get_string("format") != "dense") return key + " is not dense";
    const WeightUse u = use_of(ed, p);
    if (u.data < 0 || u.tile_n > 0 || u.tasks.size() != 1 || u.n != k)
      return key + "'s weight is not a whole dense weight of this task alone";
    return vector_ok(ed, p, "b", k);
  }
  return key + " (" + t.comp->name + ") has no exact fold";
}

std::vector<double> act_absmax(const Calibration::Input& in) {
  std::vector<double> a(std::size_t(in.k), 0.0);
  for (std::int64_t r = 0; r < in.m; ++r)
    for (std::int64_t j = 0; j < in.k; ++j)
      a[std::size_t(j)] = std::max(a[std::size_t(j)], double(std::fabs(in.x[std::size_t(r * in.k + j)])));
  return a;
}

std::vector<double> act_absmean(const Calibration::Input& in) {
  std::vector<double> a(std::size_t(in.k), 0.0);
  for (std::int64_t r = 0; r < in.m; ++r)
    for (std::int64_t j = 0; j < in.k; ++j) a[std::size_t(j)] += std::fabs(double(in.x[std::size_t(r * in.k + j)]));
  for (double& v : a) v /= double(std::max<std::int64_t>(in.m, 1));
  return a;
}

/// Σ over the consumers of ||X (Q(W diag(s)) diag(s)⁻¹ - W)ᵀ||² / m = Σ tr(ΔW H ΔWᵀ), H = XᵀX / m.
double awq_loss(const std::vector<DenseWeight>& ws, const std::vector<double>& h, const std::vector<double>& s,
                const Options& o) {
  double loss = 0;
  for (const DenseWeight& w : ws) {
    const std::int64_t n = w.n, k = w.k;
    std::vector<float> q(w.w.size());
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t j = 0; j < k; ++j) q[std::size_t(r * k + j)] = float(double(w.w[std::size_t(r * k + j)]) * s[std::size_t(j)]);
    fake_quantize(q, n, k, o.bits, o.group, o.symmetric);
    std::vector<double> dw(q.size()), dh(q.size());
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t j = 0; j < k; ++j) {
        const std::size_t i = std::size_t(r * k + j);
        dw[i] = double(q[i]) / s[std::size_t(j)] - double(w.w[i]);
      }
    cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, int(n), int(k), 1.0, h.data(), int(k), dw.data(), int(k), 0.0,
                dh.data(), int(k));
    for (std::size_t i = 0; i < dw.size(); ++i) loss += dw[i] * dh[i];
  }
  return loss;
}

/// W8A8 (the quant.int8 kernel's rules: weights int8 per output channel, each input row
/// int8 with a = max|x| / 127, ties to even): Σ over the consumers of
/// ||Q(X diag(s)⁻¹) Q(W diag(s))ᵀ - X Wᵀ||² / m on up to 2048 evenly spaced calibration rows.
struct W8A8Objective {
  std::int64_t m = 0, k = 0;
  std::vector<float> x;                // the rows used
  std::vector<std::vector<float>> y0;  // X Wᵀ per consumer
  const std::vector<DenseWeight>& ws;
  W8A8Objective(const Calibration::Input& in, const std::vector<DenseWeight>& w) : k(in.k), ws(w) {
    const std::int64_t take = std::min<std::int64_t>(in.m, 2048);
    for (std::int64_t i = 0; i < take; ++i) {
      const std::int64_t r = i * in.m / take;
      x.insert(x.end(), in.x.begin() + r * k, in.x.begin() + (r + 1) * k);
    }
    m = take;
    for (const DenseWeight& d : ws) {
      y0.emplace_back(std::size_t(m * d.n));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(d.n), int(k), 1.0f, x.data(), int(k), d.w.data(),
                  int(k), 0.0f, y0.back().data(), int(d.n));
    }
  }
  double operator()(const std::vector<double>& s) const {
    std::vector<float> xq(x.size());
    for (std::int64_t r = 0; r < m; ++r) {
      float amax = 0;
      for (std::int64_t j = 0; j < k; ++j) {
        const float v = float(double(x[std::size_t(r * k + j)]) / s[std::size_t(j)]);
        xq[std::size_t(r * k + j)] = v;
        amax = std::max(amax, std::fabs(v));
      }
      const float a = amax / 127.0f, inv = a != 0 ? 1.0f / a : 0.0f;
      for (std::int64_t j = 0; j < k; ++j) {
        float& v = xq[std::size_t(r * k + j)];
        v = std::nearbyint(v * inv) * a;
      }
    }
    double loss = 0;
    for (std::size_t c = 0; c < ws.size(); ++c) {
      const DenseWeight& d = ws[c];
      std::vector<float> wq(d.w.size()), y(std::size_t(m * d.n));
      for (std::int64_t r = 0; r < d.n; ++r)
        for (std::int64_t j = 0; j < k; ++j)
          wq[std::size_t(r * k + j)] = float(double(d.w[std::size_t(r * k + j)]) * s[std::size_t(j)]);
      fake_quantize(wq, d.n, k, 8, 0, true);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(d.n), int(k), 1.0f, xq.data(), int(k), wq.data(),
                  int(k), 0.0f, y.data(), int(d.n));
      for (std::size_t i = 0; i < y.size(); ++i) loss += double(y[i] - y0[c][i]) * double(y[i] - y0[c][i]);
    }
    return loss / double(std::max<std::int64_t>(m, 1));
  }
};

}  // namespace

void check_smooth(const PassSpec& s) { (void)options(s); }

namespace {

// The consumers' weights of group `g` (into `uses`, each once): all dense, each
// read by consumers of the group only; why not, else "".
std::string group_uses(const ModelEditor& ed, const Group& g, std::vector<WeightUse>& uses) {
  std::string why = g.why;
  for (std::size_t c : g.consumers) {
    if (!why.empty()) break;
    WeightUse u = use_of(ed, c);
    if (u.data < 0 || ed.dag().tasks[c].args.get_string("format") != "dense") {
      why = ModelEditor::task_key(ed.dag().tasks[c]) + "'s weight cannot be changed (not a dense stored weight of linears only)";
      break;
    }
    for (std::size_t t : u.tasks)
      if (std::find(g.consumers.begin(), g.consumers.end(), t) == g.consumers.end())
        why = u.name + " is also read by " + ModelEditor::task_key(ed.dag().tasks[t]) + " on another input";
    if (std::none_of(uses.begin(), uses.end(), [&](const WeightUse& v) { return v.data == u.data; })) uses.push_back(u);
  }
  return why;
}

// mode=smooth: SmoothQuant's s = max|X|^alpha / max|W|^(1-alpha), alpha given or
// searched on the grid (and s = 1) for the least W8A8 output error
std::vector<double> smoothquant_scales(const Options& o, const Calibration::Input& in, const std::vector<DenseWeight>& ws,
                                       std::int64_t k, nlohmann::json& rec) {
  std::vector<double> sc;
  std::vector<double> wmax(std::size_t(k), 0.0);
  for (const DenseWeight& w : ws)
    for (std::int64_t r = 0; r < w.n; ++r)
      for (std::int64_t j = 0; j < k; ++j)
        wmax[std::size_t(j)] = std::max(wmax[std::size_t(j)], double(std::fabs(w.w[std::size_t(r * k + j)])));
  const std::vector<double> amax = act_absmax(in);
  if (o.alpha >= 0) {
    sc = smooth_scales(amax, wmax, o.alpha);
    rec["alpha"] = o.alpha;
    return sc;
  }
  // the grid's alpha with the least W8A8 output error on the calibration rows
  const W8A8Objective f(in, ws);
  double best = 0, best_alpha = 0;
  for (int i = 0; i <= o.grid; ++i) {
    const double a = double(i) / o.grid;
    std::vector<double> si = smooth_scales(amax, wmax, a);
    const double l = f(si);
    if (i == 0) rec["loss_alpha0"] = l;  // s = (max|W|)^-1 per channel, no activation term
    if (i == 0 || l < best) best = l, best_alpha = a, sc = std::move(si);
  }
  // s = 1 is not in the family (alpha 0 gives 1 / max|W|): a candidate of its own, so the
  // search never leaves a layer worse than without smoothing on the calibration rows
  const double unscaled = f(std::vector<double>(std::size_t(k), 1.0));
  rec["loss_unscaled"] = unscaled;
  rec["kept_unscaled"] = unscaled <= best;
  if (unscaled <= best) best = unscaled, sc.assign(std::size_t(k), 1.0);
  rec["alpha"] = best_alpha;
  rec["loss"] = best;
  return sc;
}

// mode=awq: s = mean|X|^alpha, alpha given or the grid's with the least
// quantized output error (H = XᵀX / m)
std::vector<double> awq_mode_scales(const Options& o, const Calibration::Input& in, const std::vector<DenseWeight>& ws,
                                    std::int64_t k, nlohmann::json& rec) {
  std::vector<double> sc;
  const std::vector<double> mean = act_absmean(in);
  std::vector<double> xd(in.x.begin(), in.x.end()), h(std::size_t(k * k), 0.0);
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, int(k), int(in.m), 1.0 / double(std::max<std::int64_t>(in.m, 1)),
              xd.data(), int(k), 0.0, h.data(), int(k));
  std::vector<double> alphas;
  if (o.alpha >= 0) alphas = {o.alpha};
  else
    for (int i = 0; i <= o.grid; ++i) alphas.push_back(double(i) / o.grid);
  double best = 0, base = 0, best_alpha = 0;
  for (std::size_t i = 0; i < alphas.size(); ++i) {
    std::vector<double> si = awq_scales(mean, alphas[i]);
    const double l = awq_loss(ws, h, si, o);
    if (alphas[i] == 0) base = l;
    if (i == 0 || l < best) best = l, best_alpha = alphas[i], sc = std::move(si);
  }
  rec["alpha"] = best_alpha;
  rec["loss"] = best;
  if (o.alpha < 0) rec["loss_alpha0"] = base;  // plain round-to-nearest (s = 1)
  return sc;
}

// Folds 1/s into producer task p: a LayerNorm's gamma and beta, or a linear's
// weight rows and bias.
void fold_into_producer(ModelEditor& ed, std::size_t p, const std::vector<double>& sc, std::int64_t k) {
  const TaskNode& pt = ed.dag().tasks[p];
  if (pt.comp->name == components::kLayerNorm) {
    for (const char* port : {"gamma", "beta"}) {
      const DataRef r = pt.bindings[ed.port_index(pt, port)].ref;
      if (r.data < 0) continue;
      std::vector<float> v = ed.load_values(r.data);
      for (std::int64_t j = 0; j < k; ++j) v[std::size_t(j)] = float(double(v[std::size_t(j)]) / sc[std::size_t(j)]);
      replace_vector(ed, p, port, v);
    }
    return;
  }
  const WeightUse pu = use_of(ed, p);
  DenseWeight pw = ed.load(pu);
  for (std::int64_t r = 0; r < pw.n; ++r)
    for (std::int64_t j = 0; j < pw.k; ++j) {
      float& v = pw.w[std::size_t(r * pw.k + j)];
      v = float(double(v) / sc[std::size_t(r)]);
    }
  Buf b = Buf::of(pw.w, pw.n, pw.k);
  NewTensor t = tensor("w", b);
  t.shape = {pw.n, pw.k};
  ed.replace(pu, {std::move(t)}, {{"transpose_w", "true"}});
  const DataRef br = ed.dag().tasks[p].bindings[ed.port_index(ed.dag().tasks[p], "b")].ref;
  if (br.data >= 0) {
    std::vector<float> v = ed.load_values(br.data);
    for (std::int64_t j = 0; j < k; ++j) v[std::size_t(j)] = float(double(v[std::size_t(j)]) / sc[std::size_t(j)]);
    replace_vector(ed, p, "b", v);
  }
  // the producer's own calibration input is unchanged; its output (our x) is scaled by scale_inputs
}

// W diag(s) for every consumer weight; their names go to `done`.
void scale_consumers(ModelEditor& ed, const std::vector<WeightUse>& uses, std::vector<DenseWeight>& ws,
                     const std::vector<double>& sc, std::int64_t k, std::set<std::string>& done) {
  for (std::size_t i = 0; i < uses.size(); ++i) {
    DenseWeight& w = ws[i];
    for (std::int64_t r = 0; r < w.n; ++r)
      for (std::int64_t j = 0; j < k; ++j) {
        float& v = w.w[std::size_t(r * k + j)];
        v = float(double(v) * sc[std::size_t(j)]);
      }
    WeightUse u = uses[i];
    for (const WeightUse& c : ed.linear_weights())  // data indices may have moved with the producer's replacement
      if (c.name == u.name) u = c;
    Buf b = Buf::of(w.w, w.n, w.k);
    NewTensor t = tensor("w", b);
    t.shape = {w.n, w.k};
    ed.replace(u, {std::move(t)}, {{"transpose_w", "true"}});
    done.insert(u.name);
  }
}

// The consumers' calibration inputs divided by s, each input once, so that
// later passes see the scaled model's inputs.
void scale_inputs(Calibration& calib, const ModelEditor& ed, const Group& g, const std::vector<double>& sc, std::int64_t k) {
  std::set<std::string> scaled_inputs;
  for (std::size_t c : g.consumers) {
    auto it = calib.inputs.find(ModelEditor::task_key(ed.dag().tasks[c]));
    if (it == calib.inputs.end() || !scaled_inputs.insert(it->first).second) continue;
    Calibration::Input& ci = it->second;
    for (std::int64_t r = 0; r < ci.m; ++r)
      for (std::int64_t j = 0; j < k; ++j) {
        float& v = ci.x[std::size_t(r * k + j)];
        v = float(double(v) / sc[std::size_t(j)]);
      }
  }
}

}  // namespace

void pass_smooth(PassContext& ctx, const PassSpec& s) {
  const Options o = options(s);
  if (!ctx.calib) throw PassError("smooth needs calibration activations");
  // the consumers' inputs are divided by s (in the context's own copy) so that later
  // passes see the scaled model's inputs
  Calibration& calib = ctx.writable_calibration();
  ModelEditor& ed = ctx.ed;
  std::set<std::string> chosen;
  for (const WeightUse& u : selected(ctx, s)) chosen.insert(u.name);
  nlohmann::json layers = nlohmann::json::array(), skipped = nlohmann::json::array();
  std::set<std::string> done;  // consumer weights scaled
  for (std::size_t p = 0; p < ed.dag().tasks.size(); ++p) {
    const TaskNode& pt = ed.dag().tasks[p];
    if (pt.comp->name != components::kLayerNorm && pt.comp->name != components::kLinear) continue;
    const Binding& yb = pt.bindings[ed.port_index(pt, "y")];
    if (yb.mode != Access::write || yb.ref.tile >= 0) continue;
    const Group g = group_of(ed, p, yb.ref);
    if (g.consumers.empty()) continue;
    // the consumers' weights, all selected, dense, each read by consumers of this group only
    std::vector<WeightUse> uses;
    std::string why = group_uses(ed, g, uses);
    bool any_chosen = false, all_chosen = true;
    for (const WeightUse& u : uses) {
      if (chosen.count(u.name)) any_chosen = true;
      else all_chosen = false;
    }
    if (uses.empty() || !any_chosen) continue;
    if (!all_chosen && why.empty()) why = "option 'match' selects only some of the layers reading one input";
    const std::int64_t k = uses.front().k;
    for (const WeightUse& u : uses)
      if (why.empty() && u.k != k) why = "the layers reading " + ed.dag().ref_name(g.x) + " differ in width";
    if (why.empty() && o.mode == "awq" && o.group > 0 && k % o.group != 0)
      why = "k=" + std::to_string(k) + " does not split into groups of " + std::to_string(o.group) +
            " (the quantizer would skip it too)";
    if (why.empty()) why = producer_ok(ed, p, k);
    if (!why.empty()) {
      for (const WeightUse& u : uses) skipped.push_back(u.name + ": " + why);
      continue;
    }
    // calibration: the consumers' input (each consumer task holds the same rows)
    const std::string key0 = ModelEditor::task_key(ed.dag().tasks[g.consumers.front()]);
    auto cit = calib.inputs.find(key0);
    if (cit == calib.inputs.end()) throw std::runtime_error("smooth: no calibration input captured for task '" + key0 + "'");
    if (cit->second.k != k) throw std::runtime_error("smooth: calibration input of '" + key0 + "' has the wrong width");
    const Calibration::Input& in = cit->second;
    std::vector<DenseWeight> ws;
    for (const WeightUse& u : uses) ws.push_back(ed.load(u));
    nlohmann::json rec = {{"producer", ModelEditor::task_key(pt)}, {"input", ed.dag().ref_name(g.x)}};
    std::vector<std::string> names;
    for (const WeightUse& u : uses) names.push_back(u.name);
    rec["layers"] = names;
    const std::vector<double> sc = o.mode == "smooth" ? smoothquant_scales(o, in, ws, k, rec) : awq_mode_scales(o, in, ws, k, rec);
    double smin = sc.front(), smax = sc.front();
    for (double v : sc) smin = std::min(smin, v), smax = std::max(smax, v);
    rec["scale_min"] = smin;
    rec["scale_max"] = smax;
    fold_into_producer(ed, p, sc, k);
    scale_consumers(ed, uses, ws, sc, k, done);
    scale_inputs(calib, ed, g, sc, k);
    layers.push_back(rec);
  }
  for (const WeightUse& u : selected(ctx, s))
    if (!done.count(u.name)) {
      bool listed = false;
      for (const auto& sk : skipped) listed = listed || sk.get<std::string>().rfind(u.name + ":", 0) == 0;
      if (!listed) skipped.push_back(u.name + ": its input has no exact fold (not made by a LayerNorm or a linear with "
                                              "no activation or a ReLU, read by linear layers only)");
    }
  ctx.log.push_back({{"pass", s.text()}, {"mode", o.mode}, {"layers", layers}, {"scaled", done.size()}, {"skipped", skipped}});
}

}  // namespace ymlopt::opt::detail
