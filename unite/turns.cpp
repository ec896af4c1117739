// Turns (see turns.hpp).
#include "ymlopt/unite/turns.hpp"

namespace ymlopt::unite {

Turns::Turns(std::vector<std::int64_t> first) : time_(std::move(first)), retired_(time_.size(), false) {}

std::size_t Turns::next() const {
  std::size_t best = time_.size();
  for (std::size_t j = 0; j < time_.size(); ++j)
    if (!retired_[j] && (best == time_.size() || time_[j] < time_[best])) best = j;
  return best;
}

void Turns::wait(std::size_t i, const std::atomic<bool>& stop) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return next() == i || stop.load(); });
}

void Turns::pass(std::size_t i, std::int64_t after, bool retire) {
  std::lock_guard lock(mu_);
  if (retire) retired_[i] = true;
  else time_[i] += after;
  cv_.notify_all();
}

}  // namespace ymlopt::unite
