// Locating errors in text files that plugins and readers parse themselves
// (JSON configs, tokenizer files, shard indexes): "line L, column C" of a byte
// offset, and a JSON library message without its internal tag.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

namespace ymlopt {

/// "line L, column C" of byte offset `at` in `text` (both 1-based).
inline std::string line_column(std::string_view text, std::size_t at) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

/// A JSON library error's message without its "[json.exception.NAME.ID] " tag.
inline std::string json_reason(const std::exception& e) {
  const std::string w = e.what();
  const auto tag = w.find("] ");
  return w.rfind("[json.exception.", 0) == 0 && tag != std::string::npos ? w.substr(tag + 2) : w;
}

}  // namespace ymlopt
