// Generation's components (components/nn/transformer_kv.cpp, transformer_sample.cpp):
// nn.kv_attention against a long-double softmax attention and against
// nn.attention's causal forward, step by step; nn.kv_append, nn.positions,
// nn.rope at given positions; nn.sample's greedy choice, filters and draws.
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

#include "nn/nn.hpp"
#include "nn/transformer_internal.hpp"
#include "test_context.hpp"

namespace ymlopt::test {
namespace {

using LD = long double;

class KvCache : public ::testing::Test {
 protected:
  void SetUp() override { register_nn(reg); }
  TestRegistry reg;
};

Mat<std::int32_t> ints(std::vector<std::int32_t> v) {
  Mat<std::int32_t> m(1, std::int64_t(v.size()), 0, DType::i32, 0);
  for (std::size_t i = 0; i < v.size(); ++i) m(0, std::int64_t(i)) = v[i];
  return m;
}

TensorView vec1(Mat<std::int32_t>& m) {
  TensorView v = m.view();
  v.shape = {m.cols};
  return v;
}

/// y[r] for query row r attending keys 0..pos[r] (a window: the last `window`
/// of them) of kv head h / group, in long double.
LD ref_attention(const Mat<float>& q, const Mat<float>& k, const Mat<float>& v, std::int64_t r, std::int64_t pos,
                 std::int64_t h, std::int64_t group, std::int64_t dh, std::int64_t c, std::int64_t window = 0) {
  const std::int64_t g = h / group, lo = window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
  std::vector<LD> s(std::size_t(pos + 1));
  LD mx = -INFINITY;
  for (std::int64_t j = lo; j <= pos; ++j) {
    LD d = 0;
    for (std::int64_t i = 0; i < dh; ++i) d += LD(q(r, h * dh + i)) * LD(k(j, g * dh + i));
    s[std::size_t(j)] = d / std::sqrt(LD(dh));
    mx = std::max(mx, s[std::size_t(j)]);
  }
  LD num = 0, den = 0;
  for (std::int64_t j = lo; j <= pos; ++j) {
    const LD e = std::exp(s[std::size_t(j)] - mx);
    den += e;
    num += e * LD(v(j, g * dh + c));
  }
  return num / den;
}

TEST_F(KvCache, AttentionAtScatteredPositionsMatchesLongDouble) {
  const std::int64_t heads = 6, kv = 2, dh = 5, ctx = 37, rows = 4;
  Mat<float> q(rows, heads * dh, 3), k(ctx, kv * dh, 1), v(ctx, kv * dh, 2), y(rows, heads * dh, 3);
  q.random(1), k.random(2), v.random(3);
  auto pos = ints({0, 36, 7, 20});
  run(reg, "nn.kv_attention", {q.view(), k.view(), v.view(), vec1(pos), y.view()},
      {{"heads", "6"}, {"kv_heads", "2"}});
  int bad = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t c = 0; c < dh; ++c) {
        const LD ref = ref_attention(q, k, v, r, pos(0, r), h, heads / kv, dh, c);
        if (std::fabs(LD(y(r, h * dh + c)) - ref) > 1e-5L && bad++ < 5)
          ADD_FAILURE() << "row " << r << " head " << h << " col " << c << ": " << y(r, h * dh + c) << " vs "
                        << double(ref);
      }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = heads * dh; c < y.ld; ++c) EXPECT_EQ(y(r, c), 77.0f) << "padding untouched";
}

