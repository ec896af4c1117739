// quant.gptq / quant::quantize_gptq (components/quant/gptq.cpp) against an
// independent naive long-double GPTQ: column by column, no blocking, the inverse
// Hessian downdated by the OBS rule H^-1 <- H^-1 - H^-1[:, j] H^-1[j, :] / H^-1_jj
// (no Cholesky), the quantization rules re-derived from quant.hpp's text.
// Also: the layer output error on correlated inputs against round-to-nearest,
// H = identity (or diagonal) equals quant.group / quant.int8 exactly, and the
// check messages.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

#include "../components/test_context.hpp"
#include "quant/quant.hpp"

namespace ymlopt::test {
namespace {

using LD = long double;
using quant::QuantizedWeight;
using std::int64_t;

float fl(LD v) { return static_cast<float>(v); }

/// Correlated activations X [m, k]: AR(1) along the features (rho) with per-feature
/// scales exp(N(0, 0.5)) and a shared low-rank part; H = 2/m XᵀX in long double.
struct Calib {
  int64_t m = 0, k = 0;
  std::vector<double> x;  // [m, k]
  std::vector<double> h;  // [k, k]
};

Calib correlated(int64_t m, int64_t k, std::uint32_t seed, double rho = 0.8) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> scale(static_cast<std::size_t>(k));
  for (double& s : scale) s = std::exp(0.5 * nd(gen));
  const int64_t rank = 4;
  std::vector<double> basis(static_cast<std::size_t>(rank * k));
  for (double& b : basis) b = nd(gen);
  Calib c;
  c.m = m;
  c.k = k;
  c.x.resize(static_cast<std::size_t>(m * k));
  for (int64_t t = 0; t < m; ++t) {
    double prev = nd(gen);
    double lr[rank];
    for (double& v : lr) v = nd(gen);
    for (int64_t j = 0; j < k; ++j) {
      prev = rho * prev + std::sqrt(1 - rho * rho) * nd(gen);
      double v = prev;
      for (int64_t r = 0; r < rank; ++r) v += 0.5 * lr[r] * basis[static_cast<std::size_t>(r * k + j)];
      c.x[static_cast<std::size_t>(t * k + j)] = v * scale[static_cast<std::size_t>(j)];
    }
  }
  c.h.assign(static_cast<std::size_t>(k * k), 0.0);
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = a; b < k; ++b) {
      LD s = 0;
      for (int64_t t = 0; t < m; ++t) s += LD(c.x[static_cast<std::size_t>(t * k + a)]) * c.x[static_cast<std::size_t>(t * k + b)];
      const double v = static_cast<double>(2 * s / m);
      c.h[static_cast<std::size_t>(a * k + b)] = c.h[static_cast<std::size_t>(b * k + a)] = v;
    }
  return c;
}

std::vector<float> random_w(int64_t n, int64_t k, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (float& v : w) v = d(gen);
  return w;
}

// ---- the naive reference ------------------------------------------------------------

struct RefParams {
  float scale = 0, zero_u = 0, lo = 0, inv = 0;  // zero_u: in unsigned code space
  bool constant = false;
  bool stored = false;  // f16 asymmetric: code = round(x / scale16 + zero16)
};

float f16_of(float v) { return float(half::f16_bits_to_double(half::f16_bits_from_double(double(v)))); }

RefParams ref_params_f32(const std::vector<float>& x, int bits, bool sym);

/// quant.hpp's rules, on the f32 values of the group's current weights; f16: the scale
/// rounded to f16, the zero f16(-lo / scale16) (int8: stored minus 128), codes against them.
RefParams ref_params(const std::vector<float>& x, int bits, bool sym, bool f16 = false) {
  RefParams p = ref_params_f32(x, bits, sym);
  if (!f16) return p;
  p.scale = f16_of(p.scale);
  if (!sym) {
    LD lo = x[0];
    for (float v : x) lo = std::min(lo, LD(v));
    if (p.scale == 0) p.scale = 0x1p-24f;
    const float shift = bits == 8 ? 128.0f : 0.0f;
    p.zero_u = f16_of(fl(LD(fl(-lo / p.scale)) - shift)) + shift;
    p.constant = false;
    p.stored = true;
  }
  p.inv = p.scale != 0 ? fl(1.0L / p.scale) : 0.0f;
  return p;
}

RefParams ref_params_f32(const std::vector<float>& x, int bits, bool sym) {
  RefParams p;
  if (sym) {
    LD amax = 0, mx = 0;
    for (float v : x)
      if (std::fabs(LD(v)) > amax) amax = std::fabs(LD(v)), mx = v;
    if (bits == 8) {
      p.scale = fl(amax / 127);
    } else {
      p.scale = fl(mx / -8);
      p.zero_u = 8;
    }
    p.inv = p.scale != 0 ? fl(1.0L / p.scale) : 0.0f;
    return p;
  }
  const int qmax = bits == 8 ? 255 : 15;
  LD lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, LD(v)), hi = std::max(hi, LD(v));
  p.lo = fl(lo);
  p.scale = fl(LD(fl(hi - lo)) / qmax);
  if (p.scale == 0) {
    p.scale = lo != 0 ? fl(std::fabs(lo)) : 1.0f;
    p.constant = true;
  }
  p.zero_u = fl(-lo / p.scale);
  p.inv = p.constant ? 0.0f : fl(1.0L / p.scale);
  return p;
}

