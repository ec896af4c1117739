// Unstructured pruning (f32 and f64), registered by register_prune_unstructured:
//   prune.magnitude            zero the smallest-magnitude weights, per output row or per tensor,
//                              or every |w| <= an absolute threshold (a global one across layers)
//   prune.magnitude_threshold  the global threshold for a target sparsity over up to 8 tensors
//   prune.nm                   keep the n largest-magnitude of every m consecutive weights along k
//
// Exactness: with a sparsity s, exactly round(s * count) weights are zeroed in each
// row (scope=row) or in the tensor (scope=tensor): those of smallest |w|, ties
// broken by position (the earlier one is pruned first), so the result does not
// depend on the sort implementation. Existing zeros count as pruned (they are the
// smallest). A threshold t zeroes every |w| <= t, so weights tied with t are all
// pruned. NaN weights are an error.
//
//   <task component="prune.magnitude_threshold">   <!-- global 70% over two layers -->
//     <in port="w0" data="W1"/> <in port="w1" data="W2"/> <out port="t" data="T"/>
//     <arg name="sparsity" value="0.7"/>
//   </task>
//   <task component="prune.magnitude">
//     <in port="w" data="W1"/> <out port="y" data="W1"/> <in port="t" data="T"/>
//   </task>
//   <task component="prune.nm">
//     <in port="w" data="W"/> <out port="y" data="W"/> <arg name="n" value="2"/> <arg name="m" value="4"/>
//   </task>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "prune/prune.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt {
namespace {

using kutil::dims;
using std::int64_t;
using std::to_string;

using kutil::kFloat;

/// Number of weights to prune out of `count` for sparsity s.
int64_t prune_count(double s, int64_t count) {
  return std::min<int64_t>(count, static_cast<int64_t>(std::llround(s * static_cast<double>(count))));
}

std::string sparsity_param(const Args& a) {
  const double s = a.get_float("sparsity");
  if (s >= 0 && s < 1) return "";
  return "param 'sparsity' is " + to_string(s) + ": must be in [0, 1)";
}

std::string layout_param(const Args& a) { return kutil::one_of(a, "layout", {"nk", "kn"}); }

/// Accessor over W with output rows along `nk` rows or `kn` columns.
template <class T> struct Oriented {
  const T* data;
  int64_t ld;
  bool kn;
  int64_t n, k;  // output rows, reduction length
  Oriented(const TensorView& v, bool kn_) : data(static_cast<const T*>(v.data)), ld(v.ld), kn(kn_) {
    n = kn ? v.cols : v.rows;
    k = kn ? v.rows : v.cols;
  }
  int64_t offset(int64_t j, int64_t c) const { return kn ? c * ld + j : j * ld + c; }
};

template <class T> void reject_nan(const TensorView& v, const char* port) {
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t c = 0; c < v.cols; ++c)
      if (std::isnan(v.at<T>(r, c)))
        throw KernelError("port '" + std::string(port) + "' holds NaN at (" + to_string(r) + ", " + to_string(c) +
                          "): magnitudes cannot be ranked");
}

/// Copies w into y (when they are not the same data) and zeroes y where `prune(r, c)`.
template <class T, class P> int64_t write_pruned(const TensorView& w, const TensorView& y, P&& prune) {
  int64_t zeros = 0;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      const T v = prune(r, c) ? T(0) : w.at<T>(r, c);
      y.at<T>(r, c) = v;
      zeros += v == T(0);
    }
  return zeros;
}

// ============================================================ prune.magnitude

const std::vector<PortSpec>& magnitude_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, kFloat, false, 2, "weights, [n, k] (layout nk) or [k, n] (layout kn)"},
      {"y", Access::write, kFloat, false, 2, "pruned weights, shape of w (may be the same data)"},
      {"t", Access::read, kFloat, true, 1,
       "optional absolute threshold [1] (e.g. from prune.magnitude_threshold): zero every |w| <= t"},
  };
  return p;
}

std::string magnitude_check(const TaskShape& t) {
  const auto& s = magnitude_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::same_dtype(s, p, 1, 0); !m.empty()) return m;
  if (auto m = kutil::same_shape(s, p, 1, 0); !m.empty()) return m;
  if (p[2].bound() && p[2].rows * p[2].cols != 1)
    return "port 't' is " + dims(p[2]) + " but expected [1] (one threshold)";
  if (auto m = sparsity_param(t.args); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "scope", {"row", "tensor"}); !m.empty()) return m;
  if (auto m = layout_param(t.args); !m.empty()) return m;
  const double th = t.args.get_float("threshold");
  if (std::isnan(th)) return "param 'threshold' is NaN";
  return "";
}

