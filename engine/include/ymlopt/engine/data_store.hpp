#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// Host memory of every tensor of a DAG: allocated (64-byte aligned), then
/// initialised from `init=` (seeded, independent of tiling) or loaded from
/// `src=`. Tiles are strided views into their tensor.
///
///   DataStore store(dag);                       // throws std::runtime_error
///   TensorView v = store.view(task.bindings[0].ref);
class DataStore {
 public:
  explicit DataStore(const Dag& dag);
  DataStore(const DataStore&) = delete;
  DataStore& operator=(const DataStore&) = delete;

  void* base(std::int32_t data) const { return buffers_[size_t(data)].get(); }
  /// View of a whole tensor or of one tile (shape included).
  TensorView view(const DataRef& ref) const;
  std::size_t total_bytes() const { return total_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  const Dag& dag_;
  std::vector<std::unique_ptr<void, Free>> buffers_;
  std::size_t total_ = 0;
};

/// The deterministic value of element `index` of a tensor initialised with
/// init="random" and `seed` (uniform in [-1, 1)).
double random_value(std::uint64_t seed, std::uint64_t index);

}  // namespace ymlopt
