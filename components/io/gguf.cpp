#include "io/gguf.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "io/file_util.hpp"
#include "io/tensor_file.hpp"

namespace ymlopt::io::gguf {
namespace {

using file_util::fail;

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr std::uint32_t kMaxDims = 4;         // GGML_MAX_DIMS

struct TypeInfo {
  std::uint32_t type;
  const char* name;
  std::uint64_t block, bytes;
};

constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},      {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},   {8, "Q8_0", 32, 34},   {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},      {25, "I16", 1, 2},
    {26, "I32", 1, 4},      {27, "I64", 1, 8},     {28, "F64", 1, 8},     {30, "BF16", 1, 2},
};

const TypeInfo* find_type(std::uint32_t t) {
  for (const TypeInfo& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}

// Bytes of one scalar metadata value of type t (0 for string and array).
std::uint64_t scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    case ValueType::string: case ValueType::array: return 0;
  }
  return 0;
}

bool known_value_type(std::uint32_t t) { return t <= 12; }

// A bounds-checked little-endian cursor over the file's bytes.
class Reader {
 public:
  Reader(std::span<const std::byte> b, const std::string& path) : b_(b), path_(path) {}

  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return b_.size() - pos_; }

  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // a count of items that each take at least `min_bytes`: no more than the bytes left allow
  std::uint64_t count(const char* what, std::uint64_t min_bytes) {
    const auto n = get<std::uint64_t>(what);
    if (min_bytes > 0 && n > left() / min_bytes)
      fail(path_, std::string(what) + " " + std::to_string(n) + " does not fit in the " + std::to_string(left()) +
                      " bytes left (truncated or corrupt)");
    return n;
  }
  [[noreturn]] void bad(const std::string& why) const { fail(path_, why + " (at byte " + std::to_string(pos_) + ")"); }

 private:
  void need(std::uint64_t n, const char* what) const {
    if (n > left()) fail(path_, std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes at byte " +
                                    std::to_string(pos_) + ", " + std::to_string(left()) + " left");
  }
  std::span<const std::byte> b_;
  const std::string& path_;
  std::uint64_t pos_ = 0;
};

void read_element(Reader& r, ValueType t, Value& v, const std::string& key) {
  switch (t) {
    case ValueType::u8: v.ints.push_back(r.get<std::uint8_t>("a value")); break;
    case ValueType::i8: v.ints.push_back(r.get<std::int8_t>("a value")); break;
    case ValueType::u16: v.ints.push_back(r.get<std::uint16_t>("a value")); break;
    case ValueType::i16: v.ints.push_back(r.get<std::int16_t>("a value")); break;
    case ValueType::u32: v.ints.push_back(r.get<std::uint32_t>("a value")); break;
    case ValueType::i32: v.ints.push_back(r.get<std::int32_t>("a value")); break;
    case ValueType::u64: v.ints.push_back(std::int64_t(r.get<std::uint64_t>("a value"))); break;
    case ValueType::i64: v.ints.push_back(r.get<std::int64_t>("a value")); break;
    case ValueType::f32: v.floats.push_back(r.get<float>("a value")); break;
    case ValueType::f64: v.floats.push_back(r.get<double>("a value")); break;
    case ValueType::boolean: {
      const auto b = r.get<std::uint8_t>("a value");
      if (b > 1) r.bad("key '" + key + "': boolean " + std::to_string(b));
      v.ints.push_back(b);
      break;
    }
    case ValueType::string: v.strings.push_back(r.string("a string value")); break;
    case ValueType::array: r.bad("key '" + key + "': an array of arrays");
  }
}

Value read_value(Reader& r, const std::string& key) {
  Value v;
  const auto t = r.get<std::uint32_t>("a value type");
  if (!known_value_type(t)) r.bad("key '" + key + "': unknown value type " + std::to_string(t));
  v.type = v.elem = ValueType(t);
  if (v.type != ValueType::array) {
    read_element(r, v.type, v, key);
    return v;
  }
  const auto et = r.get<std::uint32_t>("an array's element type");
  if (!known_value_type(et) || ValueType(et) == ValueType::array)
    r.bad("key '" + key + "': bad array element type " + std::to_string(et));
  v.elem = ValueType(et);
  const std::uint64_t min = v.elem == ValueType::string ? 8 : scalar_bytes(v.elem);
  const std::uint64_t n = r.count("an array's length", min);
  for (std::uint64_t i = 0; i < n; ++i) read_element(r, v.elem, v, key);
  return v;
}

