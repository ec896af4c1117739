// Entries on the wire (exchange.hpp) and the Pareto gather (pareto.hpp).
#include <algorithm>
#include <cmath>

#include "ymlopt/unite/exchange.hpp"
#include "ymlopt/unite/pareto.hpp"

namespace ymlopt::unite {

void put_entry(WireOut& w, const std::string& who, const Entry& e) {
  w.put_string(who);
  w.put(std::uint64_t(e.scores.size()));
  for (double v : e.scores) w.put(v);
  w.put(std::uint64_t(e.tensors.size()));
  for (const auto& t : e.tensors) w.put_bytes(t.data(), t.size());
}

std::pair<std::string, Entry> get_entry(WireIn& in) {
  std::pair<std::string, Entry> out;
  out.first = in.get_string();
  for (auto n = in.get<std::uint64_t>(); n > 0; --n) out.second.scores.push_back(in.get<double>());
  for (auto n = in.get<std::uint64_t>(); n > 0; --n) out.second.tensors.push_back(in.get_bytes());
  return out;
}

std::optional<BoardEntry> pareto_best(const UniteBoard& board, std::string_view name) {
  const auto all = board.entries(name);
  if (all.empty()) return std::nullopt;
  std::vector<const std::vector<double>*> sv;
  for (const auto& e : all) sv.push_back(&payload_as<Entry>(e).scores);
  const size_t n = all.size(), m = sv[0]->size();
  auto dominates = [&](size_t a, size_t b) {
    bool strictly = false;
    for (size_t j = 0; j < m; ++j) {
      if ((*sv[a])[j] > (*sv[b])[j]) return false;
      strictly = strictly || (*sv[a])[j] < (*sv[b])[j];
    }
    return strictly;
  };
  std::vector<int> rank(n, -1);
  for (int r = 0, left = int(n); left > 0; ++r) {
    std::vector<size_t> front;
    for (size_t a = 0; a < n; ++a) {
      if (rank[a] >= 0) continue;
      bool dominated = false;
      for (size_t b = 0; b < n && !dominated; ++b) dominated = b != a && rank[b] < 0 && dominates(b, a);
      if (!dominated) front.push_back(a);
    }
    for (size_t a : front) rank[a] = r;
    left -= int(front.size());
  }
  std::vector<double> lo(m, INFINITY), hi(m, -INFINITY);
  for (size_t a = 0; a < n; ++a)
    for (size_t j = 0; j < m; ++j) lo[j] = std::min(lo[j], (*sv[a])[j]), hi[j] = std::max(hi[j], (*sv[a])[j]);
  size_t best = 0;
  double best_sum = INFINITY;
  for (size_t a = 0; a < n; ++a) {
    double sum = 0;
    for (size_t j = 0; j < m; ++j) sum += hi[j] > lo[j] ? ((*sv[a])[j] - lo[j]) / (hi[j] - lo[j]) : 0.0;
    if (rank[a] < rank[best] || (rank[a] == rank[best] && sum < best_sum)) best = a, best_sum = sum;
  }
  return all[best];
}

}  // namespace ymlopt::unite
