// Transformer building blocks (components/nn/transformer*.cpp) against naive
// long-double formulas written here, on odd shapes and strided views.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/nn.hpp"
#include "tensor/simd.hpp"
#include "test_context.hpp"

namespace ymlopt::test {
namespace {

using LD = long double;
using Ref = std::vector<std::vector<LD>>;  // [rows][cols]

template <class T> constexpr LD tol() { return std::is_same_v<T, float> ? 1e-5L : 1e-12L; }

template <class T> bool close(T got, LD ref) {
  return std::fabs(static_cast<LD>(got) - ref) <= tol<T>() * std::max(1.0L, std::fabs(ref));
}

/// Expects m(r, c0 + c) == ref[r][c] for the whole of ref; returns the mismatch count.
template <class T> int expect_mat(const Mat<T>& m, const Ref& ref, const std::string& what, std::int64_t c0 = 0) {
  int bad = 0;
  for (std::size_t r = 0; r < ref.size(); ++r)
    for (std::size_t c = 0; c < ref[r].size(); ++c) {
      const T got = m(std::int64_t(r), c0 + std::int64_t(c));
      if (!close(got, ref[r][c]) && bad++ < 5)
        ADD_FAILURE() << what << " at (" << r << ", " << c << "): got " << double(got) << " expected "
                      << double(ref[r][c]);
    }
  return bad;
}

/// Expects every padding element (columns cols..ld) to hold the sentinel 77.
template <class T> void expect_padding(const Mat<T>& m, const std::string& what) {
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = m.cols; c < m.ld; ++c) ASSERT_EQ(m(r, c), T(77)) << what << " padding (" << r << ", " << c << ")";
}

/// A view on the block [r0, r0+rows) x [c0, c0+cols) of m (ld = m.ld).
template <class T> TensorView sub(Mat<T>& m, std::int64_t r0, std::int64_t c0, std::int64_t rows, std::int64_t cols) {
  TensorView v = m.view();
  v.data = &m(r0, c0);
  v.rows = rows;
  v.cols = cols;
  v.shape = {rows, cols};
  return v;
}

/// A 1-D view [cols] on row 0 of m (or on columns c0.. of it).
template <class T> TensorView vec(Mat<T>& m, std::int64_t c0 = 0, std::int64_t n = -1) {
  TensorView v = m.view();
  v.data = &m(0, c0);
  v.rows = 1;
  v.cols = n < 0 ? m.cols - c0 : n;
  v.ld = v.cols;
  v.shape = {v.cols};
  return v;
}

template <class T> Ref to_ref(const Mat<T>& m) {
  Ref r(std::size_t(m.rows), std::vector<LD>(std::size_t(m.cols)));
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) r[std::size_t(i)][std::size_t(j)] = m(i, j);
  return r;
}

const LD kPi = 3.14159265358979323846264338327950288L;

template <class T> class TransformerTyped : public ::testing::Test {
 protected:
  void SetUp() override { register_nn(reg); }
  TestRegistry reg;
};
template <class T> class LinearTyped : public TransformerTyped<T> {};
template <class T> class AttentionTyped : public TransformerTyped<T> {};
template <class T> class RopeTyped : public TransformerTyped<T> {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TransformerTyped, FloatTypes);
TYPED_TEST_SUITE(LinearTyped, FloatTypes);
TYPED_TEST_SUITE(AttentionTyped, FloatTypes);
TYPED_TEST_SUITE(RopeTyped, FloatTypes);

// ------------------------------------------------------------------ embedding

TYPED_TEST(TransformerTyped, EmbeddingGathersRows) {
  using T = TypeParam;
  const std::int64_t vocab = 11, d = 13, n = 7;
  Mat<T> table(vocab, d, 3), y(n, d, 2);
  table.random(1);
  const std::vector<std::int32_t> idv = {3, 0, 10, 3, 7, 1, 10};
  // ids as [tokens]
  Mat<std::int32_t> ids1(1, n);
  for (std::int64_t i = 0; i < n; ++i) ids1(0, i) = idv[std::size_t(i)];
  TensorView iv = ids1.view();
  iv.shape = {n};
  run(this->reg, "nn.embedding", {iv, table.view(), y.view()});
  Ref ref(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < d; ++j) ref[std::size_t(i)].push_back(table(idv[std::size_t(i)], j));
  expect_mat(y, ref, "embedding [tokens]");
  expect_padding(y, "embedding");
  // ids as a strided [tokens, 1] column
  Mat<std::int32_t> ids2(n, 1, 2);
  for (std::int64_t i = 0; i < n; ++i) ids2(i, 0) = idv[std::size_t(i)];
  Mat<T> y2(n, d);
  run(this->reg, "nn.embedding", {ids2.view(), table.view(), y2.view()});
  expect_mat(y2, ref, "embedding [tokens,1]");
}

TYPED_TEST(TransformerTyped, EmbeddingOutOfRangeNamesPositionAndId) {
  using T = TypeParam;
  Mat<T> table(5, 3), y(4, 3);
  Mat<std::int32_t> ids(4, 1);
  ids.buf = {0, 4, 5, 1};
  try {
    run(this->reg, "nn.embedding", {ids.view(), table.view(), y.view()});
    FAIL() << "no error";
  } catch (const KernelError& e) {
    EXPECT_EQ(std::string(e.what()), "id 5 at position 2 is out of range: table has 5 rows (ids must be in [0, 5))");
  }
  ids.buf = {0, -1, 2, 1};
  EXPECT_THROW(run(this->reg, "nn.embedding", {ids.view(), table.view(), y.view()}), KernelError);
}

