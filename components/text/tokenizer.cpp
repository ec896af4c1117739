#include "text/tokenizer.hpp"

#include <fstream>
#include <sstream>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

namespace ymlopt::text {
namespace {

constexpr char32_t kWordMarker = 0x2581;  // "▁"

/// NFKC(utf8) with the word marker added (JS processInput), as code points.
std::u32string process_input(std::string_view utf8) {
  // fromUTF8 replaces ill-formed sequences by U+FFFD (maximal subparts, as Node does).
  const icu::UnicodeString src =
      icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(status);
  if (U_FAILURE(status)) throw TokenizerError(std::string("ICU NFKC is unavailable: ") + u_errorName(status));
  const icu::UnicodeString norm = nfkc->normalize(src, status);
  if (U_FAILURE(status)) throw TokenizerError(std::string("ICU NFKC failed: ") + u_errorName(status));
  std::u32string out;
  if (norm.length() == 0) return out;
  out.reserve(static_cast<std::size_t>(norm.length()) + 1);
  out.push_back(kWordMarker);
  for (int32_t i = 0; i < norm.length(); i = norm.moveIndex32(i, 1)) {
    const char32_t c = static_cast<char32_t>(norm.char32At(i));
    out.push_back(c == U' ' ? kWordMarker : c);
  }
  return out;
}

std::u32string to_code_points(const std::string& utf8) {
  const icu::UnicodeString s =
      icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  std::u32string out;
  for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1))
    out.push_back(static_cast<char32_t>(s.char32At(i)));
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  struct Node {
    std::unordered_map<char32_t, std::int32_t> children;
    bool end = false;
    double score = 0;
    std::int32_t index = 0;
    std::int32_t depth = 0;  // code points from the root
  };
  std::vector<Piece> vocab;
  std::vector<std::int32_t> utf16_length;  // JS string length of each piece
  std::vector<Node> trie{Node{}};

  void insert(const std::u32string& symbols, double score, std::int32_t index) {
    std::int32_t node = 0;
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      auto it = trie[static_cast<std::size_t>(node)].children.find(symbols[i]);
      if (it == trie[static_cast<std::size_t>(node)].children.end()) {
        const auto child = static_cast<std::int32_t>(trie.size());
        Node n;
        n.depth = trie[static_cast<std::size_t>(node)].depth + 1;
        trie.push_back(std::move(n));
        trie[static_cast<std::size_t>(node)].children.emplace(symbols[i], child);
        node = child;
      } else {
        node = it->second;
      }
      if (i == symbols.size() - 1) {
        Node& n = trie[static_cast<std::size_t>(node)];
        n.end = true;  // a duplicated piece keeps its last score and id, as in JS
        n.score = score;
        n.index = index;
      }
    }
  }
};

Tokenizer Tokenizer::from_vocab_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(path + ": invalid JSON: " + e.what());
  }
  if (!j.is_array()) throw TokenizerError(path + ": expected a list of [piece, score] pairs");
  std::vector<Piece> vocab;
  vocab.reserve(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    if (!e.is_array() || e.size() < 2 || !e[0].is_string() || !(e[1].is_number() || e[1].is_null()))
      throw TokenizerError(path + ": entry " + std::to_string(i) + " is not a [piece, score] pair");
    // USE-lite's vocab.json has null scores (":", "://", "▁:)", ...); in the JS
    // `null + best` is `0 + best`, so null is a score of 0 (a very likely piece).
    vocab.push_back({e[0].get<std::string>(), e[1].is_null() ? 0.0 : e[1].get<double>()});
  }
  return Tokenizer(std::move(vocab));
}

Tokenizer::Tokenizer(std::vector<Piece> vocab, int reserved) : impl_(std::make_unique<Impl>()) {
  if (reserved < 0 || static_cast<std::size_t>(reserved) > vocab.size() || vocab.empty())
    throw TokenizerError("tokenizer: the vocabulary must hold the unknown piece and the " +
                         std::to_string(reserved) + " reserved ids");
  impl_->vocab = std::move(vocab);
  for (std::size_t i = 0; i < impl_->vocab.size(); ++i) {
    const auto& text = impl_->vocab[i].text;
    impl_->utf16_length.push_back(icu::UnicodeString::fromUTF8(icu::StringPiece(
        text.data(), static_cast<int32_t>(text.size()))).length());
    if (i >= static_cast<std::size_t>(reserved))
      impl_->insert(to_code_points(text), impl_->vocab[i].score, static_cast<std::int32_t>(i));
  }
  if (impl_->utf16_length[kUnknownId] <= 0)
    throw TokenizerError("tokenizer: the unknown piece (id 0) must not be empty");
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::size_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }

const Tokenizer::Piece& Tokenizer::piece(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->vocab.size())
    throw TokenizerError("tokenizer: id " + std::to_string(id) + " is out of range");
  return impl_->vocab[static_cast<std::size_t>(id)];
}

std::string Tokenizer::preprocess(std::string_view utf8) {
  const std::u32string s = process_input(utf8);
  std::string out;
  icu::UnicodeString u;
  for (const char32_t c : s) u.append(static_cast<UChar32>(c));
  u.toUTF8String(out);
  return out;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view utf8) const {
  const std::u32string symbols = process_input(utf8);
  const std::size_t n = symbols.size();
  const auto& trie = impl_->trie;

  // Candidates by end position, each list in increasing start order.
  struct Candidate {
    std::size_t start;
    double score;
    std::int32_t index;
  };
  std::vector<std::vector<Candidate>> ending(n + 1);
  for (std::size_t i = 0; i < n; ++i) {
    bool matched = false;
    std::int32_t node = 0;
    for (std::size_t k = i; k < n; ++k) {  // JS Trie.commonPrefixSearch
      const auto& children = trie[static_cast<std::size_t>(node)].children;
      const auto it = children.find(symbols[k]);
      if (it == children.end()) break;
      node = it->second;
      const auto& t = trie[static_cast<std::size_t>(node)];
      if (t.end) {
        ending[i + static_cast<std::size_t>(t.depth)].push_back({i, t.score, t.index});
        matched = true;
      }
    }
    if (!matched) ending[i + 1].push_back({i, 0.0, kUnknownId});
  }

  std::vector<double> best(n + 1, 0.0);
  std::vector<std::int32_t> words(n + 1, 0);
  for (std::size_t end = 0; end <= n; ++end) {
    for (const auto& c : ending[end]) {
      const double score = c.score + best[c.start];
      if (best[end] == 0 || score >= best[end]) {
        best[end] = score;
        words[end] = c.index;
      }
    }
  }

  std::vector<std::int32_t> results;  // last piece first
  for (std::int64_t it = static_cast<std::int64_t>(n); it > 0;) {
    const std::int32_t id = words[static_cast<std::size_t>(it)];
    results.push_back(id);
    it -= impl_->utf16_length[static_cast<std::size_t>(id)];
  }
  std::vector<std::int32_t> merged;
  merged.reserve(results.size());
  bool previous_unknown = false;
  for (const std::int32_t id : results) {
    if (!(previous_unknown && id == kUnknownId)) merged.push_back(id);
    previous_unknown = id == kUnknownId;
  }
  return {merged.rbegin(), merged.rend()};
}

std::vector<std::int32_t> Tokenizer::encode_for_model(std::string_view utf8) const {
  auto ids = encode(utf8);
  if (ids.size() > kMaxLength) ids.resize(kMaxLength);
  return ids;
}

}  // namespace ymlopt::text
