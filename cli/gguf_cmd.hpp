// `ymlopt export` (a checkpoint as llama.cpp's GGUF) and the GGUF half of
// `ymlopt convert` (GGUF to safetensors).
#pragma once
#include <string>
#include <vector>

namespace ymlopt {
int cmd_export(const std::vector<std::string>& args);
/// `ymlopt convert MODEL.gguf OUT.safetensors`; exit code.
int convert_gguf(const std::string& in, const std::string& out);
}  // namespace ymlopt
