// gather mode="pareto": the entry of lowest Pareto rank over several scores.
#pragma once

#include <optional>
#include <string_view>

#include "ymlopt/unite/board.hpp"

namespace ymlopt::unite {

/// The entry (payload: Entry) under `name` of lowest Pareto rank (rank 0:
/// dominated by no other; an entry dominated only by rank-0 ones has rank 1,
/// ...), every score minimised; ties go to the smallest sum of scores scaled to
/// their range over the entries. Nothing when none was published.
std::optional<BoardEntry> pareto_best(const UniteBoard& board, std::string_view name);

}  // namespace ymlopt::unite