TensorInfo read_tensor_info(Reader& r, const std::string& path) {
  TensorInfo t;
  t.name = r.string("a tensor name");
  const auto nd = r.get<std::uint32_t>("a tensor's dimension count");
  if (nd == 0 || nd > kMaxDims) r.bad("tensor '" + t.name + "': " + std::to_string(nd) + " dimensions (1 to 4)");
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < nd; ++d) {
    const auto n = r.get<std::uint64_t>("a tensor dimension");
    if (n > std::uint64_t(std::numeric_limits<std::int64_t>::max()) || __builtin_mul_overflow(elements, n, &elements))
      r.bad("tensor '" + t.name + "': dimensions overflow");
    t.ne.push_back(n);
  }
  t.type = r.get<std::uint32_t>("a tensor type");
  const TypeInfo* ti = find_type(t.type);
  if (!ti) r.bad("tensor '" + t.name + "': unknown type " + std::to_string(t.type));
  if (t.ne[0] % ti->block != 0)
    fail(path, "tensor '" + t.name + "': a row of " + std::to_string(t.ne[0]) + " is not a whole number of " +
                   ti->name + " blocks of " + std::to_string(ti->block));
  if (__builtin_mul_overflow(elements / ti->block, ti->bytes, &t.bytes)) r.bad("tensor '" + t.name + "': size overflows");
  t.offset = r.get<std::uint64_t>("a tensor offset");
  return t;
}

