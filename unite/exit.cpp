// The exit policies (exit.hpp) and the co-methods' run (comethods.hpp).
#include <cmath>
#include <thread>

#include "ymlopt/unite/comethods.hpp"
#include "ymlopt/unite/exit.hpp"

namespace ymlopt::unite {

const char* exit_name(Exit e) { return e == Exit::first ? "first" : e == Exit::all ? "all" : "budget"; }

Verdict choose_winner(std::span<const Ending> endings, Exit exit, bool maximize, bool outer_stopped) {
  const size_t n = endings.size();
  Verdict v;
  std::int32_t& win = v.winner;
  for (size_t i = 0; i < n; ++i)
    if (endings[i].converged_done() && (win < 0 || endings[i].time_s < endings[size_t(win)].time_s)) win = std::int32_t(i);
  auto better = [&](double a, double b) { return std::isnan(b) || (maximize ? a > b : a < b); };
  auto failed = [&](size_t i) { return endings[i].outcome == Outcome::failed; };
  // exit first/all: a co-method that converged is the answer; when none did
  // (each ran out of loop iterations) the run cannot tell
  v.unconverged = win < 0 && exit != Exit::budget && !outer_stopped;
  for (size_t i = 0; i < n && v.unconverged; ++i) v.unconverged = endings[i].outcome != Outcome::stopped;
  if (win < 0)
    for (size_t i = 0; i < n; ++i)
      if (!failed(i) && !std::isnan(endings[i].best) && (win < 0 || better(endings[i].best, endings[size_t(win)].best)))
        win = std::int32_t(i);
  if (win < 0)
    for (size_t i = 0; i < n; ++i)
      if (!failed(i) && (win < 0 || endings[i].time_s < endings[size_t(win)].time_s)) win = std::int32_t(i);
  return v;
}

CoMethods::CoMethods(std::size_t n, Exit exit) : exit_(exit), endings_(n), ended_(n, 0) {}

void CoMethods::start(const std::vector<char>& mine, const std::function<void(std::size_t)>& comethod) {
  std::vector<std::thread> threads;
  threads.reserve(endings_.size());
  for (std::size_t i = 0; i < endings_.size(); ++i)
    if (mine.empty() || mine[i]) threads.emplace_back([&comethod, i] { comethod(i); });
  for (auto& t : threads) t.join();
}

bool CoMethods::claim(std::size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool first = claimed_ < 0;
  if (first) claimed_ = std::int32_t(i);
  if (exit_ == Exit::first) stop_.store(true);
  return first;
}

std::int32_t CoMethods::claimed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return claimed_;
}

bool CoMethods::finish(std::size_t i, const Ending& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    endings_[i] = e;
    ended_[i] = 1;
  }
  if (!e.converged_done()) return false;
  claim(i);
  return exit_ == Exit::first;
}

bool CoMethods::ended(std::size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_[i] != 0;
}

Ending CoMethods::ending(std::size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return endings_[i];
}

Verdict CoMethods::verdict(bool maximize, bool outer_stopped) const {
  std::lock_guard<std::mutex> lock(mu_);
  return choose_winner(endings_, exit_, maximize, outer_stopped);
}

}  // namespace ymlopt::unite