// ------------------------------------------------------------------ norms

TYPED_TEST(TransformerTyped, LayerNormMatchesFormula) {
  using T = TypeParam;
  const std::int64_t t = 7, d = 13;
  Mat<T> x(t, d, 3), g(1, d), b(1, d);
  x.random(2, -3, 5);
  g.random(3);
  b.random(4);
  for (int variant = 0; variant < 4; ++variant) {
    const bool hg = variant & 1, hb = variant & 2;
    for (double eps : {1e-5, 0.5}) {
      Mat<T> y(t, d, 1);
      run(this->reg, "nn.layernorm", {x.view(), hg ? vec(g) : TensorView{}, hb ? vec(b) : TensorView{}, y.view()},
          {{"eps", std::to_string(eps)}});
      Ref ref(static_cast<std::size_t>(t));
      for (std::int64_t r = 0; r < t; ++r) {
        LD mean = 0, var = 0;
        for (std::int64_t j = 0; j < d; ++j) mean += x(r, j);
        mean /= d;
        for (std::int64_t j = 0; j < d; ++j) var += (x(r, j) - mean) * (x(r, j) - mean);
        var /= d;  // biased
        for (std::int64_t j = 0; j < d; ++j)
          ref[std::size_t(r)].push_back((x(r, j) - mean) / std::sqrt(var + LD(eps)) * (hg ? LD(g(0, j)) : 1.0L) +
                                        (hb ? LD(b(0, j)) : 0.0L));
      }
      expect_mat(y, ref, "layernorm variant " + std::to_string(variant));
      expect_padding(y, "layernorm");
    }
  }
  // in place
  Mat<T> y(t, d);
  run(this->reg, "nn.layernorm", {x.view(), vec(g), vec(b), y.view()});
  run(this->reg, "nn.layernorm", {x.view(), vec(g), vec(b), x.view()});
  for (std::int64_t r = 0; r < t; ++r)
    for (std::int64_t j = 0; j < d; ++j) EXPECT_EQ(x(r, j), y(r, j));
}

TYPED_TEST(TransformerTyped, RmsNormMatchesFormula) {
  using T = TypeParam;
  const std::int64_t t = 7, d = 13;
  Mat<T> x(t, d, 2), w(1, d);
  x.random(5, -2, 3);
  w.random(6);
  for (bool hw : {false, true}) {
    Mat<T> y(t, d, 3);
    run(this->reg, "nn.rmsnorm", {x.view(), hw ? vec(w) : TensorView{}, y.view()});
    Ref ref(static_cast<std::size_t>(t));
    for (std::int64_t r = 0; r < t; ++r) {
      LD ms = 0;
      for (std::int64_t j = 0; j < d; ++j) ms += LD(x(r, j)) * x(r, j);
      ms /= d;
      for (std::int64_t j = 0; j < d; ++j)
        ref[std::size_t(r)].push_back(x(r, j) / std::sqrt(ms + 1e-6L) * (hw ? LD(w(0, j)) : 1.0L));
    }
    expect_mat(y, ref, hw ? "rmsnorm weight" : "rmsnorm");
    expect_padding(y, "rmsnorm");
  }
}

// ------------------------------------------------------------------ linear

LD ref_act(const std::string& a, LD z) {
  if (a == "relu") return z > 0 ? z : 0.0L;
  if (a == "gelu") return 0.5L * z * (1 + std::erf(z / std::sqrt(2.0L)));
  if (a == "gelu_tanh") return 0.5L * z * (1 + std::tanh(std::sqrt(2 / kPi) * (z + 0.044715L * z * z * z)));
  if (a == "silu") return z / (1 + std::exp(-z));
  return z;
}

/// y[i][j] = (acc ? y0 : 0) + act(sum_p x[i,p] W[p,j] + b[j]) with W(p, j) given by `w`.
template <class T, class W>
Ref ref_linear(const Mat<T>& x, W&& w, const T* b, std::int64_t n, const std::string& a, const Ref* y0) {
  Ref out(std::size_t(x.rows));
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      LD z = b ? LD(b[j]) : 0.0L;
      for (std::int64_t p = 0; p < x.cols; ++p) z += LD(x(i, p)) * LD(w(p, j));
      out[std::size_t(i)].push_back(ref_act(a, z) + (y0 ? (*y0)[std::size_t(i)][std::size_t(j)] : 0.0L));
    }
  return out;
}

template <class T> void linear_layouts_bias_activations(const Registry& reg) {
  const std::int64_t m = 7, k = 13, n = 11;
  Mat<T> x(m, k, 3), wkn(k, n, 2), wnk(n, k, 1), b(1, n);
  x.random(10, -2, 2);
  wkn.random(11);
  b.random(12);
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j) wnk(j, p) = wkn(p, j);  // same W in both layouts
  auto W = [&](std::int64_t p, std::int64_t j) { return wkn(p, j); };
  for (bool tw : {false, true})
    for (bool hb : {false, true})
      for (const char* a : {"none", "relu", "gelu", "gelu_tanh", "silu"})
        for (bool acc : {false, true}) {
          Mat<T> y(m, n, 2);
          y.random(13);
          const Ref y0 = to_ref(y);
          run(reg, "nn.linear",
              {x.view(), tw ? wnk.view() : wkn.view(), hb ? vec(b) : TensorView{}, y.view(), acc ? y.view() : TensorView{}},
              {{"transpose_w", tw ? "true" : "false"}, {"activation", a}});
          const std::string what = std::string("linear tw=") + (tw ? "1" : "0") + " bias=" + (hb ? "1" : "0") +
                                   " act=" + a + " acc=" + (acc ? "1" : "0");
          expect_mat(y, ref_linear(x, W, hb ? &b(0, 0) : nullptr, n, a, acc ? &y0 : nullptr), what);
          expect_padding(y, what);
        }
}

