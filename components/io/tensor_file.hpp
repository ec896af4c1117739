// Tensor files: safetensors (Hugging Face) and numpy .npy, read and written
// without third-party tensor libraries.
//
//   auto w = ymlopt::io::load_tensor("model.safetensors", "layer0.attn.q.weight");
//   ymlopt::io::save_safetensors("out.safetensors", {{"c", view}}, {{"producer", "ymlopt"}});
//
// Loading maps the file read-only and copies only the requested tensor.
// Writing is atomic: the data goes to PATH.tmp.<pid>, is fsync'ed, then renamed
// over PATH; on failure the temporary file is removed and nothing is left.
// Every error is an IoError whose message starts with the file path:
// "PATH: reason". Data is row-major and little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ymlopt/sdk.hpp>

namespace ymlopt::io {

/// A file error; what() is "PATH: reason".
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A dense, row-major, little-endian tensor. An empty shape is a scalar.
struct TensorData {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

/// One entry of a tensor file, as listed by list_tensors().
struct TensorInfo {
  std::string name;                  // "" for a .npy file
  std::string stored_dtype;          // as written in the file: "F32", "I64", "<f4", ...
  std::optional<DType> dtype;        // nullopt when ymlopt does not support it
  std::vector<std::int64_t> shape;
};

/// A tensor to save: a (possibly strided) view and its name. The logical shape
/// is view.shape, or {rows, cols} when view.shape is empty.
struct NamedTensor {
  std::string name;
  TensorView view;
};

enum class FileFormat { safetensors, npy };

/// The format from the extension (.safetensors or .npy); throws IoError
/// "PATH: unsupported file extension '.bin' (expected .safetensors or .npy)".
FileFormat format_of(const std::string& path);

/// Loads one tensor. For .safetensors, `key` names the tensor; an empty key is
/// accepted only when the file holds exactly one tensor. For .npy, `key` is ignored.
TensorData load_tensor(const std::string& path, const std::string& key = "");

/// Loads one tensor directly into `dst` (which may be strided); throws when the
/// stored dtype or shape differs from dst's (dst.shape, or {rows, cols} if empty).
void load_tensor_into(const std::string& path, const std::string& key, const TensorView& dst);

/// What a file's header says: its tensors (sorted by name for safetensors; one
/// unnamed entry for .npy) and the safetensors "__metadata__" map (empty for .npy).
struct FileIndex {
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};
/// Reads the header once (a caller that asks about many tensors of one file
/// keeps the index: the compiler asks once per file, not per data).
FileIndex index_file(const std::string& path);

/// The tensors of a file: index_file(path).tensors.
std::vector<TensorInfo> list_tensors(const std::string& path);

/// The "__metadata__" map of a safetensors file (empty for .npy): index_file(path).metadata.
std::map<std::string, std::string> read_metadata(const std::string& path);

/// Writes a safetensors file (data in the order given, 8-byte aligned header).
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Writes a .npy v1.0 file (bf16 is refused: numpy has no such dtype).
/// A tensor file mapped copy-on-write: its tensors can be used in place
/// (zero-copy loading) and even written, without the file changing.
///
///   MappedTensorFile f("gpt2.safetensors");
///   TensorInfo info;
///   float* w = reinterpret_cast<float*>(f.tensor("wte.weight", &info));
class MappedTensorFile {
 public:
  explicit MappedTensorFile(const std::string& path);  // throws IoError
  ~MappedTensorFile();
  MappedTensorFile(const MappedTensorFile&) = delete;
  MappedTensorFile& operator=(const MappedTensorFile&) = delete;
  /// The bytes of tensor `key` (for .npy, the array) inside the mapping.
  std::byte* tensor(const std::string& key, TensorInfo* info = nullptr) const;
  /// Copies n bytes of the file, those the mapping shows at `at`, into `dst`
  /// without touching the mapping (pread). Throws IoError.
  void read_at(const std::byte* at, void* dst, std::size_t n) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Writes a safetensors file tensor by tensor, without holding them all in
/// memory: `fill(i, bytes)` produces tensor i's data (dtype and shape from
/// `tensors[i]`). Atomic like save_safetensors.
///
///   save_safetensors_streamed("w.safetensors", {{"w", "", DType::f32, {4096, 4096}}},
///                             [](size_t, std::span<std::byte> out) { /* generate */ });
void save_safetensors_streamed(const std::string& path, const std::vector<TensorInfo>& tensors,
                               const std::function<void(std::size_t, std::span<std::byte>)>& fill,
                               const std::map<std::string, std::string>& metadata = {});

void save_npy(const std::string& path, const TensorView& view);

/// The safetensors / npy names of a dtype ("F32", "<f4"; "" when npy has none).
const char* safetensors_dtype_name(DType t);
const char* npy_descr(DType t);

}  // namespace ymlopt::io
