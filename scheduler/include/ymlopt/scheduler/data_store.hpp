#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// Host memory of every tensor of a DAG: allocated (64-byte aligned) and
/// initialised from `init=` (seeded, independent of tiling), or, for `src=`
/// data, used in place from a copy-on-write mapping of the file (zero-copy:
/// loading a checkpoint reads nothing up front, and tasks may still write the
/// tensor). Tiles are strided views into their tensor.
///
///   DataStore store(dag);                       // throws std::runtime_error
///   TensorView v = store.view(task.bindings[0].ref);
class DataStore {
 public:
  explicit DataStore(const Dag& dag);
  /// Only the data with resident[d] != 0 are allocated and initialised (an
  /// MPI rank holds what it owns; StarPU-MPI allocates received copies);
  /// base() is null for the others. src= data are mapped either way.
  DataStore(const Dag& dag, const std::vector<char>& resident);
  DataStore(const DataStore&) = delete;
  DataStore& operator=(const DataStore&) = delete;

  void* base(std::int32_t data) const { return ptrs_[size_t(data)]; }
  /// Writes a tensor's init= values again (run --warmup: each run starts from
  /// them). Not for src= data, which the file holds.
  void reinitialise(std::int32_t data);
  /// View of a whole tensor or of one tile (shape included).
  TensorView view(const DataRef& ref) const;
  /// Bytes allocated (mapped files not included).
  std::size_t total_bytes() const { return total_; }
  /// Bytes used in place from mapped files.
  std::size_t mapped_bytes() const { return mapped_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  const Dag& dag_;
  std::vector<void*> ptrs_;
  std::vector<std::unique_ptr<void, Free>> owned_;
  std::vector<std::shared_ptr<void>> mappings_;  // io::MappedTensorFile, one per file
  std::size_t total_ = 0;
  std::size_t mapped_ = 0;
};

/// The deterministic value of element `index` of a tensor initialised with
/// init="random" and `seed` (uniform in [-1, 1)).
double random_value(std::uint64_t seed, std::uint64_t index);

}  // namespace ymlopt
