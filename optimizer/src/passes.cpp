// The passes: each selects the linear layers whose weights it can change
// (dense, loaded from a file, not shared with another component; option
// `match` filters by weight name with a regex), runs the same registered
// component a workflow would (quant.*, prune.*, sparse.*, distill.*) on each
// weight, and rebinds the layer to the result.
#include "ymlopt/optimizer/passes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "pass_util.hpp"
#include "embedding_passes.hpp"
#include "smooth_pass.hpp"
#include "sparse/sparse_linear.hpp"
#include "ymlopt/xml/diagnostic.hpp"
#include "component_names.hpp"

namespace ymlopt::opt {
namespace {

using std::int64_t;
using namespace detail;

class LayerInputs;
/// The weight becomes a dense [n, k] f32 tensor (pruned or refitted); the new
/// tensor and args also go to `mirror` (a pass's corrected calibration runs).
void replace_dense(PassContext& ctx, const WeightUse& u, const std::vector<float>& w, LayerInputs* mirror = nullptr);

int64_t count_zeros(const std::vector<float>& w) { return std::count(w.begin(), w.end(), 0.0f); }

struct Tally {
  int64_t layers = 0, bytes_before = 0, bytes_after = 0, zeros = 0, values = 0;
  std::vector<std::string> skipped;
  void add(const WeightUse& u, int64_t after, int64_t zeros_after) {
    ++layers;
    bytes_before += u.n * u.k * 4;
    bytes_after += after;
    zeros += zeros_after;
    values += u.n * u.k;
  }
  nlohmann::json json(const std::string& pass) const {
    nlohmann::json j = {{"pass", pass},
                        {"layers", layers},
                        {"weight_bytes_before", bytes_before},
                        {"weight_bytes_after", bytes_after},
                        {"sparsity", values ? double(zeros) / double(values) : 0.0}};
    if (!skipped.empty()) j["skipped"] = skipped;
    return j;
  }
};

// ---------------------------------------------------------------- quantization

/// The activations option of the quantizers: the nn.linear args it sets
/// (activations=f32: weight-only kernel; int8, the default, sets nothing).
std::map<std::string, std::string> linear_args(const PassSpec& s, int bits, int64_t group) {
  const std::string act = opt_str(s, "activations", "int8");
  if (act != "int8" && act != "f32") throw PassError("option 'activations' of " + s.name + " must be int8 or f32");
  std::map<std::string, std::string> a = {
      {"format", bits == 4 ? "int4" : "int8"}, {"group", std::to_string(group)}, {"transpose_w", "false"}};
  if (act == "f32") a["activations"] = "f32";
  return a;
}

/// quant.int8 / quant.group / quant.q8_0 / quant.q4_0: codes + scales (+ zeros).
/// scale_dtype: how quant.int8 / quant.group store scales and zeros (f32, or f16 with the
/// codes computed against the f16 values); q8_0 / q4_0 are f16 by definition.
void quantize(PassContext& ctx, const PassSpec& s, const std::string& component, int bits, int64_t group,
              bool symmetric, std::map<std::string, std::string> args, DType scale_dtype = DType::f32) {
  Tally tally;
  nlohmann::json formats = nlohmann::json::object();
  const std::map<std::string, std::string> largs = linear_args(s, bits, group);  // checks the option first
  const char* mode = largs.count("activations") ? " weight-only" : "";
  for (const WeightUse& u : selected(ctx, s)) {
    if ((group > 0 && u.k % group != 0) || (bits == 4 && u.k % 2 != 0)) {
      tally.skipped.push_back(u.name + ": k=" + std::to_string(u.k) + " does not split into groups");
      continue;
    }
    const DenseWeight dw = ctx.ed.load(u);
    const int64_t g = group > 0 ? u.k / group : 1;
    Buf w = Buf::of(dw.w, u.n, u.k);
    Buf q(DType::i8, u.n, bits == 4 ? u.k / 2 : u.k);
    const DType sd = component == components::kQuantQ8_0 || component == components::kQuantQ4_0 ? DType::f16 : scale_dtype;
    Buf scale = group > 0 ? Buf(sd, u.n, g) : Buf(sd, 1, u.n);
    Buf zero = group > 0 ? Buf(sd, u.n, g) : Buf(sd, 1, u.n);
    std::map<std::string, Buf*> ports = {{"w", &w}, {"q", &q}, {"scale", &scale}};
    if (!symmetric) ports["zero"] = &zero;
    Buf eye;  // quant.group:clip_search=true runs quant.gptq with H = I: round-to-nearest with an MSE clip search
    if (component == components::kQuantGptq) {
      eye = Buf(DType::f64, u.k, u.k);
      for (int64_t j = 0; j < u.k; ++j) reinterpret_cast<double*>(eye.bytes.data())[j * u.k + j] = 1.0;
      ports["h"] = &eye;
    }
    run_component(ctx.ed.registry(), component, ports, args);
    std::vector<NewTensor> ts = {tensor("w", q), tensor("w_scale", scale)};
    if (!symmetric) ts.push_back(tensor("w_zero", zero));
    ctx.ed.replace(u, std::move(ts), largs);
    formats[u.name] = std::string(bits == 4 ? "int4" : "int8") + " group=" + std::to_string(group) +
                      (symmetric ? " symmetric" : " asymmetric") + " scale=" + dtype_name(sd) +
                      mode + " (" +
                      (component == components::kQuantGptq ? "quant.group clip_search: quant.gptq with H = I" : component) + ")";
    tally.add(u, int64_t(q.bytes.size() + scale.bytes.size() + (symmetric ? 0 : zero.bytes.size())), count_zeros(dw.w));
  }
  auto j = tally.json(s.text());
  j["formats"] = formats;
  ctx.log.push_back(j);
}

void pass_int8(PassContext& ctx, const PassSpec& s) { quantize(ctx, s, components::kQuantInt8, 8, 0, true, {}); }

/// The clip_search / clip_min options of quant.group and quant.gptq, checked: whether clip search is on.
bool clip_search_option(const PassSpec& s, const std::string& pass) {
  const std::string clip = opt_str(s, "clip_search", "false");
  if (clip != "true" && clip != "false") throw PassError("option 'clip_search' of " + pass + " must be true or false");
  const double clip_min = opt_num(s, "clip_min", 0.75);
  if (!(clip_min > 0 && clip_min <= 1)) throw PassError("option 'clip_min' of " + pass + " must be in (0, 1]");
  return clip == "true";
}

void pass_group(PassContext& ctx, const PassSpec& s) {
  const int bits = int(opt_num(s, "bits", 4));
  const int64_t group = int64_t(opt_num(s, "group", 128));
  const std::string sym = opt_str(s, "symmetric", "true");
  if (bits != 4 && bits != 8) throw PassError("option 'bits' of quant.group must be 4 or 8");
  if (group != 32 && group != 64 && group != 128) throw PassError("option 'group' of quant.group must be 32, 64 or 128");
  if (sym != "true" && sym != "false") throw PassError("option 'symmetric' of quant.group must be true or false");
  const bool clip = clip_search_option(s, "quant.group");
  std::map<std::string, std::string> args = {{"bits", std::to_string(bits)}, {"group", std::to_string(group)}, {"symmetric", sym}};
  if (clip) args.insert({{"clip_search", "true"}, {"clip_min", opt_str(s, "clip_min", "0.75")}, {"damp", "0"}});
  quantize(ctx, s, clip ? components::kQuantGptq : components::kQuantGroup, bits, group, sym == "true", args, scale_dtype_option(s));
}

void pass_q8_0(PassContext& ctx, const PassSpec& s) { quantize(ctx, s, components::kQuantQ8_0, 8, 32, true, {}); }
void pass_q4_0(PassContext& ctx, const PassSpec& s) { quantize(ctx, s, components::kQuantQ4_0, 4, 32, true, {}); }

// ---------------------------------------------------------------- pruning

void pass_magnitude(PassContext& ctx, const PassSpec& s) {
  const double sparsity = opt_num(s, "sparsity", 0.5);
  const std::string scope = opt_str(s, "scope", "row");
  if (!(sparsity >= 0 && sparsity < 1)) throw PassError("option 'sparsity' of prune.magnitude must be in [0, 1)");
  if (scope != "row" && scope != "tensor" && scope != "global")
    throw PassError("option 'scope' of prune.magnitude must be row, tensor or global");
  const auto sel = selected(ctx, s);
  std::string threshold;
  if (scope == "global") {
    // one threshold over every selected weight: the exact k-th smallest |w|
    std::vector<float> mags;
    for (const WeightUse& u : sel)
      for (float v : ctx.ed.load(u).w) mags.push_back(std::abs(v));
    const std::size_t kth = std::size_t(std::llround(sparsity * double(mags.size())));
    if (kth == 0 || mags.empty()) threshold = "0";
    else {
      std::nth_element(mags.begin(), mags.begin() + std::ptrdiff_t(kth - 1), mags.end());
      std::ostringstream o;
      o.precision(9);
      o << mags[kth - 1];
      threshold = o.str();
    }
  }
  Tally tally;
  for (const WeightUse& u : sel) {
    if (scope == "global" && threshold == "0") break;
    const DenseWeight dw = ctx.ed.load(u);
    Buf w = Buf::of(dw.w, u.n, u.k), y(DType::f32, u.n, u.k);
    std::map<std::string, std::string> args = {{"layout", "nk"}};
    if (scope == "global") args["threshold"] = threshold;
    else args["sparsity"] = std::to_string(sparsity), args["scope"] = scope;
    run_component(ctx.ed.registry(), components::kPruneMagnitude, {{"w", &w}, {"y", &y}}, args);
    const auto pruned = y.floats();
    replace_dense(ctx, u, pruned);
    tally.add(u, u.n * u.k * 4, count_zeros(pruned));
  }
  auto j = tally.json(s.text());
  if (scope == "global") j["threshold"] = threshold;
  ctx.log.push_back(j);
}

void pass_nm(PassContext& ctx, const PassSpec& s) {
  const int64_t n = int64_t(opt_num(s, "n", 2)), m = int64_t(opt_num(s, "m", 4));
  Tally tally;
  for (const WeightUse& u : selected(ctx, s)) {
    if (u.k % m != 0) {
      tally.skipped.push_back(u.name + ": k not a multiple of m");
      continue;
    }
    const DenseWeight dw = ctx.ed.load(u);
    Buf w = Buf::of(dw.w, u.n, u.k), y(DType::f32, u.n, u.k);
    run_component(ctx.ed.registry(), components::kPruneNm, {{"w", &w}, {"y", &y}},
                  {{"n", std::to_string(n)}, {"m", std::to_string(m)}, {"layout", "nk"}});
    const auto pruned = y.floats();
    replace_dense(ctx, u, pruned);
    tally.add(u, u.n * u.k * 4, count_zeros(pruned));
  }
  ctx.log.push_back(tally.json(s.text()));
}

/// The calibration inputs X [m, k] of a weight: its tasks' inputs stacked.
/// Tasks that read the same input (tiles of one weight) count once.
Calibration::Input calibration_for(const ModelEditor& ed, const Calibration& calib, const std::vector<std::size_t>& tasks,
                                   int64_t k) {
  Calibration::Input all;
  all.k = k;
  std::set<std::string> seen;  // by input data reference
  for (std::size_t i : tasks) {
    const TaskNode& t = ed.dag().tasks[i];
    auto it = calib.inputs.find(ModelEditor::task_key(t));
    if (it == calib.inputs.end())
      throw std::runtime_error("no calibration input captured for task '" + ModelEditor::task_key(t) + "'");
    const DataRef x = t.bindings[ed.port_index(t, "x")].ref;
    if (!seen.insert(ed.dag().ref_name(x)).second) continue;
    if (it->second.k != k) throw std::runtime_error("calibration input of '" + t.label + "' has the wrong width");
    all.x.insert(all.x.end(), it->second.x.begin(), it->second.x.end());
    all.m += it->second.m;
  }
  return all;
}

Calibration::Input calibration_for(PassContext& ctx, const std::vector<std::size_t>& tasks, int64_t k,
                                   const std::string& pass) {
  if (!ctx.calib) throw PassError(pass + " needs calibration activations");
  return calibration_for(ctx.ed, *ctx.calib, tasks, k);
}

/// correct=true (quant.gptq, prune.obs): the weight W' that, on the inputs Xq
/// the layers compressed before it produce, best reproduces what the original layer
/// computed on the original inputs X: W' = W + Δ with Δ the ridge
/// least-squares fit (distill.layerwise, mode dense) of (X - Xq) Wᵀ on Xq,
/// so the ridge pulls W' towards W, not towards 0.
std::vector<float> corrected_weight(PassContext& ctx, const Calibration::Input& x, const Calibration::Input& xq,
                                    const DenseWeight& w, const std::string& ridge) {
  if (x.m != xq.m || x.k != xq.k)
    throw std::runtime_error("the calibration runs gave " + std::to_string(xq.m) + " rows of width " +
                             std::to_string(xq.k) + " where the first capture had " + std::to_string(x.m) + " of " +
                             std::to_string(x.k));
  std::vector<float> d(x.x.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = x.x[i] - xq.x[i];
  Buf dx = Buf::of(d, x.m, x.k), wb = Buf::of(w.w, w.n, w.k), r(DType::f32, x.m, w.n);
  run_component(ctx.ed.registry(), components::kGemm, {{"a", &dx}, {"b", &wb}, {"c", &r}}, {{"transb", "true"}});
  Buf xb = Buf::of(xq.x, xq.m, xq.k), delta(DType::f32, w.n, w.k);
  run_component(ctx.ed.registry(), components::kDistillLayerwise, {{"x", &xb}, {"y_target", &r}, {"w", &wb}, {"w_fit", &delta}},
                {{"mode", "dense"}, {"ridge", ridge}});
  std::vector<float> out = delta.floats();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] += w.w[i];
  return out;
}

/// The calibration inputs of a layer-wise pass (quant.gptq, prune.obs) and the
/// weight it transforms. correct=false: each layer's captured inputs X and its
/// weight W, in the order given. correct=true: the layers in program order;
/// before a layer that follows a changed one the calibration runs run again
/// (PassContext::runs) for the inputs Xq it now gets, and the pass works on Xq
/// and W' = W + Δ (corrected_weight); replaced() mirrors each replacement in
/// the runs.
///
///   LayerInputs li(ctx, s, "prune.obs");
///   for (const WeightUse& u : li.order(selected(ctx, s))) {
///     std::vector<float> w;
///     const Calibration::Input x = li.inputs(u, ctx.ed.load(u), w);
///     ...  // transform w on x, then replace u (and li.replaced(u, tensors, args))
///   }
class LayerInputs {
 public:
  LayerInputs(PassContext& ctx, const PassSpec& s, const std::string& pass) : ctx_(ctx), pass_(pass) {
    const std::string c = opt_str(s, "correct", "false");
    if (c != "true" && c != "false") throw PassError("option 'correct' of " + pass + " must be true or false");
    correct_ = c == "true";
    ridge_ = opt_str(s, "ridge", "1");
    if (!(opt_num(s, "ridge", 1) >= 0)) throw PassError("option 'ridge' of " + pass + " must be >= 0");
    if (correct_ && !ctx.runs)
      throw PassError(pass + ":correct=true needs the calibration runs themselves (ymlopt optimize keeps them), "
                             "not only captured inputs");
    if (correct_ && !ctx.log.empty())
      throw PassError(pass + ":correct=true must be the first pass: its calibration runs are of the original model");
  }
  bool correct() const { return correct_; }

