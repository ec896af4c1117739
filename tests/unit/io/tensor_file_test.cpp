// Tensor files: round trips of every dtype for .safetensors and .npy, strided
// views, atomic writes, and a corpus of malformed files with exact messages.
#include "io/tensor_file.hpp"

#include <gtest/gtest.h>

#include "temp_dir_test.hpp"
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ymlopt::DType;
using ymlopt::TensorView;
namespace yio = ymlopt::io;

namespace {

const DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i32};

class TensorFileTest : public ymlopt::test::TempDirTest {
 protected:
  TensorFileTest() : TempDirTest("ymlopt_io") {}

  /// A safetensors file with a raw header text and data section.
  std::string st_file(const std::string& name, const std::string& header, const std::string& data) {
    std::string s(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(s.data(), &n, 8);
    write_file(p(name), s + header + data);
    return p(name);
  }

  /// A .npy file with a raw header dict (padded like numpy) and data.
  std::string npy_file(const std::string& name, const std::string& dict, const std::string& data) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
    h.push_back('\n');
    std::string s = "\x93NUMPY\x01";
    s.push_back('\0');
    const auto n = static_cast<std::uint16_t>(h.size());
    s.append(reinterpret_cast<const char*>(&n), 2);
    write_file(p(name), s + h + data);
    return p(name);
  }

  std::vector<std::string> dir_entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

};

/// Random bytes for a tensor of n elements of dtype t.
std::vector<std::byte> random_bytes(std::size_t n, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> b(n * ymlopt::dtype_size(t));
  for (auto& x : b) x = std::byte(rng() & 0xff);
  return b;
}

TensorView dense_view(std::vector<std::byte>& b, DType t, std::vector<std::int64_t> shape) {
  TensorView v;
  v.data = b.data();
  v.dtype = t;
  v.shape = shape;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  v.cols = shape.empty() ? 1 : shape.back();
  v.rows = v.cols ? n / v.cols : 0;
  v.ld = v.cols;
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const yio::IoError& e) {
    return e.what();
  }
  return "<no error>";
}

// ---------------------------------------------------------------------------

TEST_F(TensorFileTest, SafetensorsRoundTripEveryDType) {
  std::vector<std::vector<std::byte>> store;
  std::vector<yio::NamedTensor> tensors;
  const std::vector<std::vector<std::int64_t>> shapes = {{3, 5}, {7}, {2, 3, 4}, {1, 1}, {0, 4}, {4, 2}};
  unsigned seed = 1;
  for (DType t : kAllDTypes) {
    const auto& shape = shapes[seed - 1];
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    store.push_back(random_bytes(std::size_t(n), t, seed++));
  }
  for (std::size_t i = 0; i < store.size(); ++i)
    tensors.push_back({std::string("t_") + ymlopt::dtype_name(kAllDTypes[i]),
                       dense_view(store[i], kAllDTypes[i], shapes[i])});
  const std::string path = p("all.safetensors");
  yio::save_safetensors(path, tensors, {{"producer", "ymlopt"}, {"note", "ünïcode"}});

  // Header is 8-byte aligned so the data is too.
  std::ifstream f(path, std::ios::binary);
  std::uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);

  const auto list = yio::list_tensors(path);
  ASSERT_EQ(list.size(), tensors.size());
  for (std::size_t i = 0; i < store.size(); ++i) {
    const DType t = kAllDTypes[i];
    const std::string name = std::string("t_") + ymlopt::dtype_name(t);
    const auto d = yio::load_tensor(path, name);
    EXPECT_EQ(d.dtype, t) << name;
    EXPECT_EQ(d.shape, shapes[i]) << name;
    EXPECT_EQ(d.bytes, store[i]) << name;
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.name == name; });
    ASSERT_NE(it, list.end());
    EXPECT_EQ(it->dtype, t);
    EXPECT_EQ(it->stored_dtype, yio::safetensors_dtype_name(t));
    EXPECT_EQ(it->shape, shapes[i]);
  }
  const auto meta = yio::read_metadata(path);
  EXPECT_EQ(meta.at("producer"), "ymlopt");
  EXPECT_EQ(meta.at("note"), "ünïcode");
  EXPECT_EQ(dir_entries(), std::vector<std::string>{"all.safetensors"});
}

