// FairShare (see fair_share.hpp).
#include "ymlopt/unite/fair_share.hpp"

#include <algorithm>
#include <chrono>

namespace ymlopt::unite {

FairShare::FairShare(std::size_t n, std::size_t workers) : served_us_(n, 0.0), live_(n, 1), idle_(n, 0), workers_(workers) {}

int FairShare::priority(std::size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_[i]) return -5;
  int rank = 0;
  for (std::size_t j = 0; j < served_us_.size(); ++j)
    if (j != i && competes(j) && (served_us_[j] < served_us_[i] || (served_us_[j] == served_us_[i] && j < i))) ++rank;
  return -std::min(rank, 5);
}

void FairShare::set_idle(std::size_t i, bool idle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_[i] == char(idle)) return;
    idle_[i] = idle;
  }
  cv_.notify_all();
}

void FairShare::wait_turn(std::size_t i) {
  std::unique_lock<std::mutex> lock(mu_);
  // a cap on each wait, should a co-method stay behind outside its parts
  cv_.wait_for(lock, std::chrono::seconds(2), [&] { return may_go(i); });
}

void FairShare::add(std::size_t i, double us) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    served_us_[i] += us;
  }
  cv_.notify_all();
}

void FairShare::leave(std::size_t i) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_[i] = 0;
  }
  cv_.notify_all();
}

bool FairShare::may_go(std::size_t i) const {
  std::size_t live = 0, behind = 0;  // live co-methods at work, and those of them that have had less time
  for (std::size_t j = 0; j < served_us_.size(); ++j) {
    live += competes(j);
    if (j != i && competes(j) && served_us_[j] < served_us_[i]) ++behind;
  }
  return live <= workers_ || behind < workers_;
}

}  // namespace ymlopt::unite
