// The tokenizer.json models: BPE (merges by rank, leftmost first; byte
// fallback; ignore_merges), WordPiece (greedy longest match with the
// continuing-subword prefix) and Unigram (Viterbi over the pieces' scores).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <queue>

#include "text/hf_components.hpp"

namespace ymlopt::text::hf {

namespace {

/// The vocabulary of a {"token": id} object; ids must be distinct and >= 0.
Vocab vocab_of_object(const json& v, const std::string& where) {
  if (!v.is_object()) fail(where, "model.vocab is not an object of token -> id");
  Vocab out;
  out.ids.reserve(v.size());
  for (const auto& [tok, id] : v.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > (1 << 30))
      fail(where, "model.vocab: '" + tok + "' has id " + id.dump() + ", not an integer in [0, 2^30]");
    const auto i = id.get<std::int32_t>();
    if (std::size_t(i) >= out.tokens.size()) out.tokens.resize(std::size_t(i) + 1);
    if (!out.tokens[std::size_t(i)].empty()) fail(where, "model.vocab: id " + std::to_string(i) + " is given twice");
    out.tokens[std::size_t(i)] = tok;
    out.ids.emplace(tok, i);
  }
  return out;
}

// ------------------------------------------------------------------ BPE

/// The merges as an open-addressing table of (left id, right id) -> (rank,
/// merged id): the BPE loop's one hot lookup (std::unordered_map's buckets
/// made it a third of Llama 2's tokenizing time).
class MergeTable {
 public:
  struct Merge {
    std::int32_t rank = -1, merged = -1;
  };
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, Merge{});
  }
  /// Sets (a, b)'s merge (a repeated pair keeps the last).
  void set(std::int32_t a, std::int32_t b, Merge m) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    const std::uint64_t k = key(a, b);
    std::size_t i = slot(k);
    while (keys_[i] != kEmpty && keys_[i] != k) i = (i + 1) & (keys_.size() - 1);
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = k, vals_[i] = m;
  }
  const Merge* find(std::int32_t a, std::int32_t b) const {
    const std::uint64_t k = key(a, b);
    for (std::size_t i = slot(k);; i = (i + 1) & (keys_.size() - 1)) {
      if (keys_[i] == k) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);  // ids are >= 0: never a key
  static std::uint64_t key(std::int32_t a, std::int32_t b) { return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b); }
  std::size_t slot(std::uint64_t k) const {
    k ^= k >> 33, k *= 0xff51afd7ed558ccdull, k ^= k >> 33;  // MurmurHash3's finalizer
    return std::size_t(k) & (keys_.size() - 1);
  }
  void grow() {
    std::vector<std::uint64_t> keys = std::move(keys_);
    std::vector<Merge> vals = std::move(vals_);
    reserve(std::max<std::size_t>(16, keys.size()));
    size_ = 0;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) set(std::int32_t(keys[i] >> 32), std::int32_t(keys[i] & 0xffffffffu), vals[i]);
  }
  std::vector<std::uint64_t> keys_;
  std::vector<Merge> vals_;
  std::size_t size_ = 0;
};

class Bpe final : public Model {
 public:
  Bpe(const json& j, const std::string& where) {
    type = "BPE";
    vocab = vocab_of_object(j.value("vocab", json::object()), where);
    unk_token = str_of(j, "unk_token", "");
    byte_fallback_ = bool_of(j, "byte_fallback", false);
    fuse_unk = bool_of(j, "fuse_unk", false);
    ignore_merges_ = bool_of(j, "ignore_merges", false);
    suffix_ = str_of(j, "end_of_word_suffix", "");
    continuing_suffix_ = str_of(j, "continuing_subword_suffix", "");
    const auto m = j.find("merges");
    if (m == j.end() || !m->is_array()) fail(where, "model.merges is not a list");
    merges_.reserve(m->size());
    std::int32_t rank = 0;
    for (const auto& e : *m) {
      std::string a, b;
      if (e.is_string()) {  // "a b" (as transformers.js splits it: a third part is dropped)
        const std::string s = e.get<std::string>();
        const auto sp = s.find(' ');
        if (sp == std::string::npos) fail(where, "model.merges[" + std::to_string(rank) + "] '" + s + "' is not 'A B'");
        a = s.substr(0, sp), b = s.substr(sp + 1, s.find(' ', sp + 1) - sp - 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>(), b = e[1].get<std::string>();
      } else {
        fail(where, "model.merges[" + std::to_string(rank) + "] is neither 'A B' nor [A, B]");
      }
      const std::int32_t ia = intern(a), ib = intern(b), iab = intern(a + b);
      merges_.set(ia, ib, {rank++, iab});  // a repeated pair keeps its last rank
    }
  }

  void encode(const std::vector<std::string>& words, std::vector<std::string>& out) const override {
    for (const std::string& w : words) {
      if (ignore_merges_ && vocab.ids.count(w)) {
        out.push_back(w);
        continue;
      }
      for (std::string& t : bpe(w)) {
        if (vocab.ids.count(t)) {
          out.push_back(std::move(t));
          continue;
        }
        if (byte_fallback_) {
          std::vector<std::string> bytes;
          for (const unsigned char c : t) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", c);
            bytes.emplace_back(buf);
          }
          if (std::all_of(bytes.begin(), bytes.end(), [&](const std::string& b) { return vocab.ids.count(b) > 0; })) {
            for (auto& b : bytes) out.push_back(std::move(b));
            continue;
          }
        }
        if (unk_token.empty()) fail(where, "token '" + t + "' is not in the vocabulary and the model has no unk_token");
        out.push_back(unk_token);
      }
    }
  }

