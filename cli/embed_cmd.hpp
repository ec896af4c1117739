#pragma once
#include <string>
#include <vector>

namespace ymlopt {
/// `ymlopt embed TEXT...`: USE-lite sentence embeddings (tokenizer + workflow).
/// Sentences come from the arguments, then from the lines of --file; --weights
/// runs another weights file (e.g. a compressed one from `ymlopt optimize`),
/// --out writes all vectors as an f32 [sentences, 512] .npy. The workflow is
/// compiled once per distinct token count and run once per sentence.
///
///   ymlopt embed --file austen.txt --weights opt/use_lite.opt.safetensors --out comp.npy
/// Exit codes: 0 ok, 1 runtime error (no model, unreadable file), 2 usage error.
int cmd_embed(const std::vector<std::string>& args);
/// Where the shipped workflows are: $YMLOPT_WORKFLOWS, the install's
/// share/ymlopt/workflows, or the source tree's workflows/ (build tree).
std::string workflows_dir();
}  // namespace ymlopt