  std::vector<WeightUse> order(std::vector<WeightUse> units) const {
    if (correct_)  // program order: each layer after the ones that feed it
      std::stable_sort(units.begin(), units.end(), [](const WeightUse& a, const WeightUse& b) { return a.tasks < b.tasks; });
    return units;
  }

  /// The inputs the pass uses for u (X, or Xq when correcting); `w` gets the
  /// weight to transform (dw's values, or the refit W').
  Calibration::Input inputs(const WeightUse& u, const DenseWeight& dw, std::vector<float>& w) {
    Calibration::Input in = calibration_for(ctx_, u.tasks, u.k, pass_);
    w = dw.w;
    if (!correct_) return in;
    if (changed_) now_ = ctx_.runs->capture(), changed_ = false;
    if (!now_) return in;  // nothing quantized before it: Xq = X
    Calibration::Input xq = calibration_for(ctx_.ed, *now_, u.tasks, u.k);
    w = corrected_weight(ctx_, in, xq, dw, ridge_);
    for (std::size_t i = 0; i < in.x.size(); ++i) {
      const double e = double(in.x[i]) - double(xq.x[i]);
      shift_ += e * e, ref_ += double(in.x[i]) * double(in.x[i]);
    }
    return xq;
  }

  void replaced(const WeightUse& u, const std::vector<NewTensor>& ts, const std::map<std::string, std::string>& args) {
    if (!correct_) return;
    ctx_.runs->replace(u.name, ts, args);
    changed_ = true;
  }