TEST_F(TensorFileTest, NpyRoundTripEveryDType) {
  unsigned seed = 10;
  for (DType t : kAllDTypes) {
    for (const std::vector<std::int64_t>& shape :
         std::vector<std::vector<std::int64_t>>{{3, 5}, {7}, {2, 3, 4}, {0, 3}}) {
      std::int64_t n = 1;
      for (auto d : shape) n *= d;
      auto bytes = random_bytes(std::size_t(n), t, seed++);
      const std::string path = p(std::string("a_") + ymlopt::dtype_name(t) + ".npy");
      if (t == DType::bf16) {
        EXPECT_EQ(error_of([&] { yio::save_npy(path, dense_view(bytes, t, shape)); }),
                  path + ": bf16 cannot be stored in .npy (use .safetensors)");
        EXPECT_FALSE(fs::exists(path));
        continue;
      }
      yio::save_npy(path, dense_view(bytes, t, shape));
      const auto d = yio::load_tensor(path, "");
      EXPECT_EQ(d.dtype, t);
      EXPECT_EQ(d.shape, shape);
      EXPECT_EQ(d.bytes, bytes);
      EXPECT_EQ(fs::file_size(path) % 64, std::uintmax_t(n * std::int64_t(ymlopt::dtype_size(t))) % 64);
      const auto list = yio::list_tensors(path);
      ASSERT_EQ(list.size(), 1u);
      EXPECT_EQ(list[0].stored_dtype, yio::npy_descr(t));
      EXPECT_EQ(list[0].shape, shape);
    }
  }
}

