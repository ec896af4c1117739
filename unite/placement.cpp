// share_workers (see placement.hpp).
#include "ymlopt/unite/placement.hpp"

#include <algorithm>

namespace ymlopt::unite {

std::vector<std::vector<int>> share_workers(const std::vector<int>& pool, const std::vector<std::int64_t>& want) {
  const int nw = int(pool.size());
  std::vector<std::vector<int>> out(want.size());
  if (nw == 0) return out;
  int next = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0) continue;
    const int n = want[i] > 0 ? int(std::min<std::int64_t>(want[i], nw)) : std::max(1, nw / int(want.size()));
    for (int k = 0; k < n; ++k) out[i].push_back(pool[size_t((next + k) % nw)]);
    next = (next + n) % nw;
  }
  return out;
}

std::vector<std::int32_t> rank_group(std::int32_t k, std::int32_t n, int size, bool spread) {
  std::vector<std::int32_t> ranks;
  if (!spread) ranks.push_back(k % size);
  else
    for (std::int32_t q = k * size / n; q < (k + 1) * size / n; ++q) ranks.push_back(q);
  return ranks;
}

}  // namespace ymlopt::unite