// A prefill of 9 tokens, then one-token steps, each appending its k/v to the
// caches: every step's output equals that row of one causal nn.attention over
// the 14 tokens (the decode logits equal the full forward's).
TEST_F(KvCache, PrefillThenStepsEqualCausalAttention) {
  const std::int64_t heads = 4, kv = 2, dh = 8, total = 14, prefill = 9, ctx = 20;
  Mat<float> q(total, heads * dh), k(total, kv * dh), v(total, kv * dh), full(total, heads * dh);
  q.random(11), k.random(12), v.random(13);
  run(reg, "nn.attention", {q.view(), k.view(), v.view(), full.view()},
      {{"heads", "4"}, {"kv_heads", "2"}, {"causal", "true"}});
  Mat<float> kc(ctx, kv * dh, 0, DType::f32, NAN), vc(ctx, kv * dh, 0, DType::f32, NAN);  // unwritten rows: NaN
  auto counter = ints({0});
  std::int64_t done = 0;
  while (done < total) {
    const std::int64_t n = done == 0 ? prefill : 1;
    Mat<std::int32_t> positions(1, n, 0, DType::i32, -1);
    TensorView pv = vec1(positions);
    TensorView cv = vec1(counter);
    run(reg, "nn.positions", {cv, pv});
    ASSERT_EQ(counter(0, 0), done + n);
    for (std::int64_t r = 0; r < n; ++r) ASSERT_EQ(positions(0, r), done + r);
    TensorView qs = q.view(), ks = k.view(), vs = v.view();
    for (TensorView* t : {&qs, &ks, &vs}) {
      t->data = static_cast<float*>(t->data) + done * t->ld;
      t->rows = n;
      t->shape[0] = n;
    }
    run(reg, "nn.kv_append", {ks, pv, kc.view()});
    run(reg, "nn.kv_append", {vs, pv, vc.view()});
    Mat<float> y(n, heads * dh);
    run(reg, "nn.kv_attention", {qs, kc.view(), vc.view(), pv, y.view()}, {{"heads", "4"}, {"kv_heads", "2"}});
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < heads * dh; ++c)
        ASSERT_NEAR(y(r, c), full(done + r, c), 1e-6) << "token " << done + r << " col " << c;
    done += n;
  }
  for (std::int64_t r = total; r < ctx; ++r) EXPECT_TRUE(std::isnan(kc(r, 0))) << "row " << r << " written";
}

