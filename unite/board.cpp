// UniteBoard (see board.hpp).
#include "ymlopt/unite/board.hpp"

#include <cmath>
#include <stdexcept>

namespace ymlopt::unite {

UniteBoard::UniteBoard(bool keep_log) : keep_log_(keep_log), t0_(std::chrono::steady_clock::now()) {}

double UniteBoard::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void UniteBoard::publish(std::string_view name, std::string_view publisher, double score, std::any payload) {
  if (std::isnan(score))
    throw std::invalid_argument("UniteBoard::publish: NaN score for '" + std::string(name) + "' from '" +
                                std::string(publisher) + "'");
  auto shared = std::make_shared<const std::any>(std::move(payload));  // allocated outside the lock
  const double t = elapsed();
  std::lock_guard lock(mu_);
  auto by_name = entries_.find(name);
  if (by_name == entries_.end()) by_name = entries_.emplace(std::string(name), decltype(entries_)::mapped_type{}).first;
  auto it = by_name->second.find(publisher);
  if (it == by_name->second.end()) it = by_name->second.emplace(std::string(publisher), BoardEntry{}).first;
  BoardEntry& e = it->second;
  e.publisher = std::string(publisher);
  e.score = score;
  ++e.version;
  e.time_s = t;
  e.payload = std::move(shared);
  if (keep_log_) log_.push_back({BoardEvent::Kind::publish, t, std::string(name), std::string(publisher), "", score});
}

std::optional<BoardEntry> UniteBoard::gather_best(std::string_view name, Better better, std::string_view reader) {
  const double t = elapsed();
  std::lock_guard lock(mu_);
  std::optional<BoardEntry> best;
  if (auto by_name = entries_.find(name); by_name != entries_.end())
    for (const auto& [who, e] : by_name->second) {
      if (!best) {
        best = e;
        continue;
      }
      const bool wins = better == Better::min ? e.score < best->score : e.score > best->score;
      if (wins || (e.score == best->score && e.time_s < best->time_s)) best = e;
    }
  if (keep_log_ && !reader.empty())
    log_.push_back({BoardEvent::Kind::gather, t, std::string(name), std::string(reader),
                    best ? best->publisher : std::string(), best ? best->score : 0.0});
  return best;
}

std::vector<BoardEntry> UniteBoard::entries(std::string_view name) const {
  std::lock_guard lock(mu_);
  std::vector<BoardEntry> out;
  if (auto by_name = entries_.find(name); by_name != entries_.end())
    for (const auto& [who, e] : by_name->second) out.push_back(e);
  return out;
}

std::vector<BoardEvent> UniteBoard::log() const {
  std::lock_guard lock(mu_);
  return log_;
}

}  // namespace ymlopt::unite
