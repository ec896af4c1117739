// prune.heads / prune.neurons scores and masks against naive long-double
// scores, and the physical shrinking API: a structurally pruned attention
// block / FFN computes exactly what the original computes with the dropped
// units' contributions zeroed (naive reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "prune/prune_api.hpp"
#include "prune_test_util.hpp"

namespace ymlopt::test {
namespace {

using prune::MatRef;

template <class T> MatRef<T> ref(const Mat<T>& a) { return {a.buf.data(), a.rows, a.cols, a.ld}; }

/// Multi-head self-attention output [t, d] in long double: q/k/v = x Wᵀ + b,
/// softmax(q_h k_hᵀ / sqrt(dh)) v_h per head, heads with use[h] == 0 zeroed, then · Woᵀ.
std::vector<long double> attention(const Mat<double>& x, MatRef<double> wq, MatRef<double> wk, MatRef<double> wv,
                                   const std::vector<double>& bq, const std::vector<double>& bk,
                                   const std::vector<double>& bv, MatRef<double> wo, std::int64_t heads,
                                   std::int64_t dh, const std::vector<int>& use) {
  const std::int64_t t = x.rows, d = x.cols, hd = heads * dh;
  auto proj = [&](MatRef<double> w, const std::vector<double>& b) {
    std::vector<long double> o(static_cast<std::size_t>(t * hd));
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t r = 0; r < hd; ++r) {
        long double s = b.empty() ? 0 : b[r];
        for (std::int64_t c = 0; c < d; ++c) s += static_cast<long double>(x(i, c)) * w(r, c);
        o[i * hd + r] = s;
      }
    return o;
  };
  const auto q = proj(wq, bq), k = proj(wk, bk), v = proj(wv, bv);
  std::vector<long double> ctx(static_cast<std::size_t>(t * hd), 0);
  for (std::int64_t h = 0; h < heads; ++h) {
    if (!use[h]) continue;
    for (std::int64_t i = 0; i < t; ++i) {
      std::vector<long double> p(static_cast<std::size_t>(t));
      long double mx = -1e300L, z = 0;
      for (std::int64_t j = 0; j < t; ++j) {
        long double s = 0;
        for (std::int64_t e = 0; e < dh; ++e) s += q[i * hd + h * dh + e] * k[j * hd + h * dh + e];
        p[j] = s / std::sqrt(static_cast<long double>(dh));
        mx = std::max(mx, p[j]);
      }
      for (auto& e : p) z += (e = std::exp(e - mx));
      for (std::int64_t e = 0; e < dh; ++e) {
        long double s = 0;
        for (std::int64_t j = 0; j < t; ++j) s += p[j] / z * v[j * hd + h * dh + e];
        ctx[i * hd + h * dh + e] = s;
      }
    }
  }
  std::vector<long double> out(static_cast<std::size_t>(t * wo.rows));
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t r = 0; r < wo.rows; ++r) {
      long double s = 0;
      for (std::int64_t c = 0; c < hd; ++c) s += ctx[i * hd + c] * wo(r, c);
      out[i * wo.rows + r] = s;
    }
  return out;
}

/// y = W2 gelu(W1 x + b1) in long double, neurons with use[j] == 0 zeroed.
std::vector<long double> ffn(const Mat<double>& x, MatRef<double> w1, const std::vector<double>& b1,
                             MatRef<double> w2, const std::vector<int>& use) {
  std::vector<long double> y(static_cast<std::size_t>(x.rows * w2.rows), 0);
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t j = 0; j < w1.rows; ++j) {
      if (!use[j]) continue;
      long double a = b1.empty() ? 0 : b1[j];
      for (std::int64_t c = 0; c < x.cols; ++c) a += static_cast<long double>(x(i, c)) * w1(j, c);
      const long double g = 0.5L * a * (1 + std::tanh(0.7978845608L * (a + 0.044715L * a * a * a)));
      for (std::int64_t r = 0; r < w2.rows; ++r) y[i * w2.rows + r] += g * w2(r, j);
    }
  return y;
}

void expect_close(const std::vector<long double>& a, const std::vector<long double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(double(a[i]), double(b[i]), tol) << i;
}

