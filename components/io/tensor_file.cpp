#include "io/tensor_file.hpp"

#include "io/file_util.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

static_assert(std::endian::native == std::endian::little,
              "tensor files are little-endian; a big-endian host needs byte swapping");

namespace ymlopt::io {
namespace {

using json = nlohmann::json;
using file_util::AtomicWriter;
using file_util::errno_text;
using file_util::fail;
using file_util::MappedFile;

constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// Bytes of a tensor, or nullopt on a negative dimension or an overflow.
std::optional<std::uint64_t> tensor_bytes(const std::vector<std::int64_t>& shape, std::uint64_t esize) {
  std::uint64_t n = esize;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

// ---------------------------------------------------------------------------
// Views.

/// Validates a view to save and returns its logical shape.
std::vector<std::int64_t> view_shape(const std::string& path, const std::string& what,
                                     const TensorView& v) {
  if (v.rows < 0 || v.cols < 0) fail(path, what + ": negative view size");
  std::vector<std::int64_t> shape = v.shape;
  if (shape.empty()) shape = {v.rows, v.cols};
  const auto n = tensor_bytes(shape, 1);
  if (!n) fail(path, what + ": invalid shape " + shape_str(shape));
  if (*n != static_cast<std::uint64_t>(v.rows) * static_cast<std::uint64_t>(v.cols))
    fail(path, what + ": shape " + shape_str(shape) + " does not match the view's " +
                   std::to_string(v.rows) + " x " + std::to_string(v.cols) + " elements");
  if (v.size() > 0 && v.data == nullptr) fail(path, what + ": no data");
  if (v.rows > 1 && v.ld < v.cols)
    fail(path, what + ": leading dimension " + std::to_string(v.ld) + " < " +
                   std::to_string(v.cols) + " columns");
  return shape;
}

void write_view(AtomicWriter& w, const TensorView& v) {
  const std::size_t es = dtype_size(v.dtype);
  if (v.size() == 0) return;
  if (v.contiguous()) {
    w.write(v.data, static_cast<std::size_t>(v.size()) * es);
    return;
  }
  const auto* base = static_cast<const char*>(v.data);
  for (std::int64_t r = 0; r < v.rows; ++r)
    w.write(base + static_cast<std::size_t>(r * v.ld) * es, static_cast<std::size_t>(v.cols) * es);
}

/// Copies dense row-major bytes into a (possibly strided) view.
void copy_into_view(const std::byte* src, const TensorView& dst) {
  const std::size_t es = dtype_size(dst.dtype);
  if (dst.size() == 0) return;
  auto* base = static_cast<std::byte*>(dst.data);
  if (dst.contiguous()) {
    std::memcpy(base, src, static_cast<std::size_t>(dst.size()) * es);
    return;
  }
  const std::size_t row = static_cast<std::size_t>(dst.cols) * es;
  for (std::int64_t r = 0; r < dst.rows; ++r)
    std::memcpy(base + static_cast<std::size_t>(r * dst.ld) * es, src + static_cast<std::size_t>(r) * row, row);
}

// ---------------------------------------------------------------------------
// Safetensors.

struct StDType {
  const char* name;
  std::size_t size;
  std::optional<DType> dtype;
};

constexpr StDType kStDTypes[] = {
    {"F32", 4, DType::f32},     {"F64", 8, DType::f64},      {"F16", 2, DType::f16},
    {"BF16", 2, DType::bf16},   {"I8", 1, DType::i8},        {"I32", 4, DType::i32},
    {"BOOL", 1, std::nullopt},  {"U8", 1, std::nullopt},     {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},   {"U32", 4, std::nullopt},    {"I64", 8, std::nullopt},
    {"U64", 8, std::nullopt},   {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
};

const StDType* find_st_dtype(std::string_view s) {
  for (const auto& d : kStDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

struct StEntry {
  TensorInfo info;
  std::size_t esize = 0;
  std::uint64_t begin = 0, end = 0;
};

struct StHeader {
  std::vector<StEntry> entries;  // sorted by name
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;
  std::uint64_t data_size = 0;
};

std::uint64_t read_u64le(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::int64_t json_dim(const std::string& path, const std::string& what, const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(path, what + ": dimension " + std::to_string(u) + " is too large");
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  fail(path, what + ": field 'shape' is not an array of integers");
}

StHeader parse_safetensors(const std::string& path, const MappedFile& f) {
  if (f.size() < 8)
    fail(path, "file too short for a safetensors header (" + std::to_string(f.size()) + " bytes)");
  const std::uint64_t n = read_u64le(f.data());
  if (n > kMaxSafetensorsHeader)
    fail(path, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > f.size() - 8)
    fail(path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(f.size()) + " bytes)");
  const char* text = reinterpret_cast<const char*>(f.data() + 8);
  json h;
  try {
    h = json::parse(text, text + n);
  } catch (const json::parse_error& e) {
    fail(path, "invalid JSON header (syntax error at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {  // a number out of range: "88E8888"
    fail(path, std::string("invalid JSON header (") + e.what() + ")");
  }
  if (!h.is_object()) fail(path, "header is not a JSON object");

  StHeader out;
  out.data_start = 8 + n;
  out.data_size = f.size() - out.data_start;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) fail(path, "__metadata__ is not an object of strings");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__ is not an object of strings");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + name + "'";
    if (!e.is_object()) fail(path, what + ": entry is not an object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!e.contains(field)) fail(path, what + ": missing field '" + field + "'");
    const json& jd = e["dtype"];
    const json& js = e["shape"];
    const json& jo = e["data_offsets"];
    if (!jd.is_string()) fail(path, what + ": field 'dtype' is not a string");
    StEntry ent;
    ent.info.name = name;
    ent.info.stored_dtype = jd.get<std::string>();
    const StDType* dt = find_st_dtype(ent.info.stored_dtype);
    if (!dt) fail(path, what + ": unknown dtype '" + ent.info.stored_dtype + "'");
    ent.info.dtype = dt->dtype;
    ent.esize = dt->size;
    if (!js.is_array()) fail(path, what + ": field 'shape' is not an array of integers");
    for (const json& d : js) ent.info.shape.push_back(json_dim(path, what, d));
    for (std::int64_t d : ent.info.shape)
      if (d < 0)
        fail(path, what + ": negative dimension " + std::to_string(d) + " in shape " +
                       shape_str(ent.info.shape));
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      fail(path, what + ": field 'data_offsets' is not [begin, end] (non-negative integers)");
    ent.begin = jo[0].get<std::uint64_t>();
    ent.end = jo[1].get<std::uint64_t>();
    const std::string offs = "[" + std::to_string(ent.begin) + ", " + std::to_string(ent.end) + "]";
    if (ent.begin > ent.end) fail(path, what + ": data_offsets " + offs + " are reversed");
    const auto need = tensor_bytes(ent.info.shape, ent.esize);
    if (!need) fail(path, what + ": shape " + shape_str(ent.info.shape) + " is too large");
    if (*need != ent.end - ent.begin)
      fail(path, what + ": shape " + shape_str(ent.info.shape) + " of " + ent.info.stored_dtype +
                     " needs " + std::to_string(*need) + " bytes but data_offsets " + offs + " hold " +
                     std::to_string(ent.end - ent.begin));
    if (ent.end > out.data_size)
      fail(path, what + ": data_offsets " + offs + " run past the data section (" +
                     std::to_string(out.data_size) + " bytes)");
    out.entries.push_back(std::move(ent));
  }

  // Overlaps: sort non-empty ranges by begin and compare neighbours.
  std::vector<const StEntry*> ranges;
  for (const auto& e : out.entries)
    if (e.end > e.begin) ranges.push_back(&e);
  std::sort(ranges.begin(), ranges.end(), [](const StEntry* a, const StEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->info.name < b->info.name;
  });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const StEntry* a = ranges[i - 1];
    const StEntry* b = ranges[i];
    if (b->begin < a->end)
      fail(path, "tensors '" + a->info.name + "' and '" + b->info.name + "' overlap (data_offsets [" +
                     std::to_string(a->begin) + ", " + std::to_string(a->end) + "] and [" +
                     std::to_string(b->begin) + ", " + std::to_string(b->end) + "])");
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const StEntry& a, const StEntry& b) { return a.info.name < b.info.name; });
  return out;
}

std::string key_list(const StHeader& h) {
  std::string s;
  const std::size_t shown = std::min<std::size_t>(h.entries.size(), 10);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i) s += ", ";
    s += h.entries[i].info.name;
  }
  if (h.entries.size() > shown) s += ", ... (" + std::to_string(h.entries.size() - shown) + " more)";
  return s;
}

const StEntry& find_entry(const std::string& path, const StHeader& h, const std::string& key) {
  if (key.empty()) {
    if (h.entries.size() == 1) return h.entries.front();
    if (h.entries.empty()) fail(path, "the file holds no tensors");
    fail(path, "a key is required: the file holds " + std::to_string(h.entries.size()) +
                   " tensors (" + key_list(h) + ")");
  }
  auto it = std::lower_bound(h.entries.begin(), h.entries.end(), key,
                             [](const StEntry& e, const std::string& k) { return e.info.name < k; });
  if (it == h.entries.end() || it->info.name != key) {
    if (h.entries.empty()) fail(path, "no tensor '" + key + "' (the file holds no tensors)");
    fail(path, "no tensor '" + key + "' (available: " + key_list(h) + ")");
  }
  return *it;
}

// ---------------------------------------------------------------------------
// .npy

constexpr char kNpyMagic[] = "\x93NUMPY";  // 6 bytes + NUL

struct NpyDescr {
  const char* descr;
  DType dtype;
};
constexpr NpyDescr kNpyDescrs[] = {
    {"<f4", DType::f32}, {"<f8", DType::f64}, {"<f2", DType::f16},
    {"|i1", DType::i8},  {"<i1", DType::i8},  {"<i4", DType::i32},
};

/// A tiny parser for the Python dict literal of a .npy header.
class NpyHeaderParser {
 public:
  struct Value {
    enum Kind { string, boolean, none, tuple } kind = none;
    std::string text;
    bool flag = false;
    std::vector<std::int64_t> ints;
  };

  NpyHeaderParser(const std::string& path, std::string_view s) : path_(path), s_(s) {}

  std::map<std::string, Value> parse() {
    std::map<std::string, Value> out;
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') { ++i_; break; }
      std::string key = str();
      ws();
      expect(':');
      ws();
      out[key] = value();
      ws();
      if (peek() == ',') { ++i_; continue; }
      expect('}');
      break;
    }
    ws();
    if (i_ != s_.size()) bad("unexpected text after the dictionary");
    return out;
  }

 private:
  [[noreturn]] void bad(const std::string& why) { fail(path_, "malformed .npy header: " + why); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "' at offset " + std::to_string(i_));
    ++i_;
  }
  std::string str() {
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string at offset " + std::to_string(i_));
    ++i_;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) bad("unterminated string");
    std::string r(s_.substr(start, i_ - start));
    ++i_;
    return r;
  }
  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) == w) {
      i_ += w.size();
      return true;
    }
    return false;
  }
  std::int64_t integer() {
    if (peek() == '-') bad("negative dimension in shape");
    if (!std::isdigit(static_cast<unsigned char>(peek())))
      bad("expected an integer at offset " + std::to_string(i_));
    std::int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, peek() - '0', &v))
        bad("dimension too large");
      ++i_;
    }
    if (peek() == 'L') ++i_;  // Python 2 long literal
    return v;
  }
  Value value() {
    Value v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = Value::string;
      v.text = str();
    } else if (word("True")) {
      v.kind = Value::boolean;
      v.flag = true;
    } else if (word("False")) {
      v.kind = Value::boolean;
    } else if (word("None")) {
      v.kind = Value::none;
    } else if (c == '(') {
      ++i_;
      v.kind = Value::tuple;
      for (;;) {
        ws();
        if (peek() == ')') { ++i_; break; }
        v.ints.push_back(integer());
        ws();
        if (peek() == ',') { ++i_; continue; }
        expect(')');
        break;
      }
    } else if (c == '[') {
      fail(path_, "structured dtypes are not supported");
    } else {
      bad("unexpected character at offset " + std::to_string(i_));
    }
    return v;
  }

  const std::string& path_;
  std::string_view s_;
  std::size_t i_ = 0;
};

