// What co-methods exchange: an Entry (the packed rows of each published
// tensor and every score) on a UniteBoard, and the messages that carry
// publishes, states and stops to the other ranks when co-methods run on rank
// groups (see peers.hpp).
//
//   Entry e;  e.tensors.push_back(bytes);  e.scores = {0.3};
//   WireOut w;  put_entry(w, "a", e);          // the publisher and its entry
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ymlopt/unite/wire.hpp"

namespace ymlopt::unite {

/// A published entry: the packed rows of each tensor, and every score
/// (scores[0] ranks it on the board).
struct Entry {
  std::vector<std::vector<std::byte>> tensors;
  std::vector<double> scores;
};

/// The first byte of a message between ranks.
enum class Message : std::uint8_t { publish = 1, stop = 2, state = 3 };

/// A co-method's state as the other ranks see it (Message::state).
enum class PeerState : std::int8_t { busy = 0, idle = 1, finished = 2 };

void put_entry(WireOut& w, const std::string& who, const Entry& e);
std::pair<std::string, Entry> get_entry(WireIn& in);

}  // namespace ymlopt::unite
