// `ymlopt generate`: text from a gpt2/llama model folder with a KV cache, run as
// the model's generate workflow (a prefill, then a runtime loop of decode
// steps), the tokens streamed as the loop produces them.
#pragma once
#include <string>
#include <vector>

namespace ymlopt {

int cmd_generate(const std::vector<std::string>& args);

}  // namespace ymlopt