std::vector<double> vec(const Mat<double>& a) {
  std::vector<double> v;
  for (std::int64_t c = 0; c < a.cols; ++c) v.push_back(a(0, c));
  return v;
}

TEST(PruneStructured, ShrunkAttentionEqualsZeroedHeads) {
  const std::int64_t d = 16, heads = 4, dh = 4, hd = heads * dh, t = 7;
  const Mat<double> x = normal<double>(t, d, 1), wq = normal<double>(hd, d, 2), wk = normal<double>(hd, d, 3),
                    wv = normal<double>(hd, d, 4), wo = normal<double>(d, hd, 5, 2);
  const std::vector<double> bq = vec(normal<double>(1, hd, 6)), bk = vec(normal<double>(1, hd, 7)),
                            bv = vec(normal<double>(1, hd, 8));
  const std::vector<std::int32_t> keep = {1, 0, 1, 0};
  const std::vector<int> use(keep.begin(), keep.end()), all(2, 1);
  const auto want = attention(x, ref(wq), ref(wk), ref(wv), bq, bk, bv, ref(wo), heads, dh, use);

  const auto s = prune::shrink_heads<double>(ref(wq), ref(wk), ref(wv), bq, bk, bv, ref(wo), keep, dh);
  ASSERT_EQ(s.heads, 2);
  ASSERT_EQ(s.q.rows, 2 * dh);
  ASSERT_EQ(s.o.cols, 2 * dh);
  expect_close(attention(x, s.q.ref(), s.k.ref(), s.v.ref(), s.q_bias, s.k_bias, s.v_bias, s.o.ref(), 2, dh, all),
               want, 1e-12);

  // Fused Wqkv [3·hd, d] and bias [3·hd].
  Mat<double> wqkv(3 * hd, d);
  std::vector<double> bqkv;
  for (std::int64_t r = 0; r < hd; ++r)
    for (std::int64_t c = 0; c < d; ++c) wqkv(r, c) = wq(r, c), wqkv(hd + r, c) = wk(r, c), wqkv(2 * hd + r, c) = wv(r, c);
  for (const auto* b : {&bq, &bk, &bv}) bqkv.insert(bqkv.end(), b->begin(), b->end());
  const auto f = prune::shrink_heads_fused<double>(ref(wqkv), bqkv, ref(wo), keep, dh);
  ASSERT_EQ(f.qkv.rows, 3 * 2 * dh);
  const std::int64_t h2 = 2 * dh;
  const MatRef<double> fq{f.qkv.data.data(), h2, d, d}, fk{f.qkv.data.data() + h2 * d, h2, d, d},
      fv{f.qkv.data.data() + 2 * h2 * d, h2, d, d};
  const std::vector<double> fbq(f.qkv_bias.begin(), f.qkv_bias.begin() + h2),
      fbk(f.qkv_bias.begin() + h2, f.qkv_bias.begin() + 2 * h2), fbv(f.qkv_bias.begin() + 2 * h2, f.qkv_bias.end());
  expect_close(attention(x, fq, fk, fv, fbq, fbk, fbv, f.o.ref(), 2, dh, all), want, 1e-12);
}

TEST(PruneStructured, ShrunkFfnEqualsZeroedNeurons) {
  const std::int64_t d = 12, ff = 20, t = 9;
  const Mat<double> x = normal<double>(t, d, 1), w1 = normal<double>(ff, d, 2, 1), w2 = normal<double>(d, ff, 3);
  const std::vector<double> b1 = vec(normal<double>(1, ff, 4));
  std::vector<std::int32_t> keep(ff, 1);
  for (int j : {0, 3, 4, 11, 19}) keep[j] = 0;
  const std::vector<int> use(keep.begin(), keep.end());
  const auto f = prune::shrink_ffn<double>(ref(w1), b1, ref(w2), keep);
  ASSERT_EQ(f.w1.rows, 15);
  ASSERT_EQ(f.w2.cols, 15);
  ASSERT_EQ(f.b1.size(), 15u);
  expect_close(ffn(x, f.w1.ref(), f.b1, f.w2.ref(), std::vector<int>(15, 1)), ffn(x, ref(w1), b1, ref(w2), use), 1e-12);
  // Without a bias, and in f32.
  Mat<float> w1f(ff, d), w2f(d, ff);
  for (std::int64_t j = 0; j < ff; ++j)
    for (std::int64_t c = 0; c < d; ++c) w1f(j, c) = float(w1(j, c)), w2f(c, j) = float(w2(c, j));
  const auto g = prune::shrink_ffn<float>(ref(w1f), {}, ref(w2f), keep);
  EXPECT_TRUE(g.b1.empty());
  EXPECT_EQ(g.w1(0, 2), w1f(1, 2));  // neuron 0 is dropped: row 1 is the first kept
  EXPECT_EQ(g.w2(2, 2), w2f(2, 5));  // neuron 5 is the third kept
  EXPECT_THROW(prune::shrink_ffn<float>(ref(w1f), {}, ref(w2f), std::vector<std::int32_t>(5, 1)), KernelError);
}

