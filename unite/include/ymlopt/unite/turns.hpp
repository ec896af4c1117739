// Exchanges in a reproducible order: co-methods take turns in the order they
// would have on dedicated, equally fast cores, with time counted in a unit of
// work of their own (matvecs for MERAM). The next turn is the running
// co-method whose next exchange comes at the earliest time (ties: the lower
// index); the work between exchanges still runs concurrently.
//
//   Turns t({5, 7, 10});               // co-method i's first exchange at time m_i
//   t.wait(i, stop);                   // blocks until it is i's turn (or stop is set)
//   ... exchange ...
//   t.pass(i, 5, false);               // its next exchange 5 units later
//   t.pass(i, 0, true);                // it has ended: it leaves the rotation
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ymlopt::unite {

class Turns {
 public:
  explicit Turns(std::vector<std::int64_t> first);
  /// Blocks until it is co-method i's turn or `stop` is set (checked when a turn passes).
  void wait(std::size_t i, const std::atomic<bool>& stop);
  /// Ends co-method i's turn: its next exchange comes `after` units later,
  /// or (retire) it leaves the rotation.
  void pass(std::size_t i, std::int64_t after, bool retire);

 private:
  std::size_t next() const;  // under mu_; size() when every co-method has retired

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::int64_t> time_;  // each co-method's next exchange
  std::vector<bool> retired_;
};

}  // namespace ymlopt::unite