/// Unsigned code (int4, asymmetric) or signed code (symmetric int8), clamped to the range.
int ref_code(float x, const RefParams& p, int bits, bool sym) {
  if (sym && bits == 8) return static_cast<int>(std::roundl(std::clamp<LD>(fl(LD(x) * p.inv), -127, 127)));
  if (sym) {
    const float v = fl(LD(fl(LD(x) * p.inv)) + 8.5L);
    return v <= 0 ? 0 : std::min(15, static_cast<int>(std::truncl(v)));
  }
  if (p.constant) return 0;
  const int qmax = bits == 8 ? 255 : 15;
  if (p.stored) return static_cast<int>(std::roundl(std::clamp<LD>(fl(LD(fl(LD(x) * p.inv)) + p.zero_u), 0, qmax)));
  return static_cast<int>(std::roundl(std::clamp<LD>(fl(LD(fl(LD(x) - p.lo)) * p.inv), 0, qmax)));
}

/// The dequantized value as quant::dequantize computes it (asymmetric int8: both shifted by 128).
float ref_value(int code, const RefParams& p, int bits, bool sym) {
  if (bits == 8 && !sym) return fl(LD(fl(LD(code - 128) - fl(LD(p.zero_u) - 128))) * p.scale);
  return fl(LD(fl(LD(code) - p.zero_u)) * p.scale);
}

/// clip_search: the rule on a·x (a = 1, 0.99, ... >= clip_min, a·x rounded to f32) with the least
/// sum hd_j (x_j - value_j)², in long double; ties keep the earlier (larger) a.
RefParams ref_search(const std::vector<float>& x, const LD* hd, int bits, bool sym, const quant::GptqOptions& o) {
  const bool f16 = o.scale_dtype == DType::f16;
  RefParams best = ref_params(x, bits, sym, f16);
  if (!o.clip_search) return best;
  auto err = [&](const RefParams& p) {
    LD e = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const LD d = LD(x[i]) - LD(ref_value(ref_code(x[i], p, bits, sym), p, bits, sym));
      e += hd[i] * d * d;
    }
    return e;
  };
  LD best_err = err(best);
  for (int step = 1;; ++step) {
    const double a = 1.0 - 0.01 * step;
    if (a < o.clip_min - 1e-12) break;
    std::vector<float> y;
    for (float v : x) y.push_back(fl(LD(static_cast<float>(a)) * LD(v)));
    const RefParams p = ref_params(y, bits, sym, f16);
    const LD e = err(p);
    if (e < best_err) best_err = e, best = p;
  }
  return best;
}

struct RefResult {
  std::vector<int> codes;  // as ref_code returns them, [n, k]
  std::vector<float> deq;  // [n, k]
  double loss = 0;
};