// A batch of three sequences in one pool of blocks: the prompts (5, 2 and 7
// tokens, concatenated) in one prefill, then one row per sequence and step;
// sequence 1 finishes after the first step. Every row equals that sequence's
// own causal attention (nn.attention over its tokens), a finished sequence's
// row is 0 and its blocks go back to the pool, and no block is shared.
TEST_F(KvCache, BatchInBlocksEqualsEachSequenceAlone) {
  const std::int64_t heads = 4, kv = 2, dh = 4, block = 3, blocks = 9, per = 4, steps = 3;
  const std::vector<std::int64_t> prompt = {5, 2, 7};
  const std::int64_t B = 3;
  std::vector<Mat<float>> q, k, v, full;  // each sequence's tokens: prompt + steps
  for (std::int64_t s = 0; s < B; ++s) {
    const std::int64_t n = prompt[std::size_t(s)] + steps;
    q.emplace_back(n, heads * dh), k.emplace_back(n, kv * dh), v.emplace_back(n, kv * dh), full.emplace_back(n, heads * dh);
    q.back().random(unsigned(40 + s)), k.back().random(unsigned(50 + s)), v.back().random(unsigned(60 + s));
    run(reg, "nn.attention", {q.back().view(), k.back().view(), v.back().view(), full.back().view()},
        {{"heads", "4"}, {"kv_heads", "2"}, {"causal", "true"}});
  }
  Mat<float> kc(blocks * block, kv * dh, 0, DType::f32, NAN), vc(blocks * block, kv * dh, 0, DType::f32, NAN);
  Mat<std::int32_t> table(B, per, 0, DType::i32, -1), pool(1, blocks + 2, 0, DType::i32, 0);
  auto lens = ints({0, 0, 0}), alive = ints({1, 1, 1});
  const std::map<std::string, std::string> paged = {{"heads", "4"}, {"kv_heads", "2"}, {"block", "3"}};
  std::vector<std::int64_t> done(B, 0);
  for (std::int64_t step = 0; step <= steps; ++step) {
    if (step == 2) alive(0, 1) = 0;  // sequence 1 finished after the first decode step
    std::vector<std::int32_t> seq;  // this step's rows: the prompts, then one row per sequence
    for (std::int64_t s = 0; s < B; ++s)
      for (std::int64_t i = 0; i < (step == 0 ? prompt[std::size_t(s)] : 1); ++i) seq.push_back(std::int32_t(s));
    const std::int64_t n = std::int64_t(seq.size());
    auto seqm = ints(seq);
    Mat<std::int32_t> positions(1, n, 0, DType::i32, -7);
    Mat<float> qs(n, heads * dh), ks(n, kv * dh), vs(n, kv * dh), y(n, heads * dh, 0, DType::f32, 99);
    for (std::int64_t r = 0, s = -1, t = 0; r < n; ++r) {
      if (seq[std::size_t(r)] != s) s = seq[std::size_t(r)], t = done[std::size_t(s)];
      for (std::int64_t c = 0; c < heads * dh; ++c) qs(r, c) = q[std::size_t(s)](t, c);
      for (std::int64_t c = 0; c < kv * dh; ++c) ks(r, c) = k[std::size_t(s)](t, c), vs(r, c) = v[std::size_t(s)](t, c);
      ++t;
    }
    Mat<std::int32_t> lookup(1, n, 0, DType::i32, -7);
    run(reg, "nn.positions", {vec1(lens), vec1(positions), vec1(seqm), vec1(alive), vec1(lookup)});
    for (std::int64_t r = 0; r < n; ++r) ASSERT_EQ(lookup(0, r), std::max(positions(0, r), 0));
    run(reg, "nn.kv_blocks", {vec1(positions), vec1(seqm), vec1(alive), table.view(), vec1(pool)}, {{"block", "3"}});
    run(reg, "nn.kv_append", {ks.view(), vec1(positions), kc.view(), {}, vec1(seqm), table.view()}, {{"block", "3"}});
    run(reg, "nn.kv_append", {vs.view(), vec1(positions), vc.view(), {}, vec1(seqm), table.view()}, {{"block", "3"}});
    Mat<float> rot = qs;
    run(reg, "nn.rope", {rot.view(), vec1(positions)}, {{"heads", "4"}});  // an idle row stays as it is
    for (std::int64_t r = 0; r < n; ++r) {
      if (positions(0, r) >= 0) continue;
      for (std::int64_t c = 0; c < heads * dh; ++c) ASSERT_EQ(rot(r, c), qs(r, c));
    }
    run(reg, "nn.kv_attention", {qs.view(), kc.view(), vc.view(), vec1(positions), y.view(), {}, {}, vec1(seqm), table.view()},
        paged);
    for (std::int64_t r = 0, s = -1, t = 0; r < n; ++r) {
      if (seq[std::size_t(r)] != s) s = seq[std::size_t(r)], t = done[std::size_t(s)];
      if (!alive(0, s)) {
        EXPECT_EQ(positions(0, r), -1);
        for (std::int64_t c = 0; c < heads * dh; ++c) ASSERT_EQ(y(r, c), 0.0f) << "finished sequence " << s;
        continue;
      }
      ASSERT_EQ(positions(0, r), t);
      for (std::int64_t c = 0; c < heads * dh; ++c)
        ASSERT_NEAR(y(r, c), full[std::size_t(s)](t, c), 1e-6) << "step " << step << " sequence " << s << " token " << t;
      ++t;
    }
    for (std::int64_t s = 0; s < B; ++s)
      if (alive(0, s)) done[std::size_t(s)] += step == 0 ? prompt[std::size_t(s)] : 1;
    // blocks: each live sequence holds ceil(len / block), none twice; the counters agree
    std::vector<int> owner(blocks, -1);
    std::int64_t held = 0;
    for (std::int64_t s = 0; s < B; ++s)
      for (std::int64_t j = 0; j < per; ++j) {
        const std::int32_t b = table(s, j);
        const bool want = alive(0, s) && j < (done[std::size_t(s)] + block - 1) / block;
        ASSERT_EQ(b >= 0, want) << "sequence " << s << " block " << j << " at step " << step;
        if (b < 0) continue;
        ASSERT_EQ(owner[std::size_t(b)], -1) << "block " << b << " shared";
        owner[std::size_t(b)] = int(s);
        ASSERT_EQ(pool(0, 2 + b), 1);
        ++held;
      }
    ASSERT_EQ(pool(0, 0), held);
  }
  EXPECT_EQ(pool(0, 1), 3 + 4);  // the most at once: at the end (8 and 10 tokens; sequence 1 gave its block back)
  // the pool runs out: a clear error naming the sequence and position
  Mat<std::int32_t> small(1, 2 + 2, 0, DType::i32, 0), t1(1, per, 0, DType::i32, -1);
  auto p9 = ints({0, 3, 6}), s0 = ints({0, 0, 0}), a1 = ints({1});
  try {
    run(reg, "nn.kv_blocks", {vec1(p9), vec1(s0), vec1(a1), t1.view(), vec1(small)}, {{"block", "3"}});
    ADD_FAILURE() << "a full pool was accepted";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("pool is full: its 2 blocks of 3 tokens are in use and sequence 0 needs one for "
                                         "position 6"), std::string::npos) << e.what();
  }
  // past the table: the context is full
  auto p12 = ints({12}), z = ints({0});
  Mat<std::int32_t> big(1, 2 + 9, 0, DType::i32, 0), t2(1, per, 0, DType::i32, -1);
  EXPECT_THROW(run(reg, "nn.kv_blocks", {vec1(p12), vec1(z), vec1(a1), t2.view(), vec1(big)}, {{"block", "3"}}),
               KernelError);
  // seq without table is a check error; a pool of rows not a whole number of blocks too
  Mat<float> x1(1, kv * dh), c10(10, kv * dh);
  EXPECT_NE(check(reg, "nn.kv_append", {x1.view(), vec1(z), kc.view(), {}, vec1(z), {}}, {{"block", "3"}}).find("go together"),
            std::string::npos);
  EXPECT_NE(check(reg, "nn.kv_append", {x1.view(), vec1(z), c10.view(), {}, vec1(z), table.view()}, {{"block", "3"}})
                .find("not a whole number of blocks of 3"),
            std::string::npos);
}