 private:
  std::int32_t intern(const std::string& s) {
    const auto [it, fresh] = sym_id_.emplace(s, std::int32_t(sym_str_.size()));
    if (fresh) sym_str_.push_back(s);
    return it->second;
  }

  /// The merged symbols of one word: the lowest-ranked adjacent pair first,
  /// the leftmost of equal ranks (a heap of (rank, position) with lazy
  /// deletion). Symbols are interned ids; a character no merge names gets a
  /// negative id of its own and never merges.
  std::vector<std::string> bpe(const std::string& word) const {
    if (word.empty()) return {};
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (auto it = cache_.find(word); it != cache_.end()) return it->second;
    }
    std::vector<std::string> loose;  // characters no merge names, id -(k + 1)
    std::vector<std::int32_t> sym;
    const std::u32string chars = utf8_to_u32(word);
    for (std::size_t k = 0; k < chars.size(); ++k) {
      std::string c;
      append_utf8(c, chars[k]);
      if (k + 1 == chars.size()) c += suffix_;
      const auto it = sym_id_.find(c);
      if (it != sym_id_.end()) {
        sym.push_back(it->second);
      } else {
        loose.push_back(std::move(c));
        sym.push_back(-std::int32_t(loose.size()));
      }
    }
    const std::size_t n = sym.size();
    std::vector<std::size_t> next(n), prev(n);
    for (std::size_t i = 0; i < n; ++i) next[i] = i + 1, prev[i] = i - 1;  // prev[0] wraps: never read
    std::vector<char> alive(n, 1);
    using Item = std::tuple<std::int32_t, std::size_t, std::int32_t, std::int32_t>;  // rank, left, left id, right id
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    auto push = [&](std::size_t i) {
      if (i >= n || next[i] >= n || sym[i] < 0 || sym[next[i]] < 0) return;
      if (const MergeTable::Merge* m = merges_.find(sym[i], sym[next[i]])) heap.emplace(m->rank, i, sym[i], sym[next[i]]);
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const auto [rank, i, a, b] = heap.top();
      heap.pop();
      // stale: a side has merged since (a merge changes the left symbol's id) or is gone
      if (!alive[i] || next[i] >= n || sym[i] != a || sym[next[i]] != b) continue;
      const std::size_t j = next[i];
      sym[i] = merges_.find(a, b)->merged;
      alive[j] = 0;
      next[i] = next[j];
      if (next[i] < n) prev[next[i]] = i;
      if (i > 0) push(prev[i]);
      push(i);
    }
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n; i = next[i])
      out.push_back(sym[i] >= 0 ? sym_str_[std::size_t(sym[i])] : loose[std::size_t(-sym[i] - 1)]);
    if (!continuing_suffix_.empty())
      for (std::size_t i = 0; i + 1 < out.size(); ++i) out[i] += continuing_suffix_;
    if (word.size() < 256) {
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (cache_.size() >= 10000) cache_.clear();
      cache_.emplace(word, out);
    }
    return out;
  }

  std::unordered_map<std::string, std::int32_t> sym_id_;  // every string a merge names
  std::vector<std::string> sym_str_;
  MergeTable merges_;
  bool byte_fallback_ = false, ignore_merges_ = false;
  std::string suffix_, continuing_suffix_;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<std::string>> cache_;
};

// ------------------------------------------------------------------ WordPiece

class WordPiece final : public Model {
 public:
  WordPiece(const json& j, const std::string& where) {
    type = "WordPiece";
    vocab = vocab_of_object(j.value("vocab", json::object()), where);
    unk_token = str_of(j, "unk_token", "[UNK]");
    prefix_ = str_of(j, "continuing_subword_prefix", "##");
    fuse_unk = bool_of(j, "fuse_unk", false);
    const auto m = j.find("max_input_chars_per_word");
    max_chars_ = m != j.end() && m->is_number_unsigned() ? m->get<std::size_t>() : 100;
  }