TYPED_TEST(LinearTyped, LayoutsBiasActivationsAccumulate) { linear_layouts_bias_activations<TypeParam>(this->reg); }

// The bias/activation epilogue runs through kutil::run_widest: its AVX-512 copy (above,
// where the CPU has it) and the baseline build must both match the formulas.
TYPED_TEST(LinearTyped, EpilogueOnTheBaselineBuildToo) {
  const kutil::ScopedBaselineLoops baseline;
  linear_layouts_bias_activations<TypeParam>(this->reg);
}

// gelu (erf form) over its whole range, tails included: y = gelu(x) through a 1 x 1
// weight of 1, on the widest loops and on the baseline build.
TYPED_TEST(LinearTyped, GeluMatchesErfOverTheWholeRange) {
  using T = TypeParam;
  const std::int64_t m = 2401;
  Mat<T> x(m, 1), w(1, 1);
  for (std::int64_t i = 0; i < m; ++i) x(i, 0) = T(-12) + T(i) / T(100);
  w(0, 0) = T(1);
  for (bool widest : {true, false}) {
    std::optional<kutil::ScopedBaselineLoops> baseline;
    if (!widest) baseline.emplace();
    Mat<T> y(m, 1);
    run(this->reg, "nn.linear", {x.view(), w.view(), TensorView{}, y.view(), TensorView{}},
        {{"activation", "gelu"}});
    auto W = [&](std::int64_t, std::int64_t) { return w(0, 0); };
    expect_mat(y, ref_linear(x, W, static_cast<const T*>(nullptr), 1, "gelu", nullptr),
               widest ? "gelu" : "gelu (baseline)");
  }
}

TYPED_TEST(LinearTyped, ColumnTileOfWiderOutput) {
  using T = TypeParam;
  // y_full [7, 20], computed as tile columns [5, 16); w_full [13, 20] (or [20, 13]); b_full [20]
  const std::int64_t m = 7, k = 13, N = 20, c0 = 5, nt = 11;
  Mat<T> x(m, k, 1), wkn(k, N), wnk(N, k), b(1, N);
  x.random(20);
  wkn.random(21);
  b.random(22);
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < N; ++j) wnk(j, p) = wkn(p, j);
  for (bool tw : {false, true})
    for (bool acc : {false, true}) {
      Mat<T> y(m, N, 0);
      y.random(23);
      const Ref before = to_ref(y);
      Ref y0(static_cast<std::size_t>(m));
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < nt; ++j) y0[std::size_t(i)].push_back(before[std::size_t(i)][std::size_t(c0 + j)]);
      TensorView wt = tw ? sub(wnk, c0, 0, nt, k) : sub(wkn, 0, c0, k, nt);
      TensorView bt = vec(b, c0, nt);
      const TensorView yt = sub(y, 0, c0, m, nt);
      run(this->reg, "nn.linear", {x.view(), wt, bt, yt, acc ? yt : TensorView{}},
          {{"transpose_w", tw ? "true" : "false"}, {"activation", "gelu_tanh"}});
      auto W = [&](std::int64_t p, std::int64_t j) { return wkn(p, c0 + j); };
      expect_mat(y, ref_linear(x, W, &b(0, c0), nt, "gelu_tanh", acc ? &y0 : nullptr), "linear tile", c0);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < N; ++j)
          if (j < c0 || j >= c0 + nt) {
            ASSERT_EQ(y(i, j), T(before[std::size_t(i)][std::size_t(j)])) << "outside tile";
          }
    }
}

// ------------------------------------------------------------------ attention

struct AttnCase {
  std::int64_t heads, kv_heads, dh, seq, batch;
  bool causal;
  std::int64_t hb = 0, he = 0;
  double scale = 0;
};

/// Naive attention of the heads [hb, he) on q/k/v given as element accessors.
template <class Q, class K, class V>
Ref ref_attention(const AttnCase& c, Q&& q, K&& k, V&& v) {
  const std::int64_t t = c.seq * c.batch, hq = c.heads, hkv = c.kv_heads ? c.kv_heads : c.heads;
  const std::int64_t he = c.he ? c.he : hq;
  const LD scale = c.scale > 0 ? LD(c.scale) : 1.0L / std::sqrt(LD(c.dh));
  Ref y(std::size_t(t), std::vector<LD>(std::size_t(hq * c.dh), 0.0L));
  for (std::int64_t h = c.hb; h < he; ++h) {
    const std::int64_t g = h * hkv / hq;  // kv head of query head h
    for (std::int64_t i = 0; i < t; ++i) {
      const std::int64_t s0 = (i / c.seq) * c.seq, jend = c.causal ? i + 1 : s0 + c.seq;
      std::vector<LD> w;
      LD mx = -INFINITY, z = 0;
      for (std::int64_t j = s0; j < jend; ++j) {
        LD dot = 0;
        for (std::int64_t e = 0; e < c.dh; ++e) dot += LD(q(i, h * c.dh + e)) * LD(k(j, g * c.dh + e));
        w.push_back(scale * dot);
        mx = std::max(mx, w.back());
      }
      for (LD& a : w) z += (a = std::exp(a - mx));
      for (std::int64_t e = 0; e < c.dh; ++e) {
        LD s = 0;
        for (std::int64_t j = s0; j < jend; ++j) s += w[std::size_t(j - s0)] / z * LD(v(j, g * c.dh + e));
        y[std::size_t(i)][std::size_t(h * c.dh + e)] = s;
      }
    }
  }
  return y;
}

