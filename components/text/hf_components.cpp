// tokenizer.json normalizers, pre-tokenizers and decoders, and the regexes
// they use (JavaScript's dialect compiled with ICU).
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>

#include "text/hf_components.hpp"
#include "text/tokenizer.hpp"

namespace ymlopt::text::hf {

void fail(const std::string& where, const std::string& what) { throw TokenizerError(where + ": " + what); }

std::string str_of(const json& j, const char* key, const std::string& dflt) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : dflt;
}

bool bool_of(const json& j, const char* key, bool dflt) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : dflt;
}

// ------------------------------------------------------------------ UTF-8

std::u32string utf8_to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t v = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < n && i + std::size_t(k) < s.size(); ++k) v = (v << 6) | (static_cast<unsigned char>(s[i + std::size_t(k)]) & 0x3F);
    out.push_back(v);
    i += std::size_t(n);
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6)), out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12)), out += char(0x80 | ((c >> 6) & 0x3F)), out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18)), out += char(0x80 | ((c >> 12) & 0x3F)), out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

namespace {

icu::UnicodeString to_u16(std::string_view s) {
  return icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
}

std::string to_u8(const icu::UnicodeString& u) {
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace

std::string sanitize_utf8(std::string_view s) {
  // the WHATWG decoder replaces each maximal invalid subpart by one U+FFFD; so does ICU's
  // fromUTF8; lone surrogates cannot occur in its output
  return to_u8(to_u16(s));
}

bool is_js_space(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680: case 0x2028:
    case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string js_trim(std::string_view s, bool left, bool right) {
  const std::u32string u = utf8_to_u32(s);
  std::size_t b = 0, e = u.size();
  while (left && b < e && is_js_space(u[b])) ++b;
  while (right && e > b && is_js_space(u[e - 1])) --e;
  std::string out;
  for (std::size_t i = b; i < e; ++i) append_utf8(out, u[i]);
  return out;
}

// ------------------------------------------------------------------ patterns

namespace {

// JavaScript's \s, \d and \w (the u flag without i), as ICU class contents
constexpr const char* kJsSpace = "\\t\\n\\u000B\\f\\r \\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF";
constexpr const char* kJsDigit = "0-9";
constexpr const char* kJsWord = "A-Za-z0-9_";

/// A JavaScript regex as ICU reads it: \s, \d, \w and their negations spelled
/// out (ICU's are Unicode-wide), the rewrites transformers.js makes first.
std::string icu_from_js(std::string p) {
  // transformers.js: the contractions without a case-insensitive group, and \# \& \~ unescaped
  const std::pair<std::string, std::string> rewrites[] = {
      {"(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))"}};
  std::string q;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size() && (p[i + 1] == '#' || p[i + 1] == '&' || p[i + 1] == '~')) continue;
    q += p[i];
  }
  for (const auto& [from, to] : rewrites)
    for (std::size_t at; (at = q.find(from)) != std::string::npos;) q.replace(at, from.size(), to);
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const char c = q[i];
    if (c == '\\' && i + 1 < q.size()) {
      const char e = q[i + 1];
      const char* set = e == 's' || e == 'S' ? kJsSpace : e == 'd' || e == 'D' ? kJsDigit : e == 'w' || e == 'W' ? kJsWord : nullptr;
      const bool neg = e == 'S' || e == 'D' || e == 'W';
      if (set && !(in_class && neg)) {
        out += in_class ? std::string(set) : std::string(neg ? "[^" : "[") + set + "]";
      } else {
        out += c, out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct Pattern::Impl {
  std::unique_ptr<icu::RegexPattern> re;
  std::string where, text;
};

Pattern::Pattern(const json& spec, const std::string& where) : impl_(std::make_unique<Impl>()) {
  std::string text;
  uint32_t flags = 0;
  if (spec.is_object() && spec.contains("Regex") && spec["Regex"].is_string()) {
    text = icu_from_js(spec["Regex"].get<std::string>());
  } else if (spec.is_object() && spec.contains("String") && spec["String"].is_string()) {
    text = spec["String"].get<std::string>();
    flags = UREGEX_LITERAL;
    if (text.empty()) fail(where, "an empty String pattern");
  } else {
    fail(where, "pattern " + spec.dump() + " is neither {\"Regex\": ...} nor {\"String\": ...}");
  }
  impl_->where = where;
  impl_->text = spec.dump();
  UErrorCode st = U_ZERO_ERROR;
  UParseError pe;
  impl_->re.reset(icu::RegexPattern::compile(to_u16(text), flags, pe, st));
  if (U_FAILURE(st))
    fail(where, "pattern " + spec.dump() + " does not compile (" + u_errorName(st) + " at offset " +
                    std::to_string(pe.offset) + ")");
}

Pattern::~Pattern() = default;

std::vector<std::pair<std::size_t, std::size_t>> Pattern::find_all(std::string_view s) const {
  const icu::UnicodeString u = to_u16(s);
  UErrorCode st = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(impl_->re->matcher(u, st));
  // a pattern that backtracks without end (a file's regex is outside input) stops with an
  // error: about a second per match, and a bounded backtracking stack
  if (U_SUCCESS(st)) m->setTimeLimit(1000, st);
  if (U_SUCCESS(st)) m->setStackLimit(8 << 20, st);
  std::vector<std::pair<std::size_t, std::size_t>> out;
  // UTF-16 index -> UTF-8 byte offset, advanced as the matches go left to right
  int32_t u16 = 0;
  std::size_t u8 = 0;
  auto byte_at = [&](int32_t target) {
    while (u16 < target) {
      const UChar32 c = u.char32At(u16);
      u16 += U16_LENGTH(c);
      u8 += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return u8;
  };
  while (U_SUCCESS(st) && m->find(st)) {
    const int32_t b = m->start(st), e = m->end(st);
    if (e == b) continue;
    const std::size_t bb = byte_at(b);
    out.emplace_back(bb, byte_at(e));
  }
  if (U_FAILURE(st))
    throw TokenizerError(impl_->where + ": pattern " + impl_->text + " failed on a text of " + std::to_string(s.size()) +
                         " bytes (" + u_errorName(st) + ")");
  return out;
}

std::string Pattern::replace_all(std::string_view s, std::string_view with) const {
  std::string out;
  std::size_t at = 0;
  for (const auto& [b, e] : find_all(s)) {
    out.append(s.substr(at, b - at));
    out.append(with);
    at = e;
  }
  out.append(s.substr(at));
  return out;
}

// ------------------------------------------------------------------ normalizers

namespace {

std::string type_of(const json& j, const std::string& where, const char* what) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail(where, std::string(what) + " without a \"type\"");
  return j["type"].get<std::string>();
}

const json& list_of(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) fail(where, std::string("a Sequence without a \"") + key + "\" list");
  return *it;
}

struct UnicodeForm final : Normalizer {
  const icu::Normalizer2* n = nullptr;
  UnicodeForm(const std::string& form, const std::string& where) {
    UErrorCode st = U_ZERO_ERROR;
    n = form == "NFC"    ? icu::Normalizer2::getNFCInstance(st)
        : form == "NFD"  ? icu::Normalizer2::getNFDInstance(st)
        : form == "NFKC" ? icu::Normalizer2::getNFKCInstance(st)
                         : icu::Normalizer2::getNFKDInstance(st);
    if (U_FAILURE(st)) fail(where, "ICU has no " + form + " data");
  }
  std::string normalize(std::string s) const override {
    UErrorCode st = U_ZERO_ERROR;
    return to_u8(n->normalize(to_u16(s), st));
  }
};

std::string lowercase(const std::string& s) { return to_u8(to_u16(s).toLower(icu::Locale::getRoot())); }

/// s without the code points of general category M (or Mn only).
std::string remove_marks(const std::string& s, bool nonspacing_only) {
  std::string out;
  for (const char32_t c : utf8_to_u32(s)) {
    const int8_t t = u_charType(UChar32(c));
    const bool mark = t == U_NON_SPACING_MARK || (!nonspacing_only && (t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK));
    if (!mark) append_utf8(out, c);
  }
  return out;
}

struct Lowercase final : Normalizer {
  std::string normalize(std::string s) const override { return lowercase(s); }
};
struct StripAccents final : Normalizer {
  std::string normalize(std::string s) const override { return remove_marks(s, false); }
};
struct Strip final : Normalizer {
  bool left, right;
  Strip(bool l, bool r) : left(l), right(r) {}
  std::string normalize(std::string s) const override { return js_trim(s, left, right); }
};
struct Prepend final : Normalizer {
  std::string text;
  explicit Prepend(std::string t) : text(std::move(t)) {}
  std::string normalize(std::string s) const override { return text + s; }
};
struct Replace final : Normalizer {
  Pattern pattern;
  std::string content;
  Replace(const json& j, const std::string& where) : pattern(j.value("pattern", json()), where), content(str_of(j, "content")) {}
  std::string normalize(std::string s) const override { return pattern.replace_all(s, content); }
};
struct NormalizerSequence final : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> parts;
  std::string normalize(std::string s) const override {
    for (const auto& p : parts) s = p->normalize(std::move(s));
    return s;
  }
};

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

struct BertNormalizer final : Normalizer {
  bool clean_text, chinese, lower, strip_accents, strip_set;
  explicit BertNormalizer(const json& j)
      : clean_text(bool_of(j, "clean_text", true)),
        chinese(bool_of(j, "handle_chinese_chars", true)),
        lower(bool_of(j, "lowercase", true)),
        strip_accents(bool_of(j, "strip_accents", false)),
        strip_set(j.contains("strip_accents") && j["strip_accents"].is_boolean()) {}
  std::string normalize(std::string s) const override {
    if (clean_text) {
      std::string out;
      for (const char32_t c : utf8_to_u32(s)) {
        if (c == 0 || c == 0xFFFD) continue;
        const int8_t t = u_charType(UChar32(c));
        const bool control = c != '\t' && c != '\n' && c != '\r' &&
                             (t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE);
        if (control) continue;
        append_utf8(out, is_js_space(c) ? U' ' : c);
      }
      s = std::move(out);
    }
    if (chinese) {
      std::string out;
      for (const char32_t c : utf8_to_u32(s)) {
        if (is_chinese_char(c)) out += ' ', append_utf8(out, c), out += ' ';
        else append_utf8(out, c);
      }
      s = std::move(out);
    }
    auto strip = [](const std::string& x) {
      UErrorCode st = U_ZERO_ERROR;
      return remove_marks(to_u8(icu::Normalizer2::getNFDInstance(st)->normalize(to_u16(x), st)), true);
    };
    if (lower) {
      s = lowercase(s);
      if (!strip_set || strip_accents) s = strip(s);
    } else if (strip_accents) {
      s = strip(s);
    }
    return s;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, where, "a normalizer");
  if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") return std::make_unique<UnicodeForm>(t, where);
  if (t == "Lowercase") return std::make_unique<Lowercase>();
  if (t == "StripAccents") return std::make_unique<StripAccents>();
  if (t == "Strip") return std::make_unique<Strip>(bool_of(j, "strip_left", true), bool_of(j, "strip_right", true));
  if (t == "Prepend") return std::make_unique<Prepend>(str_of(j, "prepend"));
  if (t == "Replace") return std::make_unique<Replace>(j, where);
  if (t == "BertNormalizer") return std::make_unique<BertNormalizer>(j);
  if (t == "Sequence") {
    auto s = std::make_unique<NormalizerSequence>();
    for (const auto& p : list_of(j, "normalizers", where))
      if (auto n = make_normalizer(p, where)) s->parts.push_back(std::move(n));
    return s;
  }
  fail(where, "normalizer type '" + t +
                  "' is not supported (NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, "
                  "BertNormalizer, Sequence)");
}

// ------------------------------------------------------------------ pre-tokenizers

std::vector<std::string> PreTokenizer::apply(const std::vector<std::string>& pieces, int section) const {
  std::vector<std::string> out;
  for (const auto& p : pieces)
    for (auto& q : split(p, section)) out.push_back(std::move(q));
  return out;
}

namespace {

/// The pieces of `s` the matches of `p` cut: every match and every stretch
/// between matches, in order (or, with keep_gaps false, the matches alone).
std::vector<std::string> cut(const Pattern& p, const std::string& s, bool keep_gaps = true) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (const auto& [b, e] : p.find_all(s)) {
    if (keep_gaps && b > at) out.push_back(s.substr(at, b - at));
    out.push_back(s.substr(b, e - b));
    at = e;
  }
  if (keep_gaps && at < s.size()) out.push_back(s.substr(at));
  return out;
}

json regex(const std::string& r) { return json{{"Regex", r}}; }

// GPT-2's pre-tokenization regex
const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
// transformers.js's punctuation set
const std::string kPunct = "\\p{P}\\u0021-\\u002F\\u003A-\\u0040\\u005B-\\u0060\\u007B-\\u007E";

struct ByteLevel final : PreTokenizer {
  bool prefix_space, use_regex;
  Pattern re;
  ByteLevel(const json& j, const std::string& where)
      : prefix_space(bool_of(j, "add_prefix_space", true)), use_regex(bool_of(j, "use_regex", true)), re(regex(kGpt2Regex), where) {}
  std::vector<std::string> split(const std::string& piece, int) const override {
    std::string s = piece;
    if (prefix_space && (s.empty() || s[0] != ' ')) s = " " + s;
    std::vector<std::string> parts = use_regex ? cut(re, s, false) : std::vector<std::string>{s};
    for (auto& p : parts) {
      std::string mapped;
      for (const unsigned char c : p) append_utf8(mapped, byte_char(c));
      p = std::move(mapped);
    }
    return parts;
  }
};

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct Split final : PreTokenizer {
  Pattern re;
  Behavior behavior;
  bool invert;
  Split(const json& j, const std::string& where) : re(j.value("pattern", json()), where), invert(bool_of(j, "invert", false)) {
    const std::string b = str_of(j, "behavior", "Isolated");
    behavior = b == "Removed"             ? Behavior::removed
               : b == "Isolated"          ? Behavior::isolated
               : b == "MergedWithPrevious" ? Behavior::merged_with_previous
               : b == "MergedWithNext"     ? Behavior::merged_with_next
               : b == "Contiguous"         ? Behavior::contiguous
                                           : (fail(where, "Split behavior '" + b + "' is not one of Removed, Isolated, "
                                                          "MergedWithPrevious, MergedWithNext, Contiguous"),
                                              Behavior::isolated);
  }
  std::vector<std::string> split(const std::string& s, int) const override {
    if (invert) return cut(re, s, false);
    // (piece, is a match) in order
    std::vector<std::pair<std::string, bool>> parts;
    std::size_t at = 0;
    for (const auto& [b, e] : re.find_all(s)) {
      if (b > at) parts.emplace_back(s.substr(at, b - at), false);
      parts.emplace_back(s.substr(b, e - b), true);
      at = e;
    }
    if (at < s.size()) parts.emplace_back(s.substr(at), false);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      auto& [p, match] = parts[i];
      switch (behavior) {
        case Behavior::removed:
          if (!match) out.push_back(std::move(p));
          break;
        case Behavior::isolated:
          out.push_back(std::move(p));
          break;
        case Behavior::merged_with_previous:
          if (match && !out.empty() && i > 0 && !parts[i - 1].second) out.back() += p;
          else out.push_back(std::move(p));
          break;
        case Behavior::merged_with_next:
          if (match && i + 1 < parts.size() && !parts[i + 1].second) parts[i + 1].first = p + parts[i + 1].first;
          else out.push_back(std::move(p));
          break;
        case Behavior::contiguous:
          if (match && i > 0 && parts[i - 1].second) out.back() += p;
          else out.push_back(std::move(p));
          break;
      }
    }
    return out;
  }
};

/// Pieces that are the matches of one regex (what is between them is dropped).
struct Matches final : PreTokenizer {
  Pattern re;
  bool trim = false;
  Matches(const std::string& r, const std::string& where, bool trim_first = false) : re(regex(r), where), trim(trim_first) {}
  std::vector<std::string> split(const std::string& s, int) const override {
    return cut(re, trim ? js_trim(s, true, true) : s, false);
  }
};

struct Metaspace final : PreTokenizer {
  std::string replacement;
  bool prefix;
  std::string scheme;  // always | first | never
  bool split_pieces;
  Metaspace(std::string rep, bool add_prefix, std::string sch, bool sp)
      : replacement(std::move(rep)), prefix(add_prefix), scheme(std::move(sch)), split_pieces(sp) {}
  std::vector<std::string> split(const std::string& piece, int section) const override {
    std::string s;
    for (const char c : piece) {
      if (c == ' ') s += replacement;
      else s += c;
    }
    if (prefix && s.rfind(replacement, 0) != 0 && (scheme == "always" || (scheme == "first" && section == 0)))
      s = replacement + s;
    if (!split_pieces) return {s};
    std::vector<std::string> out;  // each replacement starts a piece (MergedWithNext)
    std::size_t start = 0;
    for (std::size_t at = s.find(replacement, 1); at != std::string::npos; at = s.find(replacement, at + 1)) {
      out.push_back(s.substr(start, at - start));
      start = at;
    }
    out.push_back(s.substr(start));
    return out;
  }
};

struct ReplacePre final : PreTokenizer {
  Pattern re;
  std::string content;
  ReplacePre(const json& j, const std::string& where) : re(j.value("pattern", json()), where), content(str_of(j, "content")) {}
  std::vector<std::string> split(const std::string& s, int) const override { return {re.replace_all(s, content)}; }
};

struct PreSequence final : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  std::vector<std::string> split(const std::string& s, int section) const override {
    std::vector<std::string> v{s};
    for (const auto& p : parts) v = p->apply(v, section);
    return v;
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, where, "a pre-tokenizer");
  if (t == "ByteLevel") return std::make_unique<ByteLevel>(j, where);
  if (t == "Split") return std::make_unique<Split>(j, where);
  if (t == "Whitespace") return std::make_unique<Matches>("\\w+|[^\\w\\s]+", where);
  if (t == "WhitespaceSplit") return std::make_unique<Matches>("\\S+", where);
  if (t == "Punctuation") return std::make_unique<Matches>("[^" + kPunct + "]+|[" + kPunct + "]+", where);
  if (t == "BertPreTokenizer") return std::make_unique<Matches>("[^\\s" + kPunct + "]+|[" + kPunct + "]", where, true);
  if (t == "Digits")
    return std::make_unique<Matches>(bool_of(j, "individual_digits", false) ? "[^\\d]+|\\d" : "[^\\d]+|\\d+", where);
  if (t == "Metaspace") {
    const std::string rep = str_of(j, "replacement", "\u2581");
    // the Rust library's defaults: prepend_scheme "always" unless add_prefix_space is false
    const bool add = bool_of(j, "add_prefix_space", true);
    const std::string scheme = str_of(j, "prepend_scheme", add ? "always" : "never");
    if (scheme != "always" && scheme != "first" && scheme != "never")
      fail(where, "Metaspace prepend_scheme '" + scheme + "' is not always, first or never");
    return std::make_unique<Metaspace>(rep, scheme != "never", scheme, bool_of(j, "split", true));
  }
  if (t == "Replace") return std::make_unique<ReplacePre>(j, where);
  if (t == "Sequence") {
    auto s = std::make_unique<PreSequence>();
    for (const auto& p : list_of(j, "pretokenizers", where))
      if (auto n = make_pre_tokenizer(p, where)) s->parts.push_back(std::move(n));
    return s;
  }
  fail(where, "pre-tokenizer type '" + t +
                  "' is not supported (ByteLevel, Split, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, "
                  "Digits, Metaspace, Replace, Sequence)");
}

std::unique_ptr<PreTokenizer> make_llama_metaspace() {
  return std::make_unique<Metaspace>("\u2581", true, "first", false);
}

// ------------------------------------------------------------------ byte level

namespace {

struct ByteTable {
  std::array<char32_t, 256> to_char{};
  std::array<int, 512> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool shown = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_char[std::size_t(b)] = shown ? char32_t(b) : char32_t(256 + extra++);
      to_byte[to_char[std::size_t(b)]] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

char32_t byte_char(std::uint8_t b) { return byte_table().to_char[b]; }

int char_byte(char32_t c) { return c < 512 ? byte_table().to_byte[c] : -1; }

// ------------------------------------------------------------------ decoders

namespace {

struct ByteLevelDecoder final : Decoder {
  std::vector<std::string> added;
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (!bytes.empty()) out.push_back(sanitize_utf8(bytes));
      bytes.clear();
    };
    for (auto& t : tokens) {
      if (std::find(added.begin(), added.end(), t) != added.end()) {
        flush();
        out.push_back(std::move(t));
        continue;
      }
      for (const char32_t c : utf8_to_u32(t)) {
        const int b = char_byte(c);
        if (b >= 0) bytes += char(b);
        // a character outside the table has no byte (transformers.js: undefined -> 0)
        else bytes += '\0';
      }
    }
    flush();
    return out;
  }
};

struct ReplaceDecoder final : Decoder {
  Pattern re;
  std::string content;
  ReplaceDecoder(const json& j, const std::string& where) : re(j.value("pattern", json()), where), content(str_of(j, "content")) {}
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) t = re.replace_all(t, content);
    return tokens;
  }
};

struct ByteFallbackDecoder final : Decoder {
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
    for (auto& t : tokens) {
      if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>' && hex(t[3]) && hex(t[4])) {
        bytes += char(std::stoi(t.substr(3, 2), nullptr, 16));
        continue;
      }
      if (!bytes.empty()) out.push_back(sanitize_utf8(bytes)), bytes.clear();
      out.push_back(std::move(t));
    }
    if (!bytes.empty()) out.push_back(sanitize_utf8(bytes));
    return out;
  }
};

