// GGUF, llama.cpp's model file (versions 2 and 3), read and written without
// ggml: metadata key/values, tensor descriptors and the aligned data section.
// The architecture's names and layouts (HF <-> llama.cpp) are the caller's.
//
//   gguf::File f = gguf::read("model.gguf");          // validates the whole layout
//   const gguf::Value* arch = f.find("general.architecture");
//   std::span<const std::byte> w = f.data(f.tensors[0]);
//
//   gguf::write("out.gguf", kv, {{"token_embd.weight", gguf::Type::f32, {768, 50257}}},
//               [&](std::size_t i, std::span<std::byte> out) { /* tensor i's bytes */ });
//
// A file is refused (IoError "PATH: reason") when anything does not add up:
// magic, version, counts or lengths past the end, an unknown value or tensor
// type, more than 4 dimensions, a row not a whole number of blocks, a tensor
// outside the data section, misaligned or overlapping another, repeated names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ymlopt::io::gguf {

/// ggml tensor types (ggml.h's numbering).
enum class Type : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30,
};

/// Elements per block and bytes per block of a type; false for an unknown type.
bool type_size(std::uint32_t type, std::uint64_t& block, std::uint64_t& bytes);
/// "F32", "Q8_0", ...; "type N" for an unknown one.
std::string type_name(std::uint32_t type);

/// Metadata value types (gguf.h's numbering).
enum class ValueType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};

/// One metadata value: a scalar (one element) or an array of `elem` (arrays
/// of arrays are refused). Integers and booleans in `ints` (u64 bit-cast),
/// floats in `floats`, strings in `strings`.
struct Value {
  ValueType type = ValueType::u32;
  ValueType elem = ValueType::u32;  // the element type: `type`, or the array's
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  static Value u32(std::uint32_t v);
  static Value f32(float v);
  static Value str(std::string v);
  static Value strings_of(std::vector<std::string> v);
  static Value f32s(std::vector<float> v);
  static Value i32s(std::vector<std::int32_t> v);

  bool is_array() const { return type == ValueType::array; }
  std::size_t size() const;
  /// The value as a number (one integer or float element); throws otherwise.
  double number(const std::string& key) const;
  /// The value as a string; throws when it is not one.
  const std::string& text(const std::string& key) const;
};

using KeyValues = std::vector<std::pair<std::string, Value>>;

/// A tensor descriptor. ne[0] is the innermost (contiguous) dimension, as in
/// ggml: a row-major [rows, cols] matrix has ne = {cols, rows}.
struct TensorInfo {
  std::string name;
  std::uint32_t type = 0;  // a Type
  std::vector<std::uint64_t> ne;
  std::uint64_t offset = 0;  // in the data section
  std::uint64_t bytes = 0;
};

/// A GGUF file, mapped read-only.
class File {
 public:
  std::string path;
  std::uint32_t version = 3;
  std::uint32_t alignment = 32;
  KeyValues kv;
  std::vector<TensorInfo> tensors;

  const Value* find(std::string_view key) const;
  const TensorInfo* tensor(std::string_view name) const;
  /// The tensor's bytes inside the mapping.
  std::span<const std::byte> data(const TensorInfo& t) const;

 private:
  friend File read(const std::string& path);
  friend File parse(std::span<const std::byte> bytes, const std::string& path);
  std::shared_ptr<const void> mapping_;
  const std::byte* data_ = nullptr;  // the data section
};

/// Reads and validates a GGUF file (mapped, tensor data not copied).
File read(const std::string& path);
/// The same on bytes in memory (they must outlive the File); `path` names
/// them in errors. The fuzz target's entry.
File parse(std::span<const std::byte> bytes, const std::string& path);

/// A tensor to write: name, type and ne; its bytes come from write's `fill`.
struct TensorOut {
  std::string name;
  std::uint32_t type = 0;
  std::vector<std::uint64_t> ne;
};

/// Writes a GGUF v3 file atomically (temporary file, fsync, rename): the
/// key/values (general.alignment added when not 32), then each tensor's data,
/// aligned, produced by fill(i, out) with out of the tensor's byte size.
void write(const std::string& path, const KeyValues& kv, const std::vector<TensorOut>& tensors,
           const std::function<void(std::size_t, std::span<std::byte>)>& fill, std::uint32_t alignment = 32);

}  // namespace ymlopt::io::gguf
