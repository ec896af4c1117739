// TF.js model.json + shards -> safetensors: a synthetic two-shard model, the
// node listing, and malformed manifests / shards with exact messages.
#include "io/tfjs.hpp"

#include <gtest/gtest.h>

#include "temp_dir_test.hpp"
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace yio = ymlopt::io;

namespace {

class TfjsTest : public ymlopt::test::TempDirTest {
 protected:
  TfjsTest() : TempDirTest("ymlopt_tfjs") {}
  template <class T> static std::string raw(const std::vector<T>& v) {
    std::string s(v.size() * sizeof(T), '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
  }

  /// model.json with one group of three weights across two shards:
  /// w: float32 [2,3] (24 bytes), ids: int32 [2] (8 bytes), s: float32 scalar (4 bytes).
  std::string model(const std::string& weights_override = "") {
    const std::string weights = weights_override.empty() ? R"([
        {"name": "layer/w", "shape": [2, 3], "dtype": "float32"},
        {"name": "layer/ids", "shape": [2], "dtype": "int32"},
        {"name": "scale", "shape": [], "dtype": "float32"}])"
                                                         : weights_override;
    write_file(p("model.json"), R"({"format": "graph-model",
      "modelTopology": {"node": [
        {"name": "x", "op": "Placeholder", "attr": {"dtype": {"type": "DT_FLOAT"}}},
        {"name": "layer/w", "op": "Const"},
        {"name": "y", "op": "MatMul", "input": ["x", "layer/w"]}]},
      "weightsManifest": [{"paths": ["group1-shard1of2", "group1-shard2of2"],
                           "weights": )" + weights + "}]}");
    return p("model.json");
  }

  /// The 36 bytes of the three weights, split 20 + 16 over two shards.
  void shards(std::size_t drop_last = 0, const std::string& extra = "") {
    const std::string all = raw(std::vector<float>{1, 2, 3, 4, 5, 6}) +
                            raw(std::vector<std::int32_t>{7, -8}) + raw(std::vector<float>{0.5f});
    write_file(p("group1-shard1of2"), all.substr(0, 20));
    write_file(p("group1-shard2of2"), all.substr(20, 16 - drop_last) + extra);
  }

  template <class F> static std::string error_of(F&& f) {
    try {
      f();
    } catch (const yio::IoError& e) {
      return e.what();
    }
    return "(no IoError)";
  }

};

TEST_F(TfjsTest, ConvertsTwoShardsToSafetensors) {
  const auto mj = model();
  shards();
  const auto out = p("out.safetensors");
  const auto weights = yio::convert_tfjs(mj, out);
  ASSERT_EQ(weights.size(), 3u);
  EXPECT_EQ(weights[1].name, "layer/ids");
  EXPECT_EQ(weights[1].offset, 24u);
  EXPECT_EQ(weights[1].nbytes, 8u);

  const auto infos = yio::list_tensors(out);  // sorted by name
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0].name, "layer/ids");
  EXPECT_EQ(infos[0].stored_dtype, "I32");
  EXPECT_EQ(infos[0].shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(infos[1].name, "layer/w");
  EXPECT_EQ(infos[1].stored_dtype, "F32");
  EXPECT_EQ(infos[1].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(infos[2].name, "scale");
  EXPECT_TRUE(infos[2].shape.empty());

  const auto w = yio::load_tensor(out, "layer/w");
  ASSERT_EQ(w.bytes.size(), 24u);
  std::vector<float> wf(6);
  std::memcpy(wf.data(), w.bytes.data(), 24);
  EXPECT_EQ(wf, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const auto ids = yio::load_tensor(out, "layer/ids");   // bytes 24..32: across shards 1 and 2
  EXPECT_EQ(ids.dtype, ymlopt::DType::i32);
  std::vector<std::int32_t> iv(2);
  std::memcpy(iv.data(), ids.bytes.data(), 8);
  EXPECT_EQ(iv, (std::vector<std::int32_t>{7, -8}));
  const auto s = yio::load_tensor(out, "scale");
  float sv = 0;
  std::memcpy(&sv, s.bytes.data(), 4);
  EXPECT_EQ(sv, 0.5f);

  const auto meta = yio::read_metadata(out);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("source"), "tfjs");
  EXPECT_FALSE(fs::exists(out + ".tmp." + std::to_string(::getpid())));
}

TEST_F(TfjsTest, ListsNodes) {
  const auto nodes = yio::list_tfjs_nodes(model());
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "x");
  EXPECT_EQ(nodes[0].op, "Placeholder");
  EXPECT_TRUE(nodes[0].inputs.empty());
  EXPECT_EQ(nodes[0].attr_json, R"({"dtype":{"type":"DT_FLOAT"}})");
  EXPECT_EQ(nodes[2].op, "MatMul");
  EXPECT_EQ(nodes[2].inputs, (std::vector<std::string>{"x", "layer/w"}));
  EXPECT_EQ(nodes[1].attr_json, "{}");
}

