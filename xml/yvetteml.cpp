#include "ymlopt/xml/yvetteml.hpp"

#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ymlopt {
namespace {

using xml::Attr;
using xml::Element;

enum class Tok { ident, number, string, punct, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;
  SrcLoc loc;
};

/// Splits the graph text into tokens with their positions; `#` starts a comment.
class Lexer {
 public:
  Lexer(const std::string& text, SrcLoc at, Diagnostics& d) : s_(text), line_(at.line), col_(at.col), file_(at.file), d_(d) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip();
      Token t;
      t.loc = SrcLoc{file_, line_, col_};
      if (p_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      const char c = s_[p_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        t.kind = Tok::ident;
        while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_')) t.text += take();
      } else if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && p_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_ + 1])))) {
        t.kind = Tok::number;
        while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '.' ||
                                  ((s_[p_] == '-' || s_[p_] == '+') && (t.text.back() == 'e' || t.text.back() == 'E'))))
          t.text += take();
      } else if (c == '"' || c == '\'') {
        t.kind = Tok::string;
        t.text += take();
        while (p_ < s_.size() && s_[p_] != c && s_[p_] != '\n') t.text += take();
        if (p_ >= s_.size() || s_[p_] != c) {
          d_.error(t.loc, "unterminated string in the graph");
          out.push_back(Token{Tok::end, "", t.loc});
          return out;
        }
        t.text += take();
      } else {
        t.kind = Tok::punct;
        static const char* two[] = {":=", "//", "==", "!=", ">=", "<=", "&&", "||"};
        for (const char* op : two)
          if (s_.compare(p_, 2, op) == 0) t.text = std::string(op);
        if (t.text.empty()) t.text = std::string(1, c);
        for (std::size_t i = 0; i < t.text.size(); ++i) take();
        static const std::string ok = "()[],;:=+-*/%<>!?";
        if (t.text.size() == 1 && ok.find(c) == std::string::npos) {
          d_.error(t.loc, std::string("unexpected character '") + c + "' in the graph");
          continue;
        }
      }
      out.push_back(std::move(t));
    }
  }

 private:
  char take() {
    const char c = s_[p_++];
    if (c == '\n') ++line_, col_ = 1;
    else ++col_;
    return c;
  }
  void skip() {
    while (p_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[p_]))) take();
      else if (s_[p_] == '#')
        while (p_ < s_.size() && s_[p_] != '\n') take();
      else break;
    }
  }
  const std::string& s_;
  std::size_t p_ = 0;
  int line_, col_;
  const std::string* file_;
  Diagnostics& d_;
};