TEST_F(TensorFileTest, NpyHeaderIsNumpyV1Aligned) {
  std::vector<float> v(6, 1.0f);
  TensorView view;
  view.data = v.data();
  view.rows = 2;
  view.cols = 3;
  view.ld = 3;  // empty shape -> {rows, cols}
  yio::save_npy(p("h.npy"), view);
  std::ifstream f(p("h.npy"), std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GE(all.size(), 64u + 24);
  EXPECT_EQ(all.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  std::uint16_t hlen;
  std::memcpy(&hlen, all.data() + 8, 2);
  EXPECT_EQ((10 + hlen) % 64, 0);
  const std::string header = all.substr(10, hlen);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(all.size(), 10u + hlen + 24);
}

TEST_F(TensorFileTest, StridedViewsAreWrittenDensely) {
  // A 3x4 tile at column 2 of a 5x10 matrix.
  std::vector<std::int32_t> big(50);
  for (int i = 0; i < 50; ++i) big[std::size_t(i)] = i;
  TensorView tile;
  tile.data = big.data() + 2;
  tile.dtype = DType::i32;
  tile.rows = 3;
  tile.cols = 4;
  tile.ld = 10;
  tile.shape = {3, 4};
  std::vector<std::int32_t> expect;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) expect.push_back(r * 10 + 2 + c);

  yio::save_safetensors(p("t.safetensors"), {{"tile", tile}});
  yio::save_npy(p("t.npy"), tile);
  for (const std::string& path : {p("t.safetensors"), p("t.npy")}) {
    const auto d = yio::load_tensor(path, path.ends_with(".npy") ? "" : "tile");
    ASSERT_EQ(d.bytes.size(), expect.size() * 4) << path;
    EXPECT_EQ(std::memcmp(d.bytes.data(), expect.data(), d.bytes.size()), 0) << path;
    EXPECT_EQ(d.shape, (std::vector<std::int64_t>{3, 4}));
  }

  // Empty view.shape -> {rows, cols}; rank-3 logical shape over a strided 2-D view.
  tile.shape = {};
  yio::save_safetensors(p("u.safetensors"), {{"a", tile}});
  EXPECT_EQ(yio::load_tensor(p("u.safetensors"), "a").shape, (std::vector<std::int64_t>{3, 4}));
  tile.rows = 4;
  tile.cols = 3;
  tile.shape = {2, 2, 3};
  yio::save_safetensors(p("v.safetensors"), {{"a", tile}});
  const auto d = yio::load_tensor(p("v.safetensors"), "a");
  EXPECT_EQ(d.shape, (std::vector<std::int64_t>{2, 2, 3}));
  std::int32_t last;
  std::memcpy(&last, d.bytes.data() + d.bytes.size() - 4, 4);
  EXPECT_EQ(last, 3 * 10 + 2 + 2);
}

TEST_F(TensorFileTest, LoadIntoStridedDestination) {
  std::vector<double> src = {1, 2, 3, 4, 5, 6};
  std::vector<std::byte> b(48);
  std::memcpy(b.data(), src.data(), 48);
  yio::save_safetensors(p("w.safetensors"), {{"w", dense_view(b, DType::f64, {2, 3})}});

  std::vector<double> big(2 * 5, -1.0);
  TensorView dst;
  dst.data = big.data() + 1;
  dst.dtype = DType::f64;
  dst.rows = 2;
  dst.cols = 3;
  dst.ld = 5;
  dst.shape = {2, 3};
  yio::load_tensor_into(p("w.safetensors"), "w", dst);
  EXPECT_EQ(big, (std::vector<double>{-1, 1, 2, 3, -1, -1, 4, 5, 6, -1}));

  dst.dtype = DType::f32;
  EXPECT_EQ(error_of([&] { yio::load_tensor_into(p("w.safetensors"), "w", dst); }),
            p("w.safetensors") + ": tensor 'w' is f64 [2, 3] but the destination is f32 [2, 3]");
  dst.dtype = DType::f64;
  dst.shape = {3, 2};
  dst.rows = 3;
  dst.cols = 2;
  EXPECT_EQ(error_of([&] { yio::load_tensor_into(p("w.safetensors"), "w", dst); }),
            p("w.safetensors") + ": tensor 'w' is f64 [2, 3] but the destination is f64 [3, 2]");

  yio::save_npy(p("w.npy"), dense_view(b, DType::f64, {6}));
  EXPECT_EQ(error_of([&] { yio::load_tensor_into(p("w.npy"), "", dst); }),
            p("w.npy") + ": the array is f64 [6] but the destination is f64 [3, 2]");
}

TEST_F(TensorFileTest, KeySelection) {
  std::vector<std::vector<std::byte>> store;
  std::vector<yio::NamedTensor> tensors;
  for (int i = 0; i < 12; ++i) store.push_back(random_bytes(2, DType::f32, unsigned(i)));
  for (int i = 0; i < 12; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "t%02d", 11 - i);
    tensors.push_back({name, dense_view(store[std::size_t(i)], DType::f32, {2})});
  }
  const std::string path = p("many.safetensors");
  yio::save_safetensors(path, tensors);
  EXPECT_EQ(yio::load_tensor(path, "t11").bytes, store[0]);
  EXPECT_EQ(error_of([&] { yio::load_tensor(path, "zz"); }),
            path + ": no tensor 'zz' (available: t00, t01, t02, t03, t04, t05, t06, t07, t08, t09, ... (2 more))");
  EXPECT_EQ(error_of([&] { yio::load_tensor(path, ""); }),
            path + ": a key is required: the file holds 12 tensors (t00, t01, t02, t03, t04, t05, t06, t07, "
                   "t08, t09, ... (2 more))");

  yio::save_safetensors(p("one.safetensors"), {{"only", tensors[0].view}});
  EXPECT_EQ(yio::load_tensor(p("one.safetensors"), "").bytes, store[0]);
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("one.safetensors"), "x"); }),
            p("one.safetensors") + ": no tensor 'x' (available: only)");

  yio::save_safetensors(p("none.safetensors"), {});
  EXPECT_TRUE(yio::list_tensors(p("none.safetensors")).empty());
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("none.safetensors"), ""); }),
            p("none.safetensors") + ": the file holds no tensors");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("none.safetensors"), "a"); }),
            p("none.safetensors") + ": no tensor 'a' (the file holds no tensors)");
}

