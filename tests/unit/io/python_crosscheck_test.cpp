// Cross-check of the tensor files against an independent writer/reader: a
// small python3 script written from the format specs (struct + json + ast,
// no numpy). Skipped when python3 is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/tensor_file.hpp"

namespace fs = std::filesystem;
using ymlopt::DType;
using ymlopt::TensorView;
namespace yio = ymlopt::io;

namespace {

// Writes, from the specs: a.npy (v1.0, <f4 2x3), b.npy (v2.0, <f2 [4]),
// c.npy (|i1 [5]), d.npy (<f8 [2]), e.npy (<i4 2x2) and m.safetensors with one
// tensor per supported dtype plus metadata.
const char* kWriter = R"PY(
import json, struct, sys
out = sys.argv[1]

def npy(name, descr, shape, fmt, values, major=1):
    d = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    pre = 10 if major == 1 else 12
    pad = 64 - (pre + len(d) + 1) % 64
    if pad == 64: pad = 0
    h = (d + ' ' * pad + '\n').encode('latin1')
    head = b'\x93NUMPY' + bytes([major, 0]) + (struct.pack('<H', len(h)) if major == 1 else struct.pack('<I', len(h)))
    with open(out + '/' + name, 'wb') as f:
        f.write(head + h + struct.pack('<%d%s' % (len(values), fmt), *values))

npy('a.npy', '<f4', (2, 3), 'f', [1.5, -2.0, 3.25, 0.0, 1e-3, 65504.0])
npy('b.npy', '<f2', (4,), 'e', [1.0, -2.0, 0.5, 65504.0], major=2)
npy('c.npy', '|i1', (5,), 'b', [-128, -1, 0, 1, 127])
npy('d.npy', '<f8', (2,), 'd', [3.141592653589793, -1e300])
npy('e.npy', '<i4', (2, 2), 'i', [-2147483648, -1, 7, 2147483647])

def bf16(x):
    return struct.unpack('<I', struct.pack('<f', x))[0] >> 16

tensors = [
    ('f32', 'F32', [2, 2], struct.pack('<4f', 1.0, -2.5, 3.0, 4.5)),
    ('f64', 'F64', [3], struct.pack('<3d', 0.1, 0.2, 0.3)),
    ('f16', 'F16', [2], struct.pack('<2e', 0.5, -3.0)),
    ('bf16', 'BF16', [3], struct.pack('<3H', bf16(1.0), bf16(-2.0), bf16(3.140625))),
    ('i8', 'I8', [1, 3], struct.pack('<3b', -7, 0, 9)),
    ('i32', 'I32', [2, 1], struct.pack('<2i', 123456, -654321)),
]
header, data = {}, b''
for name, dt, shape, raw in tensors:
    header[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
    data += raw
header['__metadata__'] = {'format': 'pt', 'source': 'python'}
h = json.dumps(header).encode()
h += b' ' * ((8 - len(h) % 8) % 8)
with open(out + '/m.safetensors', 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h + data)
)PY";

// Reads every .npy / .safetensors file in a folder and prints JSON:
// {file: {name: {"dtype", "shape", "values"}}}, plus "__aligned__" checks.
const char* kReader = R"PY(
import ast, json, os, struct, sys
d = sys.argv[1]
fmt = {'<f4': ('f', 4), '<f8': ('d', 8), '<f2': ('e', 2), '|i1': ('b', 1), '<i4': ('i', 4),
       'F32': ('f', 4), 'F64': ('d', 8), 'F16': ('e', 2), 'I8': ('b', 1), 'I32': ('i', 4), 'BF16': ('H', 2)}
def decode(dt, raw):
    c, n = fmt[dt]
    v = list(struct.unpack('<%d%s' % (len(raw) // n, c), raw))
    if dt == 'BF16':
        v = [struct.unpack('<f', struct.pack('<I', x << 16))[0] for x in v]
    return v
res = {}
for fn in sorted(os.listdir(d)):
    raw = open(os.path.join(d, fn), 'rb').read()
    if fn.endswith('.npy'):
        assert raw[:6] == b'\x93NUMPY' and raw[6] == 1 and raw[7] == 0
        hl = struct.unpack('<H', raw[8:10])[0]
        assert (10 + hl) % 64 == 0 and raw[10 + hl - 1:10 + hl] == b'\n'
        h = ast.literal_eval(raw[10:10 + hl].decode('latin1'))
        assert h['fortran_order'] is False
        res[fn] = {'': {'dtype': h['descr'], 'shape': list(h['shape']), 'values': decode(h['descr'], raw[10 + hl:])}}
    elif fn.endswith('.safetensors'):
        n = struct.unpack('<Q', raw[:8])[0]
        h = json.loads(raw[8:8 + n])
        body = raw[8 + n:]
        ent = {}
        for k, v in h.items():
            if k == '__metadata__':
                ent[k] = v
                continue
            b, e = v['data_offsets']
            ent[k] = {'dtype': v['dtype'], 'shape': v['shape'], 'values': decode(v['dtype'], body[b:e])}
        ent['__aligned__'] = (8 + n) % 8 == 0
        res[fn] = ent
json.dump(res, sys.stdout)
)PY";

class PythonCrossCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c 'import struct, json, ast' >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "python3 not available";
    dir_ = fs::temp_directory_path() / ("ymlopt_io_py_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  int run_python(const char* script, const std::string& arg, const std::string& stdout_file = "") {
    const fs::path py = dir_ / "script.py";
    std::ofstream(py) << script;
    std::string cmd = "python3 '" + py.string() + "' '" + arg + "'";
    if (!stdout_file.empty()) cmd += " > '" + stdout_file + "'";
    return std::system(cmd.c_str());
  }

  template <class T> static std::vector<T> as(const yio::TensorData& d) {
    std::vector<T> v(d.bytes.size() / sizeof(T));
    std::memcpy(v.data(), d.bytes.data(), d.bytes.size());
    return v;
  }
  std::string f(const std::string& name) const { return (dir_ / "data" / name).string(); }

  fs::path dir_;
};

TEST_F(PythonCrossCheck, ReadsFilesWrittenByAnIndependentWriter) {
  ASSERT_EQ(run_python(kWriter, (dir_ / "data").string()), 0);

  auto a = yio::load_tensor(f("a.npy"));
  EXPECT_EQ(a.dtype, DType::f32);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(as<float>(a), (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 65504.0f}));

  auto b = yio::load_tensor(f("b.npy"));  // v2.0 header
  EXPECT_EQ(b.dtype, DType::f16);
  EXPECT_EQ(b.shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(as<std::uint16_t>(b), (std::vector<std::uint16_t>{0x3C00, 0xC000, 0x3800, 0x7BFF}));

  auto c = yio::load_tensor(f("c.npy"));
  EXPECT_EQ(c.dtype, DType::i8);
  EXPECT_EQ(as<std::int8_t>(c), (std::vector<std::int8_t>{-128, -1, 0, 1, 127}));

  auto d = yio::load_tensor(f("d.npy"));
  EXPECT_EQ(d.dtype, DType::f64);
  EXPECT_EQ(as<double>(d), (std::vector<double>{3.141592653589793, -1e300}));

  auto e = yio::load_tensor(f("e.npy"));
  EXPECT_EQ(e.dtype, DType::i32);
  EXPECT_EQ(as<std::int32_t>(e), (std::vector<std::int32_t>{INT32_MIN, -1, 7, INT32_MAX}));

  const std::string m = f("m.safetensors");
  EXPECT_EQ(yio::read_metadata(m), (std::map<std::string, std::string>{{"format", "pt"}, {"source", "python"}}));
  EXPECT_EQ(yio::list_tensors(m).size(), 6u);
  auto t = yio::load_tensor(m, "f32");
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(as<float>(t), (std::vector<float>{1.0f, -2.5f, 3.0f, 4.5f}));
  EXPECT_EQ(as<double>(yio::load_tensor(m, "f64")), (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_EQ(as<std::uint16_t>(yio::load_tensor(m, "f16")), (std::vector<std::uint16_t>{0x3800, 0xC200}));
  auto bf = yio::load_tensor(m, "bf16");
  EXPECT_EQ(bf.dtype, DType::bf16);
  EXPECT_EQ(as<std::uint16_t>(bf), (std::vector<std::uint16_t>{0x3F80, 0xC000, 0x4049}));
  auto i8 = yio::load_tensor(m, "i8");
  EXPECT_EQ(i8.shape, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(as<std::int8_t>(i8), (std::vector<std::int8_t>{-7, 0, 9}));
  EXPECT_EQ(as<std::int32_t>(yio::load_tensor(m, "i32")), (std::vector<std::int32_t>{123456, -654321}));
}

TEST_F(PythonCrossCheck, FilesWeWriteAreReadByAnIndependentReader) {
  // A strided f32 tile, every other dtype dense.
  std::vector<float> big = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  TensorView tile;
  tile.data = big.data() + 1;
  tile.dtype = DType::f32;
  tile.rows = 3;
  tile.cols = 2;
  tile.ld = 4;
  tile.shape = {3, 2};
  std::vector<double> f64 = {0.25, -1e-300};
  std::vector<std::uint16_t> f16 = {0x3C00, 0xC000};      // 1, -2
  std::vector<std::uint16_t> bf16 = {0x3F80, 0x4049};     // 1, 3.140625
  std::vector<std::int8_t> i8 = {-128, 5, 127};
  std::vector<std::int32_t> i32 = {-7, 1 << 30};
  auto view = [](void* p, DType t, std::int64_t n) {
    TensorView v;
    v.data = p;
    v.dtype = t;
    v.rows = 1;
    v.cols = n;
    v.ld = n;
    v.shape = {n};
    return v;
  };
  const std::string data = (dir_ / "data").string();
  yio::save_safetensors(data + "/w.safetensors",
                        {{"tile", tile},
                         {"f64", view(f64.data(), DType::f64, 2)},
                         {"f16", view(f16.data(), DType::f16, 2)},
                         {"bf16", view(bf16.data(), DType::bf16, 2)},
                         {"i8", view(i8.data(), DType::i8, 3)},
                         {"i32", view(i32.data(), DType::i32, 2)}},
                        {{"k", "v"}});
  yio::save_npy(data + "/tile.npy", tile);
  yio::save_npy(data + "/f16.npy", view(f16.data(), DType::f16, 2));
  yio::save_npy(data + "/i8.npy", view(i8.data(), DType::i8, 3));
  yio::save_npy(data + "/i32.npy", view(i32.data(), DType::i32, 2));
  yio::save_npy(data + "/f64.npy", view(f64.data(), DType::f64, 2));

  const std::string out = (dir_ / "out.json").string();
  ASSERT_EQ(run_python(kReader, data, out), 0);
  std::ifstream in(out);
  const auto r = nlohmann::json::parse(in);

  const auto& w = r.at("w.safetensors");
  EXPECT_TRUE(w.at("__aligned__").get<bool>());
  EXPECT_EQ(w.at("__metadata__"), nlohmann::json({{"k", "v"}}));
  EXPECT_EQ(w.at("tile").at("dtype"), "F32");
  EXPECT_EQ(w.at("tile").at("shape"), nlohmann::json({3, 2}));
  EXPECT_EQ(w.at("tile").at("values"), nlohmann::json({2.0, 3.0, 6.0, 7.0, 10.0, 11.0}));
  EXPECT_EQ(w.at("f64").at("values"), nlohmann::json({0.25, -1e-300}));
  EXPECT_EQ(w.at("f16").at("values"), nlohmann::json({1.0, -2.0}));
  EXPECT_EQ(w.at("bf16").at("dtype"), "BF16");
  EXPECT_EQ(w.at("bf16").at("values"), nlohmann::json({1.0, 3.140625}));
  EXPECT_EQ(w.at("i8").at("values"), nlohmann::json({-128, 5, 127}));
  EXPECT_EQ(w.at("i32").at("values"), nlohmann::json({-7, 1 << 30}));

  const auto& t = r.at("tile.npy").at("");
  EXPECT_EQ(t.at("dtype"), "<f4");
  EXPECT_EQ(t.at("shape"), nlohmann::json({3, 2}));
  EXPECT_EQ(t.at("values"), nlohmann::json({2.0, 3.0, 6.0, 7.0, 10.0, 11.0}));
  EXPECT_EQ(r.at("f16.npy").at("").at("values"), nlohmann::json({1.0, -2.0}));
  EXPECT_EQ(r.at("i8.npy").at("").at("dtype"), "|i1");
  EXPECT_EQ(r.at("i8.npy").at("").at("values"), nlohmann::json({-128, 5, 127}));
  EXPECT_EQ(r.at("i32.npy").at("").at("values"), nlohmann::json({-7, 1 << 30}));
  EXPECT_EQ(r.at("f64.npy").at("").at("values"), nlohmann::json({0.25, -1e-300}));
}

}  // namespace