  /// correct=true: input_shift = ||X - Xq|| / ||X|| over the corrected layers.
  void log(nlohmann::json& j) const {
    if (correct_) j["input_shift"] = ref_ > 0 ? std::sqrt(shift_ / ref_) : 0.0;
  }

 private:
  PassContext& ctx_;
  std::string pass_, ridge_;
  bool correct_ = false, changed_ = false;
  std::optional<Calibration> now_;  // the runs on the layers replaced so far
  double shift_ = 0, ref_ = 0;
};

void replace_dense(PassContext& ctx, const WeightUse& u, const std::vector<float>& w, LayerInputs* mirror) {
  Buf b = Buf::of(w, u.n, u.k);
  NewTensor t = tensor("w", b);
  t.shape = {u.n, u.k};
  const std::map<std::string, std::string> args = {{"transpose_w", "true"}};
  if (mirror) mirror->replaced(u, {t}, args);
  ctx.ed.replace(u, {std::move(t)}, args);
}

void pass_obs(PassContext& ctx, const PassSpec& s) {
  const std::string pattern = opt_str(s, "pattern", "unstructured");
  const double sparsity = opt_num(s, "sparsity", 0.5);
  LayerInputs li(ctx, s, "prune.obs");
  Tally tally;
  for (const WeightUse& u : li.order(selected(ctx, s))) {
    std::vector<float> target;
    const Calibration::Input in = li.inputs(u, ctx.ed.load(u), target);
    Buf x = Buf::of(in.x, in.m, in.k), h(DType::f32, u.k, u.k);
    run_component(ctx.ed.registry(), components::kPruneHessian, {{"x", &x}, {"h", &h}}, {});
    Buf w = Buf::of(target, u.n, u.k), wp(DType::f32, u.n, u.k);
    run_component(ctx.ed.registry(), components::kPruneObs, {{"w", &w}, {"h", &h}, {"w_pruned", &wp}},
                  {{"sparsity", std::to_string(sparsity)}, {"pattern", pattern},
                   {"block", opt_str(s, "block", "128")}, {"damp", opt_str(s, "damp", "0.01")}});
    const auto pruned = wp.floats();
    replace_dense(ctx, u, pruned, &li);
    tally.add(u, u.n * u.k * 4, count_zeros(pruned));
  }
  auto j = tally.json(s.text());
  li.log(j);
  ctx.log.push_back(j);
}

/// quant.gptq: GPTQ int4/int8 weights from H = 2/m XᵀX of each layer's calibration inputs
/// (prune.hessian, f64), stored exactly like quant.group (group > 0) or quant.int8 (group 0).
void pass_gptq(PassContext& ctx, const PassSpec& s) {
  const int bits = int(opt_num(s, "bits", 4));
  const int64_t group = int64_t(opt_num(s, "group", 128));
  const std::string sym = opt_str(s, "symmetric", "true");
  if (bits != 4 && bits != 8) throw PassError("option 'bits' of quant.gptq must be 4 or 8");
  if (group != 0 && group != 32 && group != 64 && group != 128)
    throw PassError("option 'group' of quant.gptq must be 0 (per channel), 32, 64 or 128");
  if (sym != "true" && sym != "false") throw PassError("option 'symmetric' of quant.gptq must be true or false");
  if (!(opt_num(s, "damp", 0.01) >= 0)) throw PassError("option 'damp' of quant.gptq must be >= 0");
  const std::string act = opt_str(s, "act_order", "false");
  if (act != "true" && act != "false") throw PassError("option 'act_order' of quant.gptq must be true or false");
  const bool clip = clip_search_option(s, "quant.gptq");
  const DType sd = scale_dtype_option(s);
  const bool symmetric = sym == "true";
  LayerInputs li(ctx, s, "quant.gptq");
  Tally tally;
  nlohmann::json formats = nlohmann::json::object();
  double loss = 0, dead = 0;
  const std::map<std::string, std::string> largs = linear_args(s, bits, group);  // checks the option first
  const char* mode = largs.count("activations") ? " weight-only" : "";
  for (const WeightUse& u : li.order(selected(ctx, s))) {
    if ((group > 0 && u.k % group != 0) || (bits == 4 && u.k % 2 != 0)) {
      tally.skipped.push_back(u.name + ": k=" + std::to_string(u.k) + " does not split into groups");
      continue;
    }
    const DenseWeight dw = ctx.ed.load(u);
    std::vector<float> target;  // what GPTQ rounds
    const Calibration::Input in = li.inputs(u, dw, target);
    Buf x = Buf::of(in.x, in.m, in.k), h(DType::f64, u.k, u.k);
    run_component(ctx.ed.registry(), components::kPruneHessian, {{"x", &x}, {"h", &h}}, {});
    const int64_t g = group > 0 ? u.k / group : 1;
    Buf w = Buf::of(target, u.n, u.k), q(DType::i8, u.n, bits == 4 ? u.k / 2 : u.k);
    Buf scale = group > 0 ? Buf(sd, u.n, g) : Buf(sd, 1, u.n);
    Buf zero = group > 0 ? Buf(sd, u.n, g) : Buf(sd, 1, u.n);
    std::map<std::string, Buf*> ports = {{"w", &w}, {"h", &h}, {"q", &q}, {"scale", &scale}};
    if (!symmetric) ports["zero"] = &zero;
    const auto rep = run_component(ctx.ed.registry(), components::kQuantGptq, ports,
                                   {{"bits", std::to_string(bits)}, {"group", std::to_string(group)}, {"symmetric", sym},
                                    {"damp", opt_str(s, "damp", "0.01")}, {"block", opt_str(s, "block", "128")},
                                    {"act_order", act}, {"clip_search", clip ? "true" : "false"}, {"clip_min", opt_str(s, "clip_min", "0.75")}});
    loss += rep.count("gptq_loss") ? rep.at("gptq_loss") : 0.0;
    dead += rep.count("dead_columns") ? rep.at("dead_columns") : 0.0;
    std::vector<NewTensor> ts = {tensor("w", q), tensor("w_scale", scale)};
    if (!symmetric) ts.push_back(tensor("w_zero", zero));
    li.replaced(u, ts, largs);
    ctx.ed.replace(u, std::move(ts), largs);
    formats[u.name] = std::string(bits == 4 ? "int4" : "int8") + " group=" + std::to_string(group) +
                      (symmetric ? " symmetric" : " asymmetric") + " scale=" + dtype_name(sd) +
                      mode + " (quant.gptq" +
                      (act == "true" ? " act_order, " : ", ") + (clip ? "clip_search, " : "") +
                      (li.correct() ? "correct, " : "") +
                      std::to_string(in.m) + " calibration rows)";
    tally.add(u, int64_t(q.bytes.size() + scale.bytes.size() + (symmetric ? 0 : zero.bytes.size())), count_zeros(dw.w));
  }
  auto j = tally.json(s.text());
  j["formats"] = formats;
  j["gptq_loss"] = loss;
  j["dead_columns"] = int64_t(dead);  // inputs that were 0 on every calibration token: rounded to nearest
  li.log(j);
  ctx.log.push_back(j);
}

/// Y = X W_origᵀ: what the original layer computed on the calibration inputs.
std::vector<float> original_outputs(const Calibration::Input& in, const DenseWeight& orig) {
  std::vector<float> y(std::size_t(in.m * orig.n));
  for (int64_t r = 0; r < in.m; ++r)
    for (int64_t j = 0; j < orig.n; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < in.k; ++c)
        acc += double(in.x[std::size_t(r * in.k + c)]) * double(orig.w[std::size_t(j * orig.k + c)]);
      y[std::size_t(r * orig.n + j)] = float(acc);
    }
  return y;
}

/// distill.layerwise: refits every weight an earlier pass changed to the original
/// layer's outputs on the calibration inputs: dense (pruned) weights keep their
/// zeros (mode mask); low-rank pairs are refitted as a pair (mode lowrank).
void pass_distill(PassContext& ctx, const PassSpec& s) {
  Tally tally;
  const std::string ridge = opt_str(s, "ridge", "1e-4");
  for (const auto& [name, p] : ctx.ed.lowrank()) {
    const DenseWeight* orig = ctx.ed.original(name);
    WeightUse ua;
    for (WeightUse& c : ctx.ed.linear_weights())
      if (c.data == p.a) ua = c;
    if (!orig || ua.data < 0) continue;
    const Calibration::Input in = calibration_for(ctx, ua.tasks, p.k, "distill.layerwise");
    const std::vector<float> yt = original_outputs(in, *orig);
    auto floats = [&](std::int32_t d) {
      const auto& b = ctx.ed.tensor_bytes(d);
      std::vector<float> v(b.size() / 4);
      std::memcpy(v.data(), b.data(), b.size());
      return v;
    };
    Buf x = Buf::of(in.x, in.m, in.k), y = Buf::of(yt, in.m, p.n), a = Buf::of(floats(p.a), p.n, p.r),
        b = Buf::of(floats(p.b), p.r, p.k), af(DType::f32, p.n, p.r), bf(DType::f32, p.r, p.k);
    run_component(ctx.ed.registry(), components::kDistillLayerwise,
                  {{"x", &x}, {"y_target", &y}, {"a", &a}, {"b", &b}, {"a_fit", &af}, {"b_fit", &bf}},
                  {{"mode", "lowrank"}, {"ridge", ridge}, {"iters", opt_str(s, "iters", "2")}});
    ctx.ed.tensor_bytes(p.a) = af.bytes;
    ctx.ed.tensor_bytes(p.b) = bf.bytes;
    WeightUse shown;
    shown.n = p.n, shown.k = p.k;
    tally.add(shown, p.r * (p.n + p.k) * 4, 0);
  }
  for (const WeightUse& u : ctx.ed.linear_weights()) {
    const DenseWeight* orig = ctx.ed.original(u.name);
    if (!orig || orig->n != u.n || orig->k != u.k) continue;  // not changed by an earlier pass
    if (ctx.ed.lowrank().count(u.name)) continue;  // refitted as a pair above
    const Calibration::Input in = calibration_for(ctx, u.tasks, u.k, "distill.layerwise");
    const std::vector<float> yt = original_outputs(in, *orig);
    const DenseWeight dw = ctx.ed.load(u);
    Buf x = Buf::of(in.x, in.m, in.k), y = Buf::of(yt, in.m, u.n), w = Buf::of(dw.w, u.n, u.k),
        wf(DType::f32, u.n, u.k);
    run_component(ctx.ed.registry(), components::kDistillLayerwise, {{"x", &x}, {"y_target", &y}, {"w", &w}, {"w_fit", &wf}},
                  {{"mode", "mask"}, {"ridge", ridge}});
    const auto fit = wf.floats();
    replace_dense(ctx, u, fit);
    tally.add(u, u.n * u.k * 4, count_zeros(fit));
  }
  ctx.log.push_back(tally.json(s.text()));
}

// ---------------------------------------------------------------- sparse formats

void pass_sparse(PassContext& ctx, const PassSpec& s, bool block) {
  const double min_sparsity = opt_num(s, "min_sparsity", block ? 0.5 : 0.7);
  const int64_t bs = block ? int64_t(opt_num(s, "block", 16)) : 1;
  Tally tally;
  for (const WeightUse& u : selected(ctx, s)) {
    if (u.tile_n > 0) {
      tally.skipped.push_back(u.name + ": used by tiles (CSR/BSR arrays cannot be split by rows)");
      continue;
    }
    const DenseWeight dw = ctx.ed.load(u);
    const int64_t zeros = count_zeros(dw.w);
    if (double(zeros) < min_sparsity * double(dw.w.size())) continue;
    if (block && (u.n % bs != 0 || u.k % bs != 0)) {
      tally.skipped.push_back(u.name + ": not a multiple of the block");
      continue;
    }
    int64_t stored = 0;
    if (!block) {
      sparse::Csr c = sparse::to_csr(dw.w.data(), u.n, u.k, u.k);
      if (c.values.empty()) c.values.push_back(0), c.col.push_back(0);  // shapes must be >= 1
      stored = int64_t(c.values.size() * 8 + c.row_ptr.size() * 4);
      ctx.ed.replace(u,
                     {{"w", DType::f32, {int64_t(c.values.size())}, vec_bytes(c.values), false},
                      {"w_index", DType::i32, {int64_t(c.col.size())}, vec_bytes(c.col), false},
                      {"w_ptr", DType::i32, {int64_t(c.row_ptr.size())}, vec_bytes(c.row_ptr), false}},
                     {{"format", "csr"}, {"transpose_w", "false"}});
    } else {
      sparse::Bsr c = sparse::to_bsr(dw.w.data(), u.n, u.k, u.k, bs);
      if (c.block_col.empty()) c.values.assign(std::size_t(bs * bs), 0), c.block_col.push_back(0);
      const int64_t nb = int64_t(c.block_col.size());
      stored = int64_t(c.values.size() * 4 + c.block_col.size() * 4 + c.block_row_ptr.size() * 4);
      ctx.ed.replace(u,
                     {{"w", DType::f32, {nb, bs * bs}, vec_bytes(c.values), false},
                      {"w_index", DType::i32, {nb}, vec_bytes(c.block_col), false},
                      {"w_ptr", DType::i32, {int64_t(c.block_row_ptr.size())}, vec_bytes(c.block_row_ptr), false}},
                     {{"format", "bsr"}, {"block", std::to_string(bs)}, {"transpose_w", "false"}});
    }
    tally.add(u, stored, zeros);
  }
  ctx.log.push_back(tally.json(s.text()));
}

void pass_csr(PassContext& ctx, const PassSpec& s) { pass_sparse(ctx, s, false); }
void pass_bsr(PassContext& ctx, const PassSpec& s) { pass_sparse(ctx, s, true); }

void pass_nm24(PassContext& ctx, const PassSpec& s) {
  Tally tally;
  for (const WeightUse& u : selected(ctx, s)) {
    if (u.k % 8 != 0) continue;
    const DenseWeight dw = ctx.ed.load(u);
    // only weights that already follow the 2:4 pattern (prune.nm or prune.obs:pattern=2:4 first)
    bool ok = true;
    for (int64_t g = 0; ok && g < u.n * u.k / 4; ++g) {
      int nz = 0;
      for (int e = 0; e < 4; ++e) nz += dw.w[std::size_t(g * 4 + e)] != 0.0f;
      ok = nz <= 2;
    }
    if (!ok) {
      tally.skipped.push_back(u.name + ": not 2:4 sparse");
      continue;
    }
    Buf w = Buf::of(dw.w, u.n, u.k), values(DType::f32, u.n, u.k / 2), index(DType::i8, u.n, u.k / 8);
    run_component(ctx.ed.registry(), components::kSparsePackNm24, {{"w", &w}, {"values", &values}, {"index", &index}}, {});
    ctx.ed.replace(u, {tensor("w", values), tensor("w_index", index)}, {{"format", "nm24"}, {"transpose_w", "false"}});
    tally.add(u, int64_t(values.bytes.size() + index.bytes.size()), count_zeros(dw.w));
  }
  ctx.log.push_back(tally.json(s.text()));
}

/// quant.bf16: weights rounded to bf16 (nearest even), computed with bf16
/// products and f32 sums (format=bf16); with embeddings=true (the default) the
/// embedding tables too, read by nn.embedding into f32 rows and, where a linear
/// is tied to one (GPT-2's lm_head), by that linear as the same bf16 table.
void pass_bf16(PassContext& ctx, const PassSpec& s) {
  const std::string emb = opt_str(s, "embeddings", "true");
  if (emb != "true" && emb != "false") throw PassError("option 'embeddings' of quant.bf16 must be true or false");
  auto to_bf16 = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
    Buf w = Buf::of(v, rows, cols), b(DType::bf16, rows, cols);
    run_component(ctx.ed.registry(), components::kTensorCopy, {{"x", &w}, {"y", &b}}, {});
    return b;
  };
  Tally tally;
  for (const WeightUse& u : selected(ctx, s)) {
    const DenseWeight dw = ctx.ed.load(u);
    Buf b = to_bf16(dw.w, u.n, u.k);
    ctx.ed.replace(u, {tensor("w", b)}, {{"format", "bf16"}, {"transpose_w", "false"}});
    tally.add(u, int64_t(b.bytes.size()), count_zeros(dw.w));
  }
  nlohmann::json j = tally.json(s.text());
  if (emb == "true") {
    const auto matches = name_matcher(s);
    std::vector<std::string> refused;
    nlohmann::json tables = nlohmann::json::array(), tied = nlohmann::json::object();
    int64_t before = 0, after = 0;
    for (const auto& u : ctx.ed.embedding_tables(&refused)) {
      if (!matches(u.name)) continue;
      const DenseWeight t = ctx.ed.load_table(u);
      Buf b = to_bf16(t.w, u.vocab, u.d);
      ctx.ed.replace_embedding(u, {tensor("w", b)}, {{"format", "bf16"}});
      before += u.vocab * u.d * int64_t(dtype_size(ctx.ed.dag().data[std::size_t(u.data)].dtype));
      after += int64_t(b.bytes.size());
      tables.push_back(u.name);
      for (std::size_t i : u.linear_tasks) tied[u.name].push_back(ModelEditor::task_key(ctx.ed.dag().tasks[i]));
    }
    j["tables"] = tables;
    if (!tied.empty()) j["tied_linear_readers"] = tied;
    if (!refused.empty()) j["tables_left_f32"] = refused;
    j["weight_bytes_before"] = j["weight_bytes_before"].get<int64_t>() + before;
    j["weight_bytes_after"] = j["weight_bytes_after"].get<int64_t>() + after;
  }
  ctx.log.push_back(j);
}

