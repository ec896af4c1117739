// The pass `smooth` (smooth.cpp; SmoothQuant / AWQ scales, see ymlopt/optimizer/smooth.hpp),
// as registered in passes.cpp:
//   {"smooth", "...", {...}, pass_smooth, true, check_smooth}
#pragma once
#include "ymlopt/optimizer/passes.hpp"

namespace ymlopt::opt::detail {

/// Runs `smooth` (options mode, alpha, grid, bits, group, symmetric, match).
void pass_smooth(PassContext& ctx, const PassSpec& s);
/// Checks its option values (PassError), before any work.
void check_smooth(const PassSpec& s);

}  // namespace ymlopt::opt::detail
