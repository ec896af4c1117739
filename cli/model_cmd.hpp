#pragma once
#include <string>
#include <vector>

namespace ymlopt {
/// `ymlopt model init|info ...`: seeded checkpoints with real architecture shapes.
int cmd_model(const std::vector<std::string>& args);
}  // namespace ymlopt