template <class T> void run_attention_case(const Registry& reg, const AttnCase& c, bool fused) {
  const std::int64_t t = c.seq * c.batch, hkv = c.kv_heads ? c.kv_heads : c.heads;
  const std::int64_t wq = c.heads * c.dh, wkv = hkv * c.dh;
  const std::string what = "attention heads=" + std::to_string(c.heads) + " kv=" + std::to_string(hkv) +
                           " dh=" + std::to_string(c.dh) + " seq=" + std::to_string(c.seq) +
                           " batch=" + std::to_string(c.batch) + (c.causal ? " causal" : "") + " heads [" +
                           std::to_string(c.hb) + "," + std::to_string(c.he) + ")" + (fused ? " fused" : "");
  std::map<std::string, std::string> args = {{"heads", std::to_string(c.heads)},
                                             {"kv_heads", std::to_string(c.kv_heads)},
                                             {"seq", c.batch == 1 ? "0" : std::to_string(c.seq)},
                                             {"causal", c.causal ? "true" : "false"},
                                             {"head_begin", std::to_string(c.hb)},
                                             {"head_end", std::to_string(c.he)},
                                             {"scale", std::to_string(c.scale)}};
  Mat<T> y(t, wq, 3);  // sentinel 77 everywhere
  Ref ref;
  if (fused) {
    // q, k, v are column slices of one [t, wq + 2 wkv + 2] tensor
    Mat<T> qkv(t, wq + 2 * wkv, 2);
    qkv.random(std::uint32_t(31 + t + wq), -2, 2);
    run(reg, "nn.attention",
        {sub(qkv, 0, 0, t, wq), sub(qkv, 0, wq, t, wkv), sub(qkv, 0, wq + wkv, t, wkv), y.view()}, args);
    ref = ref_attention(
        c, [&](std::int64_t i, std::int64_t j) { return qkv(i, j); },
        [&](std::int64_t i, std::int64_t j) { return qkv(i, wq + j); },
        [&](std::int64_t i, std::int64_t j) { return qkv(i, wq + wkv + j); });
  } else {
    Mat<T> q(t, wq, 1), k(t, wkv), v(t, wkv, 5);
    q.random(41, -2, 2);
    k.random(42, -2, 2);
    v.random(43);
    run(reg, "nn.attention", {q.view(), k.view(), v.view(), y.view()}, args);
    ref = ref_attention(c, q, k, v);
  }
  const std::int64_t he = c.he ? c.he : c.heads;
  Ref written(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t j = 0; j < wq; ++j) {
      const std::int64_t h = j / c.dh;
      if (h >= c.hb && h < he) written[std::size_t(i)].push_back(ref[std::size_t(i)][std::size_t(j)]);
      else ASSERT_EQ(y(i, j), T(77)) << what << ": column " << j << " of head " << h << " was written";
    }
  expect_mat(y, written, what, c.hb * c.dh);
  expect_padding(y, what);
}

TYPED_TEST(AttentionTyped, MultiHeadCausalAndNot) {
  for (bool causal : {false, true}) {
    run_attention_case<TypeParam>(this->reg, {3, 0, 5, 7, 1, causal}, false);
    run_attention_case<TypeParam>(this->reg, {3, 0, 5, 7, 2, causal}, false);  // batch of 2 sequences
    run_attention_case<TypeParam>(this->reg, {3, 0, 5, 7, 2, causal}, true);   // fused qkv slices
    run_attention_case<TypeParam>(this->reg, {1, 0, 13, 9, 1, causal, 0, 0, 0.7}, true);
    run_attention_case<TypeParam>(this->reg, {2, 0, 7, 11, 2, causal, 0, 0, 4.0}, false);  // scores span ~[-90, 90]
  }
}

TYPED_TEST(AttentionTyped, GroupedQueryAttention) {
  for (bool causal : {false, true})
    for (std::int64_t kv : {2, 3, 1}) {
      run_attention_case<TypeParam>(this->reg, {6, kv, 4, 5, 2, causal}, false);
      run_attention_case<TypeParam>(this->reg, {6, kv, 4, 5, 2, causal}, true);
    }
}

TYPED_TEST(AttentionTyped, HeadRangesWriteOnlyTheirColumns) {
  for (bool causal : {false, true}) {
    run_attention_case<TypeParam>(this->reg, {6, 2, 3, 7, 2, causal, 0, 1}, true);
    run_attention_case<TypeParam>(this->reg, {6, 2, 3, 7, 2, causal, 2, 5}, true);
    run_attention_case<TypeParam>(this->reg, {6, 3, 3, 7, 2, causal, 5, 6}, false);
    run_attention_case<TypeParam>(this->reg, {3, 0, 5, 7, 1, causal, 1, 3}, false);
  }
}

TYPED_TEST(AttentionTyped, LongSequencesSpanSeveralQueryBlocks) {
  for (bool causal : {false, true}) run_attention_case<TypeParam>(this->reg, {2, 1, 4, 300, 2, causal}, true);
}

// The softmax rows run through kutil::run_widest: the baseline build matches too.
TYPED_TEST(AttentionTyped, SoftmaxOnTheBaselineBuildToo) {
  const kutil::ScopedBaselineLoops baseline;
  for (bool causal : {false, true}) {
    run_attention_case<TypeParam>(this->reg, {2, 1, 4, 300, 2, causal}, true);
    run_attention_case<TypeParam>(this->reg, {3, 0, 5, 9, 2, causal}, false);
  }
}