/// One positional parameter of an abstract component.
struct AbstractParam {
  std::string name, mode, port, arg;  // mode in|out|inout; bound to a port, or (mode in) to an arg
};
struct AbstractComponent {
  std::string impl;
  std::vector<AbstractParam> params;
  std::vector<const Element*> args;  // <arg name value>: fixed args of the implementation
  SrcLoc loc;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::map<std::string, AbstractComponent>& comps, Diagnostics& d)
      : t_(std::move(toks)), comps_(comps), d_(d) {}

  std::vector<Element> program() {
    std::vector<Element> out = block({});
    if (ok_ && !at_end()) error(peek(), "unexpected '" + peek().text + "'");
    return out;
  }
  bool ok() const { return ok_; }

 private:
  // ---------------------------------------------------------------- tokens
  const Token& peek(std::size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Tok::end; }
  bool is(const std::string& s, std::size_t k = 0) const {
    const Token& t = peek(k);
    return (t.kind == Tok::ident || t.kind == Tok::punct) && t.text == s;
  }
  Token next() { return t_[std::min(i_++, t_.size() - 1)]; }
  void error(const Token& t, const std::string& msg) {
    if (ok_) d_.error(t.loc, msg);
    ok_ = false;
  }
  bool expect(const std::string& s, const std::string& where) {
    if (is(s)) {
      next();
      return true;
    }
    error(peek(), "expected '" + s + "' " + where + (at_end() ? ", found the end of the graph" : ", found '" + peek().text + "'"));
    return false;
  }
  std::optional<Token> ident(const std::string& what) {
    if (peek().kind == Tok::ident && !keyword(peek().text)) return next();
    error(peek(), "expected " + what + (at_end() ? ", found the end of the graph" : ", found '" + peek().text + "'"));
    return std::nullopt;
  }
  static bool keyword(const std::string& s) {
    static const std::set<std::string> k = {"compute", "par",  "seq",    "do",  "enddo", "endpar", "if",
                                            "then",    "else", "endif",  "wait", "notify", "and",   "or",
                                            "not",     "eq",   "neq",    "gt",  "ge",    "lt",     "le"};
    return k.count(s) > 0;
  }

  // ---------------------------------------------------------------- expressions
  /// Tokens up to (not including) one of `stops` at nesting depth 0, as the text
  /// of a ${} expression (YvetteML's word operators become ours).
  std::optional<std::pair<std::string, SrcLoc>> expr(const std::set<std::string>& stops) {
    static const std::map<std::string, std::string> words = {{"eq", "=="}, {"neq", "!="}, {"gt", ">"},  {"ge", ">="},
                                                              {"lt", "<"},  {"le", "<="},  {"and", "&&"}, {"or", "||"},
                                                              {"not", "!"}};
    std::string out;
    const SrcLoc at = peek().loc;
    int depth = 0;
    bool after_operand = false;  // two operands in a row end the expression
    while (!at_end()) {
      const Token& t = peek();
      if (depth == 0 && t.kind == Tok::punct && stops.count(t.text)) break;
      const bool word_op = t.kind == Tok::ident && words.count(t.text);
      const bool operand = (t.kind != Tok::punct && !word_op) || (t.kind == Tok::punct && t.text == "(");
      if (after_operand && operand) break;
      after_operand = (t.kind != Tok::punct && !word_op) || (t.kind == Tok::punct && (t.text == ")" || t.text == "]"));
      if (t.kind == Tok::punct && (t.text == "(" || t.text == "[")) ++depth;
      if (t.kind == Tok::punct && (t.text == ")" || t.text == "]")) {
        if (depth == 0) break;
        --depth;
      }
      if (t.kind == Tok::punct && (t.text == ";" || t.text == ":=")) break;
      if (t.kind == Tok::ident && (t.text == "do" || t.text == "then")) break;
      auto w = t.kind == Tok::ident ? words.find(t.text) : words.end();
      if (!out.empty()) out += ' ';
      out += w != words.end() ? w->second : t.text;
      next();
    }
    if (out.empty()) {
      error(peek(), "expected an expression" + std::string(at_end() ? " before the end of the graph" : " before '" + peek().text + "'"));
      return std::nullopt;
    }
    return std::make_pair(out, at);
  }

  /// `A`, `A[i]`, `A[i][j]` -> "A", "A[${i}]", "A[${i},${j}]".
  std::optional<std::pair<std::string, SrcLoc>> ref(const std::string& what) {
    auto id = ident(what);
    if (!id) return std::nullopt;
    std::string out = id->text;
    std::vector<std::string> idx;
    while (is("[")) {
      next();
      auto e = expr({"]"});
      if (!e || !expect("]", "after an index")) return std::nullopt;
      idx.push_back("${" + e->first + "}");
    }
    if (!idx.empty()) {
      out += "[";
      for (std::size_t k = 0; k < idx.size(); ++k) out += (k ? "," : "") + idx[k];
      out += "]";
    }
    return std::make_pair(out, id->loc);
  }

  // ---------------------------------------------------------------- elements
  static Attr attr(const std::string& name, const std::string& value, SrcLoc at) {
    return Attr{name, value, at, true};  // errors inside the value point at its start in the graph
  }
  static Element elem(const std::string& name, SrcLoc at, std::vector<Attr> attrs = {}) {
    Element e;
    e.name = name;
    e.loc = at;
    e.attrs = std::move(attrs);
    return e;
  }

  /// Statements until one of `ends` (not consumed) or the end.
  std::vector<Element> block(const std::set<std::string>& ends) {
    std::vector<Element> out;
    while (ok_ && !at_end()) {
      if (peek().kind == Tok::ident && ends.count(peek().text)) break;
      if (peek().kind == Tok::punct && ends.count(peek().text)) break;
      statement(out);
    }
    return out;
  }

  void statement(std::vector<Element>& out) {
    const Token& t = peek();
    if (is("compute")) return compute(out);
    if (is("par") || is("seq")) return loop(out);
    if (is("if")) return if_(out);
    if (is("wait") || is("notify")) return event(out);
    if (t.kind == Tok::ident && !keyword(t.text) && is(":=", 1)) return let(out);
    error(t, at_end() ? "unexpected end of the graph" : "unexpected '" + t.text + "': expected a statement (compute, par, seq, if, wait, notify or NAME := EXPR;)");
  }

  void compute(std::vector<Element>& out) {
    const Token kw = next();
    auto name = ident("a component name after 'compute'");
    if (!name || !expect("(", "after the component name")) return;
    std::vector<std::pair<std::string, SrcLoc>> args;
    std::vector<bool> is_ref;
    while (ok_ && !is(")")) {
      // a data argument is NAME or NAME[...]...; anything else is a scalar expression
      bool data = peek().kind == Tok::ident && !keyword(peek().text) && (is(",", 1) || is(")", 1) || is("[", 1));
      auto a = data ? ref("an argument") : expr({",", ")"});
      if (!a) return;
      args.push_back(*a);
      is_ref.push_back(data);
      if (!is(")") && !expect(",", "between arguments")) return;
    }
    if (!expect(")", "after the arguments") || !expect(";", "after compute")) return;
    auto it = comps_.find(name->text);
    if (it == comps_.end()) {
      std::vector<std::string> names;
      for (const auto& [n, c] : comps_) names.push_back(n);
      error(*name, "unknown abstract component '" + name->text + "'" + did_you_mean(name->text, names) +
                       " (declare it: <component name=\"" + name->text + "\" impl=\"...\">)");
      return;
    }
    const AbstractComponent& ac = it->second;
    if (args.size() != ac.params.size()) {
      error(*name, "'" + name->text + "' takes " + std::to_string(ac.params.size()) + " argument" +
                       (ac.params.size() == 1 ? "" : "s") + ", given " + std::to_string(args.size()));
      return;
    }
    std::string label = name->text + "(";
    for (std::size_t k = 0; k < args.size(); ++k) label += (k ? "," : "") + args[k].first;
    Element task = elem("task", kw.loc, {attr("component", ac.impl, kw.loc), attr("name", label + ")", kw.loc)});
    for (std::size_t k = 0; k < args.size(); ++k) {
      const AbstractParam& p = ac.params[k];
      if (!p.arg.empty()) {
        if (is_ref[k] && args[k].first.find('[') != std::string::npos) {
          error(*name, "argument " + std::to_string(k + 1) + " of '" + name->text + "' (" + p.name + ", an arg) must be a scalar");
          return;
        }
        const std::string v = "${" + args[k].first + "}";
        Element a = elem("arg", args[k].second, {attr("name", p.arg, args[k].second), attr("value", v, args[k].second)});
        task.children.push_back(std::move(a));
        continue;
      }
      if (!is_ref[k]) {
        error(*name, "argument " + std::to_string(k + 1) + " of '" + name->text + "' (" + p.name + ", mode " + p.mode +
                         ") must be data, not an expression");
        return;
      }
      task.children.push_back(
          elem(p.mode, args[k].second, {attr("port", p.port, args[k].second), attr("data", args[k].first, args[k].second)}));
    }
    for (const Element* a : ac.args) task.children.push_back(*a);
    out.push_back(std::move(task));
  }

  void loop(std::vector<Element>& out) {
    const Token kw = next();
    const bool par = kw.text == "par";
    if (!is("(")) {  // a block: par A // B // ... endpar (seq ... endseq)
      const std::string end = par ? "endpar" : "endseq";
      Element blk = elem(kw.text, kw.loc);
      while (ok_) {
        Element branch = elem("seq", peek().loc);
        branch.children = block({"//", end});
        if (par) blk.children.push_back(std::move(branch));
        else for (auto& c : branch.children) blk.children.push_back(std::move(c));
        if (!ok_) return;
        if (par && is("//")) {
          next();
          continue;
        }
        if (!expect(end, "to close '" + kw.text + "' (line " + std::to_string(kw.loc.line) + ")")) return;
        break;
      }
      out.push_back(std::move(blk));
      return;
    }
    // par (i := a; b[; step]) (j := ...) do ... enddo: nested loops, bounds inclusive
    std::vector<Element> heads;
    while (is("(")) {
      next();
      auto var = ident("a loop variable");
      if (!var || !expect(":=", "after the loop variable")) return;
      auto lo = expr({";"});
      if (!lo || !expect(";", "between the loop bounds")) return;
      auto hi = expr({";", ")"});
      if (!hi) return;
      std::optional<std::pair<std::string, SrcLoc>> step;
      if (is(";")) {
        next();
        step = expr({")"});
        if (!step) return;
      }
      if (!expect(")", "after the loop bounds")) return;
      const std::string to = step ? "${(" + step->first + ") > 0 ? (" + hi->first + ") + 1 : (" + hi->first + ") - 1}"
                                  : "${(" + hi->first + ") + 1}";
      Element l = elem(kw.text, kw.loc,
                       {attr("var", var->text, var->loc), attr("from", "${" + lo->first + "}", lo->second), attr("to", to, hi->second)});
      if (step) l.attrs.push_back(attr("step", "${" + step->first + "}", step->second));
      heads.push_back(std::move(l));
    }
    if (!expect("do", "after the loop head")) return;
    std::vector<Element> body = block({"enddo"});
    if (!ok_ || !expect("enddo", "to close '" + kw.text + "' (line " + std::to_string(kw.loc.line) + ")")) return;
    for (auto it = heads.rbegin(); it != heads.rend(); ++it) {
      it->children = std::move(body);
      body.clear();
      body.push_back(std::move(*it));
    }
    out.push_back(std::move(body.front()));
  }

  void if_(std::vector<Element>& out) {
    const Token kw = next();
    if (!expect("(", "after 'if'")) return;
    auto c = expr({")"});
    if (!c || !expect(")", "after the condition") || !expect("then", "after the condition")) return;
    Element e = elem("if", kw.loc, {attr("cond", "${" + c->first + "}", c->second)});
    e.children = block({"else", "endif"});
    if (!ok_) return;
    if (is("else")) {
      Element el = elem("else", next().loc);
      el.children = block({"endif"});
      if (!ok_) return;
      e.children.push_back(std::move(el));
    }
    if (!expect("endif", "to close 'if' (line " + std::to_string(kw.loc.line) + ")")) return;
    out.push_back(std::move(e));
  }

  void event(std::vector<Element>& out) {
    const Token kw = next();
    if (!expect("(", "after '" + kw.text + "'")) return;
    while (ok_) {
      auto r = ref("an event name");
      if (!r) return;
      out.push_back(elem(kw.text, kw.loc, {attr("event", r->first, r->second)}));
      if (kw.text == "wait" && is("and")) {
        next();
        continue;
      }
      break;
    }
    if (!expect(")", "after the event" + std::string(kw.text == "wait" ? "s ('and' between several)" : "")) ||
        !expect(";", "after " + kw.text))
      return;
  }

  void let(std::vector<Element>& out) {
    const Token name = next();
    next();  // :=
    auto e = expr({";"});
    if (!e || !expect(";", "after the assignment")) return;
    out.push_back(elem("let", name.loc, {attr("name", name.text, name.loc), attr("value", "${" + e->first + "}", e->second)}));
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  const std::map<std::string, AbstractComponent>& comps_;
  Diagnostics& d_;
  bool ok_ = true;
};

}  // namespace

