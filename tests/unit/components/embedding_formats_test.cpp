// nn.embedding on compressed tables (format int8 / int4, per row or per group,
// symmetric or asymmetric, f32 or f16 scales; bf16 tables widened to f32) against an independent reference:
// the codes are unpacked and dequantized in long double, then gathered. Plus the
// check messages and the run-time id error.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

#include "nn/nn.hpp"
#include "quant/quant.hpp"
#include "test_context.hpp"

namespace ymlopt::test {
namespace {

using std::int64_t;

TensorView view(const void* data, DType dt, int64_t rows, int64_t cols, bool vector = false) {
  TensorView v;
  v.data = const_cast<void*>(data);
  v.dtype = dt;
  v.rows = rows;
  v.cols = cols;
  v.ld = cols;
  v.shape = vector ? Shape{cols} : Shape{rows, cols};
  return v;
}

/// A compressed table as plain arrays (independent of quant::): codes, scales, zeros.
struct Table {
  int bits = 8;
  int64_t vocab = 0, d = 0, group = 0;  // group 0: per row
  std::vector<std::int8_t> q;           // [vocab, d] or [vocab, d/2]
  std::vector<float> scale;             // [vocab, groups] (f32)
  std::vector<std::uint16_t> scale16;   // same, f16 bits (when f16)
  std::vector<float> zero;              // empty: symmetric
  bool f16 = false;
  std::vector<std::uint16_t> zero16;    // the zeros as f16 bits: bound as an f16 table_zero when non-empty
  int64_t groups() const { return group > 0 ? d / group : 1; }
  int64_t code_cols() const { return bits == 4 ? d / 2 : d; }
};

Table random_table(int bits, int64_t vocab, int64_t d, int64_t group, bool asym, bool f16, std::uint32_t seed) {
  Table t{bits, vocab, d, group, {}, {}, {}, {}, false, {}};
  t.f16 = f16;
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> s(0.001f, 0.2f), z(0.0f, 15.0f), z8(-128.0f, 127.0f);
  t.q.resize(std::size_t(vocab * t.code_cols()));
  for (auto& c : t.q) c = static_cast<std::int8_t>(byte(g));
  t.scale.resize(std::size_t(vocab * t.groups()));
  for (auto& v : t.scale) v = s(g);
  if (f16) {
    for (auto& v : t.scale) {
      t.scale16.push_back(half::f16_bits_from_double(v));
      v = static_cast<float>(half::f16_bits_to_double(t.scale16.back()));  // the reference reads the stored value
    }
  }
  if (asym) {
    t.zero.resize(t.scale.size());
    for (auto& v : t.zero) v = bits == 4 ? z(g) : z8(g);
  }
  return t;
}

/// Element (r, c) of the table in long double: (code - zero) * scale.
long double reference(const Table& t, int64_t r, int64_t c) {
  long double code;
  if (t.bits == 8) {
    code = t.q[std::size_t(r * t.d + c)];
  } else {
    const auto b = static_cast<std::uint8_t>(t.q[std::size_t(r * (t.d / 2) + c / 2)]);
    code = (c % 2 == 0) ? (b & 0x0F) : (b >> 4);
  }
  const int64_t g = t.group > 0 ? c / t.group : 0;
  const std::size_t i = std::size_t(r * t.groups() + g);
  const long double zero = t.zero.empty() ? (t.bits == 4 ? 8.0L : 0.0L) : (long double)t.zero[i];
  return (code - zero) * (long double)t.scale[i];
}

struct Fixture {
  TestRegistry reg;
  Fixture() { register_nn(reg); }

