// The pieces of a tokenizer.json pipeline (private to components/text):
//
//   hf_components.cpp  regexes, normalizers, pre-tokenizers, decoders
//   hf_models.cpp      the BPE, WordPiece and Unigram models
//   hf_tokenizer.cpp   loading, added tokens, templates, encode/decode
//
// Strings are UTF-8 throughout; ICU does the Unicode work (normalization
// forms, case mapping, the regexes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace ymlopt::text::hf {

using json = nlohmann::json;

/// Throws TokenizerError(where + ": " + what).
[[noreturn]] void fail(const std::string& where, const std::string& what);
/// j[key] when it is a string (a bool), else `dflt`.
std::string str_of(const json& j, const char* key, const std::string& dflt = "");
bool bool_of(const json& j, const char* key, bool dflt);

/// A compiled pattern: a tokenizer.json {"Regex": ...} in JavaScript's
/// dialect (\s, \d, \w as JS defines them), or a {"String": ...} literal.
class Pattern {
 public:
  Pattern(const json& spec, const std::string& where);
  ~Pattern();
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;
  /// The [begin, end) byte ranges of the non-empty matches in `s`, left to right.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const;
  /// `s` with every match replaced by `with`.
  std::string replace_all(std::string_view s, std::string_view with) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  /// Splits (and rewrites) each piece; `section` is the index of the text's
  /// section between added tokens (Metaspace's prepend_scheme "first").
  virtual std::vector<std::string> split(const std::string& piece, int section) const = 0;
  std::vector<std::string> apply(const std::vector<std::string>& pieces, int section) const;
};

struct Decoder {
  virtual ~Decoder() = default;
  virtual std::vector<std::string> chain(std::vector<std::string> tokens) const = 0;
};

/// What a decoder needs of the tokenizer: the added tokens' contents
/// (ByteLevel passes them through as text).
struct DecodeContext {
  std::vector<std::string> added;
};

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where);
std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where, const DecodeContext& ctx);
/// transformers.js's clean_up_tokenization (" ." -> ".", " n't" -> "n't", ...).
std::string clean_up_tokenization(std::string s);
/// Metaspace as LlamaTokenizer with legacy=false builds it (replacement U+2581, prefix on the first section).
std::unique_ptr<PreTokenizer> make_llama_metaspace();

/// GPT-2's byte-to-character table: byte b is shown as code point byte_char(b).
char32_t byte_char(std::uint8_t b);
/// The byte a byte-level character stands for, or -1.
int char_byte(char32_t c);

// ------------------------------------------------------------------ UTF-8

/// The code points of valid UTF-8 `s` (the callers pass ICU-made strings).
std::u32string utf8_to_u32(std::string_view s);
void append_utf8(std::string& out, char32_t c);
/// `s` with invalid sequences replaced by U+FFFD, as a JavaScript TextDecoder does.
std::string sanitize_utf8(std::string_view s);
/// JavaScript's String.prototype.trim / trimStart / trimEnd whitespace.
bool is_js_space(char32_t c);
std::string js_trim(std::string_view s, bool left, bool right);

// ------------------------------------------------------------------ models

struct Vocab {
  std::unordered_map<std::string, std::int32_t> ids;
  std::vector<std::string> tokens;  // by id ("" where an id has no token)
  std::int32_t id(const std::string& t) const {
    const auto it = ids.find(t);
    return it == ids.end() ? -1 : it->second;
  }
};

struct Model {
  virtual ~Model() = default;
  /// Appends the token strings of the pre-tokenized words.
  virtual void encode(const std::vector<std::string>& words, std::vector<std::string>& out) const = 0;
  Vocab vocab;
  std::string unk_token;  // "" when none
  std::string type;
  std::string where;      // the file, for errors
  bool fuse_unk = false;  // runs of unknown tokens become one (Unigram always; BPE/WordPiece per the file)
};

std::unique_ptr<Model> make_model(const json& j, const std::string& where);

}  // namespace ymlopt::text::hf