TEST_F(TensorFileTest, SaveRejectsBadInput) {
  auto b = random_bytes(4, DType::f32, 3);
  const auto v = dense_view(b, DType::f32, {4});
  const std::string path = p("bad.safetensors");
  EXPECT_EQ(error_of([&] { yio::save_safetensors(path, {{"a", v}, {"a", v}}); }),
            path + ": duplicate tensor name 'a'");
  EXPECT_EQ(error_of([&] { yio::save_safetensors(path, {{"__metadata__", v}}); }),
            path + ": tensor name '__metadata__' is reserved");
  auto w = v;
  w.shape = {3};
  EXPECT_EQ(error_of([&] { yio::save_safetensors(path, {{"a", w}}); }),
            path + ": tensor 'a': shape [3] does not match the view's 1 x 4 elements");
  w = v;
  w.data = nullptr;
  EXPECT_EQ(error_of([&] { yio::save_safetensors(path, {{"a", w}}); }), path + ": tensor 'a': no data");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("x.bin"), "a"); }),
            p("x.bin") + ": unsupported file extension '.bin' (expected .safetensors or .npy)");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("x"), ""); }),
            p("x") + ": unsupported file extension '' (expected .safetensors or .npy)");
  EXPECT_TRUE(dir_entries().empty());
}

TEST_F(TensorFileTest, AtomicWrites) {
  auto b = random_bytes(4, DType::f32, 3);
  const auto v = dense_view(b, DType::f32, {4});

  // Nonexistent directory: error, nothing created.
  const std::string missing = p("no/such/dir/x.safetensors");
  EXPECT_EQ(error_of([&] { yio::save_safetensors(missing, {{"x", v}}); }),
            missing + ": cannot create temporary file: No such file or directory");
  EXPECT_EQ(error_of([&] { yio::save_npy(p("no/x.npy"), v); }),
            p("no/x.npy") + ": cannot create temporary file: No such file or directory");
  EXPECT_TRUE(dir_entries().empty());

  // Rename fails (the target is a non-empty directory): the temporary file is removed.
  fs::create_directories(p("busy.safetensors/inner"));
  EXPECT_EQ(error_of([&] { yio::save_safetensors(p("busy.safetensors"), {{"x", v}}); }),
            p("busy.safetensors") + ": cannot rename temporary file: Is a directory");
  EXPECT_EQ(dir_entries(), std::vector<std::string>{"busy.safetensors"});

  // Overwrite: the new content replaces the old one, no temporary left;
  // a failed save leaves the old content intact.
  yio::save_safetensors(p("a.safetensors"), {{"x", v}});
  auto b2 = random_bytes(4, DType::f32, 4);
  yio::save_safetensors(p("a.safetensors"), {{"x", dense_view(b2, DType::f32, {4})}});
  EXPECT_EQ(yio::load_tensor(p("a.safetensors"), "x").bytes, b2);
  EXPECT_THROW(yio::save_safetensors(p("a.safetensors"), {{"x", v}, {"x", v}}), yio::IoError);
  EXPECT_EQ(yio::load_tensor(p("a.safetensors"), "x").bytes, b2);
  EXPECT_EQ(dir_entries(), (std::vector<std::string>{"a.safetensors", "busy.safetensors"}));
}