struct NpyInfo {
  TensorInfo info;
  DType dtype = DType::f32;
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
};

NpyInfo parse_npy(const std::string& path, const MappedFile& f) {
  if (f.size() < 6 || std::memcmp(f.data(), kNpyMagic, 6) != 0)
    fail(path, "not a .npy file (bad magic)");
  if (f.size() < 10) fail(path, "truncated .npy header");
  const auto major = static_cast<unsigned>(f.data()[6]);
  const auto minor = static_cast<unsigned>(f.data()[7]);
  std::size_t hlen = 0, hstart = 0;
  if (major == 1) {
    std::uint16_t v;
    std::memcpy(&v, f.data() + 8, 2);
    hlen = v;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (f.size() < 12) fail(path, "truncated .npy header");
    std::uint32_t v;
    std::memcpy(&v, f.data() + 8, 4);
    hlen = v;
    hstart = 12;
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (hlen > f.size() - hstart)
    fail(path, "truncated .npy header (header length " + std::to_string(hlen) + ", file " +
                   std::to_string(f.size()) + " bytes)");
  const std::string_view text(reinterpret_cast<const char*>(f.data() + hstart), hlen);
  auto dict = NpyHeaderParser(path, text).parse();

  auto get = [&](const char* key, NpyHeaderParser::Value::Kind kind, const char* kind_name) {
    auto it = dict.find(key);
    if (it == dict.end()) fail(path, std::string("malformed .npy header: no '") + key + "'");
    if (it->second.kind != kind)
      fail(path, std::string("malformed .npy header: '") + key + "' is not " + kind_name);
    return it->second;
  };
  const auto descr = get("descr", NpyHeaderParser::Value::string, "a string");
  const auto fortran = get("fortran_order", NpyHeaderParser::Value::boolean, "a boolean");
  const auto shape = get("shape", NpyHeaderParser::Value::tuple, "a tuple");

  NpyInfo out;
  out.info.stored_dtype = descr.text;
  out.info.shape = shape.ints;
  const NpyDescr* found = nullptr;
  for (const auto& d : kNpyDescrs)
    if (descr.text == d.descr) found = &d;
  if (!found) {
    if (descr.text == ">i1") {
      found = &kNpyDescrs[3];
    } else if (!descr.text.empty() && descr.text[0] == '>') {
      fail(path, "big-endian data not supported (descr '" + descr.text + "')");
    } else {
      fail(path, "unsupported dtype '" + descr.text + "'");
    }
  }
  out.dtype = found->dtype;
  out.info.dtype = found->dtype;
  if (fortran.flag) fail(path, "fortran_order True is not supported (save the array in C order)");

  const auto need = tensor_bytes(out.info.shape, dtype_size(out.dtype));
  if (!need) fail(path, "shape " + shape_str(out.info.shape) + " is too large");
  const std::size_t dstart = hstart + hlen;
  const std::size_t avail = f.size() - dstart;
  if (avail < *need)
    fail(path, "truncated data: shape " + shape_str(out.info.shape) + " of '" + descr.text + "' needs " +
                   std::to_string(*need) + " bytes, found " + std::to_string(avail));
  if (avail > *need)
    fail(path, std::to_string(avail - *need) + " unexpected bytes after the data");
  out.data = f.data() + dstart;
  out.nbytes = static_cast<std::size_t>(*need);
  return out;
}

/// A located tensor inside a mapped file.
struct Located {
  TensorInfo info;
  DType dtype = DType::f32;
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  std::string label;  // "tensor 'w'" or "the array"
};

/// Tensor `key` of a safetensors file whose header is h.
Located locate_in(const std::string& path, const std::string& key, const MappedFile& f, const StHeader& h) {
  Located out;
  const StEntry& e = find_entry(path, h, key);
  out.label = "tensor '" + e.info.name + "'";
  if (!e.info.dtype) fail(path, out.label + " has unsupported dtype '" + e.info.stored_dtype + "'");
  out.info = e.info;
  out.dtype = *e.info.dtype;
  out.data = f.data() + h.data_start + e.begin;
  out.nbytes = static_cast<std::size_t>(e.end - e.begin);
  return out;
}

Located locate(const std::string& path, const std::string& key, const MappedFile& f) {
  Located out;
  if (format_of(path) == FileFormat::safetensors) {
    out = locate_in(path, key, f, parse_safetensors(path, f));
  } else {
    NpyInfo n = parse_npy(path, f);
    out.label = "the array";
    out.info = std::move(n.info);
    out.dtype = n.dtype;
    out.data = n.data;
    out.nbytes = n.nbytes;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API.

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kStDTypes)
    if (d.dtype == t) return d.name;
  return "";
}

const char* npy_descr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::i8: return "|i1";
    case DType::i32: return "<i4";
    case DType::bf16: return "";
  }
  return "";
}

