// Attribute values: ${} templates compiled once per attribute, evaluated in the current scope.
#include "compiler.hpp"

#include <cmath>
#include <cstdlib>

namespace ymlopt::compiler {

const Template* Compiler::tmpl(const Attr& a) {
  auto it = templates_.find(&a);
  if (it != templates_.end()) return it->second.get();
  std::shared_ptr<const Template> t;
  try {
    t = Template::compile(a.value);
  } catch (const ExprError& e) {
    diags_.error(at_offset(a, e.offset), "bad expression in " + a.name + "=\"" + a.value + "\": " + e.message);
  }
  return (templates_[&a] = t).get();
}

// Evaluates an attribute; nullopt after reporting an error.
std::optional<Value> Compiler::eval(const Attr& a) {
  const Template* t = tmpl(a);
  if (!t) return std::nullopt;
  try {
    return t->value(lookup_fn());
  } catch (const ExprError& e) {
    diags_.error(at_offset(a, e.offset), "bad expression in " + a.name + "=\"" + a.value + "\": " + e.message);
    return std::nullopt;
  }
}

std::optional<std::string> Compiler::render(const Attr& a) {
  const Template* t = tmpl(a);
  if (!t) return std::nullopt;
  try {
    return t->render(lookup_fn());
  } catch (const ExprError& e) {
    diags_.error(at_offset(a, e.offset), "bad expression in " + a.name + "=\"" + a.value + "\": " + e.message);
    return std::nullopt;
  }
}

// A value as a number: numeric values, and literals such as cond="1",
// cond="true" or budget_s="0.5" (an attribute without ${} is a string).
std::optional<double> Compiler::as_number(const Value& v) {
  if (v.numeric()) return v.number();
  if (v.s == "true") return 1.0;
  if (v.s == "false") return 0.0;
  char* end = nullptr;
  const double x = std::strtod(v.s.c_str(), &end);
  if (v.s.empty() || *end != 0 || !std::isfinite(x)) return std::nullopt;  // not "nan", "inf"
  return x;
}

std::optional<std::int64_t> Compiler::eval_int(const Attr& a) {
  auto v = eval(a);
  if (!v) return std::nullopt;
  if (v->kind == Value::Kind::int_ || v->kind == Value::Kind::bool_) return v->i;
  if (v->kind == Value::Kind::string_) {
    char* end = nullptr;
    const long long x = std::strtoll(v->s.c_str(), &end, 10);
    if (!v->s.empty() && *end == 0) return x;
  }
  diags_.error(a.loc, a.name + "=\"" + a.value + "\" must be an integer, got '" + v->str() + "'");
  return std::nullopt;
}

std::optional<std::vector<std::int64_t>> Compiler::eval_list(const Attr& a) {
  auto s = render(a);
  if (!s) return std::nullopt;
  std::vector<std::int64_t> out;
  size_t p = 0;
  while (p <= s->size()) {
    size_t q = s->find(',', p);
    if (q == std::string::npos) q = s->size();
    std::string tok = s->substr(p, q - p);
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    char* end = nullptr;
    const long long x = std::strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || *end != 0) {
      diags_.error(a.loc, a.name + "=\"" + a.value + "\" must be a comma-separated list of integers, got '" + *s + "'");
      return std::nullopt;
    }
    out.push_back(x);
    p = q + 1;
  }
  return out;
}

std::optional<Value> Compiler::convert(const Value& v, const std::string& type) {
  if (type == "string") return Value::of_string(v.str());
  if (v.kind != Value::Kind::string_) {
    if (type == "int") {
      if (v.kind == Value::Kind::float_ && v.f != double(std::int64_t(v.f))) return std::nullopt;
      return Value::of_int(v.kind == Value::Kind::float_ ? std::int64_t(v.f) : v.i);
    }
    if (type == "float") return Value::of_float(v.number());
    return Value::of_bool(v.number() != 0);
  }
  const std::string& s = v.s;
  if (type == "bool") {
    if (s == "true" || s == "1" || s == "yes") return Value::of_bool(true);
    if (s == "false" || s == "0" || s == "no") return Value::of_bool(false);
    return std::nullopt;
  }
  char* end = nullptr;
  if (type == "int") {
    const long long x = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) return std::nullopt;
    return Value::of_int(x);
  }
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) return std::nullopt;
  return Value::of_float(x);
}

}  // namespace ymlopt::compiler