TEST(PruneStructured, HeadScoresAndMask) {
  const std::int64_t d = 8, heads = 6, dh = 3, hd = heads * dh, m = 10;
  Mat<double> wo = normal<double>(d, hd, 1), act = normal<double>(m, hd, 2);
  // Make head 4's activations tiny and head 1's weights large.
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t e = 0; e < dh; ++e) act(i, 4 * dh + e) *= 1e-3;
  for (std::int64_t r = 0; r < d; ++r)
    for (std::int64_t e = 0; e < dh; ++e) wo(r, 1 * dh + e) *= 5;
  std::vector<long double> mag(heads, 0), a2(heads, 0);
  for (std::int64_t r = 0; r < d; ++r)
    for (std::int64_t c = 0; c < hd; ++c) mag[c / dh] += static_cast<long double>(wo(r, c)) * wo(r, c);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t c = 0; c < hd; ++c) a2[c / dh] += static_cast<long double>(act(i, c)) * act(i, c) / m;
  for (const char* crit : {"magnitude", "activation"}) {
    std::vector<double> score(heads);
    for (std::int64_t h = 0; h < heads; ++h)
      score[h] = double(std::string(crit) == "magnitude" ? mag[h] : mag[h] * a2[h]);
    std::vector<int> order(heads);
    for (int h = 0; h < heads; ++h) order[h] = h;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
    Mat<std::int32_t> keep(1, heads);
    Mat<double> sc(1, heads);
    run(prune_registry(), "prune.heads", {wo.view(), act.view(), keep.view(), sc.view()},
        {{"heads", "6"}, {"ratio", "0.5"}, {"criterion", crit}});
    for (int i = 0; i < heads; ++i) {
      EXPECT_EQ(keep(0, order[i]), i < 3 ? 1 : 0) << crit << " rank " << i;
      EXPECT_NEAR(sc(0, i), score[i], 1e-12 * score[i]);
    }
    if (std::string(crit) == "activation") {
      EXPECT_EQ(keep(0, 4), 0);
    }
    EXPECT_EQ(keep(0, 1), 1);
    // kn layout (w_o stored [hd, d]) gives the same mask.
    Mat<double> wot = transposed(wo);
    Mat<std::int32_t> keep2(1, heads);
    run(prune_registry(), "prune.heads", {wot.view(), act.view(), keep2.view(), TensorView{}},
        {{"heads", "6"}, {"keep", "3"}, {"criterion", crit}, {"layout", "kn"}});
    EXPECT_EQ(keep2.buf, keep.buf);
  }
}