// ---------------------------------------------------------------- low rank

/// y = act(x Wᵀ + b) becomes h = x Bᵀ; y = act(h Aᵀ + b) with W ≈ A B, when it saves.
/// Tiles of W keep their tasks: each uses its rows of A; h is computed once.
void pass_lowrank(PassContext& ctx, const PassSpec& s) {
  const double energy = opt_num(s, "energy", 0);
  const int64_t fixed_rank = int64_t(opt_num(s, "rank", 0));
  const double max_ratio = opt_num(s, "max_ratio", 0.8);
  if (energy <= 0 && fixed_rank <= 0) throw PassError("prune.lowrank needs option 'rank' or 'energy'");
  if (energy > 1) throw PassError("option 'energy' of prune.lowrank must be in (0, 1]");
  Tally tally;
  for (const WeightUse& sel : selected(ctx, s)) {
    // indices shift as tasks are inserted: find the weight again by name
    WeightUse u;
    for (WeightUse& c : ctx.ed.linear_weights())
      if (c.name == sel.name) u = c;
    if (u.data < 0) continue;
    const DenseWeight dw = ctx.ed.load(u);
    Buf w = Buf::of(dw.w, u.n, u.k);
    int64_t r = fixed_rank;
    const int64_t full = std::min(u.n, u.k);
    if (energy > 0) {
      // sigma_i^2 = ||a[:, i]||^2 with the left split (b has orthonormal rows)
      Buf a(DType::f32, u.n, full), b(DType::f32, full, u.k);
      run_component(ctx.ed.registry(), components::kPruneLowrank, {{"w", &w}, {"a", &a}, {"b", &b}}, {{"rank", std::to_string(full)}});
      std::vector<double> s2(std::size_t(full), 0.0);
      double total = 0;
      const float* ap = reinterpret_cast<const float*>(a.bytes.data());
      for (int64_t c = 0; c < full; ++c) {
        for (int64_t row = 0; row < u.n; ++row) s2[std::size_t(c)] += double(ap[row * full + c]) * ap[row * full + c];
        total += s2[std::size_t(c)];
      }
      double acc = 0;
      r = full;
      for (int64_t c = 0; c < full; ++c)
        if ((acc += s2[std::size_t(c)]) >= energy * total) {
          r = c + 1;
          break;
        }
    }
    r = std::min(r, full);
    if (double(r) * double(u.n + u.k) > max_ratio * double(u.n) * double(u.k)) {
      tally.skipped.push_back(u.name + ": rank " + std::to_string(r) + " saves too little");
      continue;
    }
    Buf a(DType::f32, u.n, r), b(DType::f32, r, u.k);
    run_component(ctx.ed.registry(), components::kPruneLowrank, {{"w", &w}, {"a", &a}, {"b", &b}},
                  {{"rank", std::to_string(r)}, {"split", "balanced"}});
    Dag& dag = ctx.ed.dag();
    // the first task computes h = x Bᵀ for all (the tiles share their input x)
    const std::size_t first_i = u.tasks.front();
    const TaskNode proto = dag.tasks[first_i];
    const Binding xb = proto.bindings[ctx.ed.port_index(proto, "x")];
    for (std::size_t i : u.tasks) {
      const TaskNode& t = dag.tasks[i];
      if (!(t.bindings[ctx.ed.port_index(t, "x")].ref == xb.ref)) throw std::runtime_error(u.name + ": tiles read different inputs");
    }
    const Shape xs = dag.ref_shape(xb.ref);
    int64_t m = 1;
    for (std::size_t d = 0; d + 1 < xs.size(); ++d) m *= xs[d];
    const DataRef h = ctx.ed.add_scratch(u.name + ".lowrank_h", DType::f32, {m, r});
    const DataRef rb = ctx.ed.add_tensor(u.name + ".b", DType::f32, {r, u.k}, b.bytes);
    // the tiles' tasks become h Aᵀ (+ b, act, residual as before): A replaces W
    const WeightUse ua = ctx.ed.replace(u, {tensor("w", a)}, {{"transpose_w", "true"}});
    ctx.ed.set_lowrank(u.name, {ua.data, rb.data, u.n, u.k, r});
    for (std::size_t i : u.tasks) ctx.ed.bind(dag.tasks[i], "x", h);
    TaskNode first = proto;
    first.label = proto.label + ".lowrank";
    for (Binding& bd : first.bindings) bd = Binding{};
    first.bindings[ctx.ed.port_index(proto, "x")] = xb;
    ctx.ed.bind(first, "w", rb);
    ctx.ed.bind(first, "y", h, Access::write);
    for (const char* a0 : {"format"}) ctx.ed.set_arg(first, a0, "dense");
    ctx.ed.set_arg(first, "transpose_w", "true");
    ctx.ed.set_arg(first, "activation", "none");
    ctx.ed.insert_task(first_i, std::move(first));
    ctx.ed.mark_graph_changed(u.name);
    tally.add(u, r * (u.n + u.k) * 4, 0);
  }
  ctx.log.push_back(tally.json(s.text()));
}