// A sliding window of 5 (Mistral's): nn.attention's causal forward over 23
// tokens and a paged cache filled by a prefill of 9 then one-token steps both
// give each token attention over its last 5 keys (long double reference); the
// blocks every query has passed go back, so after the prefill the sequence
// holds the 3 blocks of 2 that its last 5 positions touch.
TEST_F(KvCache, SlidingWindowAttendsTheLastKeysAndGivesBlocksBack) {
  const std::int64_t heads = 4, kv = 2, dh = 6, total = 23, prefill = 9, window = 5, block = 2, per = 12, blocks = 6;
  Mat<float> q(total, heads * dh), k(total, kv * dh), v(total, kv * dh), full(total, heads * dh);
  q.random(21), k.random(22), v.random(23);
  run(reg, "nn.attention", {q.view(), k.view(), v.view(), full.view()},
      {{"heads", "4"}, {"kv_heads", "2"}, {"causal", "true"}, {"window", "5"}});
  for (std::int64_t r = 0; r < total; ++r)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t c = 0; c < dh; ++c)
        ASSERT_NEAR(LD(full(r, h * dh + c)), ref_attention(q, k, v, r, r, h, heads / kv, dh, c, window), 1e-5L)
            << "token " << r << " head " << h;
  Mat<float> kc(blocks * block, kv * dh, 0, DType::f32, NAN), vc(blocks * block, kv * dh, 0, DType::f32, NAN);
  Mat<std::int32_t> table(1, per, 0, DType::i32, -1), pool(1, blocks + 2, 0, DType::i32, 0);
  auto lens = ints({0}), alive = ints({1});
  const std::map<std::string, std::string> paged = {{"heads", "4"}, {"kv_heads", "2"}, {"block", "2"}, {"window", "5"}};
  for (std::int64_t done = 0; done < total;) {
    const std::int64_t n = done == 0 ? prefill : 1;
    Mat<std::int32_t> positions(1, n, 0, DType::i32, -1);
    auto seq = ints(std::vector<std::int32_t>(std::size_t(n), 0));
    run(reg, "nn.positions", {vec1(lens), vec1(positions), vec1(seq), vec1(alive), {}});
    run(reg, "nn.kv_blocks", {vec1(positions), vec1(seq), vec1(alive), table.view(), vec1(pool)},
        {{"block", "2"}, {"window", "5"}});
    TensorView qs = q.view(), ks = k.view(), vs = v.view();
    for (TensorView* t : {&qs, &ks, &vs}) {
      t->data = static_cast<float*>(t->data) + done * t->ld;
      t->rows = n;
      t->shape[0] = n;
    }
    run(reg, "nn.kv_append", {ks, vec1(positions), kc.view(), {}, vec1(seq), table.view()}, {{"block", "2"}});
    run(reg, "nn.kv_append", {vs, vec1(positions), vc.view(), {}, vec1(seq), table.view()}, {{"block", "2"}});
    Mat<float> y(n, heads * dh);
    run(reg, "nn.kv_attention", {qs, kc.view(), vc.view(), vec1(positions), y.view(), {}, {}, vec1(seq), table.view()},
        paged);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < heads * dh; ++c)
        ASSERT_NEAR(y(r, c), full(done + r, c), 1e-6) << "token " << done + r << " col " << c;
    // held: blocks from the one holding the step's first query's first key to the last token's
    const std::int64_t first = std::max<std::int64_t>(0, done - window + 1) / block, last = (done + n - 1) / block;
    for (std::int64_t j = 0; j < per; ++j) ASSERT_EQ(table(0, j) >= 0, j >= first && j <= last) << "block " << j << " at " << done;
    ASSERT_EQ(pool(0, 0), last - first + 1);
    done += n;
  }
  EXPECT_EQ(pool(0, 1), 5);  // the prefill's 9 tokens; then 3
  EXPECT_NE(check(reg, "nn.attention", {q.view(), k.view(), v.view(), full.view()},
                      {{"heads", "4"}, {"kv_heads", "2"}, {"window", "5"}})
                .find("causal"),
            std::string::npos);
}