TYPED_TEST(AttentionTyped, LargeScoresAreStable) {
  using T = TypeParam;
  Mat<T> q(3, 2), k(3, 2), v(3, 2), y(3, 2);
  q.buf = {T(100), T(0), T(0), T(100), T(-100), T(0)};
  k.buf = {T(100), T(0), T(0), T(100), T(100), T(1)};
  v.random(3);
  run(this->reg, "nn.attention", {q.view(), k.view(), v.view(), y.view()}, {{"heads", "1"}, {"scale", "1"}});
  for (T e : y.buf) EXPECT_TRUE(std::isfinite(e));
  // row 0: scores 1e4, 0, 1e4 -> keys 0 and 2 share the weight
  EXPECT_NEAR(y(0, 0), (LD(v(0, 0)) + v(2, 0)) / 2, 1e-6);
}

// ------------------------------------------------------------------ rope

template <class T> void run_rope_case(const Registry& reg, const std::string& style, std::int64_t heads,
                                      std::int64_t dh, std::int64_t t, std::int64_t seq, std::int64_t offset,
                                      double base, std::int64_t rotary_dim) {
  Mat<T> x(t, heads * dh, 2);
  x.random(std::uint32_t(50 + t + dh));
  const Ref x0 = to_ref(x);
  run(reg, "nn.rope", {x.view()},
      {{"heads", std::to_string(heads)}, {"seq", std::to_string(seq)}, {"offset", std::to_string(offset)},
       {"base", std::to_string(base)}, {"style", style}, {"rotary_dim", std::to_string(rotary_dim)}});
  const std::int64_t rd = rotary_dim ? rotary_dim : dh, S = seq ? seq : t;
  Ref ref = x0;
  for (std::int64_t r = 0; r < t; ++r) {
    const LD pos = LD(r % S + offset);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < rd / 2; ++i) {
        // pair i as a complex number times e^{i theta_i}, theta_i = pos / base^(2i/rd)
        const std::int64_t a = h * dh + (style == "half" ? i : 2 * i), b = h * dh + (style == "half" ? i + rd / 2 : 2 * i + 1);
        const std::complex<LD> z(x0[std::size_t(r)][std::size_t(a)], x0[std::size_t(r)][std::size_t(b)]);
        const std::complex<LD> w = z * std::polar(1.0L, pos / std::pow(LD(base), LD(2 * i) / LD(rd)));
        ref[std::size_t(r)][std::size_t(a)] = w.real();
        ref[std::size_t(r)][std::size_t(b)] = w.imag();
      }
  }
  expect_mat(x, ref, "rope " + style + " heads=" + std::to_string(heads) + " dh=" + std::to_string(dh) +
                         " seq=" + std::to_string(seq) + " rd=" + std::to_string(rotary_dim));
  expect_padding(x, "rope");
}

TYPED_TEST(RopeTyped, BothStylesMatchComplexRotation) {
  for (const char* style : {"half", "interleaved"}) {
    run_rope_case<TypeParam>(this->reg, style, 3, 6, 7, 0, 0, 10000, 0);
    run_rope_case<TypeParam>(this->reg, style, 3, 6, 7, 3, 5, 10000, 0);  // 7 rows, seq 3: positions restart
    run_rope_case<TypeParam>(this->reg, style, 2, 10, 9, 4, 2, 500, 0);
    run_rope_case<TypeParam>(this->reg, style, 3, 6, 7, 7, 1, 10000, 4);  // partial rotary: last 2 dims kept
  }
}

TYPED_TEST(RopeTyped, DotProductDependsOnlyOnRelativePosition) {
  using T = TypeParam;
  // <rope(q, m), rope(k, n)> depends only on m - n
  Mat<T> q(1, 8), k(1, 8);
  q.random(60);
  k.random(61);
  auto dot_at = [&](std::int64_t m, std::int64_t n) {
    Mat<T> a = q, b = k;
    run(this->reg, "nn.rope", {a.view()}, {{"heads", "1"}, {"offset", std::to_string(m)}});
    run(this->reg, "nn.rope", {b.view()}, {{"heads", "1"}, {"offset", std::to_string(n)}});
    LD s = 0;
    for (int j = 0; j < 8; ++j) s += LD(a(0, j)) * b(0, j);
    return s;
  };
  EXPECT_NEAR(dot_at(5, 2), dot_at(13, 10), 1e3 * tol<T>());
}

// ------------------------------------------------------------------ sinusoidal positions

TYPED_TEST(TransformerTyped, SinusoidalPositionsBothLayouts) {
  using T = TypeParam;
  for (std::int64_t d : {13, 12}) {
    const std::int64_t seq = 9, off = 3;
    Mat<T> y(seq, d, 2);
    run(this->reg, "nn.sinusoidal_positions", {y.view()}, {{"offset", std::to_string(off)}});
    Ref ref(static_cast<std::size_t>(seq));
    for (std::int64_t p = 0; p < seq; ++p)
      for (std::int64_t j = 0; j < d; ++j) {
        const LD pos = LD(p + off), ang = pos / std::pow(10000.0L, LD(2 * (j / 2)) / LD(d));
        ref[std::size_t(p)].push_back(j % 2 == 0 ? std::sin(ang) : std::cos(ang));
      }
    expect_mat(y, ref, "sinusoidal interleaved d=" + std::to_string(d));
    expect_padding(y, "sinusoidal");

    Mat<T> yc(seq, d, 1);
    run(this->reg, "nn.sinusoidal_positions", {yc.view()}, {{"layout", "concat"}, {"base", "500"}});
    const std::int64_t half = d / 2;
    Ref refc(static_cast<std::size_t>(seq));
    for (std::int64_t p = 0; p < seq; ++p) {
      for (std::int64_t j = 0; j < 2 * half; ++j) {
        const std::int64_t i = j % half;
        const LD ang = LD(p) * std::exp(-LD(i) * std::log(500.0L) / LD(half - 1));
        refc[std::size_t(p)].push_back(j < half ? std::sin(ang) : std::cos(ang));
      }
      if (d % 2) refc[std::size_t(p)].push_back(0);
    }
    expect_mat(yc, refc, "sinusoidal concat d=" + std::to_string(d));
  }
}

