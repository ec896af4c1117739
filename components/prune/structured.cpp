// Structured pruning (CPU): scores and fixed-size keep masks for attention
// heads and FFN neurons (magnitude, or an activation-based gradient-free
// Fisher proxy in the spirit of LTP, Kwon et al. 2022), and the C++ API that
// physically removes the dropped units (prune_api.hpp: shrink_heads,
// shrink_heads_fused, shrink_ffn, keep_rows, keep_cols).
//
//   prune.heads    w_o [d, heads·dh] (+ act [m, heads·dh]) -> mask i32 [heads] (+ scores [heads])
//   prune.neurons  w1 [ff, d] (+ b1 [ff]), w2 [d, ff] (+ act [m, ff]) -> mask i32 [ff] (+ scores [ff])
//
// The mask port is 1 for a kept unit, 0 for a dropped one; the arg `keep` is
// the number of units kept (or `ratio` their fraction).
//
// Scores: heads, magnitude: ||W_o[:, head]||_F^2; activation: mean_t ||act[t, head]||^2
// · ||W_o[:, head]||_F^2. Neurons, magnitude: ||[W1 row j, b1_j]|| · ||W2[:, j]||;
// activation: mean_t act[t, j]^2 · ||W2[:, j]||^2. The `keep` highest-scored
// units are kept (ties: lower index). layout=kn takes the transposed (GPT-2
// Conv1D) weights: w_o [heads·dh, d], w1 [d, ff], w2 [ff, d].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "prune/prune.hpp"
#include "prune/prune_api.hpp"
#include "prune/prune_util.hpp"

namespace ymlopt {
namespace prune {

using std::int64_t;

std::vector<std::int32_t> keep_top(std::span<const double> scores, int64_t count) {
  const int64_t n = static_cast<int64_t>(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (std::isnan(scores[i])) throw KernelError("score " + std::to_string(i) + " is NaN (non-finite weights or activations?)");
  if (count < 0 || count > n)
    throw KernelError("keep count " + std::to_string(count) + " must be in [0, " + std::to_string(n) + "]");
  std::vector<int64_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)];
  });
  std::vector<std::int32_t> keep(scores.size(), 0);
  for (int64_t i = 0; i < count; ++i) keep[static_cast<std::size_t>(idx[static_cast<std::size_t>(i)])] = 1;
  return keep;
}

template <class T> std::vector<double> head_scores(MatRef<T> wo, const MatRef<T>* act, int64_t heads) {
  if (heads < 1 || wo.cols % heads != 0)
    throw KernelError("w_o has " + std::to_string(wo.cols) + " columns: not a multiple of heads = " +
                      std::to_string(heads));
  const int64_t dh = wo.cols / heads;
  std::vector<double> s(static_cast<std::size_t>(heads), 0.0);
  for (int64_t r = 0; r < wo.rows; ++r)
    for (int64_t c = 0; c < wo.cols; ++c) {
      const double v = static_cast<double>(wo(r, c));
      s[static_cast<std::size_t>(c / dh)] += v * v;
    }
  if (act) {
    if (act->cols != wo.cols)
      throw KernelError("act has " + std::to_string(act->cols) + " columns but w_o has " + std::to_string(wo.cols));
    std::vector<double> a(static_cast<std::size_t>(heads), 0.0);
    for (int64_t t = 0; t < act->rows; ++t)
      for (int64_t c = 0; c < act->cols; ++c) {
        const double v = static_cast<double>((*act)(t, c));
        a[static_cast<std::size_t>(c / dh)] += v * v;
      }
    for (int64_t h = 0; h < heads; ++h)
      s[static_cast<std::size_t>(h)] *= act->rows > 0 ? a[static_cast<std::size_t>(h)] / double(act->rows) : 0.0;
  }
  return s;
}