// f16 and int8 caches: the stored rows are the rounded keys and values (f16
// exactly; int8 within half a step of the row-and-head scale), and attention
// over them equals attention over those rounded values.
TEST_F(KvCache, F16AndInt8CachesAttendToTheirRoundedRows) {
  const std::int64_t heads = 4, kv = 2, dh = 8, total = 11, ctx = 16;
  Mat<float> q(total, heads * dh), k(total, kv * dh), v(total, kv * dh);
  q.random(21), k.random(22, -3, 3), v.random(23);
  auto pos = ints({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  for (DType dt : {DType::f16, DType::i8}) {
    SCOPED_TRACE(dtype_name(dt));
    const bool i8 = dt == DType::i8;
    Mat<std::uint16_t> kh(ctx, kv * dh, 0, DType::f16, 0), vh(ctx, kv * dh, 0, DType::f16, 0);
    Mat<std::int8_t> kq(ctx, kv * dh, 0, DType::i8, 0), vq(ctx, kv * dh, 0, DType::i8, 0);
    Mat<float> ks(ctx, kv, 0, DType::f32, 0), vs(ctx, kv, 0, DType::f32, 0);
    TensorView kc = i8 ? kq.view() : kh.view(), vc = i8 ? vq.view() : vh.view();
    TensorView kst = i8 ? ks.view() : TensorView{}, vst = i8 ? vs.view() : TensorView{};
    run(reg, "nn.kv_append", {k.view(), vec1(pos), kc, kst}, {{"heads", "2"}});
    run(reg, "nn.kv_append", {v.view(), vec1(pos), vc, vst}, {{"heads", "2"}});
    // the rounded rows, as the cache holds them
    Mat<float> kr(total, kv * dh), vr(total, kv * dh);
    for (std::int64_t r = 0; r < total; ++r)
      for (std::int64_t c = 0; c < kv * dh; ++c) {
        if (i8) {
          kr(r, c) = float(kq(r, c)) * ks(r, c / dh);
          vr(r, c) = float(vq(r, c)) * vs(r, c / dh);
          ASSERT_LE(std::fabs(kr(r, c) - k(r, c)), ks(r, c / dh) * 0.5f * 1.0001f) << r << "," << c;
        } else {
          kr(r, c) = float(half::f16_bits_to_double(kh(r, c)));
          vr(r, c) = float(half::f16_bits_to_double(vh(r, c)));
          ASSERT_EQ(kh(r, c), half::f16_bits_from_double(double(k(r, c))));
        }
      }
    Mat<float> y(total, heads * dh), want(total, heads * dh);
    run(reg, "nn.kv_attention", {q.view(), kc, vc, vec1(pos), y.view(), kst, vst}, {{"heads", "4"}, {"kv_heads", "2"}});
    run(reg, "nn.attention", {q.view(), kr.view(), vr.view(), want.view()},
        {{"heads", "4"}, {"kv_heads", "2"}, {"causal", "true"}});
    for (std::int64_t r = 0; r < total; ++r)
      for (std::int64_t c = 0; c < heads * dh; ++c) ASSERT_NEAR(y(r, c), want(r, c), 1e-5) << r << "," << c;
  }
  // an all-zero head stores scale 0 and codes 0
  Mat<float> zero(1, 8, 0, DType::f32, 0);
  Mat<std::int8_t> zc(2, 8, 0, DType::i8, 5);
  Mat<float> zs(2, 2, 0, DType::f32, 9);
  auto p0 = ints({1});
  run(reg, "nn.kv_append", {zero.view(), vec1(p0), zc.view(), zs.view()}, {{"heads", "2"}});
  EXPECT_EQ(zs(1, 0), 0.0f);
  EXPECT_EQ(zc(1, 3), 0);
  EXPECT_EQ(zc(0, 3), 5) << "row 0 untouched";
}

TEST_F(KvCache, F16WideningMatchesTheScalarPath) {
  std::vector<std::uint16_t> bits;
  for (std::uint32_t b = 0; b < 65536; ++b)
    if ((b & 0x7c00u) != 0x7c00u || (b & 0x3ffu) == 0) bits.push_back(std::uint16_t(b));  // NaNs aside
  std::vector<float> fast(bits.size()), slow(bits.size());
  transformer::widen_f16(bits.data(), std::int64_t(bits.size()), fast.data());
  transformer::widen_f16_scalar(bits.data(), std::int64_t(bits.size()), slow.data());
  for (std::size_t i = 0; i < bits.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(fast[i]), std::bit_cast<std::uint32_t>(slow[i])) << std::hex << bits[i];
}

TEST_F(KvCache, CacheStorageChecks) {
  Mat<float> x(2, 8);
  Mat<std::int8_t> c8(4, 8, 0, DType::i8, 0);
  Mat<float> sc(4, 2), bad(4, 3);
  Mat<float> c32(4, 8);
  auto p = ints({0, 1});
  EXPECT_NE(check(reg, "nn.kv_append", {x.view(), vec1(p), c8.view()}, {{"heads", "2"}}).find("bind 'scale'"),
            std::string::npos);
  EXPECT_NE(check(reg, "nn.kv_append", {x.view(), vec1(p), c32.view(), sc.view()}, {{"heads", "2"}}).find("not i8"),
            std::string::npos);
  EXPECT_NE(check(reg, "nn.kv_append", {x.view(), vec1(p), c8.view(), bad.view()}, {{"heads", "2"}}).find("expected 4x2"),
            std::string::npos);
  EXPECT_EQ(check(reg, "nn.kv_append", {x.view(), vec1(p), c8.view(), sc.view()}, {{"heads", "2"}}), "");
  Mat<double> xd(2, 8);
  Mat<std::uint16_t> c16(4, 8, 0, DType::f16, 0);
  EXPECT_NE(check(reg, "nn.kv_append", {xd.view(), vec1(p), c16.view()}).find("f16 (f32 rows)"), std::string::npos);
}

TEST_F(KvCache, AppendRefusesAFullContext) {
  Mat<float> x(2, 3), cache(4, 3);
  auto pos = ints({3, 4});
  try {
    run(reg, "nn.kv_append", {x.view(), vec1(pos), cache.view()});
    FAIL() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("position 4 (row 1) is outside the cache's 4 rows: the context is full"),
              std::string::npos)
        << e.what();
  }
  Mat<float> long_x(5, 3);
  auto five = ints({0, 1, 2, 3, 4});
  EXPECT_NE(check(reg, "nn.kv_append", {long_x.view(), vec1(five), cache.view()}).find("longer than the context"),
            std::string::npos);
  auto neg = ints({-1});
  Mat<float> one(1, 3);
  TensorView nv = vec1(neg);
  EXPECT_THROW(run(reg, "nn.kv_append", {one.view(), nv, cache.view()}), KernelError);
  Mat<float> narrow(1, 2);
  auto p0 = ints({0});
  EXPECT_NE(check(reg, "nn.kv_append", {narrow.view(), vec1(p0), cache.view()}).find("widths must match"),
            std::string::npos);
}

TEST_F(KvCache, RopeAtGivenPositionsEqualsRopeAtAnOffset) {
  Mat<double> a(3, 12), b(3, 12);
  a.random(5);
  b.buf = a.buf;
  run(reg, "nn.rope", {a.view()}, {{"heads", "2"}, {"offset", "40"}});
  auto pos = ints({40, 41, 42});
  run(reg, "nn.rope", {b.view(), vec1(pos)}, {{"heads", "2"}});
  for (std::size_t i = 0; i < a.buf.size(); ++i) ASSERT_DOUBLE_EQ(a.buf[i], b.buf[i]);
  // scattered positions: row r rotated as a one-row tensor at offset pos[r]
  Mat<double> c(2, 12), d(1, 12), e(1, 12);
  c.random(6);
  for (std::int64_t j = 0; j < 12; ++j) d(0, j) = c(0, j), e(0, j) = c(1, j);
  auto sc = ints({1000, 3});
  run(reg, "nn.rope", {c.view(), vec1(sc)}, {{"heads", "2"}});
  run(reg, "nn.rope", {d.view()}, {{"heads", "2"}, {"offset", "1000"}});
  run(reg, "nn.rope", {e.view()}, {{"heads", "2"}, {"offset", "3"}});
  for (std::int64_t j = 0; j < 12; ++j) {
    EXPECT_DOUBLE_EQ(c(0, j), d(0, j));
    EXPECT_DOUBLE_EQ(c(1, j), e(0, j));
  }
  auto two = ints({1, 2});
  Mat<double> three(3, 12);
  EXPECT_NE(check(reg, "nn.rope", {three.view(), vec1(two)}, {{"heads", "2"}}).find("one position each"),
            std::string::npos);
}

struct Sampler {
  Mat<std::int32_t> token = ints({-1}), generated, count = ints({0}), running = ints({-1});
  explicit Sampler(std::int64_t cap) : generated(1, cap, 0, DType::i32, -1) {}
  std::vector<TensorView> ports(Mat<float>& logits) {
    return {logits.view(), vec1(token), vec1(generated), vec1(count), vec1(running)};
  }
};

TEST_F(KvCache, SampleGreedyTakesTheFirstLargestOfTheLastRow) {
  Mat<float> logits(2, 5);
  const float rows[2][5] = {{9, 9, 9, 9, 9}, {0.5f, 3, -1, 3, 2}};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 5; ++c) logits(r, c) = rows[r][c];
  Sampler s(3);
  run(reg, "nn.sample", s.ports(logits));
  EXPECT_EQ(s.token(0, 0), 1);
  EXPECT_EQ(s.generated(0, 0), 1);
  EXPECT_EQ(s.count(0, 0), 1);
  EXPECT_EQ(s.running(0, 0), 1);
  run(reg, "nn.sample", s.ports(logits), {{"eos", "4, 1"}});  // an end token stops
  EXPECT_EQ(s.generated(0, 1), 1);
  EXPECT_EQ(s.running(0, 0), 0);
  run(reg, "nn.sample", s.ports(logits));  // the third fills 'generated'
  EXPECT_EQ(s.count(0, 0), 3);
  EXPECT_EQ(s.running(0, 0), 0);
  EXPECT_THROW(run(reg, "nn.sample", s.ports(logits)), KernelError);  // no room left
}