/// Sequential GPTQ in long double: the OBQ form (explicit inverse, downdated per column),
/// columns in index order, or with act_order by decreasing diag H with every group's
/// parameters taken from the original weights.
RefResult ref_gptq(const std::vector<float>& w0, int64_t n, int64_t k, const std::vector<double>& h0,
                   const quant::GptqOptions& o) {
  std::vector<LD> w(w0.begin(), w0.end()), h(h0.begin(), h0.end());
  auto H = [&](int64_t a, int64_t b) -> LD& { return h[static_cast<std::size_t>(a * k + b)]; };
  auto W = [&](int64_t r, int64_t c) -> LD& { return w[static_cast<std::size_t>(r * k + c)]; };
  LD diag = 0;
  for (int64_t j = 0; j < k; ++j) {
    if (H(j, j) == 0) H(j, j) = 1;  // a dead column keeps its weights
    diag += H(j, j);
  }
  for (int64_t j = 0; j < k; ++j) H(j, j) += LD(o.damp) * diag / k;
  std::vector<LD> hd;  // the damped diagonal: clip_search's weights
  for (int64_t j = 0; j < k; ++j) hd.push_back(H(j, j));
  // Gauss-Jordan inverse (SPD: no pivoting needed)
  std::vector<LD> inv(static_cast<std::size_t>(k * k), 0);
  auto I = [&](int64_t a, int64_t b) -> LD& { return inv[static_cast<std::size_t>(a * k + b)]; };
  for (int64_t j = 0; j < k; ++j) I(j, j) = 1;
  for (int64_t p = 0; p < k; ++p) {
    const LD piv = H(p, p);
    for (int64_t c = 0; c < k; ++c) H(p, c) /= piv, I(p, c) /= piv;
    for (int64_t r = 0; r < k; ++r) {
      if (r == p || H(r, p) == 0) continue;
      const LD f = H(r, p);
      for (int64_t c = 0; c < k; ++c) H(r, c) -= f * H(p, c), I(r, c) -= f * I(p, c);
    }
  }
  const int64_t gs = o.group > 0 ? o.group : k;
  RefResult res;
  res.codes.resize(static_cast<std::size_t>(n * k));
  res.deq.resize(static_cast<std::size_t>(n * k));
  std::vector<RefParams> par(static_cast<std::size_t>(n)), fixed(static_cast<std::size_t>(n * (k / gs)));
  std::vector<int64_t> order;
  for (int64_t j = 0; j < k; ++j) order.push_back(j);
  if (o.act_order) {
    // selection sort by decreasing diagonal, ties by index (the diagonal of the damped H = H_jj + const)
    std::vector<LD> dg;
    for (int64_t j = 0; j < k; ++j) dg.push_back(h0[static_cast<std::size_t>(j * k + j)] == 0 ? 1 : h0[static_cast<std::size_t>(j * k + j)]);
    for (int64_t a = 0; a < k; ++a) {
      int64_t best = a;
      for (int64_t b = a + 1; b < k; ++b)
        if (dg[static_cast<std::size_t>(order[static_cast<std::size_t>(b)])] > dg[static_cast<std::size_t>(order[static_cast<std::size_t>(best)])] ||
            (dg[static_cast<std::size_t>(order[static_cast<std::size_t>(b)])] == dg[static_cast<std::size_t>(order[static_cast<std::size_t>(best)])] &&
             order[static_cast<std::size_t>(b)] < order[static_cast<std::size_t>(best)]))
          best = b;
      std::swap(order[static_cast<std::size_t>(a)], order[static_cast<std::size_t>(best)]);
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < k / gs; ++g)
        fixed[static_cast<std::size_t>(r * (k / gs) + g)] = ref_search(
            std::vector<float>(w0.begin() + r * k + g * gs, w0.begin() + r * k + (g + 1) * gs), &hd[static_cast<std::size_t>(g * gs)],
            o.bits, o.symmetric, o);
  }
  std::vector<char> done(static_cast<std::size_t>(k), 0);
  LD loss = 0;
  for (int64_t j : order) {
    if (!o.act_order && j % gs == 0)
      for (int64_t r = 0; r < n; ++r) {
        std::vector<float> g;
        for (int64_t c = j; c < j + gs; ++c) g.push_back(fl(W(r, c)));
        par[static_cast<std::size_t>(r)] = ref_search(g, &hd[static_cast<std::size_t>(j)], o.bits, o.symmetric, o);
      }
    const LD d = I(j, j);
    done[static_cast<std::size_t>(j)] = 1;
    for (int64_t r = 0; r < n; ++r) {
      const RefParams& p = o.act_order ? fixed[static_cast<std::size_t>(r * (k / gs) + j / gs)] : par[static_cast<std::size_t>(r)];
      const int c = ref_code(fl(W(r, j)), p, o.bits, o.symmetric);
      const float q = ref_value(c, p, o.bits, o.symmetric);
      res.codes[static_cast<std::size_t>(r * k + j)] = c;
      res.deq[static_cast<std::size_t>(r * k + j)] = q;
      const LD e = (W(r, j) - q) / d;
      loss += (W(r, j) - q) * e / 2;
      for (int64_t c2 = 0; c2 < k; ++c2)
        if (!done[static_cast<std::size_t>(c2)]) W(r, c2) -= e * I(j, c2);
    }
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = 0; b < k; ++b)
        if (!done[static_cast<std::size_t>(a)] && !done[static_cast<std::size_t>(b)]) I(a, b) -= I(a, j) * I(j, b) / d;
  }
  res.loss = static_cast<double>(loss);
  return res;
}

/// The code as the reference numbers it, read back from the stored bytes.
int unsigned_code(const QuantizedWeight& q, int64_t r, int64_t c, bool sym) {
  if (q.bits == 8) {
    const int v = q.q[static_cast<std::size_t>(r * q.q_ld + c)];
    return sym ? v : v + 128;
  }
  const auto b = static_cast<std::uint8_t>(q.q[static_cast<std::size_t>(r * q.q_ld + c / 2)]);
  return (c & 1) ? b >> 4 : b & 15;
}

std::vector<float> dequant(const QuantizedWeight& q) {
  std::vector<float> out(static_cast<std::size_t>(q.n * q.k));
  quant::dequantize(q.view(), out.data(), q.k);
  return out;
}

/// ||X (W - Ŵ)ᵀ||_F in long double.
double output_error(const Calib& c, const std::vector<float>& w, const std::vector<float>& wq, int64_t n) {
  const int64_t k = c.k;
  LD s = 0;
  for (int64_t t = 0; t < c.m; ++t)
    for (int64_t r = 0; r < n; ++r) {
      LD y = 0;
      for (int64_t j = 0; j < k; ++j)
        y += LD(c.x[static_cast<std::size_t>(t * k + j)]) *
             (LD(w[static_cast<std::size_t>(r * k + j)]) - wq[static_cast<std::size_t>(r * k + j)]);
      s += y * y;
    }
  return static_cast<double>(std::sqrt(s));
}