// ------------------------------------------------------------------ element-wise and row-wise

TYPED_TEST(TransformerTyped, SwigluTanhL2Normalize) {
  using T = TypeParam;
  const std::int64_t t = 7, f = 13;
  Mat<T> g(t, f, 2), u(t, f, 1), y(t, f, 3);
  g.random(70, -30, 30);
  u.random(71);
  run(this->reg, "nn.swiglu", {g.view(), u.view(), y.view()});
  Ref ref(static_cast<std::size_t>(t));
  for (std::int64_t r = 0; r < t; ++r)
    for (std::int64_t j = 0; j < f; ++j) ref[std::size_t(r)].push_back(LD(g(r, j)) / (1 + std::exp(-LD(g(r, j)))) * u(r, j));
  expect_mat(y, ref, "swiglu");
  expect_padding(y, "swiglu");
  {
    const kutil::ScopedBaselineLoops baseline;  // the baseline build of the run_widest loop
    Mat<T> yb(t, f, 3);
    run(this->reg, "nn.swiglu", {g.view(), u.view(), yb.view()});
    expect_mat(yb, ref, "swiglu, baseline build");
  }
  run(this->reg, "nn.swiglu", {g.view(), u.view(), u.view()});  // in place on up
  expect_mat(u, ref, "swiglu in place");

  Mat<T> x(t, f, 2), yt(t, f, 1);
  x.random(72, -4, 4);
  run(this->reg, "nn.tanh", {x.view(), yt.view()});
  Ref rt(static_cast<std::size_t>(t));
  for (std::int64_t r = 0; r < t; ++r)
    for (std::int64_t j = 0; j < f; ++j) rt[std::size_t(r)].push_back(std::tanh(LD(x(r, j))));
  expect_mat(yt, rt, "tanh");
  expect_padding(yt, "tanh");
  Mat<T> xi = x;
  run(this->reg, "nn.tanh", {xi.view(), xi.view()});
  expect_mat(xi, rt, "tanh in place");

  for (std::int64_t j = 0; j < f; ++j) x(3, j) = T(0);  // a zero row stays zero
  Mat<T> yl(t, f, 2);
  run(this->reg, "nn.l2normalize", {x.view(), yl.view()});
  Ref rl(static_cast<std::size_t>(t));
  for (std::int64_t r = 0; r < t; ++r) {
    LD n = 0;
    for (std::int64_t j = 0; j < f; ++j) n += LD(x(r, j)) * x(r, j);
    n = std::max(std::sqrt(n), 1e-12L);
    for (std::int64_t j = 0; j < f; ++j) rl[std::size_t(r)].push_back(x(r, j) / n);
  }
  expect_mat(yl, rl, "l2normalize");
  expect_padding(yl, "l2normalize");
  run(this->reg, "nn.l2normalize", {x.view(), x.view()});
  expect_mat(x, rl, "l2normalize in place");
}

// ------------------------------------------------------------------ pool

TYPED_TEST(TransformerTyped, PoolModes) {
  using T = TypeParam;
  const std::int64_t seq = 7, batch = 2, d = 13;
  Mat<T> x(seq * batch, d, 3);
  x.random(80, -3, 3);
  struct Case {
    const char* mode;
    const char* scale;
    std::int64_t length;
    std::int64_t seq_param;
  };
  for (const Case& c : {Case{"mean", "none", 0, seq}, Case{"mean", "none", 5, seq}, Case{"sum", "none", 0, seq},
                        Case{"sum", "sqrt_len", 0, seq}, Case{"sum", "sqrt_len", 3, seq}, Case{"max", "none", 0, seq},
                        Case{"max", "none", 4, seq}, Case{"first", "none", 0, seq}, Case{"last", "none", 6, seq},
                        Case{"mean", "none", 0, 0}}) {
    const std::int64_t S = c.seq_param ? c.seq_param : seq * batch, B = seq * batch / S, L = c.length ? c.length : S;
    Mat<T> y(B, d, 2);
    run(this->reg, "nn.pool", {x.view(), y.view()},
        {{"mode", c.mode}, {"scale", c.scale}, {"length", std::to_string(c.length)}, {"seq", std::to_string(c.seq_param)}});
    const std::string mode = c.mode;
    Ref ref(static_cast<std::size_t>(B));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < d; ++j) {
        LD s = 0, mx = -INFINITY;
        for (std::int64_t r = b * S; r < b * S + L; ++r) {
          s += x(r, j);
          mx = std::max(mx, LD(x(r, j)));
        }
        LD v = mode == "mean"    ? s / L
               : mode == "sum"   ? (std::string(c.scale) == "sqrt_len" ? s / std::sqrt(LD(L)) : s)
               : mode == "max"   ? mx
               : mode == "first" ? LD(x(b * S, j))
                                 : LD(x(b * S + L - 1, j));
        ref[std::size_t(b)].push_back(v);
      }
    expect_mat(y, ref, std::string("pool ") + c.mode + " " + c.scale + " length=" + std::to_string(c.length));
    expect_padding(y, "pool");
  }
}