TEST_F(TensorFileTest, UnsupportedButKnownDTypes) {
  // An I64 tensor next to an F32 one: the F32 loads, the I64 is listed but refused.
  const std::string header =
      R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  std::string data(24, '\0');
  const float w[2] = {1.5f, -2.0f};
  std::memcpy(data.data() + 16, w, 8);
  const auto path = st_file("mixed.safetensors", header, data);
  const auto d = yio::load_tensor(path, "w");
  EXPECT_EQ(d.dtype, DType::f32);
  EXPECT_EQ(std::memcmp(d.bytes.data(), w, 8), 0);
  EXPECT_EQ(error_of([&] { yio::load_tensor(path, "ids"); }),
            path + ": tensor 'ids' has unsupported dtype 'I64'");
  const auto list = yio::list_tensors(path);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "ids");
  EXPECT_EQ(list[0].stored_dtype, "I64");
  EXPECT_FALSE(list[0].dtype.has_value());
  for (const char* t : {"U8", "I16", "BOOL"}) {
    const std::string h = std::string(R"({"a":{"dtype":")") + t + R"(","shape":[2],"data_offsets":[0,)" +
                          (std::string(t) == "I16" ? "4" : "2") + "]}}";
    const auto f = st_file("u.safetensors", h, "abcd");
    EXPECT_EQ(error_of([&] { yio::load_tensor(f, "a"); }),
              f + ": tensor 'a' has unsupported dtype '" + t + "'");
  }
}