template <class T>
std::vector<double> neuron_scores(MatRef<T> w1, std::span<const T> b1, MatRef<T> w2, const MatRef<T>* act) {
  const int64_t ff = w1.rows;
  if (w2.cols != ff || (!b1.empty() && static_cast<int64_t>(b1.size()) != ff))
    throw KernelError("FFN shapes disagree: w1 has " + std::to_string(ff) + " rows, w2 " + std::to_string(w2.cols) +
                      " columns, b1 " + std::to_string(b1.size()) + " elements");
  std::vector<double> out2(static_cast<std::size_t>(ff), 0.0);
  for (int64_t r = 0; r < w2.rows; ++r)
    for (int64_t j = 0; j < ff; ++j) {
      const double v = static_cast<double>(w2(r, j));
      out2[static_cast<std::size_t>(j)] += v * v;
    }
  std::vector<double> s(static_cast<std::size_t>(ff), 0.0);
  if (!act) {
    for (int64_t j = 0; j < ff; ++j) {
      double in2 = b1.empty() ? 0.0 : double(b1[static_cast<std::size_t>(j)]) * double(b1[static_cast<std::size_t>(j)]);
      for (int64_t c = 0; c < w1.cols; ++c) in2 += double(w1(j, c)) * double(w1(j, c));
      s[static_cast<std::size_t>(j)] = std::sqrt(in2) * std::sqrt(out2[static_cast<std::size_t>(j)]);
    }
    return s;
  }
  if (act->cols != ff)
    throw KernelError("act has " + std::to_string(act->cols) + " columns but the FFN has " + std::to_string(ff) +
                      " neurons");
  for (int64_t t = 0; t < act->rows; ++t)
    for (int64_t j = 0; j < ff; ++j) s[static_cast<std::size_t>(j)] += double((*act)(t, j)) * double((*act)(t, j));
  for (int64_t j = 0; j < ff; ++j)
    s[static_cast<std::size_t>(j)] *=
        (act->rows > 0 ? 1.0 / double(act->rows) : 0.0) * out2[static_cast<std::size_t>(j)];
  return s;
}

static void check_groups(int64_t n, std::span<const std::int32_t> keep, int64_t unit, const char* what) {
  if (unit < 1 || static_cast<int64_t>(keep.size()) * unit != n)
    throw KernelError(std::string(what) + ": " + std::to_string(n) + " is not keep.size() (" +
                      std::to_string(keep.size()) + ") x unit (" + std::to_string(unit) + ")");
}

template <class T> Matrix<T> keep_rows(MatRef<T> a, std::span<const std::int32_t> keep, int64_t unit) {
  check_groups(a.rows, keep, unit, "keep_rows: rows");
  Matrix<T> out;
  out.cols = a.cols;
  for (int64_t r = 0; r < a.rows; ++r) {
    if (!keep[static_cast<std::size_t>(r / unit)]) continue;
    for (int64_t c = 0; c < a.cols; ++c) out.data.push_back(a(r, c));
    ++out.rows;
  }
  return out;
}

template <class T> Matrix<T> keep_cols(MatRef<T> a, std::span<const std::int32_t> keep, int64_t unit) {
  check_groups(a.cols, keep, unit, "keep_cols: columns");
  Matrix<T> out;
  out.rows = a.rows;
  for (int64_t c = 0; c < a.cols; ++c) out.cols += keep[static_cast<std::size_t>(c / unit)] ? 1 : 0;
  out.data.reserve(static_cast<std::size_t>(out.rows * out.cols));
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t c = 0; c < a.cols; ++c)
      if (keep[static_cast<std::size_t>(c / unit)]) out.data.push_back(a(r, c));
  return out;
}

template <class T> std::vector<T> keep_elems(std::span<const T> v, std::span<const std::int32_t> keep, int64_t unit) {
  check_groups(static_cast<int64_t>(v.size()), keep, unit, "keep_elems: length");
  std::vector<T> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (keep[i / static_cast<std::size_t>(unit)]) out.push_back(v[i]);
  return out;
}

template <class T>
ShrunkAttention<T> shrink_heads(MatRef<T> wq, MatRef<T> wk, MatRef<T> wv, std::span<const T> bq,
                                std::span<const T> bk, std::span<const T> bv, MatRef<T> wo,
                                std::span<const std::int32_t> keep, int64_t dh) {
  ShrunkAttention<T> s;
  s.q = keep_rows(wq, keep, dh);
  s.k = keep_rows(wk, keep, dh);
  s.v = keep_rows(wv, keep, dh);
  if (!bq.empty()) s.q_bias = keep_elems(bq, keep, dh);
  if (!bk.empty()) s.k_bias = keep_elems(bk, keep, dh);
  if (!bv.empty()) s.v_bias = keep_elems(bv, keep, dh);
  s.o = keep_cols(wo, keep, dh);
  s.heads = std::count_if(keep.begin(), keep.end(), [](std::int32_t v) { return v != 0; });
  return s;
}