// ---------------------------------------------------------------- the list

const std::pair<std::string, std::string> kMatch = {"match", "regex on the weight's name (default: every eligible linear layer)"};
const std::pair<std::string, std::string> kCorrect = {
    "correct", "false (default) or true: layers in program order, each first refit so that on the inputs the layers "
               "compressed before it produce it reproduces the original layer's outputs, then compressed with H from "
               "those inputs (the calibration runs run again before each layer; the first pass only)"};
const std::pair<std::string, std::string> kRidge = {
    "ridge", "correct=true: ridge of the refit, relative to mean diag XᵀX, towards the original weight (1)"};
const std::pair<std::string, std::string> kActivations = {
    "activations", "int8 (default: the W8A8/W4A8 kernels quantize x per token) or f32 (weight-only: nn.linear "
                   "dequantizes the codes in cache and keeps x f32; more accurate, f32 GEMM speed)"};
const std::pair<std::string, std::string> kScaleDtype = {
    "scale_dtype", "f32 (default) or f16: scales and zero points stored in f16 (codes rounded against the stored "
                   "values; 1 bit per weight less at group 32 asymmetric)"};

}  // namespace

Calibration& PassContext::writable_calibration() {
  if (!calib) throw PassError("no calibration activations to change");
  if (calib != own_calib.get()) {
    own_calib = std::make_shared<Calibration>(*calib);
    calib = own_calib.get();
  }
  return *own_calib;
}