TEST_F(TensorFileTest, MalformedSafetensors) {
  struct Case {
    const char* name;
    std::string header;
    std::string data;
    std::string error;
  };
  const std::string f4x2 = R"("dtype":"F32","shape":[2])";
  const std::vector<Case> cases = {
      {"not_json", R"({"a": )", "", "invalid JSON header (syntax error at byte 7)"},
      {"garbage", "\x01\x02zz", "", "invalid JSON header (syntax error at byte 1)"},
      // a number JSON cannot hold (found by tests/fuzz: it used to end the process)
      {"number_overflow", R"({"a": 88E8888})", "",
       "invalid JSON header ([json.exception.out_of_range.406] number overflow parsing '88E8888')"},
      {"array", "[1, 2]", "", "header is not a JSON object"},
      {"entry_number", R"({"a": 3})", "", "tensor 'a': entry is not an object"},
      {"no_dtype", R"({"a": {"shape":[2],"data_offsets":[0,8]}})", "12345678",
       "tensor 'a': missing field 'dtype'"},
      {"no_shape", R"({"a": {"dtype":"F32","data_offsets":[0,8]}})", "12345678",
       "tensor 'a': missing field 'shape'"},
      {"no_offsets", R"({"a": {"dtype":"F32","shape":[2]}})", "12345678",
       "tensor 'a': missing field 'data_offsets'"},
      {"dtype_number", R"({"a": {"dtype":4,"shape":[2],"data_offsets":[0,8]}})", "12345678",
       "tensor 'a': field 'dtype' is not a string"},
      {"unknown_dtype", R"({"a": {"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", "12345678",
       "tensor 'a': unknown dtype 'F7'"},
      {"shape_float", R"({"a": {"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", "12345678",
       "tensor 'a': field 'shape' is not an array of integers"},
      {"shape_object", R"({"a": {"dtype":"F32","shape":{},"data_offsets":[0,8]}})", "12345678",
       "tensor 'a': field 'shape' is not an array of integers"},
      {"negative_dim", R"({"a": {"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]}})", "12345678",
       "tensor 'a': negative dimension -3 in shape [2, -3]"},
      {"huge_dim", R"({"a": {"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})",
       "12345678", "tensor 'a': dimension 18446744073709551615 is too large"},
      {"overflow", R"({"a": {"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       "12345678", "tensor 'a': shape [4294967296, 4294967296] is too large"},
      {"offsets_one", "{\"a\": {" + f4x2 + R"(,"data_offsets":[0]}})", "12345678",
       "tensor 'a': field 'data_offsets' is not [begin, end] (non-negative integers)"},
      {"offsets_negative", "{\"a\": {" + f4x2 + R"(,"data_offsets":[-8,0]}})", "12345678",
       "tensor 'a': field 'data_offsets' is not [begin, end] (non-negative integers)"},
      {"offsets_reversed", "{\"a\": {" + f4x2 + R"(,"data_offsets":[8,0]}})", "12345678",
       "tensor 'a': data_offsets [8, 0] are reversed"},
      {"size_mismatch", R"({"a": {"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
       std::string(24, 'x'), "tensor 'a': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20"},
      {"past_data", R"({"a": {"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "12345678",
       "tensor 'a': data_offsets [0, 16] run past the data section (8 bytes)"},
      {"overlap",
       R"({"a": {"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b": {"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
       std::string(24, 'x'), "tensors 'a' and 'b' overlap (data_offsets [0, 16] and [8, 24])"},
      {"metadata_number", R"({"__metadata__": {"k": 1}})", "", "__metadata__ is not an object of strings"},
      {"metadata_array", R"({"__metadata__": []})", "", "__metadata__ is not an object of strings"},
  };
  for (const auto& c : cases) {
    const std::string path = st_file(std::string(c.name) + ".safetensors", c.header, c.data);
    EXPECT_EQ(error_of([&] { yio::load_tensor(path, "a"); }), path + ": " + c.error) << c.name;
    EXPECT_EQ(error_of([&] { yio::list_tensors(path); }), path + ": " + c.error) << c.name;
  }

  // Framing errors.
  write_file(p("empty.safetensors"), "");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("empty.safetensors"), "a"); }),
            p("empty.safetensors") + ": file too short for a safetensors header (0 bytes)");
  write_file(p("short.safetensors"), std::string("\x05\x00\x00", 3));
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("short.safetensors"), "a"); }),
            p("short.safetensors") + ": file too short for a safetensors header (3 bytes)");
  std::string past(8, '\0');
  past[0] = 100;
  write_file(p("past.safetensors"), past + "{}        ");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("past.safetensors"), "a"); }),
            p("past.safetensors") + ": header length 100 runs past the end of the file (18 bytes)");
  std::string absurd(8, '\0');
  absurd[5] = 1;  // 2^40
  write_file(p("absurd.safetensors"), absurd + "{}");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("absurd.safetensors"), "a"); }),
            p("absurd.safetensors") + ": header length 1099511627776 exceeds the 100 MB limit");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("missing.safetensors"), "a"); }),
            p("missing.safetensors") + ": cannot open: No such file or directory");
  fs::create_directories(p("adir.safetensors"));
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("adir.safetensors"), "a"); }),
            p("adir.safetensors") + ": not a regular file");

  // Padding spaces after the JSON (as written by the reference implementation) are fine.
  const auto ok = st_file("ok.safetensors", "{\"a\": {" + f4x2 + R"(,"data_offsets":[0,8]}}   )", "12345678");
  EXPECT_EQ(yio::load_tensor(ok, "a").bytes.size(), 8u);
}