// Every tensor aligned, inside the data section, and apart from the others.
void check_tensors(const File& f, std::uint64_t data_bytes) {
  std::vector<const TensorInfo*> by_offset;
  std::set<std::string_view> names;
  for (const TensorInfo& t : f.tensors) {
    if (!names.insert(t.name).second) fail(f.path, "tensor '" + t.name + "' appears twice");
    if (t.offset % f.alignment != 0)
      fail(f.path, "tensor '" + t.name + "': offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                       std::to_string(f.alignment));
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(f.path, "tensor '" + t.name + "': bytes [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
                       ") lie past the end of the data section (" + std::to_string(data_bytes) + " bytes; truncated?)");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(f.path, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
}

// Writes one metadata element (the value's i-th).
void write_element(file_util::AtomicWriter& w, ValueType t, const Value& v, std::size_t i) {
  auto put = [&](auto x) { w.write(&x, sizeof x); };
  switch (t) {
    case ValueType::u8: case ValueType::boolean: put(std::uint8_t(v.ints[i])); break;
    case ValueType::i8: put(std::int8_t(v.ints[i])); break;
    case ValueType::u16: put(std::uint16_t(v.ints[i])); break;
    case ValueType::i16: put(std::int16_t(v.ints[i])); break;
    case ValueType::u32: put(std::uint32_t(v.ints[i])); break;
    case ValueType::i32: put(std::int32_t(v.ints[i])); break;
    case ValueType::u64: put(std::uint64_t(v.ints[i])); break;
    case ValueType::i64: put(std::int64_t(v.ints[i])); break;
    case ValueType::f32: put(float(v.floats[i])); break;
    case ValueType::f64: put(double(v.floats[i])); break;
    case ValueType::string: put(std::uint64_t(v.strings[i].size())); w.write(v.strings[i]); break;
    case ValueType::array: break;
  }
}

}  // namespace

bool type_size(std::uint32_t type, std::uint64_t& block, std::uint64_t& bytes) {
  const TypeInfo* t = find_type(type);
  if (!t) return false;
  block = t->block;
  bytes = t->bytes;
  return true;
}

std::string type_name(std::uint32_t type) {
  const TypeInfo* t = find_type(type);
  return t ? t->name : "type " + std::to_string(type);
}

Value Value::u32(std::uint32_t v) { return Value{ValueType::u32, ValueType::u32, {v}, {}, {}}; }
Value Value::f32(float v) { return Value{ValueType::f32, ValueType::f32, {}, {v}, {}}; }
Value Value::str(std::string v) { return Value{ValueType::string, ValueType::string, {}, {}, {std::move(v)}}; }
Value Value::strings_of(std::vector<std::string> v) { return Value{ValueType::array, ValueType::string, {}, {}, std::move(v)}; }
Value Value::f32s(std::vector<float> v) { return Value{ValueType::array, ValueType::f32, {}, {v.begin(), v.end()}, {}}; }
Value Value::i32s(std::vector<std::int32_t> v) { return Value{ValueType::array, ValueType::i32, {v.begin(), v.end()}, {}, {}}; }

std::size_t Value::size() const { return ints.size() + floats.size() + strings.size(); }

double Value::number(const std::string& key) const {
  if (is_array() || size() != 1 || elem == ValueType::string)
    throw IoError("GGUF key '" + key + "' is not a number");
  return ints.empty() ? floats[0] : double(ints[0]);
}

const std::string& Value::text(const std::string& key) const {
  if (is_array() || elem != ValueType::string) throw IoError("GGUF key '" + key + "' is not a string");
  return strings[0];
}

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

const TensorInfo* File::tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> File::data(const TensorInfo& t) const { return {data_ + t.offset, t.bytes}; }

File parse(std::span<const std::byte> bytes, const std::string& path) {
  File f;
  f.path = path;
  Reader r(bytes, path);
  if (r.get<std::uint32_t>("the magic") != kMagic) fail(path, "not a GGUF file (no 'GGUF' magic)");
  f.version = r.get<std::uint32_t>("the version");
  if (f.version != 2 && f.version != 3)
    fail(path, "GGUF version " + std::to_string(f.version) + " is not supported (2 or 3)");
  const std::uint64_t n_tensors = r.count("the tensor count", 8 + 4 + 8 + 4 + 8);
  const std::uint64_t n_kv = r.count("the key/value count", 8 + 4 + 1);
  std::set<std::string> keys;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("a key");
    if (!keys.insert(key).second) r.bad("key '" + key + "' appears twice");
    Value v = read_value(r, key);
    f.kv.emplace_back(std::move(key), std::move(v));
  }
  if (const Value* a = f.find("general.alignment")) {
    if (a->is_array() || (a->type != ValueType::u32 && a->type != ValueType::u64) || a->ints[0] <= 0 ||
        a->ints[0] > (1 << 30) || (a->ints[0] & (a->ints[0] - 1)) != 0)
      fail(path, "general.alignment must be a power of two (an unsigned integer)");
    f.alignment = std::uint32_t(a->ints[0]);
  }
  for (std::uint64_t i = 0; i < n_tensors; ++i) f.tensors.push_back(read_tensor_info(r, path));
  const std::uint64_t start = (r.pos() + f.alignment - 1) / f.alignment * f.alignment;
  if (start > bytes.size() && !f.tensors.empty()) fail(path, "truncated: no data section after the header");
  check_tensors(f, start > bytes.size() ? 0 : bytes.size() - start);
  f.data_ = bytes.data() + std::min<std::uint64_t>(start, bytes.size());
  return f;
}

File read(const std::string& path) {
  auto map = std::make_shared<file_util::MappedFile>(path);
  File f = parse({map->data(), map->size()}, path);
  f.mapping_ = std::move(map);
  return f;
}

void write(const std::string& path, const KeyValues& kv, const std::vector<TensorOut>& tensors,
           const std::function<void(std::size_t, std::span<std::byte>)>& fill, std::uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail(path, "alignment must be a power of two");
  KeyValues all = kv;
  if (alignment != 32) all.emplace_back("general.alignment", Value::u32(alignment));
  std::vector<std::uint64_t> sizes, offsets;
  std::uint64_t at = 0;
  for (const TensorOut& t : tensors) {
    std::uint64_t block = 0, bytes = 0, n = 1;
    if (!type_size(t.type, block, bytes)) fail(path, "tensor '" + t.name + "': unknown type " + std::to_string(t.type));
    if (t.ne.empty() || t.ne.size() > kMaxDims || t.ne[0] % block != 0)
      fail(path, "tensor '" + t.name + "': bad shape for " + type_name(t.type));
    for (std::uint64_t d : t.ne) n *= d;
    offsets.push_back(at);
    sizes.push_back(n / block * bytes);
    at = (at + sizes.back() + alignment - 1) / alignment * alignment;
  }
  file_util::AtomicWriter w(path);
  auto put = [&](auto x) { w.write(&x, sizeof x); };
  auto put_str = [&](const std::string& s) {
    put(std::uint64_t(s.size()));
    w.write(s);
  };
  std::uint64_t pos = 4 + 4 + 8 + 8;
  put(kMagic);
  put(std::uint32_t(3));
  put(std::uint64_t(tensors.size()));
  put(std::uint64_t(all.size()));
  for (const auto& [key, v] : all) {
    put_str(key);
    put(std::uint32_t(v.type));
    pos += 8 + key.size() + 4;
    if (v.is_array()) {
      put(std::uint32_t(v.elem));
      put(std::uint64_t(v.size()));
      pos += 12;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      write_element(w, v.elem, v, i);
      pos += v.elem == ValueType::string ? 8 + v.strings[i].size() : scalar_bytes(v.elem);
    }
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    put_str(tensors[i].name);
    put(std::uint32_t(tensors[i].ne.size()));
    for (std::uint64_t d : tensors[i].ne) put(d);
    put(tensors[i].type);
    put(offsets[i]);
    pos += 8 + tensors[i].name.size() + 4 + 8 * tensors[i].ne.size() + 4 + 8;
  }
  std::vector<std::byte> buf;
  const std::vector<std::byte> zeros(alignment);
  w.write(zeros.data(), (alignment - pos % alignment) % alignment);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    buf.assign(sizes[i], std::byte{0});
    fill(i, buf);
    w.write(buf.data(), buf.size());
    w.write(zeros.data(), (alignment - sizes[i] % alignment) % alignment);
  }
  w.commit();
}

}  // namespace ymlopt::io::gguf