struct FuseDecoder final : Decoder {
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    return {all};
  }
};

struct StripDecoder final : Decoder {
  char32_t content;
  std::size_t start, stop;
  StripDecoder(char32_t c, std::size_t a, std::size_t b) : content(c), start(a), stop(b) {}
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    for (auto& t : tokens) {
      const std::u32string u = utf8_to_u32(t);
      std::size_t b = 0, e = u.size();
      for (std::size_t i = 0; i < start && i < u.size() && u[i] == content; ++i) b = i + 1;
      for (std::size_t i = 0; i < stop && i < u.size() && u[u.size() - 1 - i] == content; ++i) e = u.size() - 1 - i;
      std::string s;
      for (std::size_t i = b; i < e; ++i) append_utf8(s, u[i]);
      t = std::move(s);
    }
    return tokens;
  }
};

/// transformers.js's clean_up_tokenization.
std::string clean_up(std::string s) {
  const std::pair<const char*, const char*> r[] = {{" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
                                                   {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},
                                                   {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : r) {
    std::string out;
    const std::string f = from;
    std::size_t at = 0;
    for (std::size_t hit; (hit = s.find(f, at)) != std::string::npos; at = hit + f.size()) out += s.substr(at, hit - at) + to;
    s = out + s.substr(at);
  }
  return s;
}

struct WordPieceDecoder final : Decoder {
  std::string prefix;
  bool cleanup;
  WordPieceDecoder(std::string p, bool c) : prefix(std::move(p)), cleanup(c) {}
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i > 0) {
        if (!prefix.empty() && t.rfind(prefix, 0) == 0) t = t.substr(prefix.size());
        else t = " " + t;
      }
      if (cleanup) t = clean_up(t);
    }
    return tokens;
  }
};