quant::GptqOptions opts(int bits, int64_t group, bool sym, int64_t block = 128, double damp = 0.01,
                        bool act_order = false) {
  quant::GptqOptions o;
  o.act_order = act_order;
  o.bits = bits;
  o.group = group;
  o.symmetric = sym;
  o.block = block;
  o.damp = damp;
  return o;
}

quant::GptqOptions f16(quant::GptqOptions o) {
  o.scale_dtype = DType::f16;
  return o;
}

quant::GptqOptions clip(quant::GptqOptions o, double clip_min = 0.75) {
  o.clip_search = true;
  o.clip_min = clip_min;
  return o;
}

// ---- (a) equals the naive sequential reference ------------------------------------------

TEST(GptqTest, EqualsNaiveSequentialLongDoubleGptq) {
  struct Case {
    int64_t n, k;
    quant::GptqOptions o;
    int dead;  // a column with H_jj = 0 (its row/column of H zeroed), -1: none
  };
  const std::vector<Case> cases = {
      {6, 64, opts(4, 32, true), -1},     {5, 128, opts(4, 64, false, 32), 7},  {4, 96, opts(8, 32, false, 40), -1},
      {3, 72, opts(8, 0, true, 16), 70},  {4, 64, opts(4, 0, false), -1},       {7, 256, opts(4, 128, true, 64, 0.1), -1},
      {2, 128, opts(8, 128, true, 1), -1},
      // act_order: static groups, blocks that do not align with the groups
      {6, 128, opts(4, 32, true, 48, 0.01, true), 9},   {5, 96, opts(4, 32, false, 128, 0.01, true), -1},
      {4, 64, opts(8, 0, true, 16, 0.01, true), -1},    {3, 128, opts(8, 64, false, 7, 0.01, true), -1},
      // f16 scales and zeros: the reference rounds its parameters the same way
      {6, 64, f16(opts(4, 32, true)), -1},              {5, 128, f16(opts(4, 32, false, 32)), 7},
      {4, 96, f16(opts(8, 32, false, 40)), -1},         {3, 72, f16(opts(8, 0, true, 16)), -1},
      {5, 96, f16(opts(4, 32, false, 128, 0.01, true)), -1},
      // clip_search: per group the shrink of the range with the least diag-H-weighted error
      {6, 64, clip(opts(4, 32, true)), -1},             {5, 128, clip(opts(4, 64, false, 32), 0.5), 7},
      {4, 96, clip(opts(8, 32, false, 40)), -1},        {3, 72, clip(opts(8, 0, true, 16)), 70},
      {7, 256, clip(opts(4, 128, true, 64)), -1},       {6, 128, clip(opts(4, 32, true, 48, 0.01, true)), 9},
      {5, 96, clip(f16(opts(4, 32, false))), -1},       {4, 64, clip(f16(opts(8, 0, true, 16, 0.01, true)), 0.9), -1}};
  int idx = 0;
  for (const Case& cs : cases) {
    SCOPED_TRACE("case " + std::to_string(idx));
    Calib c = correlated(3 * cs.k, cs.k, 100 + idx);
    if (cs.dead >= 0)
      for (int64_t j = 0; j < cs.k; ++j)
        c.h[static_cast<std::size_t>(cs.dead * cs.k + j)] = c.h[static_cast<std::size_t>(j * cs.k + cs.dead)] = 0;
    const std::vector<float> w = random_w(cs.n, cs.k, 200 + idx);
    quant::GptqStats st;
    const QuantizedWeight q = quant::quantize_gptq(w.data(), cs.n, cs.k, cs.k, c.h.data(), cs.o, &st);
    const RefResult ref = ref_gptq(w, cs.n, cs.k, c.h, cs.o);
    const std::vector<float> deq = dequant(q);
    int64_t same = 0;
    double max_diff = 0;
    for (int64_t r = 0; r < cs.n; ++r)
      for (int64_t j = 0; j < cs.k; ++j) {
        const std::size_t i = static_cast<std::size_t>(r * cs.k + j);
        if (unsigned_code(q, r, j, cs.o.symmetric) == ref.codes[i]) {
          ++same;
          max_diff = std::max(max_diff, double(std::fabs(deq[i] - ref.deq[i])));
        }
      }
    const double total = double(cs.n * cs.k);
    EXPECT_GE(double(same) / total, 0.99) << same << " of " << total << " codes equal";
    EXPECT_LE(max_diff, 1e-6);
    EXPECT_NEAR(st.loss, ref.loss, 1e-6 * std::max(1.0, ref.loss));
    EXPECT_EQ(st.dead_columns, cs.dead >= 0 ? 1 : 0);
    if (cs.dead >= 0) {  // a dead column gets no error from the others: its own weights rounded to nearest
      for (int64_t r = 0; r < cs.n; ++r) {
        const std::size_t i = static_cast<std::size_t>(r * cs.k + cs.dead);
        const float step = quant::scale_of(q.view(), r, cs.o.group ? cs.dead / cs.o.group : 0);
        EXPECT_LE(std::fabs(deq[i] - w[i]), 0.5001f * std::fabs(step)) << "row " << r;
      }
    }
    ++idx;
  }
}

