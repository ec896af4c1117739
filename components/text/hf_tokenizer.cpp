#include "text/hf_tokenizer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ymlopt/parse_position.hpp"
#include "text/hf_components.hpp"

namespace ymlopt::text {

using hf::json;

namespace {

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool lstrip = false, rstrip = false, special = false;
};

/// Post-processing: the template's special tokens around the sequence.
struct Template {
  std::vector<std::string> before, after;  // special tokens (strings) around sequence A
  bool present = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse(std::string_view text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    hf::fail(where, line_column(text, e.byte ? e.byte - 1 : 0) + ": not valid JSON");
  } catch (const json::exception& e) {  // a number out of range
    hf::fail(where, "not valid JSON: " + json_reason(e));
  }
}

/// A special token of tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::string config_token(const json& c, const char* key) {
  const auto it = c.find(key);
  if (it == c.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

/// The template of a TemplateProcessing, BertProcessing or RobertaProcessing
/// (a Sequence: the last one that adds tokens; ByteLevel adds none).
Template make_template(const json& j, const std::string& where) {
  Template t;
  if (j.is_null()) return t;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return t;
  if (type == "Sequence") {
    for (const auto& p : j.value("processors", json::array()))
      if (Template q = make_template(p, where); q.present) t = q;
    return t;
  }
  t.present = true;
  if (type == "TemplateProcessing") {
    const auto single = j.find("single");
    if (single == j.end() || !single->is_array()) hf::fail(where, "TemplateProcessing without a \"single\" list");
    bool seen = false;
    for (const auto& item : *single) {
      if (item.contains("Sequence")) {
        if (item["Sequence"].value("id", "A") != "A") hf::fail(where, "TemplateProcessing.single names sequence B");
        seen = true;
      } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id") &&
                 item["SpecialToken"]["id"].is_string()) {
        (seen ? t.after : t.before).push_back(item["SpecialToken"]["id"].get<std::string>());
      } else {
        hf::fail(where, "TemplateProcessing.single item " + item.dump() + " is neither a Sequence nor a SpecialToken");
      }
    }
    return t;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto token = [&](const char* k) {
      const auto it = j.find(k);
      if (it == j.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
        hf::fail(where, type + " without its \"" + k + "\" [token, id]");
      return (*it)[0].get<std::string>();
    };
    t.before = {token("cls")};
    t.after = {token("sep")};
    return t;
  }
  hf::fail(where, "post-processor type '" + type +
                      "' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
}

}  // namespace

struct HfTokenizer::Impl {
  std::string where;
  std::unique_ptr<hf::Normalizer> normalizer;
  std::unique_ptr<hf::PreTokenizer> pre;
  std::unique_ptr<hf::Model> model;
  std::unique_ptr<hf::Decoder> decoder;
  Template post;
  std::vector<AddedToken> added;
  std::map<std::string, std::size_t, std::less<>> added_by_content;
  std::set<std::string, std::less<>> special;  // contents skipped by decode(skip_special_tokens)
  hf::Vocab vocab;  // the model's and the added tokens
  std::int32_t unk_id = -1;
  bool clean_up = true;
  bool llama_non_legacy = false;
  std::string end_of_word_suffix;
  std::optional<std::int32_t> bos, eos;

  std::vector<std::string> encode_text(const std::string& text) const;
  void fuse_unknown(std::vector<std::string>& tokens) const;
  std::int32_t id_of(const std::string& token) const;
};

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;
HfTokenizer::~HfTokenizer() = default;

HfTokenizer HfTokenizer::from_file(const std::string& path) {
  const std::string text = read_text(path);
  const auto cfg = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::string config;
  if (std::filesystem::exists(cfg)) config = read_text(cfg.string());
  return from_json(text, config, path);
}

HfTokenizer HfTokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json, const std::string& where) {
  const json j = parse(tokenizer_json, where);
  if (!j.is_object()) hf::fail(where, "a tokenizer.json is a JSON object");
  const json cfg = config_json.empty() ? json::object() : parse(config_json, where + " (tokenizer_config.json)");
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;
  t.where = where;
  t.model = hf::make_model(j.value("model", json()), where);
  t.vocab = t.model->vocab;
  const auto at = j.find("added_tokens");
  if (at != j.end() && !at->is_null()) {
    if (!at->is_array()) hf::fail(where, "added_tokens is not a list");
    for (const auto& a : *at) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id") ||
          !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0 || a["id"].get<std::int64_t>() > (1 << 30))
        hf::fail(where, "added_tokens item " + a.dump().substr(0, 200) + " has no string content and id in [0, 2^30]");
      AddedToken tok{a["content"].get<std::string>(), a["id"].get<std::int32_t>(), a.value("lstrip", false),
                     a.value("rstrip", false), a.value("special", false)};
      if (tok.content.empty()) hf::fail(where, "added token " + std::to_string(tok.id) + " is empty");
      t.added_by_content[tok.content] = t.added.size();
      if (tok.special) t.special.insert(tok.content);
      t.vocab.ids[tok.content] = tok.id;
      if (std::size_t(tok.id) >= t.vocab.tokens.size()) t.vocab.tokens.resize(std::size_t(tok.id) + 1);
      t.vocab.tokens[std::size_t(tok.id)] = tok.content;
      t.added.push_back(std::move(tok));
    }
  }
  if (const auto extra = cfg.find("additional_special_tokens"); extra != cfg.end() && extra->is_array())
    for (const auto& e : *extra)
      if (e.is_string()) t.special.insert(e.get<std::string>());
  if (!t.model->unk_token.empty()) t.unk_id = t.vocab.id(t.model->unk_token);
  t.normalizer = hf::make_normalizer(j.value("normalizer", json()), where);
  t.pre = hf::make_pre_tokenizer(j.value("pre_tokenizer", json()), where);
  t.post = make_template(j.value("post_processor", json()), where);
  hf::DecodeContext dc;
  for (const auto& a : t.added) dc.added.push_back(a.content);
  t.decoder = hf::make_decoder(j.value("decoder", json()), where, dc);
  for (const auto& s : t.post.before) t.id_of(s);  // template tokens must exist
  for (const auto& s : t.post.after) t.id_of(s);
  if (const auto m = j.find("model"); m != j.end() && (*m).contains("end_of_word_suffix") && (*m)["end_of_word_suffix"].is_string())
    t.end_of_word_suffix = (*m)["end_of_word_suffix"].get<std::string>();
  if (const auto c = cfg.find("clean_up_tokenization_spaces"); c != cfg.end() && c->is_boolean()) t.clean_up = c->get<bool>();
  // transformers.js's LlamaTokenizer with legacy=false: a Metaspace pre-tokenizer replaces the normalizer
  if (cfg.value("tokenizer_class", "") == "LlamaTokenizer" && cfg.contains("legacy") && cfg["legacy"].is_boolean() &&
      !cfg["legacy"].get<bool>()) {
    t.llama_non_legacy = true;
    t.normalizer.reset();
    t.pre = hf::make_llama_metaspace();
  }
  for (auto [key, out] : {std::pair{"bos_token", &t.bos}, {"eos_token", &t.eos}})
    if (const std::string s = config_token(cfg, key); !s.empty())
      if (const std::int32_t id = t.vocab.id(s); id >= 0) *out = id;
  return HfTokenizer(std::move(impl));
}