std::string PassSpec::text() const {
  std::string t = name;
  for (const auto& [k, v] : options) t += ":" + k + "=" + v;
  return t;
}

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> p = {
      {"quant.int8", "int8 weights, one symmetric scale per output channel (W8A8 kernel, activations quantized per token, "
       "or weight-only with activations=f32)",
       {kActivations, kMatch}, pass_int8},
      {"quant.group", "int4/int8 weights with one scale (and zero point) per group of weights along k",
       {{"bits", "4 (default) or 8"}, {"group", "32, 64 or 128 (default)"}, {"symmetric", "true (default) or false"},
        {"clip_search", "false (default) or true: per group the range shrink (1, 0.99, ... clip_min) with the least "
                        "squared weight error (quant.gptq with H = I; same storage)"},
        {"clip_min", "smallest shrink of clip_search (0.75)"}, kScaleDtype, kActivations, kMatch},
       pass_group},
      {"quant.q8_0", "llama.cpp Q8_0: int8 in blocks of 32 with an f16 scale (8.5 bits per weight)", {kActivations, kMatch},
       pass_q8_0},
      {"quant.q4_0", "llama.cpp Q4_0: 4-bit in blocks of 32 with an f16 scale (4.5 bits per weight)", {kActivations, kMatch},
       pass_q4_0},
      {"quant.bf16", "bf16 weights (rounded to nearest even), products of bf16 activations and weights summed in f32 "
       "(AVX-512 BF16 where the CPU has it): half the bytes of f32",
       {{"embeddings", "true (default) or false: the embedding tables in bf16 too (rows widened to f32 when read; "
                       "a tied lm_head computes on the same bf16 table)"},
        kMatch},
       pass_bf16},
      quant_embedding_pass(),
      {"quant.gptq", "GPTQ int4/int8: weights rounded column by column with the rounding error compensated on the "
       "remaining columns through H = 2/m XᵀX of calibration inputs; stored like quant.group / quant.int8",
       {{"bits", "4 (default) or 8"}, {"group", "0 (per channel), 32, 64 or 128 (default)"},
        {"symmetric", "true (default) or false"}, {"damp", "diagonal damping (0.01)"}, {"block", "column block (128)"},
        {"act_order", "false (default) or true: columns by decreasing diag H, static group scales"},
        {"clip_search", "false (default) or true: per group the range shrink (1, 0.99, ... clip_min) with the least "
                        "diag-H-weighted squared error; same storage"},
        {"clip_min", "smallest shrink of clip_search (0.75)"},
        kCorrect, kRidge, kScaleDtype, kActivations, kMatch},
       pass_gptq, true},
      {"smooth", "SmoothQuant / AWQ per-input-channel scales s from calibration inputs: W' = W diag(s), the input's 1/s "
       "folded exactly into the LayerNorm or linear (no activation / ReLU) that makes it; run before a quantizer",
       {{"mode", "smooth (default; SmoothQuant, for W8A8 int8) or awq (for int4 groups)"},
        {"alpha", "smooth: s = max|X|^alpha / max|W|^(1-alpha), default 0.5; awq: s = mean|X|^alpha, default search; "
                  "search: the grid's alpha with the least calibration output error of the quantized layer (smooth: "
                  "W8A8 int8 per channel and per token, s = 1 a candidate too; awq: the bits/group weights)"},
        {"grid", "alpha=search: alphas 0, 1/grid, ... 1 (20)"},
        {"bits", "awq: the quantizer the search rounds with, 4 (default) or 8"},
        {"group", "awq: its group, 0 (per channel), 32, 64 or 128 (default)"},
        {"symmetric", "awq: true (default) or false"}, kMatch},
       pass_smooth, true, check_smooth},
      {"prune.magnitude", "zero the smallest-magnitude weights (dense result; follow with sparse.csr or a quantizer)",
       {{"sparsity", "fraction to zero (default 0.5)"}, {"scope", "row (default), tensor or global (one threshold over every layer)"}, kMatch},
       pass_magnitude},
      {"prune.nm", "keep the n largest of every m weights along k (default 2:4)",
       {{"n", "kept per group (2)"}, {"m", "group length (4)"}, kMatch}, pass_nm},
      {"prune.obs", "SparseGPT-style OBS pruning with H = 2/m XᵀX from calibration inputs",
       {{"sparsity", "fraction of zeros per row (0.5)"}, {"pattern", "unstructured (default) or N:M, e.g. 2:4"},
        {"block", "column block (128)"}, {"damp", "diagonal damping (0.01)"}, kCorrect, kRidge, kMatch},
       pass_obs, true},
      {"prune.lowrank", "truncated SVD: one linear becomes two (x Bᵀ, then Aᵀ) when r(n+k) <= max_ratio·n·k",
       {{"rank", "fixed rank"}, {"energy", "or the share of sum(sigma^2) to keep, e.g. 0.9"},
        {"max_ratio", "apply only below this parameter ratio (0.8)"}, kMatch},
       pass_lowrank},
      {"distill.layerwise", "least-squares refit of every changed dense layer to the original layer's outputs on calibration inputs (zeros kept)",
       {{"ridge", "relative ridge (1e-4)"}, {"iters", "alternations for low-rank pairs (2)"}}, pass_distill, true},
      {"sparse.csr", "store sparse weights as CSR (values, columns, row pointers) with the CSR kernel",
       {{"min_sparsity", "only weights at least this sparse (0.7)"}, kMatch}, pass_csr},
      {"sparse.bsr", "store sparse weights as block-sparse rows",
       {{"block", "block size (16)"}, {"min_sparsity", "only weights at least this sparse (0.5)"}, kMatch}, pass_bsr},
      {"sparse.nm24", "store 2:4-sparse weights compressed (values + 2-bit positions) with the 2:4 kernel", {kMatch},
       pass_nm24},
      {"fuse.activation", "fold an activation task (nn.relu, nn.gelu, nn.silu) on a linear's output into the linear", {},
       pass_fuse_activation},
      {"fuse.ln_affine", "fold a LayerNorm/RMSNorm scale and shift into the linear layers that read its output", {},
       pass_fuse_ln_affine},
      {"prune.heads", "remove whole attention heads: q/k/v rows, attention and rope head counts, o_proj columns shrink",
       {{"sparsity", "fraction of heads removed per layer (0.25)"},
        {"criterion", "magnitude (||W_o columns||^2) or activation (x mean ||head output||^2, needs calibration)"}, kMatch},
       pass_prune_heads, false, check_prune_units},
      {"prune.neurons", "remove whole FFN neurons: up/gate rows and down_proj columns shrink",
       {{"sparsity", "fraction of neurons removed per layer (0.5)"},
        {"criterion", "magnitude (||W1 row|| ||W2 column||) or activation (mean act^2 ||W2 column||^2, needs calibration)"},
        kMatch},
       pass_prune_neurons, false, check_prune_units},
      {"fuse.merge", "linears reading one input whose results one task uses together (q, k, v; gate, up) become one GEMM; "
       "op.matmul products of one input by constants become one (any add, mul: columns are independent)",
       {{"min", "smallest group to merge (2)"}}, pass_fuse_merge},
      {"fuse.compose", "two linears with no activation between, the first read only by the second, become one when cheaper; "
       "so do two op.matmul products by constants where (add, mul) is associative (a semiring)",
       {{"max_ratio", "compose when the product costs at most this share of the pair's flops (1.0)"}}, pass_fuse_compose},
      {"dce", "remove tasks whose outputs are never read (saves and other output-less tasks stay)", {}, pass_dce},
      {"sparse.propagate",
       "follow zero tiles (zero weights, fills, zero-initialised tensors) through products whose multiply annihilates "
       "zero (op.matmul a*b/sum, nn.linear), activations, sums and attention; drop the tasks that change nothing or "
       "whose results are no longer read, fill the zeros others wrote; report the tasks and flops removed",
       {}, pass_sparse_propagate},
  };
  return p;
}