// ---- (b) lower layer output error than round-to-nearest ------------------------------------

// A diagonal H takes the direct path (U = diag(1/sqrt(h_jj)), no factorisation, no updates):
// same codes, values and loss as the long-double sequential reference, which factorises.
TEST(GptqTest, DiagonalHessianMatchesTheReferenceWithoutFactorising) {
  const int64_t n = 5, k = 128;
  std::vector<double> h(static_cast<std::size_t>(k * k), 0.0);
  std::mt19937 gen(9);
  std::uniform_real_distribution<double> ud(0.1, 10.0);
  for (int64_t j = 0; j < k; ++j) h[static_cast<std::size_t>(j * k + j)] = ud(gen);
  const std::vector<float> w = random_w(n, k, 31);
  for (bool clip : {false, true}) {
    SCOPED_TRACE(clip ? "clip_search" : "plain");
    quant::GptqOptions o;
    o.bits = 4;
    o.group = 32;
    o.clip_search = clip;
    quant::GptqStats st;
    const QuantizedWeight q = quant::quantize_gptq(w.data(), n, k, k, h.data(), o, &st);
    const RefResult ref = ref_gptq(w, n, k, h, o);
    const std::vector<float> deq = dequant(q);
    for (std::size_t i = 0; i < deq.size(); ++i) ASSERT_NEAR(deq[i], ref.deq[i], 1e-6) << "element " << i;
    EXPECT_NEAR(st.loss, ref.loss, 1e-9 * std::max(1.0, ref.loss));
  }
  h[static_cast<std::size_t>(3 * k + 3)] = 0;  // a zero diagonal entry is a dead column, on this path too
  quant::GptqStats st;
  quant::quantize_gptq(w.data(), n, k, k, h.data(), quant::GptqOptions{}, &st);
  EXPECT_EQ(st.dead_columns, 1);
}

TEST(GptqTest, LayerOutputErrorClearlyBelowRoundToNearest) {
  const int64_t n = 48, k = 256;
  const Calib c = correlated(1024, k, 7);
  const std::vector<float> w = random_w(n, k, 8);
  struct S {
    int bits;
    int64_t group;
    bool sym;
    double max_ratio;
  };
  for (const S& s : {S{4, 128, true, 0.75}, S{4, 128, false, 0.75}, S{4, 32, false, 0.8}, S{8, 0, true, 0.75}}) {
   for (bool act : {false, true}) {
    SCOPED_TRACE(std::to_string(s.bits) + " bits, group " + std::to_string(s.group) + (s.sym ? " sym" : " asym") +
                 (act ? ", act_order" : ""));
    const QuantizedWeight g =
        quant::quantize_gptq(w.data(), n, k, k, c.h.data(), opts(s.bits, s.group, s.sym, 128, 0.01, act));
    const QuantizedWeight r = s.group == 0 ? quant::quantize_int8(w.data(), n, k, k)
                                           : quant::quantize_group(w.data(), n, k, k, s.bits, s.group, s.sym);
    const double eg = output_error(c, w, dequant(g), n), er = output_error(c, w, dequant(r), n);
    std::printf("    %d bits group %lld %s%s: ||X(W-Q)'|| GPTQ %.5g, RTN %.5g, ratio %.3f\n", s.bits,
                static_cast<long long>(s.group), s.sym ? "sym" : "asym", act ? " act_order" : "", eg, er, eg / er);
    EXPECT_GT(er, 0);
    EXPECT_LT(eg, s.max_ratio * er);
   }
  }
}

