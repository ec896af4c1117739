#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ymlopt/xml/diagnostic.hpp"

namespace ymlopt::xml {

/// An attribute with the position of its name.
struct Attr {
  std::string name;
  std::string value;
  SrcLoc loc;
  // Made from text embedded in another language (YvetteML): loc is where the
  // value's source starts, so positions inside the value are not added to it.
  bool embedded = false;
};

/// An element of the workflow file: name, attributes, children, position.
///
///   auto doc = xml::parse_file("wf.xml", diags);
///   for (const auto& e : doc->root.children) if (e.name == "task") ...
struct Element {
  std::string name;
  std::vector<Attr> attrs;
  std::vector<Element> children;
  std::string text;  // concatenated text content (trimmed)
  SrcLoc loc;
  // The first non-blank text node as written (entities decoded, CDATA kept) and
  // where it starts: for a language embedded in an element (a YvetteML <graph>).
  std::string raw_text;
  SrcLoc text_loc;
  const Attr* find(std::string_view attr) const {
    for (const auto& a : attrs)
      if (a.name == attr) return &a;
    return nullptr;
  }
};

/// A parsed file. `path` is the storage every SrcLoc of the tree points to.
struct Document {
  std::unique_ptr<std::string> path;
  Element root;
};

/// Parses a file (or an in-memory text with `path` as its name). Syntax errors
/// are added to `diags` with TinyXML-2's line; returns null then.
std::unique_ptr<Document> parse_file(const std::string& path, Diagnostics& diags);
std::unique_ptr<Document> parse_text(const std::string& path, const std::string& text,
                                     Diagnostics& diags);

}  // namespace ymlopt::xml
