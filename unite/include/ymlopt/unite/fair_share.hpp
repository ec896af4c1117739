// mapping="fair": equal shares of worker time for co-methods sharing workers.
//
// The worker time each co-method of a unite has had. Before
// each part a co-method's tasks get a StarPU priority from its rank (the least
// served the highest: 0, -1, ... down to -5, StarPU's default lowest), and one
// "prio" context over the pool runs them, so that N co-methods on fewer workers
// get equal shares of worker time, as if each had a core, whatever the size of
// their tasks (shared: the workers serve the co-methods' parts in turn, so a
// co-method of short parts gets as many parts done as one of long parts).
// Priorities only order tasks that are ready together; with more live
// co-methods than workers (two on one worker: each has one part in flight, so
// they would alternate), a co-method also waits before a part while as many live
// co-methods as there are workers have had less worker time than it (wait_turn):
// the W least served of them go on W workers. The least served never waits, and time is added as parts end (a nested unite's parts to every
// enclosing co-method), so the waits always end. A co-method whose last part
// reported `idle` = 1 (it waits for the others' results: compress.search_step
// with nothing left to try) holds no one back and gets the lowest priority
// until a part of it reports otherwise.
//
//   FairShare f(3, 1);      // 3 co-methods on 1 worker
//   f.wait_turn(i);         // before co-method i's part
//   f.add(i, busy_us);      // after it
//   f.leave(i);             // when co-method i ends (or runs on another rank)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace ymlopt::unite {

class FairShare {
 public:
  /// n co-methods on `workers` workers.
  FairShare(std::size_t n, std::size_t workers);
  /// The StarPU priority of co-method i's next part (0 for the least served, down to -5).
  int priority(std::size_t i);
  /// Co-method i's last part reported `idle` (it waits for the others' results).
  void set_idle(std::size_t i, bool idle);
  /// Blocks before co-method i's part while it is ahead (at most 2 s).
  void wait_turn(std::size_t i);
  /// Adds `us` µs of worker time to co-method i.
  void add(std::size_t i, double us);
  /// Co-method i has ended (or runs on another rank).
  void leave(std::size_t i);

 private:
  bool competes(std::size_t j) const { return live_[j] && !idle_[j]; }
  bool may_go(std::size_t i) const;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<double> served_us_;
  std::vector<char> live_, idle_;
  std::size_t workers_;
};

}  // namespace ymlopt::unite