/// clip_search with H = I is a mean-squared-error clip search on round-to-nearest: per group
/// the weight error never exceeds round-to-nearest's (a = 1 is a candidate), is lower in total (4 bits),
/// and on correlated inputs GPTQ with clip_search has a lower layer output error than without.
TEST(GptqTest, ClipSearchNeverWorseThanTheRulePerGroupAndLowersTheLayerError) {
  const int64_t n = 16, k = 256;
  const std::vector<float> w = random_w(n, k, 41);
  std::vector<double> eye(static_cast<std::size_t>(k * k), 0.0);
  for (int64_t j = 0; j < k; ++j) eye[static_cast<std::size_t>(j * k + j)] = 1;
  struct S {
    int bits;
    int64_t group;
    bool sym;
  };
  for (const S& s : {S{4, 128, true}, S{4, 32, false}, S{8, 0, true}, S{8, 64, false}}) {
    SCOPED_TRACE(std::to_string(s.bits) + " bits, group " + std::to_string(s.group) + (s.sym ? " sym" : " asym"));
    const std::vector<float> plain = dequant(quant::quantize_gptq(w.data(), n, k, k, eye.data(), opts(s.bits, s.group, s.sym)));
    const std::vector<float> clipped =
        dequant(quant::quantize_gptq(w.data(), n, k, k, eye.data(), clip(opts(s.bits, s.group, s.sym))));
    const int64_t gs = s.group ? s.group : k;
    LD total_plain = 0, total_clip = 0;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < k / gs; ++g) {
        LD ep = 0, ec = 0;
        for (int64_t j = g * gs; j < (g + 1) * gs; ++j) {
          const std::size_t i = static_cast<std::size_t>(r * k + j);
          ep += (LD(w[i]) - plain[i]) * (LD(w[i]) - plain[i]);
          ec += (LD(w[i]) - clipped[i]) * (LD(w[i]) - clipped[i]);
        }
        EXPECT_LE(ec, ep * (1 + 1e-12L)) << "row " << r << " group " << g;
        total_plain += ep, total_clip += ec;
      }
    std::printf("    %d bits group %lld %s, H = I: weight SSE clip/plain %.3f\n", s.bits, static_cast<long long>(s.group),
                s.sym ? "sym" : "asym", static_cast<double>(total_clip / total_plain));
    if (s.bits == 4) {  // 16 levels: clipping the range pays; 8 bits: rarely (never worse, checked above)
      EXPECT_LT(total_clip, 0.95L * total_plain);
    }
  }
  const Calib c = correlated(1024, k, 42);
  for (const S& s : {S{4, 128, true}, S{4, 32, false}}) {
    SCOPED_TRACE(std::to_string(s.bits) + " bits, group " + std::to_string(s.group) + (s.sym ? " sym" : " asym"));
    const double e0 = output_error(c, w, dequant(quant::quantize_gptq(w.data(), n, k, k, c.h.data(), opts(s.bits, s.group, s.sym))), n);
    const double e1 =
        output_error(c, w, dequant(quant::quantize_gptq(w.data(), n, k, k, c.h.data(), clip(opts(s.bits, s.group, s.sym)))), n);
    std::printf("    %d bits group %lld %s: ||X(W-Q)'|| GPTQ clip/plain %.3f\n", s.bits, static_cast<long long>(s.group),
                s.sym ? "sym" : "asym", e1 / e0);
    EXPECT_LT(e1, e0);
  }
}

// ---- (c) H = identity (or diagonal): exactly round-to-nearest ----------------------------------

class GptqComponentTest : public ::testing::Test {
 protected:
  void SetUp() override { register_quant(reg); }
  TestRegistry reg;
};

TEST_F(GptqComponentTest, DiagonalHessianEqualsRoundToNearestExactly) {
  const int64_t n = 6, k = 256;
  Mat<float> w(n, k, 3);
  w.random(11, -0.4, 0.6);
  for (bool identity : {true, false})
   for (bool act : {false, true}) {
    Mat<double> h(k, k, 0, DType::f64, 0.0);
    std::mt19937 gen(5);
    std::uniform_real_distribution<double> ud(0.1, 10.0);
    for (int64_t j = 0; j < k; ++j) h(j, j) = identity ? 1.0 : ud(gen);
    for (int bits : {4, 8})
      for (int64_t group : {0, 32, 64, 128})
        for (bool sym : {true, false}) {
          if (group == 0 && !(bits == 8 && sym)) continue;  // quant.int8 is the per-channel RTN reference
          SCOPED_TRACE(std::to_string(bits) + " bits, group " + std::to_string(group) + (sym ? " sym" : " asym") +
                       (identity ? ", H = I" : ", H diagonal") + (act ? ", act_order" : ""));
          const int64_t G = group > 0 ? k / group : 1;
          const int64_t qc = bits == 8 ? k : k / 2;
          Mat<std::int8_t> q(n, qc, 0, DType::i8), qr(n, qc, 0, DType::i8);
          Mat<float> s(group > 0 ? n : 1, group > 0 ? G : n), sr = s, z = s, zr = s;
          const std::map<std::string, std::string> a = {
              {"bits", std::to_string(bits)}, {"group", std::to_string(group)}, {"symmetric", sym ? "true" : "false"},
              {"act_order", act ? "true" : "false"}};
          run(reg, "quant.gptq", {w.view(), h.view(), q.view(), s.view(), sym ? TensorView{} : z.view()}, a);
          if (group == 0)
            run(reg, "quant.int8", {w.view(), qr.view(), sr.view()});
          else
            run(reg, "quant.group", {w.view(), qr.view(), sr.view(), sym ? TensorView{} : zr.view()},
                {{"bits", std::to_string(bits)}, {"group", std::to_string(group)}, {"symmetric", sym ? "true" : "false"}});
          EXPECT_EQ(q.buf, qr.buf);
          EXPECT_EQ(s.buf, sr.buf);
          if (!sym) {
            EXPECT_EQ(z.buf, zr.buf);
          }
        }
  }
}