Cost magnitude_cost(const TaskShape& t) {
  if (t.ports.size() != magnitude_ports().size()) return {};
  const double n = double(t.ports[0].rows) * double(t.ports[0].cols);
  return kutil::io_cost(magnitude_ports(), t, n * std::max(1.0, std::log2(std::max(n, 2.0))));
}

/// Marks pruned[o] for the `cnt` entries of `idx` (element offsets r*ld + c into
/// data) with the smallest (|w|, offset): ties go to the earlier position.
template <class T>
void select_smallest(const T* data, std::vector<int64_t>& idx, int64_t cnt, std::vector<char>& pruned) {
  if (cnt <= 0) return;
  auto less = [data](int64_t a, int64_t b) {
    const T x = std::abs(data[a]), y = std::abs(data[b]);
    return x < y || (x == y && a < b);
  };
  if (cnt < static_cast<int64_t>(idx.size())) std::nth_element(idx.begin(), idx.begin() + (cnt - 1), idx.end(), less);
  for (int64_t i = 0; i < cnt; ++i) pruned[static_cast<std::size_t>(idx[static_cast<std::size_t>(i)])] = 1;
}

template <class T> void magnitude_run(KernelContext& ctx) {
  const TensorView &w = ctx.port(0), &y = ctx.port(1), &tp = ctx.port(2);
  reject_nan<T>(w, "w");
  double th = ctx.arg_float("threshold");
  const bool port_th = tp.bound();
  if (port_th)
    th = kutil::dispatch_float(tp.dtype, [&](auto tg) -> double {
      return static_cast<double>(static_cast<const typename decltype(tg)::type*>(tp.data)[0]);
    });
  if (port_th && std::isnan(th)) throw KernelError("port 't' holds NaN");
  int64_t zeros = 0;
  if (port_th || th > 0) {
    zeros = write_pruned<T>(w, y, [&](int64_t r, int64_t c) { return std::abs(double(w.at<T>(r, c))) <= th; });
  } else {
    const double s = ctx.arg_float("sparsity");
    const bool kn = ctx.arg_string("layout") == "kn";
    const Oriented<T> o(w, kn);
    // pruned[] is indexed by flat offset r*ld + c (covers the strided view).
    const int64_t span = w.rows > 0 ? (w.rows - 1) * w.ld + w.cols : 0;
    std::vector<char> pruned(static_cast<std::size_t>(std::max<int64_t>(span, 0)), 0);
    std::vector<int64_t> idx;
    if (ctx.arg_string("scope") == "tensor") {
      idx.reserve(static_cast<std::size_t>(w.rows * w.cols));
      for (int64_t r = 0; r < w.rows; ++r)
        for (int64_t c = 0; c < w.cols; ++c) idx.push_back(r * w.ld + c);
      select_smallest(o.data, idx, prune_count(s, w.rows * w.cols), pruned);
    } else {
      const int64_t cnt = prune_count(s, o.k);
      for (int64_t j = 0; j < o.n; ++j) {
        idx.clear();
        for (int64_t c = 0; c < o.k; ++c) idx.push_back(o.offset(j, c));
        select_smallest(o.data, idx, cnt, pruned);
      }
    }
    zeros = write_pruned<T>(w, y, [&](int64_t r, int64_t c) { return pruned[static_cast<std::size_t>(r * w.ld + c)] != 0; });
  }
  const double total = double(w.rows) * double(w.cols);
  ctx.report("zeros", double(zeros));
  ctx.report("sparsity", total > 0 ? double(zeros) / total : 0.0);
}

void magnitude_cpu(KernelContext& ctx) {
  kutil::validate(ctx, magnitude_ports(), magnitude_check);
  kutil::dispatch_float(ctx.port(0).dtype, [&](auto tg) { magnitude_run<typename decltype(tg)::type>(ctx); });
}

// ============================================================ prune.magnitude_threshold

constexpr int kMaxThresholdInputs = 8;

