#pragma once
#include <string>
#include <vector>

namespace ymlopt {
/// `ymlopt embed TEXT...`: USE-lite sentence embeddings (tokenizer + workflow).
int cmd_embed(const std::vector<std::string>& args);
/// Where the shipped workflows are: $YMLOPT_WORKFLOWS, the install's
/// share/ymlopt/workflows, or the source tree's workflows/ (build tree).
std::string workflows_dir();
}  // namespace ymlopt