  void encode(const std::vector<std::string>& words, std::vector<std::string>& out) const override {
    for (const std::string& w : words) {
      const std::u32string chars = utf8_to_u32(w);
      if (chars.size() > max_chars_) {
        out.push_back(unk_token);
        continue;
      }
      std::vector<std::string> pieces;
      bool bad = false;
      for (std::size_t start = 0; start < chars.size();) {
        std::size_t end = chars.size();
        std::string hit;
        for (; start < end; --end) {
          std::string s = start > 0 ? prefix_ : std::string();
          for (std::size_t k = start; k < end; ++k) append_utf8(s, chars[k]);
          if (vocab.ids.count(s)) {
            hit = std::move(s);
            break;
          }
        }
        if (hit.empty()) {
          bad = true;
          break;
        }
        pieces.push_back(std::move(hit));
        start = end;
      }
      if (bad) out.push_back(unk_token);
      else out.insert(out.end(), pieces.begin(), pieces.end());
    }
  }

 private:
  std::string prefix_;
  std::size_t max_chars_ = 100;
};

// ------------------------------------------------------------------ Unigram

class Unigram final : public Model {
 public:
  Unigram(const json& j, const std::string& where) {
    type = "Unigram";
    fuse_unk = true;
    const auto v = j.find("vocab");
    if (v == j.end() || !v->is_array() || v->empty()) fail(where, "model.vocab is not a list of [piece, score]");
    for (const auto& e : *v) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        fail(where, "model.vocab[" + std::to_string(vocab.tokens.size()) + "] is not [piece, score]");
      const std::string piece = e[0].get<std::string>();
      vocab.ids.emplace(piece, std::int32_t(vocab.tokens.size()));
      vocab.tokens.push_back(piece);
      scores_.push_back(e[1].get<double>());
    }
    const auto u = j.find("unk_id");
    if (u == j.end() || !u->is_number_unsigned() || u->get<std::size_t>() >= scores_.size())
      fail(where, "model.unk_id is not an index of model.vocab");
    unk_id_ = u->get<std::int32_t>();
    unk_token = vocab.tokens[std::size_t(unk_id_)];
    scores_[std::size_t(unk_id_)] = *std::min_element(scores_.begin(), scores_.end()) - 10.0;
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i)
      if (!vocab.tokens[i].empty()) max_len_ = std::max(max_len_, utf8_to_u32(vocab.tokens[i]).size());
  }

  void encode(const std::vector<std::string>& words, std::vector<std::string>& out) const override {
    for (const std::string& w : words) {
      const std::u32string chars = utf8_to_u32(w);
      const std::size_t n = chars.size();
      // best[i]: the best score of chars[0, i) and the piece that ends it
      std::vector<double> best(n + 1, -std::numeric_limits<double>::infinity());
      std::vector<std::size_t> from(n + 1, 0);
      best[0] = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (best[i] == -std::numeric_limits<double>::infinity()) continue;
        std::string s;
        bool single = false;
        for (std::size_t len = 1; len <= max_len_ && i + len <= n; ++len) {
          append_utf8(s, chars[i + len - 1]);
          const auto it = vocab.ids.find(s);
          if (it == vocab.ids.end()) continue;
          single = single || len == 1;
          const double sc = best[i] + scores_[std::size_t(it->second)];
          if (sc > best[i + len]) best[i + len] = sc, from[i + len] = i;
        }
        if (!single && best[i] + scores_[std::size_t(unk_id_)] > best[i + 1])
          best[i + 1] = best[i] + scores_[std::size_t(unk_id_)], from[i + 1] = i;
      }
      std::vector<std::string> pieces;
      for (std::size_t e = n; e > 0; e = from[e]) {
        std::string s;
        for (std::size_t k = from[e]; k < e; ++k) append_utf8(s, chars[k]);
        pieces.push_back(std::move(s));
      }
      std::reverse(pieces.begin(), pieces.end());
      for (auto& p : pieces) out.push_back(vocab.ids.count(p) ? std::move(p) : unk_token);
    }
  }

 private:
  std::vector<double> scores_;
  std::int32_t unk_id_ = 0;
  std::size_t max_len_ = 1;
};

}  // namespace

std::unique_ptr<Model> make_model(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "no \"model\" object");
  const std::string type = str_of(j, "type", "");
  std::unique_ptr<Model> m;
  if (type == "BPE" || (type.empty() && j.contains("merges"))) m = std::make_unique<Bpe>(j, where);
  else if (type == "WordPiece") m = std::make_unique<WordPiece>(j, where);
  else if (type == "Unigram") m = std::make_unique<Unigram>(j, where);
  else fail(where, "model type '" + type + "' is not supported (BPE, WordPiece, Unigram)");
  m->where = where;
  return m;
}

}  // namespace ymlopt::text::hf