void validate_pass(const PassSpec& spec) {
  std::vector<std::string> names;
  for (const auto& p : all_passes()) {
    names.push_back(p.name);
    if (p.name != spec.name) continue;
    std::vector<std::string> opts;
    for (const auto& o : p.options) opts.push_back(o.first);
    for (const auto& [k, v] : spec.options)
      if (std::find(opts.begin(), opts.end(), k) == opts.end())
        throw PassError("pass " + spec.name + " has no option '" + k + "'" + did_you_mean(k, opts));
    if (p.check) p.check(spec);
    return;
  }
  throw PassError("unknown pass '" + spec.name + "'" + did_you_mean(spec.name, names));
}

std::vector<PassSpec> parse_pass_list(const std::string& text) {
  std::vector<PassSpec> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw PassError("empty pass in '" + text + "'");
    std::stringstream is(item);
    std::string part;
    PassSpec spec;
    std::getline(is, spec.name, ':');
    while (std::getline(is, part, ':')) {
      const auto eq = part.find('=');
      if (eq == std::string::npos || eq == 0)
        throw PassError("pass option '" + part + "' of " + spec.name + " is not KEY=VALUE");
      spec.options[part.substr(0, eq)] = part.substr(eq + 1);
    }
    validate_pass(spec);
    out.push_back(std::move(spec));
  }
  if (out.empty()) throw PassError("no pass given");
  return out;
}

