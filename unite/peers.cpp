// Peers (see peers.hpp).
#include "ymlopt/unite/peers.hpp"

#include <algorithm>

namespace ymlopt::unite {

std::int32_t Peers::begin(std::int32_t u, std::size_t n, std::atomic<bool>* stop) {
  std::lock_guard<std::mutex> lock(mu_);
  stops_[u] = stop;
  const std::int32_t run = ++runs_[u];
  auto& v = states_[{u, run}];
  v.resize(std::max(v.size(), n), PeerState::busy);
  return run;
}

void Peers::unhook(std::int32_t u) {
  std::lock_guard<std::mutex> lock(mu_);
  stops_.erase(u);
}

void Peers::end(std::int32_t u) {
  std::lock_guard<std::mutex> lock(mu_);
  states_.erase({u, runs_[u]});  // (nothing of this run arrives after unite_end)
}

std::int32_t Peers::run(std::int32_t u) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(u);
  return it == runs_.end() ? 0 : it->second;
}

bool Peers::states(std::int32_t u, std::vector<PeerState>& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = runs_.find(u);
  auto it = states_.find({u, r == runs_.end() ? 0 : r->second});
  if (it == states_.end()) return false;
  out = it->second;
  return true;
}

void Peers::apply(const std::vector<std::byte>& msg, UniteBoard& board) {
  WireIn in(msg);
  const auto kind = in.get<Message>();
  if (kind == Message::publish) {
    const std::string channel = in.get_string();
    auto [who, e] = get_entry(in);
    const double score = e.scores.at(0);
    board.publish(channel, who, score, std::move(e));
  } else if (kind == Message::state) {
    // (a rank ahead may post for the unite's next run before this one starts it)
    const auto u = in.get<std::int32_t>(), run = in.get<std::int32_t>();
    const auto i = size_t(in.get<std::int32_t>());
    const auto st = in.get<PeerState>();
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = states_[{u, run}];
    if (v.size() <= i) v.resize(i + 1, PeerState::busy);
    v[i] = st;
  } else if (kind == Message::stop) {
    const auto u = in.get<std::int32_t>();
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = stops_.find(u); it != stops_.end()) *it->second = true;
  }
}

std::vector<std::byte> Peers::publish_message(const std::string& channel, const std::string& who, const Entry& e) {
  WireOut w;
  w.put(Message::publish);
  w.put_string(channel);
  put_entry(w, who, e);
  return w.take();
}

std::vector<std::byte> Peers::state_message(std::int32_t u, std::int32_t run, std::int32_t comethod, PeerState st) {
  WireOut w;
  w.put(Message::state);
  w.put(u), w.put(run), w.put(comethod), w.put(st);
  return w.take();
}

std::vector<std::byte> Peers::stop_message(std::int32_t u) {
  WireOut w;
  w.put(Message::stop);
  w.put(u);
  return w.take();
}

}  // namespace ymlopt::unite
