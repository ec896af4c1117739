#include "tokenize_cmd.hpp"

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/hf_tokenizer.hpp"
#include "usage_error.hpp"

namespace po = boost::program_options;

namespace ymlopt {

namespace {

const char* kUsage =
    "usage: ymlopt tokenize --tokenizer tokenizer.json [--special] TEXT...     ids of each TEXT, one JSON array per line\n"
    "       ymlopt tokenize --tokenizer tokenizer.json [--special] --lines FILE   the same for each line of FILE\n"
    "       ymlopt tokenize --tokenizer tokenizer.json [--special] --json FILE    ... of each string of a JSON list\n"
    "       ymlopt tokenize --tokenizer tokenizer.json --decode [--skip-special] IDS...\n"
    "                                 the text of each IDS (a JSON array), one JSON string per line\n"
    "--model DIR stands for --tokenizer DIR/tokenizer.json (a Hugging Face model folder).\n"
    "tokenizer_config.json beside tokenizer.json is read when present.\n";

/// "[1, 2, 3]" -> ids; throws UsageError naming the argument.
std::vector<std::int32_t> parse_ids(const std::string& s) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(s);
  } catch (const nlohmann::json::exception&) {
    throw UsageError("tokenize --decode: '" + s + "' is not a JSON array of ids");
  }
  if (!j.is_array()) throw UsageError("tokenize --decode: '" + s + "' is not a JSON array of ids");
  std::vector<std::int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < INT32_MIN || v.get<std::int64_t>() > INT32_MAX)
      throw UsageError("tokenize --decode: " + v.dump() + " in '" + s + "' is not an id");
    ids.push_back(v.get<std::int32_t>());
  }
  return ids;
}

std::string json_ids(const std::vector<std::int32_t>& ids) {
  std::string o = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) o += (i ? ", " : "") + std::to_string(ids[i]);
  return o + "]";
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& args) {
  std::string path, lines, json_file, model;
  std::vector<std::string> inputs;
  bool special = false, decode = false, skip_special = false, stats = false;
  po::options_description d("options");
  d.add_options()("help,h", "show this help")("tokenizer,t", po::value(&path), "tokenizer.json")(
      "model", po::value(&model), "a model folder holding tokenizer.json")(
      "special", po::bool_switch(&special), "add the post-processor template's special tokens (BOS, EOS, CLS ...)")(
      "decode", po::bool_switch(&decode), "ids to text")(
      "skip-special", po::bool_switch(&skip_special), "with --decode: leave the special tokens out")(
      "lines", po::value(&lines), "tokenize each line of this file (UTF-8)")(
      "json", po::value(&json_file), "tokenize each string of this JSON list (texts with newlines or NUL)")(
      "stats", po::bool_switch(&stats), "print bytes, ids and MB/s on stderr")(
      "input", po::value(&inputs)->composing(), "texts (or id arrays with --decode)");
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << kUsage << d;
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("tokenize: ") + e.what());
  }
  if (!path.empty() && !model.empty()) throw UsageError("tokenize: give --tokenizer FILE or --model DIR, not both");
  if (!model.empty()) path = model + "/tokenizer.json";
  if (path.empty()) throw UsageError("tokenize: --tokenizer FILE (or --model DIR) is required");
  const int sources = int(!inputs.empty()) + int(!lines.empty()) + int(!json_file.empty());
  if (sources > 1) throw UsageError("tokenize: give one of TEXT..., --lines FILE and --json FILE");
  if (sources == 0) throw UsageError("tokenize: nothing to tokenize (TEXT..., --lines FILE or --json FILE)");
  if (decode && inputs.empty()) throw UsageError("tokenize: --decode takes IDS arguments");
  if (skip_special && !decode) throw UsageError("tokenize: --skip-special is for --decode");
  if (special && decode) throw UsageError("tokenize: --special is for encoding; --decode keeps the ids given");
  const text::HfTokenizer tok = text::HfTokenizer::from_file(path);
  if (!lines.empty()) {
    std::ifstream in(lines, std::ios::binary);
    if (!in) throw std::runtime_error(lines + ": cannot open");
    for (std::string line; std::getline(in, line);) inputs.push_back(line);
  }
  if (!json_file.empty()) {
    std::ifstream in(json_file, std::ios::binary);
    if (!in) throw std::runtime_error(json_file + ": cannot open");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(json_file + ": not a JSON list of strings (" + e.what() + ")");
    }
    if (!j.is_array()) throw std::runtime_error(json_file + ": not a JSON list of strings");
    for (const auto& v : j) {
      if (!v.is_string()) throw std::runtime_error(json_file + ": " + v.dump().substr(0, 80) + " is not a string");
      inputs.push_back(v.get<std::string>());
    }
  }
  std::ostringstream out;
  std::size_t bytes = 0, count = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& s : inputs) {
    if (decode) {
      out << nlohmann::json(tok.decode(parse_ids(s), skip_special)).dump(-1, ' ', false,
                                                                          nlohmann::json::error_handler_t::replace)
          << "\n";
    } else {
      const auto ids = tok.encode(s, special);
      bytes += s.size(), count += ids.size();
      out << json_ids(ids) << "\n";
    }
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << out.str();
  if (stats && !decode)
    std::fprintf(stderr, "tokenize: %zu bytes, %zu texts, %zu ids in %.3f s (%.2f MB/s, %s model)\n", bytes,
                 inputs.size(), count, sec, sec > 0 ? double(bytes) / sec / 1e6 : 0.0, tok.model_type().c_str());
  return 0;
}

}  // namespace ymlopt