FileFormat format_of(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".safetensors") return FileFormat::safetensors;
  if (ext == ".npy") return FileFormat::npy;
  fail(path, "unsupported file extension '" + ext + "' (expected .safetensors or .npy)");
}

struct MappedTensorFile::Impl {
  std::string path;
  MappedFile file;
  std::optional<StHeader> header;  // safetensors: parsed once, not per tensor
  Impl(const std::string& p) : path(p), file(p, true) {
    if (format_of(p) == FileFormat::safetensors) header = parse_safetensors(p, file);
  }
};

MappedTensorFile::MappedTensorFile(const std::string& path) {
  format_of(path);
  impl_ = std::make_unique<Impl>(path);
}
MappedTensorFile::~MappedTensorFile() = default;

std::byte* MappedTensorFile::tensor(const std::string& key, TensorInfo* info) const {
  const Located loc = impl_->header ? locate_in(impl_->path, key, impl_->file, *impl_->header)
                                    : locate(impl_->path, key, impl_->file);
  if (info) *info = loc.info;
  // the mapping is private and writable: handing out a mutable pointer is safe
  return const_cast<std::byte*>(loc.data);
}

void MappedTensorFile::read_at(const std::byte* at, void* dst, std::size_t n) const {
  impl_->file.read_at(at, dst, n);
}