TEST_F(GptqComponentTest, LayoutKnAndF32HessianEqualTheApiAndDequantReadsIt) {
  const int64_t n = 8, k = 128;
  const Calib c = correlated(256, k, 21);
  const std::vector<float> w = random_w(n, k, 22);
  Mat<float> wkn(k, n, 1);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) wkn(j, r) = w[static_cast<std::size_t>(r * k + j)];
  Mat<float> h32(k, k, 2);  // an f32 Hessian: the API sees its f32 values
  std::vector<double> h32d(static_cast<std::size_t>(k * k));
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b)
      h32d[static_cast<std::size_t>(a * k + b)] = h32(a, b) = static_cast<float>(c.h[static_cast<std::size_t>(a * k + b)]);
  const QuantizedWeight ref = quant::quantize_gptq(w.data(), n, k, k, h32d.data(), opts(4, 32, false, 64, 0.05));
  Mat<std::int8_t> q(n, k / 2, 2, DType::i8);
  Mat<float> s(n, k / 32), z(n, k / 32), back(n, k);
  const auto rep = run(reg, "quant.gptq", {wkn.view(), h32.view(), q.view(), s.view(), z.view()},
                       {{"bits", "4"}, {"group", "32"}, {"symmetric", "false"}, {"layout", "kn"}, {"block", "64"}, {"damp", "0.05"}});
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k / 2; ++j) ASSERT_EQ(q(r, j), ref.q[static_cast<std::size_t>(r * (k / 2) + j)]);
    for (int64_t j = k / 2; j < q.ld; ++j) ASSERT_EQ(q(r, j), std::int8_t(77)) << "padding";
    for (int64_t g = 0; g < k / 32; ++g) {
      EXPECT_EQ(s(r, g), ref.scale_f32[static_cast<std::size_t>(r * 4 + g)]);
      EXPECT_EQ(z(r, g), ref.zero[static_cast<std::size_t>(r * 4 + g)]);
    }
  }
  EXPECT_GT(rep.at("gptq_loss"), 0);
  EXPECT_EQ(rep.at("dead_columns"), 0);
  run(reg, "quant.dequant", {q.view(), s.view(), z.view(), back.view()}, {{"bits", "4"}, {"group", "32"}});
  const std::vector<float> deq = dequant(ref);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(back(r, j), deq[static_cast<std::size_t>(r * k + j)]);
  // per channel int8 into a [n] scale vector, read by quant.dequant with group 0
  Mat<std::int8_t> q8(n, k, 0, DType::i8);
  Mat<float> s8(1, n), back8(n, k);
  run(reg, "quant.gptq", {wkn.view(), h32.view(), q8.view(), s8.view(), TensorView{}},
      {{"bits", "8"}, {"group", "0"}, {"layout", "kn"}});
  run(reg, "quant.dequant", {q8.view(), s8.view(), TensorView{}, back8.view()}, {{"bits", "8"}, {"group", "0"}});
  const QuantizedWeight r8 = quant::quantize_gptq(w.data(), n, k, k, h32d.data(), opts(8, 0, true));
  const std::vector<float> d8 = dequant(r8);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(back8(r, j), d8[static_cast<std::size_t>(r * k + j)]);
}

// ---- (d) bad shapes and args ----------------------------------------------------------------