const std::vector<PortSpec>& threshold_ports() {
  static const std::vector<PortSpec> p = [] {
    std::vector<PortSpec> v;
    for (int i = 0; i < kMaxThresholdInputs; ++i) {
      std::string name = "w";  // (not "w" + to_string(i): GCC 12 -Wrestrict false positive)
      name += to_string(i);
      v.push_back({name, Access::read, kFloat, i > 0, 8, i == 0 ? "weights" : "more weights (optional)"});
    }
    v.push_back({"t", Access::write, kFloat, false, 1,
                 "threshold [1]: the round(sparsity * total)-th smallest |w| over all inputs (0 when none is pruned)"});
    return v;
  }();
  return p;
}

std::string threshold_check(const TaskShape& t) {
  const auto& s = threshold_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (p[kMaxThresholdInputs].rows * p[kMaxThresholdInputs].cols != 1)
    return "port 't' is " + dims(p[kMaxThresholdInputs]) + " but expected [1] (one threshold)";
  return sparsity_param(t.args);
}

Cost threshold_cost(const TaskShape& t) {
  if (t.ports.size() != threshold_ports().size()) return {};
  double n = 0;
  for (int i = 0; i < kMaxThresholdInputs; ++i) n += double(t.ports[i].rows) * double(t.ports[i].cols);
  Cost c = kutil::io_cost(threshold_ports(), t, 2 * n);
  c.extra_bytes = 8 * n;
  return c;
}

void threshold_cpu(KernelContext& ctx) {
  kutil::validate(ctx, threshold_ports(), threshold_check);
  std::vector<double> mags;
  int64_t total = 0;
  for (int i = 0; i < kMaxThresholdInputs; ++i) total += ctx.port(i).bound() ? ctx.port(i).size() : 0;
  mags.reserve(static_cast<std::size_t>(total));
  for (int i = 0; i < kMaxThresholdInputs; ++i) {
    const TensorView& v = ctx.port(i);
    if (!v.bound()) continue;
    kutil::dispatch_float(v.dtype, [&](auto tg) {
      using T = typename decltype(tg)::type;
      reject_nan<T>(v, threshold_ports()[static_cast<std::size_t>(i)].name.c_str());
      for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t c = 0; c < v.cols; ++c) mags.push_back(std::abs(double(v.at<T>(r, c))));
    });
  }
  const int64_t cnt = prune_count(ctx.arg_float("sparsity"), total);
  double th = 0;
  if (cnt > 0) {
    std::nth_element(mags.begin(), mags.begin() + (cnt - 1), mags.end());
    th = mags[static_cast<std::size_t>(cnt - 1)];
  }
  const TensorView& out = ctx.port(kMaxThresholdInputs);
  kutil::dispatch_float(out.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    T v = static_cast<T>(th);
    if (static_cast<double>(v) < th) v = std::nextafter(v, T(INFINITY));  // never prune fewer than cnt
    static_cast<T*>(out.data)[0] = v;
  });
  ctx.report("threshold", th);
  ctx.report("weights", double(total));
}

// ============================================================ prune.nm

const std::vector<PortSpec>& nm_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, kFloat, false, 2, "weights, [n, k] (layout nk) or [k, n] (layout kn)"},
      {"y", Access::write, kFloat, false, 2, "pruned weights, shape of w (may be the same data)"},
  };
  return p;
}

std::string nm_check(const TaskShape& t) {
  const auto& s = nm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::same_dtype(s, p, 1, 0); !m.empty()) return m;
  if (auto m = kutil::same_shape(s, p, 1, 0); !m.empty()) return m;
  if (auto m = layout_param(t.args); !m.empty()) return m;
  const int64_t n = t.args.get_int("n"), m = t.args.get_int("m");
  if (m < 1) return "param 'm' is " + to_string(m) + ": must be >= 1";
  if (n < 0 || n > m) return "param 'n' is " + to_string(n) + ": must be in [0, m = " + to_string(m) + "]";
  const bool kn = t.args.get_string("layout") == "kn";
  const int64_t k = kn ? p[0].rows : p[0].cols;
  if (k % m)
    return "port 'w' is " + dims(p[0]) + ": k = " + to_string(k) + " (" + (kn ? "rows" : "columns") +
           ", layout " + (kn ? "kn" : "nk") + ") is not a multiple of m = " + to_string(m);
  return "";
}

Cost nm_cost(const TaskShape& t) {
  if (t.ports.size() != nm_ports().size()) return {};
  const double n = double(t.ports[0].rows) * double(t.ports[0].cols);
  return kutil::io_cost(nm_ports(), t, 4 * n);
}

