// What one rank knows of the co-methods that run on other ranks (a unite on
// rank groups, rank_groups.hpp): their publishes go to this rank's board,
// their states (busy, idle, finished) and their unites' stops are kept here.
// Messages travel through RankGroups::post/poll.
//
//   Peers peers;
//   const auto run = peers.begin(u, n, &comethods.stop_flag());
//   groups.post(Peers::state_message(u, run, i, PeerState::idle));   // on the co-method's leader
//   for (auto& m : groups.poll()) peers.apply(m, board);             // elsewhere
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ymlopt/unite/board.hpp"
#include "ymlopt/unite/exchange.hpp"

namespace ymlopt::unite {

class Peers {
 public:
  /// A run of distributed unite `u` (n co-methods, stopped through `stop`)
  /// starts; returns which run of it this is (a loop may run it again).
  std::int32_t begin(std::int32_t u, std::size_t n, std::atomic<bool>* stop);
  /// Its co-methods on this rank ended: stop messages for it are dropped.
  void unhook(std::int32_t u);
  /// Its end: the states of its current run are forgotten.
  void end(std::int32_t u);
  /// The current run of unite `u` (0 before its first).
  std::int32_t run(std::int32_t u) const;
  /// The states posted for the current run of unite `u`, by co-method; false
  /// when nothing is known of it.
  bool states(std::int32_t u, std::vector<PeerState>& out) const;
  /// Applies one message of another rank: a publish goes to `board`.
  void apply(const std::vector<std::byte>& msg, UniteBoard& board);

  static std::vector<std::byte> publish_message(const std::string& channel, const std::string& who, const Entry& e);
  static std::vector<std::byte> state_message(std::int32_t u, std::int32_t run, std::int32_t comethod, PeerState st);
  static std::vector<std::byte> stop_message(std::int32_t u);

 private:
  mutable std::mutex mu_;
  std::map<std::int32_t, std::atomic<bool>*> stops_;  // running unites' stop flags
  // by (unite, run): their co-methods' states, as posted
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<PeerState>> states_;
  std::map<std::int32_t, std::int32_t> runs_;  // how many times each unite has started
};

}  // namespace ymlopt::unite