std::int32_t HfTokenizer::Impl::id_of(const std::string& token) const {
  const std::int32_t id = vocab.id(token);
  if (id >= 0) return id;
  if (unk_id >= 0) return unk_id;
  hf::fail(where, "token '" + token + "' is not in the vocabulary and the model has no unk_token");
}

std::vector<std::string> HfTokenizer::Impl::encode_text(const std::string& text) const {
  // sections: the added tokens (longest match at each position, left to right) and the text between them
  std::vector<std::string> sections;
  std::size_t from = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t best = 0;
    if (!added_by_content.empty()) {
      // the candidates share text[i]: scan the ordered map from the first byte
      const std::string_view rest(text.data() + i, text.size() - i);
      for (auto it = added_by_content.lower_bound(rest.substr(0, 1)); it != added_by_content.end() && it->first[0] == text[i]; ++it)
        if (it->first.size() > best && rest.substr(0, it->first.size()) == it->first) best = it->first.size();
    }
    if (!best) {
      ++i;
      continue;
    }
    if (i > from) sections.push_back(text.substr(from, i - from));
    sections.push_back(text.substr(i, best));
    i += best;
    from = i;
  }
  if (from < text.size()) sections.push_back(text.substr(from));
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const auto a = added_by_content.find(sections[i]);
    if (a == added_by_content.end()) continue;
    const AddedToken& tok = added[a->second];
    if (tok.lstrip && i > 0) sections[i - 1] = hf::js_trim(sections[i - 1], false, true);
    if (tok.rstrip && i + 1 < sections.size()) sections[i + 1] = hf::js_trim(sections[i + 1], true, false);
  }
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    std::string x = sections[i];
    if (x.empty()) continue;
    if (added_by_content.count(x)) {
      tokens.push_back(std::move(x));
      continue;
    }
    if (normalizer) x = normalizer->normalize(std::move(x));
    if (x.empty()) continue;
    std::vector<std::string> words = pre ? pre->split(x, int(i)) : std::vector<std::string>{x};
    std::vector<std::string> section;
    model->encode(words, section);
    if (model->fuse_unk) fuse_unknown(section);
    for (auto& s : section) tokens.push_back(std::move(s));
  }
  return tokens;
}

