// GGUF container: write -> read round trips (every metadata type, F32, F16 and
// Q8_0 tensors, alignment), and malformed files refused with the reason: every
// truncation of a valid file, lying offsets, unknown types, bad counts.
#include "io/gguf.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "io/tensor_file.hpp"
#include "temp_dir_test.hpp"

namespace gg = ymlopt::io::gguf;
using ymlopt::io::IoError;

namespace {

class GgufTest : public ymlopt::test::TempDirTest {
 protected:
  GgufTest() : TempDirTest("ymlopt_gguf") {}

  // A small valid file: three tensors, one of each kind, and every value type.
  std::string valid(std::uint32_t alignment = 32) {
    gg::KeyValues kv = {{"general.architecture", gg::Value::str("llama")},
                        {"llama.block_count", gg::Value::u32(2)},
                        {"llama.attention.layer_norm_rms_epsilon", gg::Value::f32(1e-5f)},
                        {"tokenizer.ggml.tokens", gg::Value::strings_of({"a", "", "ccc"})},
                        {"tokenizer.ggml.scores", gg::Value::f32s({0.5f, -1.0f, 2.0f})},
                        {"tokenizer.ggml.token_type", gg::Value::i32s({1, 3, -6})}};
    const std::vector<gg::TensorOut> t = {{"a", std::uint32_t(gg::Type::f32), {5, 3}},
                                          {"b", std::uint32_t(gg::Type::q8_0), {64, 2}},
                                          {"c", std::uint32_t(gg::Type::f16), {7}}};
    const std::string path = p("valid.gguf");
    gg::write(path, kv, t, [](std::size_t i, std::span<std::byte> out) {
      for (std::size_t j = 0; j < out.size(); ++j) out[j] = std::byte((i * 31 + j * 7) & 0xFF);
    }, alignment);
    return path;
  }
  static std::string bytes_of(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  // The parse error of these bytes ("" if they parse).
  static std::string error_of(const std::string& bytes) {
    try {
      gg::parse({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "x.gguf");
    } catch (const IoError& e) {
      return e.what();
    }
    return "";
  }
  // A file with one u32 key and the given tensor descriptors' raw fields.
  struct RawTensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    std::uint64_t offset;
  };
  static std::string raw(const std::vector<RawTensor>& ts, std::uint64_t data_bytes, std::uint32_t version = 3) {
    std::string s;
    auto put = [&](auto x) { s.append(reinterpret_cast<const char*>(&x), sizeof x); };
    auto str = [&](const std::string& x) { put(std::uint64_t(x.size())); s += x; };
    s += "GGUF";
    put(version);
    put(std::uint64_t(ts.size()));
    put(std::uint64_t(1));
    str("k");
    put(std::uint32_t(4));
    put(std::uint32_t(7));
    for (const RawTensor& t : ts) {
      str(t.name);
      put(std::uint32_t(t.ne.size()));
      for (auto d : t.ne) put(d);
      put(t.type);
      put(t.offset);
    }
    s.resize((s.size() + 31) / 32 * 32, '\0');
    s.append(data_bytes, '\x01');
    return s;
  }
};

TEST_F(GgufTest, WriteThenReadGivesBackEveryValueAndTensor) {
  for (std::uint32_t alignment : {32u, 64u}) {
    const gg::File f = gg::read(valid(alignment));
    EXPECT_EQ(f.version, 3u);
    EXPECT_EQ(f.alignment, alignment);
    EXPECT_EQ(f.find("general.architecture")->text("general.architecture"), "llama");
    EXPECT_EQ(f.find("llama.block_count")->number("llama.block_count"), 2);
    EXPECT_FLOAT_EQ(float(f.find("llama.attention.layer_norm_rms_epsilon")->number("eps")), 1e-5f);
    EXPECT_EQ(f.find("tokenizer.ggml.tokens")->strings, (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(f.find("tokenizer.ggml.scores")->floats, (std::vector<double>{0.5, -1.0, 2.0}));
    EXPECT_EQ(f.find("tokenizer.ggml.token_type")->ints, (std::vector<std::int64_t>{1, 3, -6}));
    EXPECT_EQ(f.find("nope"), nullptr);
    ASSERT_EQ(f.tensors.size(), 3u);
    const std::uint64_t sizes[] = {5 * 3 * 4, 2 * 2 * 34, 7 * 2};
    for (std::size_t i = 0; i < 3; ++i) {
      const gg::TensorInfo& t = f.tensors[i];
      EXPECT_EQ(t.bytes, sizes[i]) << t.name;
      EXPECT_EQ(t.offset % alignment, 0u) << t.name;
      const auto d = f.data(t);
      for (std::size_t j = 0; j < d.size(); ++j) ASSERT_EQ(d[j], std::byte((i * 31 + j * 7) & 0xFF)) << t.name << " " << j;
    }
    EXPECT_EQ(f.tensor("b")->ne, (std::vector<std::uint64_t>{64, 2}));
    EXPECT_THROW(f.find("tokenizer.ggml.tokens")->text("tokens"), IoError);
    EXPECT_THROW(f.find("general.architecture")->number("arch"), IoError);
  }
}

TEST_F(GgufTest, EveryTruncationIsRefusedNeverACrash) {
  const std::string all = bytes_of(valid());
  ASSERT_EQ(error_of(all), "");
  // the last tensor's padding is not needed; every cut before its end is
  const gg::File f = gg::parse({reinterpret_cast<const std::byte*>(all.data()), all.size()}, "x.gguf");
  const std::uint64_t end = all.size() - (32 - f.tensors[2].bytes % 32) % 32;
  for (std::size_t n = 0; n < end; ++n) {
    const std::string e = error_of(all.substr(0, n));
    EXPECT_NE(e, "") << "a file cut at " << n << " of " << all.size() << " bytes was read";
    EXPECT_EQ(e.rfind("x.gguf: ", 0), 0u) << e;
  }
}

TEST_F(GgufTest, LyingOffsetsAndSizesAreRefused) {
  const std::uint32_t f32 = 0;
  EXPECT_EQ(error_of(raw({{"t", {4, 2}, f32, 0}}, 32)), "");
  EXPECT_NE(error_of(raw({{"t", {4, 2}, f32, 0}}, 31)).find("past the end of the data section"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {4}, f32, 64}}, 64)).find("past the end"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {4}, f32, 8}}, 64)).find("not a multiple of the alignment 32"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {16}, f32, 0}, {"u", {4}, f32, 32}}, 96)).find("'t' and 'u' overlap"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {4}, f32, 0}, {"t", {4}, f32, 32}}, 64)).find("'t' appears twice"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {4}, 99, 0}}, 64)).find("unknown type 99"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {33}, 8, 0}}, 64)).find("not a whole number of Q8_0 blocks of 32"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {1, 1, 1, 1, 1}, f32, 0}}, 64)).find("5 dimensions"), std::string::npos);
  EXPECT_NE(error_of(raw({{"t", {1ull << 62, 1ull << 62}, f32, 0}}, 64)).find("overflow"), std::string::npos);
  EXPECT_NE(error_of(raw({}, 0, 4)).find("GGUF version 4 is not supported"), std::string::npos);
  std::string bad = raw({}, 0);
  bad[0] = 'X';
  EXPECT_NE(error_of(bad).find("no 'GGUF' magic"), std::string::npos);
}