bool needs_calibration_runs(const std::vector<PassSpec>& specs) {
  for (const auto& s : specs) {
    if (!s.options.count("correct") || s.options.at("correct") != "true") continue;
    for (const PassInfo& p : all_passes())  // the passes that list kCorrect
      if (p.name == s.name && std::find(p.options.begin(), p.options.end(), kCorrect) != p.options.end()) return true;
  }
  return false;
}

bool needs_calibration(const std::vector<PassSpec>& specs) {
  for (const auto& s : specs)
    for (const auto& p : all_passes())
      if (p.name == s.name && (p.needs_calibration || (s.options.count("criterion") && s.options.at("criterion") == "activation")))
        return true;
  return false;
}

std::vector<double> output_values(const TensorView& v) {
  std::vector<double> out;
  out.reserve(std::size_t(v.rows * v.cols));
  for (std::int64_t r = 0; r < v.rows; ++r)
    for (std::int64_t c = 0; c < v.cols; ++c) {
      const std::int64_t i = r * v.ld + c;
      switch (v.dtype) {
        case DType::f32: out.push_back(static_cast<const float*>(v.data)[i]); break;
        case DType::f64: out.push_back(static_cast<const double*>(v.data)[i]); break;
        case DType::i32: out.push_back(static_cast<const std::int32_t*>(v.data)[i]); break;
        case DType::i8: out.push_back(static_cast<const std::int8_t*>(v.data)[i]); break;
        default: throw std::runtime_error("cannot compare outputs of dtype " + std::string(dtype_name(v.dtype)));
      }
    }
  return out;
}

void run_pass(PassContext& ctx, const PassSpec& spec) {
  validate_pass(spec);
  for (const auto& p : all_passes())
    if (p.name == spec.name) {
      p.run(ctx, spec);
      return;
    }
}

}  // namespace ymlopt::opt
