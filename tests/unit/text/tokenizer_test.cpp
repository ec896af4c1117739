// The USE-lite tokenizer: hand-checked cases on a tiny vocabulary (always run),
// and ids compared with the JS reference tokenizer of @energetic-ai/embeddings
// on the real vocabulary (run when YMLOPT_USE_LITE_DIR names the fetched model's
// dist folder: scripts/fetch_use_lite.sh prints it; node must be installed).
#include "text/tokenizer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ymlopt::text::Tokenizer;
using Ids = std::vector<std::int32_t>;

namespace {

Tokenizer tiny(std::vector<Tokenizer::Piece> pieces) {
  std::vector<Tokenizer::Piece> v = {{"\xEF\xBF\xBD", 0}, {"<s>", 0},  {"</s>", 0},
                                     {"extra_token_id_1", 0}, {"extra_token_id_2", 0},
                                     {"extra_token_id_3", 0}};
  for (auto& p : pieces) v.push_back(std::move(p));
  return Tokenizer(std::move(v));
}

TEST(TokenizerTest, ViterbiOnATinyVocabulary) {
  // 6 "▁a", 7 "b", 8 "▁ab", 9 "▁"
  const auto tok = tiny({{"\xE2\x96\x81" "a", -1}, {"b", -2}, {"\xE2\x96\x81" "ab", -2.5},
                         {"\xE2\x96\x81", -3}});
  EXPECT_EQ(tok.encode("ab"), (Ids{8}));         // -2.5 beats ▁a + b = -3
  EXPECT_EQ(tok.encode("a b"), (Ids{6, 9, 7}));  // spaces become ▁
  EXPECT_EQ(tok.encode("xyz"), (Ids{9, 0}));     // unknown code points merge into one 0
  EXPECT_EQ(tok.encode("x\xC3\xA9" "b"), (Ids{9, 0, 7}));
  EXPECT_EQ(tok.encode(""), Ids{});
  EXPECT_EQ(tok.vocab_size(), 10u);
  EXPECT_EQ(tok.piece(7).text, "b");
}

TEST(TokenizerTest, DuplicatedPieceKeepsItsLastId) {
  const auto tok = tiny({{"b", -1}, {"b", -5}});
  EXPECT_EQ(tok.encode("b"), (Ids{0, 7}));  // "▁" is unknown here
}

TEST(TokenizerTest, PreprocessIsNfkcWithWordMarkers) {
  EXPECT_EQ(Tokenizer::preprocess(""), "");
  // "ﬁ" -> "fi", no-break space -> space -> ▁, full-width Ａ -> A; no lowercasing.
  EXPECT_EQ(Tokenizer::preprocess("\xEF\xAC\x81  x\xC2\xA0\xEF\xBC\xA1"),
            "\xE2\x96\x81" "fi" "\xE2\x96\x81\xE2\x96\x81" "x" "\xE2\x96\x81" "A");
  EXPECT_EQ(Tokenizer::preprocess("a\tb\n"), "\xE2\x96\x81" "a\tb\n");  // only U+0020 is marked
  EXPECT_EQ(Tokenizer::preprocess("e\xCC\x81"), "\xE2\x96\x81\xC3\xA9");  // composed
}

TEST(TokenizerTest, BadVocabularyFile) {
  EXPECT_THROW(Tokenizer::from_vocab_json("/nonexistent/vocab.json"), ymlopt::text::TokenizerError);
}

// ---------------------------------------------------------------------------

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);  // UTF-8 passes through
    }
  }
  return out + "\"";
}