template <class T> void nm_run(KernelContext& ctx) {
  const TensorView &w = ctx.port(0), &y = ctx.port(1);
  reject_nan<T>(w, "w");
  const int64_t n = ctx.arg_int("n"), m = ctx.arg_int("m");
  const Oriented<T> o(w, ctx.arg_string("layout") == "kn");
  T* out = static_cast<T*>(y.data);
  std::vector<int64_t> order(static_cast<std::size_t>(m));
  std::vector<T> g(static_cast<std::size_t>(m));
  int64_t zeros = 0;
  for (int64_t j = 0; j < o.n; ++j)
    for (int64_t c0 = 0; c0 < o.k; c0 += m) {
      for (int64_t i = 0; i < m; ++i) g[static_cast<std::size_t>(i)] = o.data[o.offset(j, c0 + i)];
      std::iota(order.begin(), order.end(), int64_t{0});
      // Largest |w| first; ties: the earlier position is kept.
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const T x = std::abs(g[static_cast<std::size_t>(a)]), z = std::abs(g[static_cast<std::size_t>(b)]);
        return x > z || (x == z && a < b);
      });
      for (int64_t r = 0; r < m; ++r) {
        const int64_t i = order[static_cast<std::size_t>(r)];
        const T v = r < n ? g[static_cast<std::size_t>(i)] : T(0);
        // y has w's shape, so the same offset addresses it with y's ld.
        const int64_t row = o.kn ? c0 + i : j, col = o.kn ? j : c0 + i;
        out[row * y.ld + col] = v;
        zeros += v == T(0);
      }
    }
  const double total = double(w.rows) * double(w.cols);
  ctx.report("zeros", double(zeros));
  ctx.report("sparsity", total > 0 ? double(zeros) / total : 0.0);
}

void nm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, nm_ports(), nm_check);
  kutil::dispatch_float(ctx.port(0).dtype, [&](auto tg) { nm_run<typename decltype(tg)::type>(ctx); });
}

}  // namespace

void register_prune_unstructured(Registry& reg) {
  const ParamSpec layout = {"layout", ParamType::string_, "nk", false,
                            "nk: w is [n, k] (rows are output features, torch Linear); kn: w is [k, n] (GPT-2 Conv1D)"};
  kutil::add_component(
      reg, "prune.magnitude",
      "magnitude pruning: zero exactly round(sparsity * count) weights of smallest |w| per output row (scope=row) "
      "or per tensor (scope=tensor), ties pruned in position order; or, with threshold > 0 or port t bound, every "
      "|w| <= threshold (a global threshold across layers from prune.magnitude_threshold). Reports zeros, sparsity.",
      magnitude_ports(),
      {{"sparsity", ParamType::float_, "0", false, "fraction of weights to zero, in [0, 1)"},
       {"scope", ParamType::string_, "tensor", false, "row: per output row; tensor: over the whole tensor"},
       {"threshold", ParamType::float_, "0", false, "if > 0: zero every |w| <= threshold instead (sparsity unused)"},
       layout},
      magnitude_cpu, magnitude_check, magnitude_cost);
  kutil::add_component(
      reg, "prune.magnitude_threshold",
      "global magnitude threshold over up to 8 tensors (w0 required, w1..w7 optional): t = the c-th smallest |w| "
      "over all of them, c = round(sparsity * total) (exact, nth_element); t = 0 when c = 0. Feeding t to "
      "prune.magnitude on each tensor prunes at least c weights in all (more only on ties with t).",
      threshold_ports(), {{"sparsity", ParamType::float_, "0.5", false, "global fraction to prune, in [0, 1)"}},
      threshold_cpu, threshold_check, threshold_cost);
  kutil::add_component(reg, "prune.nm",
                       "N:M semi-structured pruning: in every m consecutive weights along k keep the n of largest "
                       "|w| (ties: the earlier one), zero the others; n=2, m=4 gives the 2:4 pattern of "
                       "sparse.pack_nm24. Reports zeros, sparsity.",
                       nm_ports(),
                       {{"n", ParamType::int_, "2", false, "weights kept per group"},
                        {"m", ParamType::int_, "4", false, "group length along k"},
                        layout},
                       nm_cpu, nm_check, nm_cost);
}

}  // namespace ymlopt
