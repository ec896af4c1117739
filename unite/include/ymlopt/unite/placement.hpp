// Where co-methods run: on one process's workers (mapping="contexts"), each
// gets a run of consecutive workers of the pool, wrapping around, so that
// co-methods share workers when they ask for more than there are; on the
// ranks of an MPI job, co-method k of a top-level unite gets a rank group.
//
//   auto ws = share_workers({0, 1, 2, 3}, {2, 0, 3});  // {{0,1}, {}, {2,3,0}}
//   auto rs = rank_group(1, 2, 4, true);                // {2, 3}
#pragma once

#include <cstdint>
#include <vector>

namespace ymlopt::unite {

/// The workers of each co-method: want[i] of them (0: none, the co-method
/// runs elsewhere; -1: an equal share, pool / (number of co-methods), at
/// least 1; more than the pool: the whole pool), taken in turn from `pool`.
std::vector<std::vector<int>> share_workers(const std::vector<int>& pool, const std::vector<std::int64_t>& want);

/// The ranks of co-method k of n on `size` ranks: rank k % size, or with
/// `spread` (more ranks than co-methods) a block of consecutive ranks, the
/// ranks shared out evenly.
std::vector<std::int32_t> rank_group(std::int32_t k, std::int32_t n, int size, bool spread);

}  // namespace ymlopt::unite