std::vector<std::string> sentences() {
  std::string long_text;
  for (int i = 0; i < 40; ++i)
    long_text += "The quick brown fox number " + std::to_string(i) + " jumps over the lazy dog. ";
  return {
      "Hello world.",
      "hello world",
      "HELLO WORLD!!!",
      "The quick brown fox jumps over the lazy dog.",
      "How old are you? I'm 42 years old, and you?",
      "U.S.A. vs. U.K.: 3.14159, $1,000,000 (approx.) -- 50% off; e-mail: a.b@example.com",
      "Die Größe der Straße ist ungewöhnlich.",
      "café au lait, naïve résumé, façade, coöperate",
      "Cafe\xCC\x81 with a combining accent",
      "東京は日本の首都です。",
      "私はリンゴが好きです",
      "안녕하세요 세계",
      "Привет, мир! Как дела?",
      "مرحبا بالعالم",
      "I love pizza \xF0\x9F\x8D\x95\xF0\x9F\x98\x80 and \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7!",
      "",
      " ",
      "   leading and trailing spaces   ",
      "many     spaces\tand\ttabs\nand\nnewlines",
      "\xEF\xAC\x81nancial \xEF\xAC\x82ow \xE2\x91\xA0\xE2\x91\xA1 x\xC2\xB2 \xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93",
      "no\xC2\xA0" "break\xE2\x80\x83" "em space",
      "\xE2\x80\x9D" "5 quotes \xE2\x80\x9C" "like this\xE2\x80\x9D and \xE2\x80\x98" "that\xE2\x80\x99",
      "1234567890 0.5 -17 1e10 2023-11-22 12:34",
      "Supercalifragilisticexpialidocious antidisestablishmentarianism",
      "zzzzqqqxxjjj unknownwordsxyz",
      "\xC2\xBF" "D\xC3\xB3nde est\xC3\xA1 la biblioteca?",
      "Ελληνικά γράμματα",
      "CamelCaseWordsAndSHOUTING",
      "a",
      ".",
      "\xE2\x96\x81 literal marker",
      "ctrl\x01" "char\x7F",
      "bad \xFF\xFE utf8 \xE2\x82 end",
      long_text,
  };
}

TEST(TokenizerTest, MatchesTheJsReferenceOnUseLiteVocabulary) {
  const char* dir = std::getenv("YMLOPT_USE_LITE_DIR");
  if (dir == nullptr || *dir == '\0')
    GTEST_SKIP() << "YMLOPT_USE_LITE_DIR is not set: run scripts/fetch_use_lite.sh and set "
                    "YMLOPT_USE_LITE_DIR to the folder it prints";
  const fs::path dist(dir);
  if (!fs::exists(dist / "vocab.json"))
    GTEST_SKIP() << "YMLOPT_USE_LITE_DIR=" << dir << " holds no vocab.json: run scripts/fetch_use_lite.sh";
  if (std::system("node --version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "node is not installed: the JS reference tokenizer cannot run";

#ifdef YMLOPT_SOURCE_DIR
  const fs::path script = fs::path(YMLOPT_SOURCE_DIR) / "tests/unit/text/tokenize_reference.mjs";
#else
  const fs::path script = fs::path(__FILE__).parent_path() / "tokenize_reference.mjs";
#endif
  ASSERT_TRUE(fs::exists(script)) << script;

  const auto texts = sentences();
  const fs::path tmp = fs::temp_directory_path() / ("ymlopt_tok_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  {
    std::ofstream f(tmp / "sentences.json", std::ios::binary);
    f << "[";
    for (std::size_t i = 0; i < texts.size(); ++i) f << (i ? ",\n" : "\n") << json_string(texts[i]);
    f << "]\n";
  }
  const std::string cmd = "node '" + script.string() + "' '" + dist.string() + "' '" +
                          (tmp / "sentences.json").string() + "' '" + (tmp / "ids.txt").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::vector<Ids> want;
  {
    std::ifstream f(tmp / "ids.txt");
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream ss(line);
      Ids ids;
      for (std::int32_t id; ss >> id;) ids.push_back(id);
      want.push_back(ids);
    }
  }
  fs::remove_all(tmp);
  ASSERT_EQ(want.size(), texts.size());

  const auto tok = Tokenizer::from_vocab_json((dist / "vocab.json").string());
  ASSERT_EQ(tok.vocab_size(), 8000u);
  bool long_seen = false;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i]), want[i]) << "sentence " << i << ": \"" << texts[i] << "\"";
    if (want[i].size() > Tokenizer::kMaxLength) {
      long_seen = true;
      EXPECT_EQ(tok.encode_for_model(texts[i]),
                Ids(want[i].begin(), want[i].begin() + Tokenizer::kMaxLength));
    }
  }
  EXPECT_TRUE(long_seen) << "no sentence is longer than " << Tokenizer::kMaxLength << " tokens";
  EXPECT_EQ(tok.encode("Hello world."), want[0]);
  EXPECT_TRUE(want[15].empty());  // the empty string has no ids
}

}  // namespace