// ------------------------------------------------------------------ check hooks, costs, registration

TensorView vshape(DType dt, std::int64_t n) {
  TensorView v = shape_view(dt, 1, n);
  v.shape = {n};
  return v;
}

TEST(TransformerCheck, Messages) {
  TestRegistry reg;
  register_nn(reg);
  const DType f = DType::f32;
  const TensorView none{};
  auto sv = [&](std::int64_t r, std::int64_t c) { return shape_view(f, r, c); };

  // embedding
  TensorView ids = shape_view(DType::i32, 7, 1);
  EXPECT_EQ(check(reg, "nn.embedding", {ids, sv(50, 13), sv(7, 13)}), "");
  EXPECT_EQ(check(reg, "nn.embedding", {vshape(DType::i32, 7), sv(50, 13), sv(7, 13)}), "");
  EXPECT_EQ(check(reg, "nn.embedding", {shape_view(DType::i32, 3, 2), sv(50, 13), sv(6, 13)}),
            "port 'ids' is 3x2: expected shape [tokens] or [tokens, 1]");
  EXPECT_EQ(check(reg, "nn.embedding", {ids, sv(50, 13), sv(7, 12)}),
            "port 'y' is 7x12 but expected 7x13 (7 ids x table width 13)");
  EXPECT_EQ(check(reg, "nn.embedding", {ids, sv(50, 13), shape_view(DType::f64, 7, 13)}),
            "port 'y' has dtype f64 but port 'table' has dtype f32: dtypes must match");

  // norms
  EXPECT_EQ(check(reg, "nn.layernorm", {sv(7, 13), vshape(f, 13), none, sv(7, 13)}), "");
  EXPECT_EQ(check(reg, "nn.layernorm", {sv(7, 13), vshape(f, 12), none, sv(7, 13)}),
            "port 'gamma' is 1x12 (shape 12) but expected [13] (x has 13 features)");
  EXPECT_EQ(check(reg, "nn.layernorm", {sv(7, 13), none, none, sv(7, 12)}),
            "port 'y' is 7x12 but port 'x' is 7x13: shapes must match");
  EXPECT_EQ(check(reg, "nn.rmsnorm", {sv(7, 13), vshape(DType::f64, 13), sv(7, 13)}),
            "port 'weight' has dtype f64 but port 'x' has dtype f32: dtypes must match");

  // linear
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(13, 11), vshape(f, 11), sv(7, 11), none}), "");
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(11, 13), none, sv(7, 11), none}, {{"transpose_w", "true"}}), "");
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(12, 11), none, sv(7, 11), none}),
            "port 'w' is 12x11 but port 'x' is 7x13: x has 13 columns but w has 12 rows (transpose_w=false: w is [k, n])");
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(13, 11), none, sv(7, 11), none}, {{"transpose_w", "true"}}),
            "port 'w' is 13x11 but port 'x' is 7x13: x has 13 columns but w has 11 columns (transpose_w=true: w is "
            "[n, k])");
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(13, 11), none, sv(7, 10), none}),
            "port 'y' is 7x10 but expected 7x11 (x W is 7x11, transpose_w=false: w is [k, n])");
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(13, 11), vshape(f, 10), sv(7, 11), none}),
            "port 'b' is 1x10 (shape 10) but expected [11] (11 output features)");
  EXPECT_EQ(check(reg, "nn.linear", {sv(7, 13), sv(13, 11), none, sv(7, 11), none}, {{"activation", "tanh"}}),
            "param 'activation' is 'tanh': expected one of 'none', 'relu', 'gelu', 'gelu_tanh', 'silu'");

  // attention
  const std::map<std::string, std::string> h6 = {{"heads", "6"}, {"kv_heads", "2"}, {"seq", "7"}};
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 6), sv(14, 6), sv(14, 18)}, h6), "");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 20), sv(14, 6), sv(14, 6), sv(14, 20)}, h6),
            "port 'q' is 14x20: 20 columns are not a positive multiple of heads=6");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 9), sv(14, 6), sv(14, 18)}, h6),
            "port 'k' is 14x9 but expected 14x6 (kv_heads=2 x head dim 3)");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 6), sv(13, 6), sv(14, 18)}, h6),
            "port 'v' is 13x6 but expected 14x6 (kv_heads=2 x head dim 3)");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 12), sv(14, 12), sv(14, 18)},
                  {{"heads", "6"}, {"kv_heads", "4"}}),
            "param 'kv_heads' is 4: heads=6 must be a multiple of kv_heads");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 6), sv(14, 6), sv(14, 18)},
                  {{"heads", "6"}, {"kv_heads", "2"}, {"seq", "4"}}),
            "port 'q' has 14 rows (tokens): not a multiple of seq=4");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 6), sv(14, 6), sv(14, 18)},
                  {{"heads", "6"}, {"kv_heads", "2"}, {"head_begin", "4"}, {"head_end", "7"}}),
            "head range [4, 7) (params head_begin, head_end) is not a non-empty range within [0, 6)");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 6), sv(14, 6), sv(14, 18)},
                  {{"heads", "0"}}),
            "param 'heads' is 0: must be >= 1");
  EXPECT_EQ(check(reg, "nn.attention", {sv(14, 18), sv(14, 18), sv(14, 18), sv(7, 18)}, {{"heads", "3"}}),
            "port 'y' is 7x18 but port 'q' is 14x18: shapes must match");

  // rope
  EXPECT_EQ(check(reg, "nn.rope", {sv(7, 18)}, {{"heads", "3"}}), "");
  EXPECT_EQ(check(reg, "nn.rope", {sv(7, 15)}, {{"heads", "3"}}),
            "port 'x' is 7x15: head dim 5 (columns / heads=3) must be even");
  EXPECT_EQ(check(reg, "nn.rope", {sv(7, 18)}, {{"heads", "4"}}),
            "port 'x' is 7x18: 18 columns are not a multiple of heads=4");
  EXPECT_EQ(check(reg, "nn.rope", {sv(7, 18)}, {{"heads", "3"}, {"style", "neox"}}),
            "param 'style' is 'neox': expected one of 'half', 'interleaved'");
  EXPECT_EQ(check(reg, "nn.rope", {sv(7, 18)}, {{"heads", "3"}, {"rotary_dim", "8"}}),
            "param 'rotary_dim' is 8: more than the head dim 6");

  // pool
  EXPECT_EQ(check(reg, "nn.pool", {sv(14, 13), sv(2, 13)}, {{"seq", "7"}}), "");
  EXPECT_EQ(check(reg, "nn.pool", {sv(14, 13), sv(1, 13)}, {{"seq", "7"}}),
            "port 'y' is 1x13 but expected 2x13 (2 sequences of 7 rows, 13 features)");
  EXPECT_EQ(check(reg, "nn.pool", {sv(14, 13), sv(2, 13)}, {{"seq", "7"}, {"length", "8"}}),
            "param 'length' is 8: more than the sequence length 7");
  EXPECT_EQ(check(reg, "nn.pool", {sv(14, 13), sv(2, 13)}, {{"seq", "7"}, {"scale", "sqrt_len"}}),
            "param 'scale' is 'sqrt_len' but param 'mode' is 'mean': sqrt_len needs mode 'sum'");
  EXPECT_EQ(check(reg, "nn.pool", {sv(14, 13), sv(2, 13)}, {{"seq", "5"}}),
            "port 'x' has 14 rows (tokens): not a multiple of seq=5");

  // others
  EXPECT_EQ(check(reg, "nn.swiglu", {sv(7, 13), sv(7, 12), sv(7, 13)}),
            "port 'up' is 7x12 but port 'gate' is 7x13: shapes must match");
  EXPECT_EQ(check(reg, "nn.sinusoidal_positions", {sv(9, 13)}, {{"layout", "sincos"}}),
            "param 'layout' is 'sincos': expected one of 'interleaved', 'concat'");
  EXPECT_EQ(check(reg, "nn.tanh", {shape_view(DType::i32, 2, 2), shape_view(DType::i32, 2, 2)}),
            "port 'x' has dtype i32: only f32 and f64 are supported");
}

