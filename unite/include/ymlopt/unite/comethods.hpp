// The co-methods of one unite while they run: one thread each, the stop flag
// they all poll, and how each ended (for the exit policy, exit.hpp). The
// caller's function runs a whole co-method (its steps, publishes and gathers);
// this class knows nothing of what a co-method computes.
//
//   CoMethods run(3, Exit::first);
//   run.start({}, [&](size_t i) {
//     while (!run.stopping() && step(i)) {}      // a co-method's steps
//     run.finish(i, {Outcome::done, true, score, clock()});  // exit first: stops the others
//   });
//   Verdict v = run.verdict(false, false);
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "ymlopt/unite/exit.hpp"

namespace ymlopt::unite {

class CoMethods {
 public:
  CoMethods(std::size_t n, Exit exit);

  /// Runs comethod(i) for every i with mine[i] set (every i when `mine` is
  /// empty), one thread each, and returns when all have returned. comethod
  /// must not throw.
  void start(const std::vector<char>& mine, const std::function<void(std::size_t)>& comethod);

  /// The flag every co-method polls (also set from outside: another rank's stop).
  std::atomic<bool>& stop_flag() { return stop_; }
  bool stopping() const { return stop_.load(); }
  void stop() { stop_.store(true); }

  /// Co-method i converged. The first claim wins (true); under exit first it
  /// stops everyone.
  bool claim(std::size_t i);
  /// The first co-method that claimed, or -1.
  std::int32_t claimed() const;

  /// Co-method i ended as `e` (a second call overwrites: another rank's report).
  /// Under exit first a converged ending claims and stops everyone; returns
  /// whether this ending stops the others.
  bool finish(std::size_t i, const Ending& e);
  /// Whether co-method i has ended.
  bool ended(std::size_t i) const;
  Ending ending(std::size_t i) const;
  std::size_t size() const { return endings_.size(); }

  /// The exit policy's verdict on the endings (choose_winner).
  Verdict verdict(bool maximize, bool outer_stopped) const;

 private:
  Exit exit_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<Ending> endings_;
  std::vector<char> ended_;
  std::int32_t claimed_ = -1;
};

}  // namespace ymlopt::unite
