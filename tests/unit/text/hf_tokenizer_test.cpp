// tokenizer.json pieces whose behaviour the transformers.js comparison
// (tests/e2e/hf_tokenizers.sh) does not reach: the Split behaviours and
// Metaspace's split, where we keep the Rust library's semantics, BPE's word
// suffixes, and the errors. Expected ids worked out by hand from the Rust
// library's documented rules.
#include <gtest/gtest.h>

#include <string>

#include "text/hf_tokenizer.hpp"

namespace {

using ymlopt::text::HfTokenizer;
using ymlopt::text::TokenizerError;
using Ids = std::vector<std::int32_t>;

/// A WordLevel-like BPE (no merges) over the given tokens, with `pre` as its pre-tokenizer.
HfTokenizer words(const std::string& pre, const std::vector<std::string>& vocab) {
  std::string v;
  for (std::size_t i = 0; i < vocab.size(); ++i) v += (i ? ", \"" : "\"") + vocab[i] + "\": " + std::to_string(i);
  return HfTokenizer::from_json(
      R"({"model": {"type": "BPE", "unk_token": "?", "vocab": {)" + v + R"(}, "merges": []}, "pre_tokenizer": )" + pre + "}",
      "", "test");
}

TEST(HfTokenizerTest, SplitBehaviours) {
  // ignore_merges: a pre-tokenized word in the vocabulary is one id, so the ids show the words
  const std::vector<std::string> vocab = {"?", "a", "-", "b", "a-", "-b", "--"};
  auto split = [&](const std::string& behavior) {
    std::string v;
    for (std::size_t i = 0; i < vocab.size(); ++i) v += (i ? ", \"" : "\"") + vocab[i] + "\": " + std::to_string(i);
    return HfTokenizer::from_json(R"({"model": {"type": "BPE", "unk_token": "?", "ignore_merges": true, "vocab": {)" + v +
                                      R"(}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"String": "-"},
                                      "behavior": ")" + behavior + R"("}})",
                                  "", "test");
  };
  // "a--b": matches "-" at 1 and 2
  EXPECT_EQ(split("Removed").encode("a--b", false), (Ids{1, 3}));
  EXPECT_EQ(split("Isolated").encode("a--b", false), (Ids{1, 2, 2, 3}));
  // a match joins the piece before (after) it unless that piece is a match itself
  EXPECT_EQ(split("MergedWithPrevious").encode("a--b", false), (Ids{4, 2, 3}));  // "a-" "-" "b"
  EXPECT_EQ(split("MergedWithNext").encode("a--b", false), (Ids{1, 2, 5}));      // "a" "-" "-b"
  EXPECT_EQ(split("Contiguous").encode("a--b", false), (Ids{1, 6, 3}));         // "a" "--" "b"
  EXPECT_THROW(split("Sideways"), TokenizerError);
}

TEST(HfTokenizerTest, MetaspaceSplitsBeforeEachReplacement) {
  const auto t = HfTokenizer::from_json(
      R"({"model": {"type": "BPE", "ignore_merges": true, "vocab": {"▁a": 0, "▁b": 1, "▁a▁b": 2}, "merges": []},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}})",
      "", "test");
  EXPECT_EQ(t.encode("a b", false), (Ids{0, 1}));
  const auto joined = HfTokenizer::from_json(
      R"({"model": {"type": "BPE", "ignore_merges": true, "vocab": {"▁a": 0, "▁b": 1, "▁a▁b": 2}, "merges": []},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}})",
      "", "test");
  EXPECT_EQ(joined.encode("a b", false), (Ids{2}));
}

