// `ymlopt tokenize`: text to ids and back with a Hugging Face tokenizer.json.
#pragma once
#include <string>
#include <vector>

namespace ymlopt {

int cmd_tokenize(const std::vector<std::string>& args);

}  // namespace ymlopt