  /// Runs nn.embedding on t for `ids` into a padded y; returns y. With `hot` (int8
  /// per row), ids below hot->vocab read it and the others row id - hot->vocab of t.
  Mat<float> gather(const Table& t, const std::vector<std::int32_t>& ids, bool ids_column = false,
                    const Table* hot = nullptr) {
    const int64_t n = int64_t(ids.size());
    Mat<float> y(n, t.d, 3);
    const bool per_row = t.group == 0;
    const DType sd = t.f16 ? DType::f16 : DType::f32;
    const void* sp = t.f16 ? static_cast<const void*>(t.scale16.data()) : static_cast<const void*>(t.scale.data());
    TensorView sv = per_row ? view(sp, sd, 1, t.vocab, true) : view(sp, sd, t.vocab, t.groups());
    TensorView zv;
    const bool z16 = !t.zero16.empty();
    const void* zp = z16 ? static_cast<const void*>(t.zero16.data()) : static_cast<const void*>(t.zero.data());
    const DType zd = z16 ? DType::f16 : DType::f32;
    if (!t.zero.empty()) zv = per_row ? view(zp, zd, 1, t.vocab, true) : view(zp, zd, t.vocab, t.groups());
    TensorView iv = ids_column ? view(ids.data(), DType::i32, n, 1) : view(ids.data(), DType::i32, 1, n, true);
    std::vector<TensorView> ports = {iv, view(t.q.data(), DType::i8, t.vocab, t.code_cols()), y.view(), sv, zv};
    if (hot) {
      const void* hp = hot->f16 ? static_cast<const void*>(hot->scale16.data()) : static_cast<const void*>(hot->scale.data());
      ports.push_back(view(hot->q.data(), DType::i8, hot->vocab, hot->d));
      ports.push_back(view(hp, hot->f16 ? DType::f16 : DType::f32, 1, hot->vocab, true));
    }
    run(reg, "nn.embedding", std::move(ports),
        {{"format", t.bits == 4 ? "int4" : "int8"}, {"group", std::to_string(t.group)}});
    return y;
  }
};

/// y equals the long-double dequantize-then-gather reference (two f32 roundings), padding untouched.
void expect_gathered(const Table& t, const std::vector<std::int32_t>& ids, const Mat<float>& y, const std::string& what) {
  for (int64_t i = 0; i < int64_t(ids.size()); ++i) {
    for (int64_t c = 0; c < t.d; ++c) {
      const long double ref = reference(t, ids[std::size_t(i)], c);
      ASSERT_NEAR(double(y(i, c)), double(ref), 3e-7 * std::fabs(double(ref)) + 1e-30)
          << what << " id " << ids[std::size_t(i)] << " col " << c;
    }
    for (int64_t c = t.d; c < y.ld; ++c) ASSERT_EQ(y(i, c), 77.0f) << what << ": padding written";
  }
}

std::vector<std::int32_t> some_ids(int64_t vocab) {
  // repeats, the first and last row, out of order
  return {3, 0, std::int32_t(vocab - 1), 3, 17 % std::int32_t(vocab), 5, std::int32_t(vocab / 2), 1};
}

TEST(EmbeddingFormats, Int8PerRowMatchesTheReference) {
  Fixture f;
  const Table t = random_table(8, 37, 64, 0, false, false, 1);
  const auto ids = some_ids(t.vocab);
  expect_gathered(t, ids, f.gather(t, ids), "int8 per row");
  expect_gathered(t, ids, f.gather(t, ids, true), "int8 per row, ids [n, 1]");
}

TEST(EmbeddingFormats, Int8GroupsAsymmetricAndF16Scales) {
  Fixture f;
  for (int64_t group : {32, 64, 128})
    for (bool asym : {false, true})
      for (bool f16 : {false, true}) {
        const Table t = random_table(8, 21, 256, group, asym, f16, std::uint32_t(group + asym * 7 + f16 * 13));
        const auto ids = some_ids(t.vocab);
        expect_gathered(t, ids, f.gather(t, ids),
                        "int8 g" + std::to_string(group) + (asym ? " asym" : " sym") + (f16 ? " f16" : " f32"));
      }
}

TEST(EmbeddingFormats, Int4GroupsSymmetricAndAsymmetric) {
  Fixture f;
  for (int64_t group : {0, 32, 64, 128})
    for (bool asym : {false, true}) {
      const Table t = random_table(4, 29, 256, group, asym, false, std::uint32_t(100 + group + asym));
      const auto ids = some_ids(t.vocab);
      expect_gathered(t, ids, f.gather(t, ids), "int4 g" + std::to_string(group) + (asym ? " asym" : " sym"));
    }
  const Table t = random_table(4, 9, 64, 32, false, true, 5);  // q4_0-like: f16 scales
  expect_gathered(t, {8, 0, 4}, f.gather(t, {8, 0, 4}), "int4 f16 scales");
}

/// f16 zero points (and f16 scales), int8 and int4: the reference reads the stored f16 values.
TEST(EmbeddingFormats, F16ZeroPoints) {
  Fixture f;
  for (int bits : {8, 4})
    for (int64_t group : {32, 128}) {
      Table t = random_table(bits, 23, 256, group, true, true, std::uint32_t(300 + bits + group));
      for (auto& v : t.zero) {
        t.zero16.push_back(half::f16_bits_from_double(v));
        v = static_cast<float>(half::f16_bits_to_double(t.zero16.back()));
      }
      const auto ids = some_ids(t.vocab);
      expect_gathered(t, ids, f.gather(t, ids), "int" + std::to_string(bits) + " g" + std::to_string(group) + " f16 zeros");
    }
}

/// quant.group / quant.int8 with f16 scales (and zeros): the gathered rows are the
/// long-double dequantization of the stored f16 values, within half a step of the table.
TEST(EmbeddingFormats, F16QuantizerOutputRoundTrips) {
  Fixture f;
  const int64_t vocab = 40, d = 128;
  Mat<float> w(vocab, d);
  w.random(19);
  for (const int64_t group : {0, 32, 64}) {
    const int bits = group == 0 ? 8 : 4;
    const bool sym = group != 32;
    const quant::QuantizedWeight qw = group == 0 ? quant::quantize_int8(w.buf.data(), vocab, d, w.ld, DType::f16)
                                                 : quant::quantize_group(w.buf.data(), vocab, d, w.ld, bits, group, sym,
                                                                         DType::f16);
    ASSERT_EQ(qw.scale_dtype, DType::f16);
    Table t{bits, vocab, d, group, qw.q, {}, qw.scale_f16, {}, true, {}};
    for (std::uint16_t b : qw.scale_f16) t.scale.push_back(static_cast<float>(half::f16_bits_to_double(b)));
    for (float z : qw.zero) {
      t.zero16.push_back(half::f16_bits_from_double(z));
      ASSERT_EQ(half::f16_bits_to_double(t.zero16.back()), double(z)) << "zero not f16-exact";
      t.zero.push_back(z);
    }
    const auto ids = some_ids(vocab);
    const Mat<float> y = f.gather(t, ids);
    const std::string what = "f16 group " + std::to_string(group);
    expect_gathered(t, ids, y, what);
    for (int64_t i = 0; i < int64_t(ids.size()); ++i)
      for (int64_t col = 0; col < d; ++col) {
        const int64_t g = group > 0 ? col / group : 0;
        const double step = std::fabs(double(t.scale[std::size_t(ids[std::size_t(i)] * t.groups() + g)]));
        // symmetric int4 may clamp one code per group (a full step); the f16 grid moves the edges by < 0.1%
        EXPECT_LE(std::fabs(double(y(i, col)) - double(w(ids[std::size_t(i)], col))),
                  step * (bits == 4 && sym ? 1.0 : 0.5) * 1.002 + 1e-6)
            << what;
      }
  }
}

/// The quantizers' own output (quant.group / quant.int8 layouts) gathers to the rows of the
/// reference dequantization, and those stay within half a step of the float table.
TEST(EmbeddingFormats, QuantizerOutputRoundTrips) {
  Fixture f;
  const int64_t vocab = 40, d = 128;
  Mat<float> w(vocab, d);
  w.random(9);
  struct Case {
    int bits;
    int64_t group;
    bool sym;
  };
  for (const Case c : {Case{8, 0, true}, Case{8, 64, false}, Case{4, 32, true}, Case{4, 128, false}}) {
    const quant::QuantizedWeight qw = c.group == 0 ? quant::quantize_int8(w.buf.data(), vocab, d, w.ld)
                                                   : quant::quantize_group(w.buf.data(), vocab, d, w.ld, c.bits, c.group, c.sym);
    Table t{c.bits, vocab, d, c.group, {}, {}, {}, {}, false, {}};
    t.q = qw.q;
    t.scale = qw.scale_f32;
    t.zero = qw.zero;
    const auto ids = some_ids(vocab);
    const Mat<float> y = f.gather(t, ids);
    const std::string what = "bits " + std::to_string(c.bits) + " group " + std::to_string(c.group);
    expect_gathered(t, ids, y, what);
    for (int64_t i = 0; i < int64_t(ids.size()); ++i)
      for (int64_t col = 0; col < d; ++col) {
        const int64_t g = c.group > 0 ? col / c.group : 0;
        const double step = std::fabs(double(t.scale[std::size_t(ids[std::size_t(i)] * t.groups() + g)]));
        // symmetric int4 may clamp one code per group: up to a full step
        EXPECT_LE(std::fabs(double(y(i, col)) - double(w(ids[std::size_t(i)], col))), step * (c.bits == 4 ? 1.0 : 0.5) + 1e-6)
            << what;
      }
  }
}

/// Hot rows: ids below H read the int8 rows (one scale each, f32 or f16), the
/// others row id - H of the int4 (or int8) table; both against the long-double reference.
TEST(EmbeddingFormats, HotRowsReadTheirOwnCodesTheOthersTheTableBelowThem) {
  Fixture f;
  const int64_t hot_rows = 11, cold_rows = 26, d = 128;
  for (const bool f16 : {false, true})
    for (const int cold_bits : {4, 8}) {
      const Table hot = random_table(8, hot_rows, d, 0, false, f16, std::uint32_t(500 + f16));
      const Table cold = random_table(cold_bits, cold_rows, d, 32, true, f16, std::uint32_t(600 + cold_bits + f16));
      const std::vector<std::int32_t> ids = {0, 10, 11, 36, 5, 12, 10, 11, 0, 30};  // both sides of the edge, repeats
      const Mat<float> y = f.gather(cold, ids, false, &hot);
      const std::string what = std::string(f16 ? "f16" : "f32") + " scales, cold int" + std::to_string(cold_bits);
      for (int64_t i = 0; i < int64_t(ids.size()); ++i) {
        const std::int32_t v = ids[std::size_t(i)];
        for (int64_t c = 0; c < d; ++c) {
          const long double ref = v < hot_rows ? reference(hot, v, c) : reference(cold, v - hot_rows, c);
          ASSERT_NEAR(double(y(i, c)), double(ref), 3e-7 * std::fabs(double(ref)) + 1e-30) << what << " id " << v;
        }
        for (int64_t c = d; c < y.ld; ++c) ASSERT_EQ(y(i, c), 77.0f) << what << ": padding written";
      }
    }
  // the vocabulary is the hot rows and the table's together
  const Table hot = random_table(8, 4, 32, 0, false, false, 7), cold = random_table(4, 6, 32, 32, false, false, 8);
  try {
    f.gather(cold, {0, 9, 10}, false, &hot);
    FAIL() << "no error for id 10";
  } catch (const KernelError& e) {
    EXPECT_EQ(std::string(e.what()), "id 10 at position 2 is out of range: table has 10 rows (ids must be in [0, 10))");
  }
}

// format=bf16: each row read is the table's bf16 row widened to f32, exactly
TEST(EmbeddingFormats, Bf16RowsWidenToF32) {
  Fixture f;
  const int64_t V = 9, D = 37;
  std::vector<std::uint16_t> table(std::size_t(V * D));
  std::mt19937 g(5);
  for (auto& b : table) b = half::bf16_bits_from_float(std::normal_distribution<float>(0, 1)(g));
  const std::vector<std::int32_t> ids = {8, 0, 3, 3, 7};
  std::vector<float> y(ids.size() * D, -1);
  run(f.reg, "nn.embedding",
      {view(ids.data(), DType::i32, 1, int64_t(ids.size()), true), view(table.data(), DType::bf16, V, D),
       view(y.data(), DType::f32, int64_t(ids.size()), D)},
      {{"format", "bf16"}});
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < D; ++c)
      ASSERT_EQ(y[i * D + std::size_t(c)], half::bf16_bits_to_float(table[std::size_t(ids[i] * D + c)])) << i << "," << c;
}

TEST(EmbeddingFormats, BadIdNamesItsPosition) {
  Fixture f;
  const Table t = random_table(8, 10, 32, 0, false, false, 3);
  for (std::int32_t bad : {10, -1}) {
    try {
      f.gather(t, {1, 2, bad, 3});
      FAIL() << "no error for id " << bad;
    } catch (const KernelError& e) {
      EXPECT_EQ(std::string(e.what()), "id " + std::to_string(bad) +
                                           " at position 2 is out of range: table has 10 rows (ids must be in [0, 10))");
    }
  }
}

TEST(EmbeddingFormats, CheckMessages) {
  Fixture f;
  const int64_t V = 50, D = 64, T = 7;
  auto sv = [](DType dt, int64_t r, int64_t c) { return shape_view(dt, r, c); };
  auto vec = [](DType dt, int64_t n) {
    TensorView v = shape_view(dt, 1, n);
    v.shape = {n};
    return v;
  };
  const TensorView ids = vec(DType::i32, T), y = sv(DType::f32, T, D), none;
  const std::map<std::string, std::string> i8 = {{"format", "int8"}}, i4g = {{"format", "int4"}, {"group", "32"}};
  auto chk = [&](std::vector<TensorView> p, const std::map<std::string, std::string>& a) {
    return check(f.reg, "nn.embedding", std::move(p), a);
  };
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y, vec(DType::f32, V)}, i8), "");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D / 2), y, sv(DType::f16, V, 2), sv(DType::f32, V, 2)}, i4g), "");
  EXPECT_EQ(chk({ids, sv(DType::f32, V, D), y, vec(DType::f32, V)}, i8),
            "port 'table' has dtype f32 but format=int8 needs i8 (int8 codes)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y}, i8), "port 'table_scale' is not bound: format=int8 needs it");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y, vec(DType::f32, V - 1)}, i8),
            "port 'table_scale' is 1x49 (shape 49) but expected 50x1 (one scale per row)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D / 2), y, sv(DType::f32, V, 3)}, i4g),
            "port 'table_scale' is 50x3 but expected 50x2 (one scale per row and group of 32)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D / 2), y, sv(DType::f32, V, 2), sv(DType::f32, V, 1)}, i4g),
            "port 'table_zero' is 50x1 but expected 50x2 (one zero point per scale)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D / 2), y, sv(DType::i32, V, 2)}, i4g),
            "port 'table_scale' has dtype i32: expected f32 or f16");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D / 2), y, sv(DType::f16, V, 2), sv(DType::f16, V, 2)}, i4g), "");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D / 2), y, sv(DType::f16, V, 2), sv(DType::f64, V, 2)}, i4g),
            "port 'table_zero' has dtype f64: expected f32 or f16 (zero points)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y, vec(DType::f32, V)}, {{"format", "int4"}}),
            "port 'table' is 50x64 but y is 7x64: format=int4 needs table [vocab, d/2] = 50x32 with d = y columns");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), sv(DType::f64, T, D), vec(DType::f32, V)}, i8),
            "port 'y' has dtype f64 but format=int8 needs f32 (the dequantized rows)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y, sv(DType::f32, V, 1)}, {{"format", "int8"}, {"group", "48"}}),
            "param 'group' is 48: expected 0 (one scale per row), 32 or a multiple of 64");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, 96), sv(DType::f32, T, 96), sv(DType::f32, V, 1)}, {{"format", "int8"}, {"group", "64"}}),
            "param 'group' is 64 but y has 96 columns: groups must tile the rows of the table");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), sv(DType::f32, T + 1, D), vec(DType::f32, V)}, i8),
            "port 'y' is 8x64 but there are 7 ids (one row per id)");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y, vec(DType::f32, V)}, {{"format", "int2"}}),
            "param 'format' is 'int2': expected one of 'dense', 'int8', 'int4', 'bf16'");
  const std::map<std::string, std::string> b16 = {{"format", "bf16"}};
  EXPECT_EQ(chk({ids, sv(DType::bf16, V, D), y}, b16), "");
  EXPECT_EQ(chk({ids, sv(DType::f32, V, D), y}, b16), "port 'table' has dtype f32 but format=bf16 needs bf16");
  EXPECT_EQ(chk({ids, sv(DType::bf16, V, D), sv(DType::bf16, T, D)}, b16),
            "port 'y' has dtype bf16: format=bf16 gives f32 rows");
  EXPECT_EQ(chk({ids, sv(DType::bf16, V, D), y, vec(DType::f32, V)}, b16),
            "port 'table_scale' is bound but format=bf16 does not use it");
  EXPECT_EQ(chk({ids, sv(DType::i8, V, D), y}, {}),
            "port 'table' has dtype i8: format=dense needs a float table (set format=int8 or int4 for codes)");
  EXPECT_EQ(chk({ids, sv(DType::f32, V, D), y, vec(DType::f32, V)}, {}),
            "port 'table_scale' is bound but format=dense does not use it");
  // hot rows: 8 of them beside the 50 of the table
  const TensorView cold = sv(DType::i8, V, D / 2), cs = sv(DType::f16, V, 2);
  EXPECT_EQ(chk({ids, cold, y, cs, none, sv(DType::i8, 8, D), vec(DType::f16, 8)}, i4g), "");
  EXPECT_EQ(chk({ids, cold, y, cs, none, sv(DType::i8, 8, D), vec(DType::f32, 8)}, i4g), "");
  EXPECT_EQ(chk({ids, cold, y, cs, none, sv(DType::i8, 8, D)}, i4g),
            "port 'table_hot_scale' is not bound: hot rows need one scale each");
  EXPECT_EQ(chk({ids, cold, y, cs, none, none, vec(DType::f32, 8)}, i4g),
            "port 'table_hot_scale' is bound but table_hot is not");
  EXPECT_EQ(chk({ids, cold, y, cs, none, sv(DType::i8, 8, D / 2), vec(DType::f32, 8)}, i4g),
            "port 'table_hot' is 8x32 but y has 64 columns: hot rows are [hot, d] int8 codes");
  EXPECT_EQ(chk({ids, cold, y, cs, none, sv(DType::i8, 8, D), vec(DType::f32, 7)}, i4g),
            "port 'table_hot_scale' is 1x7 (shape 7) but expected 8x1 (one scale per hot row)");
  EXPECT_EQ(chk({ids, cold, y, cs, none, sv(DType::i8, 8, D), vec(DType::i32, 8)}, i4g),
            "port 'table_hot_scale' has dtype i32: expected f32 or f16");
  EXPECT_EQ(chk({ids, sv(DType::f32, V, D), y, none, none, sv(DType::i8, 8, D), vec(DType::f32, 8)}, {}),
            "port 'table_hot' is bound but format=dense does not use it");
}