TEST_F(TfjsTest, TruncatedShardIsRefusedAndNothingIsWritten) {
  const auto mj = model();
  shards(/*drop_last=*/3);
  const auto out = p("out.safetensors");
  EXPECT_EQ(error_of([&] { yio::convert_tfjs(mj, out); }),
            p("group1-shard2of2") +
                ": truncated: the weights of weightsManifest[0] need 36 bytes but its 2 shards hold 33");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(TfjsTest, ShardLongerThanTheManifestIsRefused) {
  const auto mj = model();
  shards(0, "xyzw");
  EXPECT_EQ(error_of([&] { yio::convert_tfjs(mj, p("out.safetensors")); }),
            p("group1-shard2of2") +
                ": too long: the weights of weightsManifest[0] need 36 bytes but its 2 shards hold 40");
}

TEST_F(TfjsTest, ManifestClaimingMoreThanTheShardsIsRefused) {
  // A lying manifest: w is declared [3, 3] (36 bytes) but the shards hold 36 bytes in all.
  const auto mj = model(R"([
      {"name": "layer/w", "shape": [3, 3], "dtype": "float32"},
      {"name": "layer/ids", "shape": [2], "dtype": "int32"},
      {"name": "scale", "shape": [], "dtype": "float32"}])");
  shards();
  EXPECT_EQ(error_of([&] { yio::convert_tfjs(mj, p("out.safetensors")); }),
            p("group1-shard2of2") +
                ": truncated: the weights of weightsManifest[0] need 48 bytes but its 2 shards hold 36");
}

TEST_F(TfjsTest, MissingShard) {
  const auto mj = model();
  shards();
  fs::remove(p("group1-shard1of2"));
  EXPECT_EQ(error_of([&] { yio::convert_tfjs(mj, p("out.safetensors")); }),
            p("group1-shard1of2") + ": cannot open shard: No such file or directory");
}

TEST_F(TfjsTest, MalformedManifests) {
  shards();
  EXPECT_EQ(error_of([&] {
              yio::read_tfjs_manifest(model(R"([{"name": "q", "shape": [2], "dtype": "float32",
                  "quantization": {"dtype": "uint8", "min": -1, "scale": 0.1}}])"));
            }),
            p("model.json") +
                ": weight 'q' is quantized (uint8); quantized TF.js weights are not supported: "
                "export the model unquantized");
  EXPECT_EQ(error_of([&] {
              yio::read_tfjs_manifest(model(R"([{"name": "h", "shape": [2], "dtype": "float16"}])"));
            }),
            p("model.json") + ": weight 'h': unsupported dtype 'float16' (expected float32 or int32)");
  EXPECT_EQ(error_of([&] {
              yio::read_tfjs_manifest(model(R"([{"name": "n", "shape": [2, -1], "dtype": "int32"}])"));
            }),
            p("model.json") + ": weight 'n': invalid shape [2,-1]");
  EXPECT_EQ(error_of([&] {
              yio::read_tfjs_manifest(model(R"([{"name": "d", "shape": [1], "dtype": "int32"},
                                                {"name": "d", "shape": [1], "dtype": "int32"}])"));
            }),
            p("model.json") + ": duplicate weight name 'd'");
  write_file(p("bad.json"), R"({"modelTopology": {}})");
  EXPECT_EQ(error_of([&] { yio::convert_tfjs(p("bad.json"), p("out.safetensors")); }),
            p("bad.json") + ": no \"weightsManifest\" list (not a TF.js model.json?)");
  EXPECT_EQ(error_of([&] { yio::list_tfjs_nodes(p("missing.json")); }),
            p("missing.json") + ": cannot open: No such file or directory");
}

}  // namespace

namespace {

// The real USE-lite model, when scripts/fetch_use_lite.sh has been run and
// YMLOPT_USE_LITE_DIR names the dist folder it prints.
TEST(TfjsUseLiteTest, ConvertsTheRealModel) {
  const char* dir = std::getenv("YMLOPT_USE_LITE_DIR");
  if (dir == nullptr || !fs::exists(fs::path(dir) / "model.json"))
    GTEST_SKIP() << "YMLOPT_USE_LITE_DIR is not set to a folder with model.json: run "
                    "scripts/fetch_use_lite.sh and set it to the folder it prints";
  const fs::path dist(dir);
  const auto out = (fs::temp_directory_path() /
                    ("ymlopt_use_lite_" + std::to_string(::getpid()) + ".safetensors")).string();
  const auto weights = yio::convert_tfjs((dist / "model.json").string(), out);
  EXPECT_EQ(weights.size(), 61u);
  const auto infos = yio::list_tensors(out);
  EXPECT_EQ(infos.size(), 61u);
  const auto emb = yio::load_tensor(out, "module/Embeddings_en");
  EXPECT_EQ(emb.shape, (std::vector<std::int64_t>{8002, 256}));
  // The first weight's first bytes are the first bytes of shard 1.
  std::ifstream shard(dist / "group1-shard1of7", std::ios::binary);
  char head[4] = {};
  shard.read(head, 4);
  const auto first = yio::load_tensor(out, weights.front().name);
  EXPECT_EQ(std::memcmp(first.bytes.data(), head, 4), 0);
  EXPECT_EQ(fs::file_size(out) % 8, 0u);
  fs::remove(out);
}

}  // namespace
