// libFuzzer target: any bytes as a Hugging Face tokenizer.json (up to a NUL
// byte; what follows it is the text to encode, else a fixed sample). Loading
// must end with a tokenizer or a TokenizerError; a tokenizer then encodes the
// text with and without its special tokens and decodes the ids back: never a
// crash, a sanitizer report or a hang (a regex that backtracks without end
// stops with an error). Built and replayed like fuzz_workflow.cpp:
//
//   build-fuzz/bin/ymlopt_fuzz_tokenizer -max_total_time=600 /tmp/tcorpus tests/fuzz/corpus_tokenizer
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "text/hf_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos
                                    ? std::string_view("Hello, world! naïve 日本 👩‍👩‍👧 <s> 123  \t\n x")
                                    : all.substr(nul + 1);
  try {
    const auto tok = ymlopt::text::HfTokenizer::from_json(json, "", "fuzz/tokenizer.json");
    for (const bool special : {false, true}) {
      const auto ids = tok.encode(text, special);
      (void)tok.decode(ids, !special);
    }
  } catch (const ymlopt::text::TokenizerError&) {
  }
  return 0;
}