TEST_F(GptqComponentTest, BadShapesAndArgsGiveCheckMessages) {
  const int64_t n = 4, k = 64;
  auto W = shape_view(DType::f32, n, k), H = shape_view(DType::f64, k, k), Q4 = shape_view(DType::i8, n, k / 2),
       S = shape_view(DType::f32, n, 2), Z = shape_view(DType::f32, n, 2);
  const std::map<std::string, std::string> g32 = {{"group", "32"}};
  EXPECT_EQ(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, g32), "");
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: '" << msg << "', expected to contain '" << part << "'";
  };
  has(check(reg, "quant.gptq", {W, shape_view(DType::f64, k, k + 1), Q4, S, TensorView{}}, g32), "port 'h' is 64x65");
  has(check(reg, "quant.gptq", {W, H, shape_view(DType::i8, n, k), S, TensorView{}}, g32), "two 4-bit codes per byte");
  has(check(reg, "quant.gptq", {W, H, Q4, shape_view(DType::f32, n, 4), TensorView{}}, g32), "one scale per group of 32");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"bits", "3"}}), "param 'bits' is 3");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "48"}}), "param 'group' is 48");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "128"}}), "not a multiple of group 128");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"damp", "-1"}}), "param 'damp'");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"block", "0"}}), "param 'block' is 0");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"clip_search", "true"}, {"clip_min", "0"}}),
      "param 'clip_min' is 0");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"clip_search", "true"}, {"clip_min", "1.5"}}),
      "must be in (0, 1]");
  EXPECT_EQ(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"clip_min", "0"}}), "")
      << "clip_min is only read with clip_search";
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"layout", "xy"}}), "param 'layout'");
  has(check(reg, "quant.gptq", {W, H, Q4, S, TensorView{}}, {{"group", "32"}, {"symmetric", "false"}}),
      "port 'zero' is required");
  has(check(reg, "quant.gptq", {W, H, Q4, S, Z}, g32), "port 'zero' is bound but the quantization is symmetric");
  has(check(reg, "quant.gptq", {W, H, Q4, S, shape_view(DType::f32, n, 3)}, {{"group", "32"}, {"symmetric", "false"}}),
      "port 'zero' is 4x3");
  has(check(reg, "quant.gptq", {W, H, shape_view(DType::i8, n, k), shape_view(DType::f32, 1, n + 1), TensorView{}},
            {{"bits", "8"}, {"group", "0"}}),
      "one per row");
  has(check(reg, "quant.gptq", {shape_view(DType::f32, n, 63), shape_view(DType::f64, 63, 63),
                                shape_view(DType::i8, n, 31), shape_view(DType::f32, 1, n), TensorView{}},
            {{"group", "0"}}),
      "int4 needs an even k");
  has(TestContext(reg.get("quant.gptq"), {W, H, Q4}, g32).check(), "expected 5 ports, got 3");

  // runtime: a Hessian that is not positive definite, a non-finite weight, a wrong dtype
  Mat<float> w(n, k);
  w.random(1);
  Mat<double> h(k, k, 0, DType::f64, 0.0);
  for (int64_t j = 0; j < k; ++j) h(j, j) = -1;
  Mat<std::int8_t> q(n, k / 2, 0, DType::i8);
  Mat<float> s(n, 2);
  try {
    run(reg, "quant.gptq", {w.view(), h.view(), q.view(), s.view()}, g32);
    ADD_FAILURE() << "no error for an indefinite Hessian";
  } catch (const KernelError& e) {
    has(e.what(), "not positive definite");
  }
  for (int64_t j = 0; j < k; ++j) h(j, j) = 1;
  w(2, 5) = std::nanf("");
  try {
    run(reg, "quant.gptq", {w.view(), h.view(), q.view(), s.view()}, g32);
    ADD_FAILURE() << "no error for a NaN weight";
  } catch (const KernelError& e) {
    has(e.what(), "non-finite value at (2, 5)");
  }
  w(2, 5) = 0;
  Mat<double> wd(n, k);
  try {
    run(reg, "quant.gptq", {wd.view(), h.view(), q.view(), s.view()}, g32);
    ADD_FAILURE() << "no error for an f64 weight";
  } catch (const KernelError& e) {
    has(e.what(), "port 'w' has unsupported dtype f64");
  }
  EXPECT_THROW(quant::quantize_gptq(w.buf.data(), n, k, k, nullptr, opts(4, 32, true)), KernelError);
  EXPECT_THROW(quant::quantize_gptq(w.buf.data(), n, k, k, h.buf.data(), opts(4, 48, true)), KernelError);
  EXPECT_THROW(quant::quantize_gptq(w.buf.data(), n, k, k, h.buf.data(), clip(opts(4, 32, true), -0.5)), KernelError);
  has(check(reg, "quant.gptq", {W, H, Q4, shape_view(DType::f16, n, 2), Z}, {{"group", "32"}, {"symmetric", "false"}}),
      "port 'zero' has dtype f32 but 'scale' is f16: zero points are stored like the scales");
  EXPECT_EQ(check(reg, "quant.gptq", {W, H, Q4, shape_view(DType::f16, n, 2), shape_view(DType::f16, n, 2)},
                  {{"group", "32"}, {"symmetric", "false"}}),
            "");
}

/// f16 scale and zero ports: the component writes the API's f16 result (scale_dtype f16),
/// and quant.dequant reads it back to the API's dequantization.
TEST_F(GptqComponentTest, F16PortsEqualTheApi) {
  const int64_t n = 5, k = 64;
  const Calib c = correlated(3 * k, k, 31);
  const std::vector<float> w = random_w(n, k, 32);
  Mat<float> wm(n, k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) wm(r, j) = w[static_cast<std::size_t>(r * k + j)];
  Mat<double> h(k, k, 0, DType::f64, 0.0);
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) h(a, b) = c.h[static_cast<std::size_t>(a * k + b)];
  const QuantizedWeight ref = quant::quantize_gptq(w.data(), n, k, k, c.h.data(), f16(opts(4, 32, false)));
  ASSERT_EQ(ref.scale_dtype, DType::f16);
  Mat<std::int8_t> q(n, k / 2, 0, DType::i8);
  Mat<std::uint16_t> s(n, 2, 0, DType::f16), z(n, 2, 0, DType::f16);
  Mat<float> back(n, k);
  run(reg, "quant.gptq", {wm.view(), h.view(), q.view(), s.view(), z.view()}, {{"group", "32"}, {"symmetric", "false"}});
  EXPECT_EQ(q.buf, ref.q);
  EXPECT_EQ(s.buf, ref.scale_f16);
  for (std::size_t i = 0; i < ref.zero.size(); ++i) ASSERT_EQ(half::f16_bits_to_double(z.buf[i]), double(ref.zero[i]));
  run(reg, "quant.dequant", {q.view(), s.view(), z.view(), back.view()}, {{"bits", "4"}, {"group", "32"}});
  const std::vector<float> deq = dequant(ref);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(back(r, j), deq[static_cast<std::size_t>(r * k + j)]);
}

TEST(GptqTest, EmptyWeightsGiveEmptyResults) {
  const QuantizedWeight q = quant::quantize_gptq(nullptr, 0, 64, 64, nullptr, opts(4, 32, true));
  EXPECT_EQ(q.n, 0);
  EXPECT_TRUE(q.q.empty());
  EXPECT_TRUE(q.scale_f32.empty());
}

}  // namespace
}  // namespace ymlopt::test