bool translate_application(Element& root, Diagnostics& diags) {
  const int errors = diags.error_count();
  std::map<std::string, AbstractComponent> comps;
  const Element* graph = nullptr;
  Element wf;
  wf.name = "workflow";
  wf.loc = root.loc;
  for (const Attr& a : root.attrs)
    if (a.name == "name") wf.attrs.push_back(a);
    else diags.error(a.loc, "unknown attribute '" + a.name + "' on <application>");
  for (const Element& e : root.children) {
    if (e.name == "graph") {
      if (graph) diags.error(e.loc, "<application> has more than one <graph>");
      graph = &e;
      for (const Element& c : e.children) diags.error(c.loc, "<graph> holds YvetteML text, not <" + c.name + ">");
      continue;
    }
    if (e.name != "component") {
      wf.children.push_back(e);  // param, data, description, ...: the workflow language's
      continue;
    }
    const Attr* n = e.find("name");
    const Attr* impl = e.find("impl");
    if (!n || !impl) {
      diags.error(e.loc, "<component> needs name= and impl= (the registered component implementing it)");
      continue;
    }
    AbstractComponent ac{impl->value, {}, {}, e.loc};
    for (const Element& p : e.children) {
      if (p.name == "arg") {
        ac.args.push_back(&p);
        continue;
      }
      const Attr* pn = p.find("name");
      if (p.name != "param" || !pn) {
        diags.error(p.loc, "<component> holds <param name mode [port|arg]> and <arg name value> elements");
        continue;
      }
      AbstractParam ap{pn->value, "in", pn->value, ""};
      if (const Attr* m = p.find("mode")) ap.mode = m->value;
      if (const Attr* po = p.find("port")) ap.port = po->value;
      if (const Attr* ar = p.find("arg")) ap.arg = ar->value;
      if (ap.mode != "in" && ap.mode != "out" && ap.mode != "inout")
        diags.error(p.find("mode")->loc, "mode=\"" + ap.mode + "\": expected in, out or inout");
      if (!ap.arg.empty() && ap.mode != "in")
        diags.error(p.loc, "parameter '" + ap.name + "' binds an arg: its mode must be in");
      ac.params.push_back(std::move(ap));
    }
    if (!comps.emplace(n->value, std::move(ac)).second) diags.error(n->loc, "component '" + n->value + "' declared twice");
  }
  if (!graph) {
    diags.error(root.loc, "<application> has no <graph>");
    return false;
  }
  if (diags.error_count() > errors) return false;
  Lexer lex(graph->raw_text, graph->text_loc.line > 0 ? graph->text_loc : graph->loc, diags);
  Parser parser(lex.run(), comps, diags);
  std::vector<Element> body = parser.program();
  if (!parser.ok() || diags.error_count() > errors) return false;
  for (auto& e : body) wf.children.push_back(std::move(e));
  root = std::move(wf);
  return true;
}

}  // namespace ymlopt