template <class T>
ShrunkAttention<T> shrink_heads_fused(MatRef<T> wqkv, std::span<const T> bqkv, MatRef<T> wo,
                                      std::span<const std::int32_t> keep, int64_t dh) {
  // The fused matrix is three stacked [heads·dh, d] blocks: keep the same heads in each.
  std::vector<std::int32_t> keep3(keep.begin(), keep.end());
  keep3.insert(keep3.end(), keep.begin(), keep.end());
  keep3.insert(keep3.end(), keep.begin(), keep.end());
  ShrunkAttention<T> s;
  s.qkv = keep_rows(wqkv, keep3, dh);
  if (!bqkv.empty()) s.qkv_bias = keep_elems(bqkv, keep3, dh);
  s.o = keep_cols(wo, keep, dh);
  s.heads = std::count_if(keep.begin(), keep.end(), [](std::int32_t v) { return v != 0; });
  return s;
}

template <class T>
ShrunkFfn<T> shrink_ffn(MatRef<T> w1, std::span<const T> b1, MatRef<T> w2, std::span<const std::int32_t> keep) {
  ShrunkFfn<T> f;
  f.w1 = keep_rows(w1, keep, 1);
  if (!b1.empty()) f.b1 = keep_elems(b1, keep, 1);
  f.w2 = keep_cols(w2, keep, 1);
  return f;
}

#define YMLOPT_PRUNE_INSTANTIATE(T)                                                                             \
  template std::vector<double> head_scores<T>(MatRef<T>, const MatRef<T>*, int64_t);                            \
  template std::vector<double> neuron_scores<T>(MatRef<T>, std::span<const T>, MatRef<T>, const MatRef<T>*);    \
  template Matrix<T> keep_rows<T>(MatRef<T>, std::span<const std::int32_t>, int64_t);                           \
  template Matrix<T> keep_cols<T>(MatRef<T>, std::span<const std::int32_t>, int64_t);                           \
  template std::vector<T> keep_elems<T>(std::span<const T>, std::span<const std::int32_t>, int64_t);            \
  template ShrunkAttention<T> shrink_heads<T>(MatRef<T>, MatRef<T>, MatRef<T>, std::span<const T>,              \
                                              std::span<const T>, std::span<const T>, MatRef<T>,                \
                                              std::span<const std::int32_t>, int64_t);                          \
  template ShrunkAttention<T> shrink_heads_fused<T>(MatRef<T>, std::span<const T>, MatRef<T>,                   \
                                                    std::span<const std::int32_t>, int64_t);                    \
  template ShrunkFfn<T> shrink_ffn<T>(MatRef<T>, std::span<const T>, MatRef<T>, std::span<const std::int32_t>);
YMLOPT_PRUNE_INSTANTIATE(float)
YMLOPT_PRUNE_INSTANTIATE(double)
#undef YMLOPT_PRUNE_INSTANTIATE

}  // namespace prune