TensorData load_tensor(const std::string& path, const std::string& key) {
  format_of(path);
  MappedFile f(path);
  const Located loc = locate(path, key, f);
  TensorData out;
  out.dtype = loc.dtype;
  out.shape = loc.info.shape;
  out.bytes.assign(loc.data, loc.data + loc.nbytes);
  return out;
}

void load_tensor_into(const std::string& path, const std::string& key, const TensorView& dst) {
  format_of(path);
  MappedFile f(path);
  const Located loc = locate(path, key, f);
  std::vector<std::int64_t> dshape = dst.shape;
  if (dshape.empty()) dshape = {dst.rows, dst.cols};
  if (loc.dtype != dst.dtype || loc.info.shape != dshape)
    fail(path, loc.label + " is " + dtype_name(loc.dtype) + " " + shape_str(loc.info.shape) +
                   " but the destination is " + dtype_name(dst.dtype) + " " + shape_str(dshape));
  const auto n = tensor_bytes(dshape, 1);
  if (!n || *n != static_cast<std::uint64_t>(dst.rows) * static_cast<std::uint64_t>(dst.cols))
    fail(path, "destination shape " + shape_str(dshape) + " does not match its " +
                   std::to_string(dst.rows) + " x " + std::to_string(dst.cols) + " view");
  if (dst.size() > 0 && dst.data == nullptr) fail(path, "destination has no data");
  if (dst.rows > 1 && dst.ld < dst.cols) fail(path, "destination has a leading dimension < its columns");
  copy_into_view(loc.data, dst);
}