TEST(HfTokenizerTest, BpeMergesByRankThenLeftmost) {
  // "aaa": the pair (a, a) occurs twice; the leftmost merges first -> "aa" "a"
  const auto t = HfTokenizer::from_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "aa": 1, "b": 2, "ab": 3, "aab": 4},
          "merges": [["a", "b"], "a a", "aa b"]}})",
      "", "test");
  EXPECT_EQ(t.encode("aaa", false), (Ids{1, 0}));
  // "aab": (a, b) has rank 0, before (a, a): "a" "ab", and "aa b" never applies
  EXPECT_EQ(t.encode("aab", false), (Ids{0, 3}));
  EXPECT_EQ(t.decode(Ids{0, 3}, false), "a ab");  // no decoder: tokens joined by spaces
}

TEST(HfTokenizerTest, EndOfWordSuffix) {
  const auto t = HfTokenizer::from_json(
      R"({"model": {"type": "BPE", "end_of_word_suffix": "</w>", "vocab": {"l": 0, "o": 1, "lo": 2, "o</w>": 3, "lo</w>": 4},
          "merges": ["l o</w>"]}, "pre_tokenizer": {"type": "WhitespaceSplit"}, "decoder": {"type": "BPEDecoder", "suffix": "</w>"}})",
      "", "test");
  EXPECT_EQ(t.encode("lo lo", false), (Ids{4, 4}));
  EXPECT_EQ(t.decode(Ids{4, 4}, false), "lo lo");
}

TEST(HfTokenizerTest, AddedTokensStripAndTemplates) {
  const auto t = HfTokenizer::from_json(
      R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "hi": 4}},
          "added_tokens": [{"id": 1, "content": "[CLS]", "special": true}, {"id": 2, "content": "[SEP]", "special": true},
                           {"id": 3, "content": "[MASK]", "special": true, "lstrip": true, "rstrip": true}],
          "pre_tokenizer": {"type": "WhitespaceSplit"},
          "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 1], "sep": ["[SEP]", 2]}})",
      "", "test");
  EXPECT_EQ(t.encode("hi [MASK] hi", false), (Ids{4, 3, 4}));
  EXPECT_EQ(t.encode("hi", true), (Ids{1, 4, 2}));
  EXPECT_EQ(t.encode("what", false), (Ids{0}));
  EXPECT_EQ(t.decode(Ids{1, 4, 2}, true), "hi");
}

TEST(HfTokenizerTest, ErrorsNameTheComponentAndTheFile) {
  auto message = [](const std::string& json) {
    try {
      HfTokenizer::from_json(json, "", "dir/tokenizer.json");
    } catch (const TokenizerError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"model": {"type": "WordLevel", "vocab": {}}})"),
            "dir/tokenizer.json: model type 'WordLevel' is not supported (BPE, WordPiece, Unigram)");
  EXPECT_NE(message(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": {"type": "Precompiled"}})")
                .find("normalizer type 'Precompiled' is not supported"),
            std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})").find("is not 'A B'"),
            std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}}})")
                .find("does not compile"),
            std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})").find("id 0 is given twice"),
            std::string::npos);
  EXPECT_NE(message("{\"model\": ").find("dir/tokenizer.json: line 1, column"), std::string::npos);
  // a template token outside the vocabulary, with no unk token to stand for it
  EXPECT_NE(message(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}},
                                           {"Sequence": {"id": "A"}}]}})")
                .find("token '<s>' is not in the vocabulary"),
            std::string::npos);
}

TEST(HfTokenizerTest, JavaScriptWhitespaceAndDigitsInPatterns) {
  // \s is JavaScript's (U+FEFF and U+000B in, U+0085 out), \d is ASCII only
  const auto t = words(R"({"type": "Split", "pattern": {"Regex": "\\s+|\\d+"}, "behavior": "Removed"})",
                       {"?", "x", "\u0085", "\u0663"});
  EXPECT_EQ(t.encode("x\xef\xbb\xbfx\x0bx", false), (Ids{1, 1, 1}));
  EXPECT_EQ(t.encode("x\xc2\x85x", false), (Ids{1, 2, 1}));        // NEL is not \s in JavaScript
  EXPECT_EQ(t.encode("x\xd9\xa3x12x", false), (Ids{1, 3, 1, 1}));  // Arabic-Indic 3 is not \d
}

}  // namespace