namespace {

namespace pu = prune_util;
using std::int64_t;

using kutil::kFloat;

/// Number of units to keep from args keep (count) / ratio, or -1 when unset or out of range.
int64_t keep_count(const Args& a, int64_t units) {
  const int64_t k = a.get_int("keep");
  if (k > 0) return k <= units ? k : -1;
  const double r = a.get_float("ratio");
  if (r > 0 && r <= 1) return std::max<int64_t>(1, std::llround(r * double(units)));
  return -1;
}

std::string keep_args(const Args& a, int64_t units, const char* what) {
  if (auto m = kutil::one_of(a, "criterion", {"magnitude", "activation"}); !m.empty()) return m;
  if (a.get_int("keep") < 0) return "param 'keep' is " + std::to_string(a.get_int("keep")) + ": must be >= 0";
  if (keep_count(a, units) < 0)
    return "params keep=" + std::to_string(a.get_int("keep")) + ", ratio=" + std::to_string(a.get_float("ratio")) +
           ": set keep in [1, " + std::to_string(units) + "] " + what + " or ratio in (0, 1]";
  return "";
}

std::string activation_bound(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t act,
                             const Args& a) {
  if (a.get_string("criterion") == "activation" && !p[act].bound())
    return "criterion 'activation' needs the '" + s[act].name + "' port (calibration activations)";
  return "";
}

/// Writes the keep mask (and the optional scores) to their ports.
void write_keep(const std::vector<std::int32_t>& keep, const std::vector<double>& scores, const TensorView& kv,
                const TensorView& sv) {
  auto* k = kv.ptr<std::int32_t>();
  for (std::size_t i = 0; i < keep.size(); ++i) k[i] = keep[i];
  if (sv.bound()) pu::store(scores, sv);
}

// ============================================================ prune.heads

const std::vector<PortSpec>& heads_ports() {
  static const std::vector<PortSpec> p = {
      {"w_o", Access::read, kFloat, false, 2, "attention output projection [d, heads·dh] (layout kn: [heads·dh, d])"},
      {"act", Access::read, kFloat, true, 2, "calibration context vectors of the heads [m, heads·dh] (criterion activation)"},
      {"mask", Access::write, {DType::i32}, false, 2, "keep mask [heads]: 1 keep, 0 drop"},
      {"scores", Access::write, kFloat, true, 2, "head scores [heads]"},
  };
  return p;
}

std::string heads_check(const TaskShape& t) {
  const auto& s = heads_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  if (auto m = pu::layout_arg(t.args); !m.empty()) return m;
  const int64_t h = t.args.get_int("heads");
  if (h < 1) return "param 'heads' is " + std::to_string(h) + ": must be >= 1";
  const bool kn = pu::is_kn(t.args);
  const int64_t hd = pu::w_k(t.ports[0], kn);
  if (hd % h != 0)
    return "port 'w_o' is " + kutil::dims(t.ports[0]) + ": its " + std::to_string(hd) +
           " input features are not a multiple of heads = " + std::to_string(h);
  return pu::first_error({keep_args(t.args, h, "heads"), activation_bound(s, t.ports, 1, t.args),
                          t.ports[1].bound() && t.ports[1].cols != hd
                              ? "port 'act' is " + kutil::dims(t.ports[1]) + " but expected " +
                                    std::to_string(hd) + " columns (heads·dh)"
                              : std::string(),
                          pu::same_dtype_opt(s, t.ports, 1, 0), pu::expect_shape(s, t.ports, 2, 1, h, "[heads]"),
                          pu::expect_vector(s, t.ports, 3, h, "[heads]")});
}

Cost heads_cost(const TaskShape& t) {
  return kutil::io_cost(heads_ports(), t, 2.0 * double(t.ports[0].size() + t.ports[1].size()));
}

void heads_cpu(KernelContext& ctx) {
  kutil::validate(ctx, heads_ports(), heads_check);
  const bool kn = pu::is_kn(ctx.args());
  const TensorView& wv = ctx.port(0);
  const int64_t d = pu::w_n(wv, kn), hd = pu::w_k(wv, kn), h = ctx.arg_int("heads");
  const std::vector<double> wo = pu::load(wv, kn);
  std::vector<double> act;
  prune::MatRef<double> aref;
  const bool use_act = ctx.arg_string("criterion") == "activation";
  if (use_act) {
    act = pu::load(ctx.port(1));
    aref = {act.data(), ctx.port(1).rows, hd, hd};
  }
  const std::vector<double> s = prune::head_scores<double>({wo.data(), d, hd, hd}, use_act ? &aref : nullptr, h);
  const auto keep = prune::keep_top(s, keep_count(ctx.args(), h));
  write_keep(keep, s, ctx.port(2), ctx.port(3));
  ctx.report("kept", double(std::count(keep.begin(), keep.end(), 1)));
}

// ============================================================ prune.neurons

const std::vector<PortSpec>& neurons_ports() {
  static const std::vector<PortSpec> p = {
      {"w1", Access::read, kFloat, false, 2, "FFN up projection [ff, d] (layout kn: [d, ff])"},
      {"b1", Access::read, kFloat, true, 2, "FFN up bias [ff]"},
      {"w2", Access::read, kFloat, false, 2, "FFN down projection [d, ff] (layout kn: [ff, d])"},
      {"act", Access::read, kFloat, true, 2, "calibration hidden activations [m, ff] (criterion activation)"},
      {"mask", Access::write, {DType::i32}, false, 2, "keep mask [ff]: 1 keep, 0 drop"},
      {"scores", Access::write, kFloat, true, 2, "neuron scores [ff]"},
  };
  return p;
}

std::string neurons_check(const TaskShape& t) {
  const auto& s = neurons_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  if (auto m = pu::layout_arg(t.args); !m.empty()) return m;
  const bool kn = pu::is_kn(t.args);
  const int64_t ff = pu::w_n(t.ports[0], kn), d = pu::w_k(t.ports[0], kn);
  return pu::first_error(
      {keep_args(t.args, ff, "neurons"), activation_bound(s, t.ports, 3, t.args),
       kn ? pu::expect_shape(s, t.ports, 2, ff, d, "[ff, d] for layout kn, from w1")
          : pu::expect_shape(s, t.ports, 2, d, ff, "[d, ff], from w1"),
       pu::expect_vector(s, t.ports, 1, ff, "[ff], from w1"),
       t.ports[3].bound() && t.ports[3].cols != ff
           ? "port 'act' is " + kutil::dims(t.ports[3]) + " but expected " + std::to_string(ff) + " columns (ff)"
           : std::string(),
       kutil::same_dtype(s, t.ports, 2, 0), pu::same_dtype_opt(s, t.ports, 1, 0), pu::same_dtype_opt(s, t.ports, 3, 0),
       pu::expect_shape(s, t.ports, 4, 1, ff, "[ff]"), pu::expect_vector(s, t.ports, 5, ff, "[ff]")});
}

Cost neurons_cost(const TaskShape& t) {
  return kutil::io_cost(neurons_ports(), t,
                        2.0 * double(t.ports[0].size() + t.ports[2].size() + t.ports[3].size()));
}

void neurons_cpu(KernelContext& ctx) {
  kutil::validate(ctx, neurons_ports(), neurons_check);
  const bool kn = pu::is_kn(ctx.args());
  const TensorView& w1v = ctx.port(0);
  const int64_t ff = pu::w_n(w1v, kn), d = pu::w_k(w1v, kn);
  const std::vector<double> w1 = pu::load(w1v, kn), w2 = pu::load(ctx.port(2), kn);
  std::vector<double> b1, act;
  if (ctx.port(1).bound()) b1 = pu::load(ctx.port(1));
  prune::MatRef<double> aref;
  const bool use_act = ctx.arg_string("criterion") == "activation";
  if (use_act) {
    act = pu::load(ctx.port(3));
    aref = {act.data(), ctx.port(3).rows, ff, ff};
  }
  const std::vector<double> s = prune::neuron_scores<double>({w1.data(), ff, d, d}, b1, {w2.data(), d, ff, ff},
                                                             use_act ? &aref : nullptr);
  const auto keep = prune::keep_top(s, keep_count(ctx.args(), ff));
  write_keep(keep, s, ctx.port(4), ctx.port(5));
  ctx.report("kept", double(std::count(keep.begin(), keep.end(), 1)));
}

std::vector<ParamSpec> keep_params() {
  return {{"keep", ParamType::int_, "0", false, "number of units to keep (0: use ratio)"},
          {"ratio", ParamType::float_, "0", false, "fraction of units to keep, in (0, 1] (when keep is 0)"},
          {"criterion", ParamType::string_, "magnitude", false, "'magnitude' or 'activation' (needs port act)"},
          {"layout", ParamType::string_, "nk", false, "'nk' (torch Linear) or 'kn' (GPT-2 Conv1D, transposed)"}};
}

}  // namespace