FileIndex index_file(const std::string& path) {
  const FileFormat fmt = format_of(path);
  MappedFile f(path);
  FileIndex out;
  if (fmt == FileFormat::safetensors) {
    StHeader h = parse_safetensors(path, f);
    for (auto& e : h.entries) out.tensors.push_back(std::move(e.info));
    out.metadata = std::move(h.metadata);
  } else {
    out.tensors.push_back(parse_npy(path, f).info);
  }
  return out;
}

std::vector<TensorInfo> list_tensors(const std::string& path) { return index_file(path).tensors; }

std::map<std::string, std::string> read_metadata(const std::string& path) { return index_file(path).metadata; }

namespace {

// The header of a safetensors file holding `entries` in order, padded so that
// the data start 8-byte aligned; returns the 8-byte length followed by the JSON.
struct HeaderEntry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t bytes;
};

std::string safetensors_header(const std::string& path, const std::vector<HeaderEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& e : entries) {
    if (e.name == "__metadata__") fail(path, "tensor name '__metadata__' is reserved");
    if (!names.insert(e.name).second) fail(path, "duplicate tensor name '" + e.name + "'");
    h[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string text;
  try {
    text = h.dump();
  } catch (const json::exception&) {
    fail(path, "tensor names and metadata must be valid UTF-8");
  }
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  const std::uint64_t n = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + text;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<HeaderEntry> entries;
  for (const auto& t : tensors) {
    auto shape = view_shape(path, "tensor '" + t.name + "'", t.view);
    entries.push_back({t.name, t.view.dtype, std::move(shape),
                       static_cast<std::uint64_t>(t.view.size()) * dtype_size(t.view.dtype)});
  }
  const std::string header = safetensors_header(path, entries, metadata);
  AtomicWriter w(path);
  w.write(header);
  for (const auto& t : tensors) write_view(w, t.view);
  w.commit();
}

void save_safetensors_streamed(const std::string& path, const std::vector<TensorInfo>& tensors,
                               const std::function<void(std::size_t, std::span<std::byte>)>& fill,
                               const std::map<std::string, std::string>& metadata) {
  std::vector<HeaderEntry> entries;
  for (const auto& t : tensors) {
    if (!t.dtype) fail(path, "tensor '" + t.name + "' has no dtype");
    const auto n = tensor_bytes(t.shape, dtype_size(*t.dtype));
    if (!n) fail(path, "tensor '" + t.name + "': invalid shape " + shape_str(t.shape));
    entries.push_back({t.name, *t.dtype, t.shape, *n});
  }
  const std::string header = safetensors_header(path, entries, metadata);
  AtomicWriter w(path);
  w.write(header);
  std::vector<std::byte> buf;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    buf.resize(entries[i].bytes);
    fill(i, std::span<std::byte>(buf));
    w.write(buf.data(), buf.size());
  }
  w.commit();
}