struct MetaspaceDecoder final : Decoder {
  std::string replacement;
  bool strip_first;
  MetaspaceDecoder(std::string r, bool s) : replacement(std::move(r)), strip_first(s) {}
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string s;
      for (std::size_t at = 0;;) {
        const std::size_t hit = t.find(replacement, at);
        s += t.substr(at, hit == std::string::npos ? std::string::npos : hit - at);
        if (hit == std::string::npos) break;
        s += ' ';
        at = hit + replacement.size();
      }
      if (strip_first && i == 0 && !s.empty() && s[0] == ' ') s.erase(0, 1);
      t = std::move(s);
    }
    return tokens;
  }
};

struct BpeDecoder final : Decoder {
  std::string suffix;
  explicit BpeDecoder(std::string s) : suffix(std::move(s)) {}
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      const std::string with = i + 1 == tokens.size() ? "" : " ";
      std::string s;
      std::size_t at = 0;
      for (std::size_t hit; !suffix.empty() && (hit = t.find(suffix, at)) != std::string::npos; at = hit + suffix.size())
        s += t.substr(at, hit - at) + with;
      t = s + t.substr(at);
    }
    return tokens;
  }
};

struct DecoderSequence final : Decoder {
  std::vector<std::unique_ptr<Decoder>> parts;
  std::vector<std::string> chain(std::vector<std::string> tokens) const override {
    for (const auto& p : parts) tokens = p->chain(std::move(tokens));
    return tokens;
  }
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where, const DecodeContext& ctx) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, where, "a decoder");
  if (t == "ByteLevel") {
    auto d = std::make_unique<ByteLevelDecoder>();
    d->added = ctx.added;
    return d;
  }
  if (t == "Replace") return std::make_unique<ReplaceDecoder>(j, where);
  if (t == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (t == "Fuse") return std::make_unique<FuseDecoder>();
  if (t == "Strip") {
    const std::u32string c = utf8_to_u32(str_of(j, "content", " "));
    if (c.size() != 1) fail(where, "Strip decoder content '" + str_of(j, "content") + "' is not one character");
    auto count = [&](const char* k) {
      const auto it = j.find(k);
      return it != j.end() && it->is_number_unsigned() ? it->get<std::size_t>() : std::size_t(0);
    };
    return std::make_unique<StripDecoder>(c[0], count("start"), count("stop"));
  }
  if (t == "WordPiece") return std::make_unique<WordPieceDecoder>(str_of(j, "prefix", "##"), bool_of(j, "cleanup", true));
  if (t == "Metaspace") {
    const std::string scheme = str_of(j, "prepend_scheme", bool_of(j, "add_prefix_space", true) ? "always" : "never");
    return std::make_unique<MetaspaceDecoder>(str_of(j, "replacement", "\u2581"), scheme != "never");
  }
  if (t == "BPEDecoder") return std::make_unique<BpeDecoder>(str_of(j, "suffix", "</w>"));
  if (t == "Sequence") {
    auto s = std::make_unique<DecoderSequence>();
    for (const auto& p : list_of(j, "decoders", where))
      if (auto d = make_decoder(p, where, ctx)) s->parts.push_back(std::move(d));
    return s;
  }
  fail(where, "decoder type '" + t +
                  "' is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, WordPiece, Metaspace, "
                  "BPEDecoder, Sequence)");
}

std::string clean_up_tokenization(std::string s) { return clean_up(std::move(s)); }

}  // namespace ymlopt::text::hf