/// Registers prune.heads and prune.neurons.
///
///   <task component="prune.heads" w_o="attn.out.weight" mask="attn.keep" heads="12" ratio="0.75"/>
///   <task component="prune.neurons" w1="fc1.weight" w2="fc2.weight" act="fc1.act" mask="ffn.keep"
///         ratio="0.5" criterion="activation"/>
void register_prune_structured(Registry& reg) {
  std::vector<ParamSpec> hp = keep_params();
  hp.insert(hp.begin(), ParamSpec{"heads", ParamType::int_, "", true, "number of attention heads"});
  kutil::add_component(reg, "prune.heads",
                       "scores attention heads (magnitude of w_o's columns, or activation x magnitude) and outputs "
                       "a 0/1 mask keeping the `keep` (or ratio x heads) best heads",
                       heads_ports(), std::move(hp), heads_cpu, heads_check, heads_cost);
  kutil::add_component(reg, "prune.neurons",
                       "scores FFN neurons (||w1 row|| x ||w2 column||, or mean activation^2 x ||w2 column||^2) and "
                       "outputs a 0/1 mask keeping the `keep` (or ratio x ff) best neurons",
                       neurons_ports(), keep_params(), neurons_cpu, neurons_check, neurons_cost);
}

}  // namespace ymlopt