TEST_F(TensorFileTest, MalformedNpy) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  const std::string d48(48, 'x');
  struct Case {
    const char* name;
    std::string dict;
    std::string data;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"fortran", "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", d48,
       "fortran_order True is not supported (save the array in C order)"},
      {"big_endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4), }", d48,
       "big-endian data not supported (descr '>f4')"},
      {"i8", "{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }", d48, "unsupported dtype '<i8'"},
      {"truncated", f4, std::string(40, 'x'), "truncated data: shape [3, 4] of '<f4' needs 48 bytes, found 40"},
      {"trailing", f4, d48 + "tail", "4 unexpected bytes after the data"},
      {"unclosed", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4) ", d48,
       "malformed .npy header: expected '}' at offset 118"},
      {"no_shape", "{'descr': '<f4', 'fortran_order': False}", d48, "malformed .npy header: no 'shape'"},
      {"shape_string", "{'descr': '<f4', 'fortran_order': False, 'shape': '3'}", d48,
       "malformed .npy header: 'shape' is not a tuple"},
      {"negative", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", d48,
       "malformed .npy header: negative dimension in shape"},
      {"structured", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", d48,
       "structured dtypes are not supported"},
      {"not_dict", "['descr']", d48, "malformed .npy header: expected '{' at offset 0"},
  };
  for (const auto& c : cases) {
    const std::string path = npy_file(std::string(c.name) + ".npy", c.dict, c.data);
    EXPECT_EQ(error_of([&] { yio::load_tensor(path, ""); }), path + ": " + c.error) << c.name;
  }

  // Accepted variants: '<i1' and '|i1', Python 2 longs, double quotes, scalars.
  EXPECT_EQ(yio::load_tensor(npy_file("i1.npy", "{'descr': '<i1', 'fortran_order': False, 'shape': (2L, 3L)}",
                                      "abcdef"))
                .shape,
            (std::vector<std::int64_t>{2, 3}));
  const auto sc = yio::load_tensor(npy_file("sc.npy", R"({"descr": "<i4", "fortran_order": False, "shape": ()})",
                                            "abcd"));
  EXPECT_TRUE(sc.shape.empty());
  EXPECT_EQ(sc.bytes.size(), 4u);

  write_file(p("magic.npy"), "\x93NUMPX\x01\x00\x10\x00{}");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("magic.npy")); }), p("magic.npy") + ": not a .npy file (bad magic)");
  write_file(p("tiny.npy"), "\x93NU");
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("tiny.npy")); }), p("tiny.npy") + ": not a .npy file (bad magic)");
  write_file(p("hdr.npy"), std::string("\x93NUMPY\x01\x00\xc8\x00{'descr'", 18));
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("hdr.npy")); }),
            p("hdr.npy") + ": truncated .npy header (header length 200, file 18 bytes)");
  write_file(p("v9.npy"), std::string("\x93NUMPY\x09\x00\x00\x00", 10));
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("v9.npy")); }), p("v9.npy") + ": unsupported .npy version 9.0");
  write_file(p("nine.npy"), std::string("\x93NUMPY\x01", 7));
  EXPECT_EQ(error_of([&] { yio::load_tensor(p("nine.npy")); }), p("nine.npy") + ": truncated .npy header");
}

TEST_F(TensorFileTest, RandomCorruptionNeverCrashes) {
  // Mutate bytes / truncate valid files: every outcome is a load or an IoError.
  auto b = random_bytes(12, DType::f32, 9);
  yio::save_safetensors(p("ok.safetensors"), {{"a", dense_view(b, DType::f32, {3, 4})},
                                              {"b", dense_view(b, DType::f32, {12})}});
  yio::save_npy(p("ok.npy"), dense_view(b, DType::f32, {3, 4}));
  std::mt19937 rng(42);
  int loaded = 0, errors = 0;
  for (const char* name : {"ok.safetensors", "ok.npy"}) {
    std::ifstream in(p(name), std::ios::binary);
    const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string ext = fs::path(name).extension().string();
    for (int it = 0; it < 1500; ++it) {
      std::string bad = good;
      if (it % 3 == 0) {
        bad.resize(rng() % good.size());
      } else {
        for (int k = 0, n = 1 + int(rng() % 4); k < n; ++k) {
          // Mostly the header, where the structure is.
          const std::size_t pos = rng() % std::min<std::size_t>(bad.size(), 140);
          bad[pos] = static_cast<char>(rng() & 0xff);
        }
      }
      const std::string path = p("fuzz" + ext);
      write_file(path, bad);
      try {
        yio::load_tensor(path, ext == ".npy" ? "" : "a");
        yio::list_tensors(path);
        ++loaded;
      } catch (const yio::IoError& e) {
        EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(loaded, 0);
}

}  // namespace