TEST(EmbeddingFormats, CostCountsTheRowsRead) {
  Fixture f;
  const ComponentSpec& s = f.reg.get("nn.embedding");
  TensorView ids = shape_view(DType::i32, 1, 10);
  ids.shape = {10};
  TensorView scale = shape_view(DType::f32, 1000, 4);
  const std::vector<TensorView> p = {ids, shape_view(DType::i8, 1000, 64), shape_view(DType::f32, 10, 128), scale, TensorView{},
                                     TensorView{}, TensorView{}};
  const Cost c = s.cost(TaskShape{p, make_args(s, {{"format", "int4"}, {"group", "32"}})});
  // ids 40 B + 10 rows x (64 code bytes + 4 scales x 4 B) + y 10 x 128 x 4 B: the vocab does not count
  EXPECT_DOUBLE_EQ(c.bytes, 40 + 10 * (64 + 16) + 10 * 128 * 4);
  EXPECT_DOUBLE_EQ(c.flops, 2 * 10 * 128);
  // with hot rows the ids are taken to read hot rows (the frequent ones): 128 codes + an f16 scale
  TensorView hs = shape_view(DType::f16, 1, 300);
  hs.shape = {300};
  const std::vector<TensorView> ph = {ids, shape_view(DType::i8, 700, 64), shape_view(DType::f32, 10, 128),
                                      shape_view(DType::f32, 700, 4), TensorView{}, shape_view(DType::i8, 300, 128), hs};
  const Cost h = s.cost(TaskShape{ph, make_args(s, {{"format", "int4"}, {"group", "32"}})});
  EXPECT_DOUBLE_EQ(h.bytes, 40 + 10 * (128 + 2) + 10 * 128 * 4);
}

}  // namespace
}  // namespace ymlopt::test