TEST(TransformerCheck, KernelValidatesToo) {
  TestRegistry reg;
  register_nn(reg);
  Mat<float> x(7, 13), w(12, 11), y(7, 11);
  try {
    run(reg, "nn.linear", {x.view(), w.view(), TensorView{}, y.view(), TensorView{}});
    FAIL() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("x has 13 columns but w has 12 rows"), std::string::npos) << e.what();
  }
}

TEST(TransformerCheck, CostsAndRegistration) {
  TestRegistry reg;
  register_nn(reg);
  for (const char* name : {"nn.embedding", "nn.layernorm", "nn.rmsnorm", "nn.linear", "nn.attention", "nn.rope",
                           "nn.sinusoidal_positions", "nn.swiglu", "nn.tanh", "nn.l2normalize", "nn.pool"}) {
    const ComponentSpec& s = reg.get(name);
    EXPECT_FALSE(s.doc.empty()) << name;
    EXPECT_TRUE(s.check && s.cost && s.cpu) << name;
    for (const PortSpec& p : s.ports) EXPECT_FALSE(p.doc.empty()) << name << "." << p.name;
    for (const ParamSpec& p : s.params) EXPECT_FALSE(p.doc.empty()) << name << "." << p.name;
  }
  auto sv = [](std::int64_t r, std::int64_t c) { return shape_view(DType::f32, r, c); };
  TestContext lin(reg.get("nn.linear"), pad_optional(reg.get("nn.linear"), {sv(7, 13), sv(13, 11), TensorView{}, sv(7, 11)}));
  EXPECT_DOUBLE_EQ(lin.cost().flops, 2.0 * 7 * 11 * 13);
  EXPECT_DOUBLE_EQ(lin.cost().bytes, 4.0 * (7 * 13 + 13 * 11 + 7 * 11));
  TestContext att(reg.get("nn.attention"), {sv(14, 18), sv(14, 6), sv(14, 6), sv(14, 18)},
                  {{"heads", "6"}, {"kv_heads", "2"}, {"seq", "7"}});
  EXPECT_DOUBLE_EQ(att.cost().flops, 2 * 6 * 49 * (4 * 3 + 5.0));
  TestContext att2(reg.get("nn.attention"), {sv(14, 18), sv(14, 6), sv(14, 6), sv(14, 18)},
                   {{"heads", "6"}, {"kv_heads", "2"}, {"seq", "7"}, {"head_begin", "0"}, {"head_end", "3"}});
  EXPECT_DOUBLE_EQ(att2.cost().flops, att.cost().flops / 2);
  EXPECT_LT(att2.cost().bytes, att.cost().bytes);
}

}  // namespace
}  // namespace ymlopt::test