void save_npy(const std::string& path, const TensorView& view) {
  const auto shape = view_shape(path, "array", view);
  const std::string descr = npy_descr(view.dtype);
  if (descr.empty())
    fail(path, std::string(dtype_name(view.dtype)) + " cannot be stored in .npy (use .safetensors)");
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dict += ",";
  dict += "), }";
  // v1.0: magic(6) + version(2) + u16 length; v2.0 (u32 length) if the header is huge.
  std::size_t prefix = 10;
  unsigned char major = 1;
  auto padded = [&](std::size_t pre) {
    std::string s = dict;
    while ((pre + s.size() + 1) % 64 != 0) s.push_back(' ');
    s.push_back('\n');
    return s;
  };
  std::string header = padded(prefix);
  if (header.size() > 65535) {
    prefix = 12;
    major = 2;
    header = padded(prefix);
  }
  AtomicWriter w(path);
  w.write(kNpyMagic, 6);
  const unsigned char ver[2] = {major, 0};
  w.write(ver, 2);
  if (major == 1) {
    const auto n = static_cast<std::uint16_t>(header.size());
    w.write(&n, 2);
  } else {
    const auto n = static_cast<std::uint32_t>(header.size());
    w.write(&n, 4);
  }
  w.write(header);
  write_view(w, view);
  w.commit();
}

}  // namespace ymlopt::io
