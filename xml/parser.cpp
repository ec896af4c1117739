#include "ymlopt/xml/parser.hpp"

#include <tinyxml2.h>

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

namespace ymlopt::xml {
namespace {

// TinyXML-2 reports lines only; columns are recovered from the source text.
class Locator {
 public:
  explicit Locator(const std::string& text) : text_(text) {
    starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') starts_.push_back(i + 1);
  }
  // Offset of the n-th `<name` (n counts from 0) on `line`, or npos.
  size_t element_offset(int line, const std::string& name, int nth) const {
    if (line < 1 || size_t(line) > starts_.size()) return std::string::npos;
    size_t pos = starts_[line - 1];
    const size_t end = size_t(line) < starts_.size() ? starts_[line] : text_.size();
    const std::string pat = "<" + name;
    while ((pos = text_.find(pat, pos)) != std::string::npos && pos < end) {
      const char after = pos + pat.size() < text_.size() ? text_[pos + pat.size()] : ' ';
      if (!std::isalnum(static_cast<unsigned char>(after)) && after != '_' && after != '-' &&
          after != '.' && after != ':') {
        if (nth-- == 0) return pos;
      }
      ++pos;
    }
    return std::string::npos;
  }
  // Offset of the '>' closing the tag that starts at `from`.
  size_t tag_end(size_t from) const {
    if (from == std::string::npos) return from;
    size_t end = from;
    for (char quote = 0; end < text_.size(); ++end) {
      const char c = text_[end];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    return end;
  }
  // Offset of attribute `name` inside the tag starting at `from`.
  size_t attr_offset(size_t from, const std::string& name) const {
    if (from == std::string::npos) return from;
    const size_t tag_end = this->tag_end(from);
    size_t pos = from;
    while ((pos = text_.find(name, pos + 1)) != std::string::npos && pos < tag_end) {
      const char before = text_[pos - 1];
      size_t k = pos + name.size();
      while (k < text_.size() && std::isspace(static_cast<unsigned char>(text_[k]))) ++k;
      if (std::isspace(static_cast<unsigned char>(before)) && k < text_.size() && text_[k] == '=')
        return pos;
    }
    return std::string::npos;
  }
  void to_loc(size_t off, SrcLoc& loc) const {
    if (off == std::string::npos) return;
    size_t lo = 0, hi = starts_.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      (starts_[mid] <= off ? lo : hi) = mid;
    }
    loc.line = int(lo + 1);
    loc.col = int(off - starts_[lo] + 1);
  }

 private:
  const std::string& text_;
  std::vector<size_t> starts_;
};

struct Builder {
  const Locator& loc;
  const std::string* path;
  std::map<std::pair<int, std::string>, int> seen;  // (line, name) -> count

  void build(const tinyxml2::XMLElement* src, Element& dst) {
    dst.name = src->Name();
    dst.loc = SrcLoc{path, src->GetLineNum(), 1};
    const int nth = seen[{dst.loc.line, dst.name}]++;
    const size_t off = loc.element_offset(dst.loc.line, dst.name, nth);
    loc.to_loc(off, dst.loc);
    for (auto* a = src->FirstAttribute(); a; a = a->Next()) {
      Attr attr{a->Name(), a->Value(), dst.loc};
      loc.to_loc(loc.attr_offset(off, attr.name), attr.loc);
      dst.attrs.push_back(std::move(attr));
    }
    for (auto* n = src->FirstChild(); n; n = n->NextSibling()) {
      if (auto* e = n->ToElement()) {
        dst.children.emplace_back();
        build(e, dst.children.back());
      } else if (auto* t = n->ToText()) {
        std::string s = t->Value();
        const auto b = s.find_first_not_of(" \t\r\n");
        if (b == std::string::npos) continue;
        if (dst.raw_text.empty() && n == src->FirstChild()) {  // text right after the start tag
          dst.raw_text = s;
          dst.text_loc = dst.loc;
          const size_t end = loc.tag_end(off);
          if (off != std::string::npos && end != std::string::npos)
            loc.to_loc(end + 1 + (t->CData() ? 9 : 0), dst.text_loc);  // 9: "<![CDATA["
        }
        s = s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
        if (!dst.text.empty()) dst.text += ' ';
        dst.text += s;
      }
    }
  }
};

std::string describe(tinyxml2::XMLError e) {
  using namespace tinyxml2;
  switch (e) {
    case XML_ERROR_PARSING_ELEMENT: return "malformed element";
    case XML_ERROR_PARSING_ATTRIBUTE: return "malformed attribute";
    case XML_ERROR_PARSING_TEXT: return "malformed text";
    case XML_ERROR_PARSING_CDATA: return "malformed CDATA section";
    case XML_ERROR_PARSING_COMMENT: return "malformed comment";
    case XML_ERROR_PARSING_DECLARATION: return "malformed declaration";
    case XML_ERROR_PARSING_UNKNOWN: return "malformed markup";
    case XML_ERROR_EMPTY_DOCUMENT: return "empty document";
    case XML_ERROR_MISMATCHED_ELEMENT: return "mismatched closing tag";
    case XML_ERROR_PARSING: return "malformed XML";
    default: return XMLDocument::ErrorIDToName(e);
  }
}

}  // namespace

std::unique_ptr<Document> parse_text(const std::string& path, const std::string& text,
                                     Diagnostics& diags) {
  auto doc = std::make_unique<Document>();
  doc->path = std::make_unique<std::string>(path);
  tinyxml2::XMLDocument x;
  if (x.Parse(text.data(), text.size()) != tinyxml2::XML_SUCCESS) {
    std::string detail = x.ErrorStr();  // "Error=... ErrorID=.. Line number=N: detail"
    const auto colon = detail.find(": ");
    detail = colon == std::string::npos ? std::string() : detail.substr(colon + 2);
    if (x.ErrorID() == tinyxml2::XML_ERROR_MISMATCHED_ELEMENT && detail.rfind("XMLElement name=", 0) == 0)
    {
      std::string tag = "<";
      tag += detail.substr(16);
      tag += "> opened here is not closed, or closed by another tag";
      detail = std::move(tag);
    }
    std::string msg = "XML syntax error: " + describe(x.ErrorID());
    if (!detail.empty()) msg += " (" + detail + ")";
    diags.error(SrcLoc{doc->path.get(), x.ErrorLineNum(), 0}, msg);
    return nullptr;
  }
  const auto* root = x.RootElement();
  if (!root) {
    diags.error(SrcLoc{doc->path.get(), 1, 0}, "XML syntax error: empty document");
    return nullptr;
  }
  Locator loc(text);
  Builder b{loc, doc->path.get(), {}};
  b.build(root, doc->root);
  return doc;
}

std::unique_ptr<Document> parse_file(const std::string& path, Diagnostics& diags) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.add(Diagnostic{path, 0, 0, Severity::error, "cannot open file"});
    return nullptr;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_text(path, ss.str(), diags);
}

}  // namespace ymlopt::xml
