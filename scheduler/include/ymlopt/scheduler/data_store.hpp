#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// Host memory of every tensor of a DAG: allocated (64-byte aligned) and
/// initialised from `init=` (seeded, independent of tiling), or, for `src=`
/// data, used in place from a copy-on-write mapping of the file (zero-copy:
/// loading a checkpoint reads nothing up front, and tasks may still write the
/// tensor). Tiles are strided views into their tensor, except on an MPI rank
/// that holds only some tiles of a tensor (Holding::tiles): each of those is
/// its own contiguous block (ld = its columns), read from the file with pread
/// so that the rest of the tensor is never touched.
///
///   DataStore store(dag);                       // throws std::runtime_error
///   TensorView v = store.view(task.bindings[0].ref);
class DataStore {
 public:
  explicit DataStore(const Dag& dag);
  /// Only what `held` says is allocated and initialised (an MPI rank holds
  /// what it owns; StarPU-MPI allocates received copies); base() is null for
  /// data not held whole. src= files are mapped either way.
  DataStore(const Dag& dag, const Residency& held);
  DataStore(const DataStore&) = delete;
  DataStore& operator=(const DataStore&) = delete;

  void* base(std::int32_t data) const { return ptrs_[size_t(data)]; }
  /// The block of tile `tile` of a data held as tiles (Holding::tiles), null
  /// otherwise. Its leading dimension is the tile's columns.
  void* tile_base(std::int32_t data, std::int64_t tile) const {
    const auto& t = tiles_[size_t(data)];
    return t.empty() ? nullptr : t[size_t(tile)];
  }
  /// Writes a tensor's init= values again (run --warmup: each run starts from
  /// them), in every block held of it. Not for src= data, which the file holds.
  void reinitialise(std::int32_t data);
  /// View of a whole tensor or of one tile (shape included).
  TensorView view(const DataRef& ref) const;
  /// Bytes allocated (mapped files not included).
  std::size_t total_bytes() const { return total_; }
  /// Bytes used in place from mapped files (of a tensor held whole whose
  /// tiles this rank owns only some of: those tiles' bytes).
  std::size_t mapped_bytes() const { return mapped_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  /// `bytes` of 64-byte aligned memory, counted in total_; zeroed when
  /// `lazy_zero` (by the kernel, page by page as written, when large).
  void* allocate(std::size_t bytes, bool lazy_zero, const std::string& name);
  const Dag& dag_;
  std::vector<void*> ptrs_;
  std::vector<std::vector<void*>> tiles_;  // by data: the held tiles' blocks (Holding::tiles)
  std::vector<std::unique_ptr<void, Free>> owned_;
  std::vector<std::shared_ptr<void>> mappings_;  // io::MappedTensorFile, one per file
  std::size_t total_ = 0;
  std::size_t mapped_ = 0;
};

/// The deterministic value of element `index` of a tensor initialised with
/// init="random" and `seed` (uniform in [-1, 1)).
double random_value(std::uint64_t seed, std::uint64_t index);

}  // namespace ymlopt
