// Where co-methods run on one process's workers (mapping="contexts"): each
// gets a run of consecutive workers of the pool, wrapping around, so that
// co-methods share workers when they ask for more than there are.
//
//   auto ws = share_workers({0, 1, 2, 3}, {2, 0, 3});  // {{0,1}, {}, {2,3,0}}
#pragma once

#include <cstdint>
#include <vector>

namespace ymlopt::unite {

/// The workers of each co-method: want[i] of them (0: none, the co-method
/// runs elsewhere; -1: an equal share, pool / (number of co-methods), at
/// least 1; more than the pool: the whole pool), taken in turn from `pool`.
std::vector<std::vector<int>> share_workers(const std::vector<int>& pool, const std::vector<std::int64_t>& want);

}  // namespace ymlopt::unite
