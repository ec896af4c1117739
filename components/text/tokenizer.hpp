// The USE-lite (Universal Sentence Encoder lite) tokenizer: a C++ port of the
// SentencePiece-style tokenizer of @energetic-ai/embeddings 0.2.0
// (lib/tokenizer.ts, lib/trie.ts), which is the one of
// @tensorflow-models/universal-sentence-encoder. It mirrors the JS exactly:
//
//   0. vocab.json scores that are null count as 0 (JS: null + x == x).
//   1. NFKC-normalise the text (String.prototype.normalize("NFKC"); here ICU).
//      No lowercasing, no other cleaning.
//   2. If the result is not empty: prefix "▁" (U+2581) and replace every
//      U+0020 space by "▁" (runs of spaces stay runs of "▁").
//   3. Split into code points; pieces 6..7999 of vocab.json go into a trie
//      (ids 0..5 are reserved: 0 "�" unknown, 1 "<s>", 2 "</s>", 3..5 extra;
//      a duplicated piece keeps its last id and score).
//   4. Viterbi over piece scores: at each start position, every vocab piece
//      that is a prefix is a candidate; where none is, the one code point is
//      an unknown piece (id 0, score 0). For each end position, candidates are
//      visited by increasing start; one replaces the best so far when the best
//      is still exactly 0 or when its total score is >= the best (ties go to
//      the later candidate).
//   5. Backtrack from the end, stepping back by the UTF-16 length of the chosen
//      piece's text; consecutive unknown ids are merged into one.
//
// No start/end ids, no padding, no truncation: USE-lite's graph takes the ids
// as a sparse [batch, position] tensor and itself drops positions >= 128
// (kMaxLength; see docs/USE_LITE.md). The empty string gives no ids.
//
//   auto tok = ymlopt::text::Tokenizer::from_vocab_json(dist + "/vocab.json");
//   std::vector<int32_t> ids = tok.encode("Hello world.");  // {▁Hello, ▁world, .}
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ymlopt::text {

/// A vocabulary or input error; what() starts with the file path when there is one.
struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  struct Piece {
    std::string text;  // UTF-8
    double score = 0;  // log-probability (higher is better)
  };

  static constexpr std::int32_t kUnknownId = 0;  // "�"; also every unknown code point
  static constexpr std::int32_t kStartId = 1;    // "<s>"  (never produced by encode)
  static constexpr std::int32_t kEndId = 2;      // "</s>" (never produced by encode)
  static constexpr int kReservedSymbols = 6;     // ids 0..5 are never matched
  static constexpr std::size_t kMaxLength = 128; // positions the USE-lite graph keeps

  /// Reads vocab.json: a JSON list of [piece, score] pairs (8000 for USE-lite).
  static Tokenizer from_vocab_json(const std::string& path);

  /// A tokenizer over `vocab` (piece i has id i); ids below `reserved` are never matched.
  explicit Tokenizer(std::vector<Piece> vocab, int reserved = kReservedSymbols);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// The ids of `utf8`, exactly as the JS Tokenizer.encode. Invalid UTF-8 is
  /// decoded with U+FFFD replacement characters first (as Node does).
  std::vector<std::int32_t> encode(std::string_view utf8) const;

  /// encode() cut to the first kMaxLength ids: what the USE-lite graph uses.
  std::vector<std::int32_t> encode_for_model(std::string_view utf8) const;

  /// The text the Viterbi search runs on (steps 1-2 above), as UTF-8.
  static std::string preprocess(std::string_view utf8);

  std::size_t vocab_size() const;
  const Piece& piece(std::int32_t id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ymlopt::text