TEST(PruneStructured, NeuronScoresAndMask) {
  const std::int64_t d = 6, ff = 10, m = 12;
  Mat<float> w1 = normal<float>(ff, d, 1), w2 = normal<float>(d, ff, 2), b1 = normal<float>(1, ff, 3),
             act = normal<float>(m, ff, 4);
  for (std::int64_t i = 0; i < m; ++i) act(i, 7) *= 10.0f;
  for (const char* crit : {"magnitude", "activation"}) {
    std::vector<double> score(ff);
    for (std::int64_t j = 0; j < ff; ++j) {
      long double in = static_cast<long double>(b1(0, j)) * b1(0, j), out = 0, a = 0;
      for (std::int64_t c = 0; c < d; ++c) in += static_cast<long double>(w1(j, c)) * w1(j, c);
      for (std::int64_t r = 0; r < d; ++r) out += static_cast<long double>(w2(r, j)) * w2(r, j);
      for (std::int64_t i = 0; i < m; ++i) a += static_cast<long double>(act(i, j)) * act(i, j) / m;
      score[j] = double(std::string(crit) == "magnitude" ? std::sqrt(in) * std::sqrt(out) : a * out);
    }
    std::vector<int> order(ff);
    for (int j = 0; j < ff; ++j) order[j] = j;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
    Mat<std::int32_t> keep(1, ff);
    Mat<float> sc(1, ff);
    const auto rep = run(prune_registry(), "prune.neurons",
                         {w1.view(), b1.view(), w2.view(), act.view(), keep.view(), sc.view()},
                         {{"keep", "4"}, {"criterion", crit}});
    EXPECT_EQ(rep.at("kept"), 4.0);
    for (int i = 0; i < ff; ++i) {
      EXPECT_EQ(keep(0, order[i]), i < 4 ? 1 : 0) << crit << " rank " << i;
      EXPECT_NEAR(sc(0, i), score[i], 1e-5 * score[i]);
    }
    if (std::string(crit) == "activation") {
      EXPECT_EQ(keep(0, 7), 1);
    }
  }
}

TEST(PruneStructured, CheckMessages) {
  const auto& reg = prune_registry();
  auto v = [](std::int64_t r, std::int64_t c, DType t = DType::f32) { return shape_view(t, r, c); };
  const TensorView none{};
  EXPECT_EQ(check(reg, "prune.heads", {v(8, 12), none, v(1, 4, DType::i32), none}, {{"heads", "4"}, {"keep", "2"}}), "");
  EXPECT_NE(check(reg, "prune.heads", {v(8, 12), none, v(1, 5, DType::i32), none}, {{"heads", "5"}, {"keep", "2"}})
                .find("not a multiple of heads = 5"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.heads", {v(8, 12), none, v(1, 4, DType::i32), none}, {{"heads", "4"}, {"keep", "9"}})
                .find("set keep in [1, 4]"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.heads", {v(8, 12), none, v(1, 4, DType::i32), none}, {{"heads", "4"}})
                .find("or ratio in (0, 1]"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.heads", {v(8, 12), none, v(1, 4, DType::i32), none},
                  {{"heads", "4"}, {"keep", "2"}, {"criterion", "activation"}})
                .find("needs the 'act' port"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.heads", {v(8, 12), v(5, 10), v(1, 4, DType::i32), none},
                  {{"heads", "4"}, {"keep", "2"}, {"criterion", "activation"}})
                .find("port 'act' is 5x10"),
            std::string::npos);
  EXPECT_EQ(check(reg, "prune.neurons", {v(10, 6), v(1, 10), v(6, 10), none, v(1, 10, DType::i32), none}, {{"ratio", "0.5"}}), "");
  EXPECT_NE(check(reg, "prune.neurons", {v(10, 6), none, v(10, 6), none, v(1, 10, DType::i32), none}, {{"ratio", "0.5"}})
                .find("port 'w2' is 10x6 but expected 6x10"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.neurons", {v(10, 6), v(1, 9), v(6, 10), none, v(1, 10, DType::i32), none}, {{"ratio", "0.5"}})
                .find("port 'b1'"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.neurons", {v(10, 6), none, v(6, 10), none, v(1, 10, DType::i32), none},
                  {{"ratio", "0.5"}, {"criterion", "fisher"}})
                .find("'criterion'"),
            std::string::npos);
}

}  // namespace
}  // namespace ymlopt::test

namespace ymlopt::test {
namespace {

// The engine's registry refuses a parameter named like a port (one XML attribute
// namespace); TestRegistry does not check it, so check every component here.
TEST(PruneRegistry, NoPortIsNamedLikeAParameter) {
  const auto& reg = prune_registry();
  EXPECT_EQ(reg.specs.size(), 6u);  // prune.hessian, obs, lowrank, heads, neurons; distill.layerwise
  for (const auto& [name, spec] : reg.specs)
    for (const PortSpec& p : spec.ports)
      for (const ParamSpec& a : spec.params) EXPECT_NE(p.name, a.name) << name;
}

}  // namespace
}  // namespace ymlopt::test