// transformers.js's fuse_unk: a token that reads as unknown absorbs the unknown
// tokens after it (the unk token itself absorbs nothing: what follows it is dropped).
void HfTokenizer::Impl::fuse_unknown(std::vector<std::string>& v) const {
  auto id = [&](const std::string& s) {
    const std::int32_t i = vocab.id(s);
    return i >= 0 ? i : unk_id;
  };
  std::vector<std::string> r;
  for (std::size_t n = 0; n < v.size();) {
    r.push_back(v[n]);
    if (unk_id < 0 || id(v[n]) != unk_id) {
      ++n;
      continue;
    }
    while (++n < v.size() && id(v[n]) == unk_id)
      if (vocab.id(r.back()) != unk_id) r.back() += v[n];
  }
  v = std::move(r);
}

std::vector<std::int32_t> HfTokenizer::encode(std::string_view utf8, bool add_special_tokens) const {
  const Impl& t = *impl_;
  const std::string text = hf::sanitize_utf8(utf8);
  std::vector<std::string> tokens;
  if (t.llama_non_legacy && !text.empty()) {
    std::string s = "\u2581";
    for (std::size_t at = 0;;) {  // U+2581 in the text reads as a space
      const std::size_t hit = text.find("\u2581", at);
      s += text.substr(at, hit == std::string::npos ? std::string::npos : hit - at);
      if (hit == std::string::npos) break;
      s += ' ';
      at = hit + 3;
    }
    tokens = t.encode_text(s);
    if (tokens.size() > 1 && tokens[0] == "\u2581" && t.special.count(tokens[1])) tokens.erase(tokens.begin());
  } else {
    tokens = t.encode_text(text);
  }
  std::vector<std::int32_t> ids;
  ids.reserve(tokens.size() + 2);
  if (add_special_tokens)
    for (const auto& s : t.post.before) ids.push_back(t.id_of(s));
  for (const auto& s : tokens) ids.push_back(t.id_of(s));
  if (add_special_tokens)
    for (const auto& s : t.post.after) ids.push_back(t.id_of(s));
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id < 0 || std::size_t(id) >= t.vocab.tokens.size() || t.vocab.tokens[std::size_t(id)].empty())
      throw TokenizerError(t.where + ": id " + std::to_string(id) + " is not in the vocabulary (" +
                           std::to_string(t.vocab.tokens.size()) + " ids)");
    const std::string& s = t.vocab.tokens[std::size_t(id)];
    if (skip_special_tokens && t.special.count(s)) continue;
    tokens.push_back(s);
  }
  std::string out;
  if (t.decoder) {
    for (const auto& s : t.decoder->chain(std::move(tokens))) out += s;
  } else {
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
  }
  if (t.decoder && !t.end_of_word_suffix.empty()) {
    std::string r;
    std::size_t at = 0;
    for (std::size_t hit; (hit = out.find(t.end_of_word_suffix, at)) != std::string::npos; at = hit + t.end_of_word_suffix.size())
      r += out.substr(at, hit - at) + " ";
    out = r + out.substr(at);
    if (skip_special_tokens) out = hf::js_trim(out, true, true);
  }
  if (t.clean_up) out = hf::clean_up_tokenization(std::move(out));
  return out;
}

std::optional<std::int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  const std::int32_t id = impl_->vocab.id(std::string(token));
  return id >= 0 ? std::optional<std::int32_t>(id) : std::nullopt;
}

std::size_t HfTokenizer::vocab_size() const { return impl_->vocab.tokens.size(); }
std::optional<std::int32_t> HfTokenizer::bos_id() const { return impl_->bos; }
std::optional<std::int32_t> HfTokenizer::eos_id() const { return impl_->eos; }
const std::string& HfTokenizer::model_type() const { return impl_->model->type; }

}  // namespace ymlopt::text