TEST_F(KvCache, SampleDrawsFollowTheFilteredSoftmax) {
  Mat<float> logits(1, 4);
  const LD p[4] = {0.5L, 0.3L, 0.15L, 0.05L};
  for (int c = 0; c < 4; ++c) logits(0, c) = float(std::log(p[c]));
  auto freq = [&](const std::map<std::string, std::string>& args) {
    const int n = 20000;
    Sampler s(n);
    for (int i = 0; i < n; ++i) run(reg, "nn.sample", s.ports(logits), args);
    std::vector<double> f(4, 0);
    for (int i = 0; i < n; ++i) f[std::size_t(s.generated(0, i))] += 1.0 / n;
    return f;
  };
  const auto plain = freq({{"temperature", "1"}, {"seed", "7"}});
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(plain[std::size_t(c)], double(p[c]), 0.015) << "token " << c;
  const auto top2 = freq({{"temperature", "1"}, {"top_k", "2"}, {"seed", "8"}});
  EXPECT_NEAR(top2[0], 0.5 / 0.8, 0.015);
  EXPECT_EQ(top2[2] + top2[3], 0.0);
  const auto nucleus = freq({{"temperature", "1"}, {"top_p", "0.75"}, {"seed", "9"}});  // 0.5 + 0.3 reaches it
  EXPECT_NEAR(nucleus[1], 0.3 / 0.8, 0.015);
  EXPECT_EQ(nucleus[2] + nucleus[3], 0.0);
  const auto minp = freq({{"temperature", "1"}, {"min_p", "0.2"}, {"seed", "10"}});  // drops p < 0.1
  EXPECT_EQ(minp[3], 0.0);
  EXPECT_NEAR(minp[2], 0.15 / 0.95, 0.015);
  const auto cold = freq({{"temperature", "0.25"}, {"seed", "11"}});  // p^4, renormalized
  LD z = 0;
  for (LD x : p) z += std::pow(x, 4.0L);
  EXPECT_NEAR(cold[1], double(std::pow(p[1], 4.0L) / z), 0.015);
  // the same seed draws the same tokens
  Sampler a(50), b(50);
  for (int i = 0; i < 50; ++i) {
    run(reg, "nn.sample", a.ports(logits), {{"temperature", "1"}, {"seed", "3"}});
    run(reg, "nn.sample", b.ports(logits), {{"temperature", "1"}, {"seed", "3"}});
  }
  EXPECT_EQ(a.generated.buf, b.generated.buf);
}

TEST_F(KvCache, SampleRefusesBadArgsAndLogits) {
  Mat<float> logits(1, 4);
  logits.random(1);
  Sampler s(2);
  auto msg = [&](const std::map<std::string, std::string>& args) { return check(reg, "nn.sample", s.ports(logits), args); };
  EXPECT_NE(msg({{"temperature", "-1"}}).find("must be >= 0"), std::string::npos);
  EXPECT_NE(msg({{"top_p", "0"}}).find("(0, 1]"), std::string::npos);
  EXPECT_NE(msg({{"top_k", "-2"}}).find("top_k"), std::string::npos);
  EXPECT_NE(msg({{"eos", "4"}}).find("names token 4 but the vocabulary has 4"), std::string::npos);
  EXPECT_NE(msg({{"eos", "2,x"}}).find("holds 'x'"), std::string::npos);
  EXPECT_EQ(msg({{"eos", "3, 0"}}), "");
  logits(0, 2) = NAN;
  try {
    run(reg, "nn.sample", s.ports(logits));
    FAIL() << "no error";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN at token 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ymlopt::test