TEST_F(GgufTest, BadMetadataIsRefused) {
  auto file = [](const std::string& body, std::uint64_t n_kv) {
    std::string s = "GGUF";
    const std::uint32_t v = 3;
    const std::uint64_t nt = 0;
    s.append(reinterpret_cast<const char*>(&v), 4).append(reinterpret_cast<const char*>(&nt), 8);
    s.append(reinterpret_cast<const char*>(&n_kv), 8);
    return s + body;
  };
  auto key = [](const std::string& k, std::uint32_t type) {
    std::string s;
    const std::uint64_t n = k.size();
    s.append(reinterpret_cast<const char*>(&n), 8).append(k).append(reinterpret_cast<const char*>(&type), 4);
    return s;
  };
  auto u64 = [](std::uint64_t x) { return std::string(reinterpret_cast<const char*>(&x), 8); };
  auto u32 = [](std::uint32_t x) { return std::string(reinterpret_cast<const char*>(&x), 4); };
  EXPECT_NE(error_of(file(key("a", 13), 1)).find("key 'a': unknown value type 13"), std::string::npos);
  EXPECT_NE(error_of(file(key("a", 9) + u32(9) + u64(1), 1)).find("bad array element type 9"), std::string::npos);
  EXPECT_NE(error_of(file(key("a", 9) + u32(4) + u64(1ull << 60), 1)).find("does not fit"), std::string::npos);
  EXPECT_NE(error_of(file(key("a", 7) + "\x02", 1)).find("boolean 2"), std::string::npos);
  EXPECT_NE(error_of(file(key("a", 4) + u32(1) + key("a", 4) + u32(2), 2)).find("key 'a' appears twice"), std::string::npos);
  EXPECT_NE(error_of(file(key("a", 8) + u64(1ull << 40), 1)).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(file("", 1ull << 40)).find("the key/value count"), std::string::npos);
  EXPECT_NE(error_of(file(key("general.alignment", 4) + u32(48), 1)).find("power of two"), std::string::npos);
  EXPECT_EQ(error_of(file(key("general.alignment", 4) + u32(64), 1)), "");
}

TEST_F(GgufTest, AFailedWriteLeavesNothing) {
  const std::string path = p("never.gguf");
  EXPECT_THROW(gg::write(path, {}, {{"t", std::uint32_t(gg::Type::f32), {4}}},
                         [](std::size_t, std::span<std::byte>) { throw IoError("fill failed"); }),
               IoError);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(gg::write(path, {}, {{"t", std::uint32_t(gg::Type::q4_0), {20}}}, [](std::size_t, std::span<std::byte>) {}),
               IoError);  // a row of 20 is not whole Q4_0 blocks
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(gg::read(p("missing.gguf")), IoError);
}

}  // namespace
