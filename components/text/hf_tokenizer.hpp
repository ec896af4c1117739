// Hugging Face tokenizer.json: normalizers, pre-tokenizers, the BPE,
// WordPiece and Unigram models, added and special tokens, post-processor
// templates and decoders, with the behaviour of transformers.js (the
// @lenml/tokenizers build of it), which the tests compare against id for id.
//
//   auto tok = ymlopt::text::HfTokenizer::from_file("llama3/tokenizer.json");
//   std::vector<int32_t> ids = tok.encode("Hello world", /*add_special_tokens=*/true);  // <|begin_of_text|> Hello ĠWorld
//   std::string text = tok.decode(ids, /*skip_special_tokens=*/true);
//
// A component the file names that is not implemented is an error naming it
// and the file, never a silent approximation. Where transformers.js departs
// from the Rust library (Split's merged behaviours, Metaspace's split), the
// Rust semantics are kept: docs/ARCHITECTURE.md lists them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.hpp"  // TokenizerError

namespace ymlopt::text {

class HfTokenizer {
 public:
  /// Reads tokenizer.json, and tokenizer_config.json when it sits beside it
  /// (clean_up_tokenization_spaces, legacy, bos/eos). Throws TokenizerError("PATH: ...").
  static HfTokenizer from_file(const std::string& path);
  /// The same from the files' text; `where` names them in errors ("" config: none).
  static HfTokenizer from_json(std::string_view tokenizer_json, std::string_view config_json, const std::string& where);

  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;
  ~HfTokenizer();

  /// The ids of `utf8` (invalid UTF-8 becomes U+FFFD first); with
  /// add_special_tokens, the post-processor's template adds its special tokens.
  std::vector<std::int32_t> encode(std::string_view utf8, bool add_special_tokens) const;
  /// The text of `ids`; throws TokenizerError on an id outside the vocabulary.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// One past the largest id (the model's vocabulary and the added tokens).
  std::size_t vocab_size() const;
  std::optional<std::int32_t> bos_id() const;
  std::optional<std::int32_t> eos_id() const;
  /// "BPE", "WordPiece" or "Unigram".
  const std::string& model_type() const;

 private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ymlopt::text
