#include "ymlopt/engine/expr.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace ymlopt {

std::string Value::str() const {
  switch (kind) {
    case Kind::int_: return std::to_string(i);
    case Kind::bool_: return i ? "true" : "false";
    case Kind::string_: return s;
    case Kind::float_: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", f);
      return buf;
    }
  }
  return {};
}

using Op = Template::Node::Op;

class ExprParser {
 public:
  ExprParser(std::string_view src, size_t base, std::vector<Template::Node>& nodes)
      : s_(src), base_(base), nodes_(nodes) {}

  int parse_all() {
    const int n = ternary();
    skip();
    if (p_ != s_.size()) fail("unexpected '" + std::string(1, s_[p_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& m) const { throw ExprError{m, base_ + p_}; }
  void skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s_.substr(p_, tok.size()) == tok) {
      p_ += tok.size();
      return true;
    }
    return false;
  }
  int add(Op op, std::vector<int> args, size_t at) {
    Template::Node n;
    n.op = op;
    n.args = std::move(args);
    n.offset = base_ + at;
    nodes_.push_back(std::move(n));
    return int(nodes_.size() - 1);
  }
  int ternary() {
    const size_t at = p_;
    const int c = or_();
    if (!eat("?")) return c;
    const int a = ternary();
    if (!eat(":")) fail("expected ':' in conditional expression");
    const int b = ternary();
    return add(Op::cond, {c, a, b}, at);
  }
  int or_() {
    int l = and_();
    for (size_t at = p_; eat("||"); at = p_) l = add(Op::or_, {l, and_()}, at);
    return l;
  }
  int and_() {
    int l = cmp();
    for (size_t at = p_; eat("&&"); at = p_) l = add(Op::and_, {l, cmp()}, at);
    return l;
  }
  int cmp() {
    const int l = sum();
    const size_t at = p_;
    static const std::pair<const char*, Op> ops[] = {{"==", Op::eq}, {"!=", Op::ne}, {"<=", Op::le},
                                                     {">=", Op::ge}, {"<", Op::lt},   {">", Op::gt}};
    for (auto [tok, op] : ops)
      if (eat(tok)) return add(op, {l, sum()}, at);
    return l;
  }
  int sum() {
    int l = product();
    for (;;) {
      const size_t at = p_;
      if (eat("+")) l = add(Op::add, {l, product()}, at);
      else if (eat("-")) l = add(Op::sub, {l, product()}, at);
      else return l;
    }
  }
  int product() {
    int l = unary();
    for (;;) {
      const size_t at = p_;
      skip();
      if (s_.substr(p_, 2) == "**") return l;  // handled in power()
      if (eat("*")) l = add(Op::mul, {l, unary()}, at);
      else if (eat("/")) l = add(Op::div, {l, unary()}, at);
      else if (eat("%")) l = add(Op::mod, {l, unary()}, at);
      else return l;
    }
  }
  int unary() {
    const size_t at = p_;
    if (eat("-")) return add(Op::neg, {unary()}, at);
    if (eat("!")) return add(Op::not_, {unary()}, at);
    if (eat("+")) return unary();
    return power();
  }
  int power() {
    const int b = primary();
    const size_t at = p_;
    if (eat("**")) return add(Op::pow, {b, unary()}, at);
    return b;
  }
  int primary() {
    skip();
    const size_t at = p_;
    if (p_ >= s_.size()) fail("expected a value");
    const char c = s_[p_];
    if (c == '(') {
      ++p_;
      const int e = ternary();
      if (!eat(")")) fail("expected ')'");
      return e;
    }
    if (c == '\'') {
      const size_t end = s_.find('\'', p_ + 1);
      if (end == std::string_view::npos) fail("unterminated string");
      Template::Node n;
      n.offset = base_ + at;
      n.lit = Value::of_string(std::string(s_.substr(p_ + 1, end - p_ - 1)));
      p_ = end + 1;
      nodes_.push_back(std::move(n));
      return int(nodes_.size() - 1);
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t q = p_;
      bool is_float = false;
      while (q < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[q])) || s_[q] == '.' ||
                               ((s_[q] == '+' || s_[q] == '-') && (s_[q - 1] == 'e' || s_[q - 1] == 'E')))) {
        if (s_[q] == '.' || s_[q] == 'e' || s_[q] == 'E') is_float = true;
        ++q;
      }
      const std::string tok(s_.substr(p_, q - p_));
      char* end = nullptr;
      Template::Node n;
      n.offset = base_ + at;
      if (is_float) {
        n.lit = Value::of_float(std::strtod(tok.c_str(), &end));
      } else {
        n.lit = Value::of_int(std::strtoll(tok.c_str(), &end, 10));
      }
      if (end != tok.c_str() + tok.size()) fail("bad number '" + tok + "'");
      p_ = q;
      nodes_.push_back(std::move(n));
      return int(nodes_.size() - 1);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t q = p_;
      while (q < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[q])) || s_[q] == '_')) ++q;
      std::string name(s_.substr(p_, q - p_));
      p_ = q;
      Template::Node n;
      n.offset = base_ + at;
      if (name == "true" || name == "false") {
        n.lit = Value::of_bool(name == "true");
        nodes_.push_back(std::move(n));
        return int(nodes_.size() - 1);
      }
      if (eat("(")) {
        std::vector<int> args;
        if (!eat(")")) {
          do args.push_back(ternary());
          while (eat(","));
          if (!eat(")")) fail("expected ')' after arguments of '" + name + "'");
        }
        static const std::pair<const char*, int> fns[] = {
            {"min", -2}, {"max", -2}, {"abs", 1}, {"floor", 1}, {"ceil", 1}, {"sqrt", 1},
            {"log2", 1}, {"ceildiv", 2}, {"int", 1}, {"float", 1}};
        int arity = 0;
        for (auto [f, a] : fns)
          if (name == f) arity = a;
        if (arity == 0) {
          p_ = at;
          fail("unknown function '" + name + "'");
        }
        if ((arity > 0 && int(args.size()) != arity) || (arity < 0 && int(args.size()) < -arity)) {
          p_ = at;
          fail("wrong number of arguments to '" + name + "'");
        }
        n.op = Op::call;
        n.args = std::move(args);
      } else {
        n.op = Op::var;
      }
      n.name = std::move(name);
      nodes_.push_back(std::move(n));
      return int(nodes_.size() - 1);
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  std::string_view s_;
  size_t base_;
  size_t p_ = 0;
  std::vector<Template::Node>& nodes_;
};

std::shared_ptr<const Template> Template::compile(std::string_view text) {
  auto t = std::make_shared<Template>();
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find("${", pos);
    if (open == std::string_view::npos) {
      t->parts_.push_back({std::string(text.substr(pos)), -1, pos});
      break;
    }
    if (open > pos) t->parts_.push_back({std::string(text.substr(pos, open - pos)), -1, pos});
    int depth = 0;
    size_t close = open + 2;
    for (; close < text.size(); ++close) {
      if (text[close] == '(') ++depth;
      else if (text[close] == ')') --depth;
      else if (text[close] == '}' && depth <= 0) break;
    }
    if (close >= text.size()) throw ExprError{"unterminated '${'", open};
    const auto body = text.substr(open + 2, close - open - 2);
    if (body.find_first_not_of(" \t") == std::string_view::npos) throw ExprError{"empty '${}'", open};
    ExprParser p(body, open + 2, t->nodes_);
    const int root = p.parse_all();
    t->parts_.push_back({{}, root, open});
    ++t->exprs_;
    pos = close + 1;
  }
  return t;
}

namespace {
bool ints(const Value& a, const Value& b) { return a.kind != Value::Kind::float_ && b.kind != Value::Kind::float_; }
/// An integer result, or an error at `offset` when it does not fit 64 bits.
std::int64_t fits(bool overflow, long long v, std::size_t offset) {
  if (overflow) throw ExprError{"integer overflow (beyond 64 bits)", offset};
  return std::int64_t(v);
}
/// -v, or an error when it does not fit (v = INT64_MIN)
std::int64_t neg(std::int64_t v, std::size_t offset) {
  long long r = 0;
  const bool over = __builtin_sub_overflow(0LL, v, &r);
  return fits(over, r, offset);
}
std::int64_t floordiv(std::int64_t a, std::int64_t b, std::size_t offset) {
  if (b == -1) return neg(a, offset);
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
/// floor, ceil or int of a float: an error when it is NaN or out of the 64-bit range.
std::int64_t to_int(double v, std::size_t offset) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    throw ExprError{std::string("value ") + text + " is not an integer within 64 bits", offset};
  }
  return std::int64_t(v);
}
}  // namespace

Value Template::eval(int idx, const Lookup& lookup) const {
  const Node& n = nodes_[size_t(idx)];
  auto arg = [&](size_t k) {
    Value v = eval(n.args[k], lookup);
    if (!v.numeric() && n.op != Op::eq && n.op != Op::ne && n.op != Op::cond)
      throw ExprError{"string '" + v.s + "' used in arithmetic", nodes_[size_t(n.args[k])].offset};
    return v;
  };
  switch (n.op) {
    case Op::lit: return n.lit;
    case Op::var: {
      const Value* v = lookup(n.name);
      if (!v) throw ExprError{"unknown name '" + n.name + "'", n.offset};
      return *v;
    }
    case Op::neg: {
      Value a = arg(0);
      return a.kind == Value::Kind::float_ ? Value::of_float(-a.f) : Value::of_int(neg(a.i, n.offset));
    }
    case Op::not_: return Value::of_bool(arg(0).number() == 0);
    case Op::add:
    case Op::sub:
    case Op::mul: {
      Value a = arg(0), b = arg(1);
      if (!ints(a, b))
        return Value::of_float(n.op == Op::add   ? a.number() + b.number()
                               : n.op == Op::sub ? a.number() - b.number()
                                                 : a.number() * b.number());
      long long r = 0;
      const bool over = n.op == Op::add   ? __builtin_add_overflow(a.i, b.i, &r)
                        : n.op == Op::sub ? __builtin_sub_overflow(a.i, b.i, &r)
                                          : __builtin_mul_overflow(a.i, b.i, &r);
      return Value::of_int(fits(over, r, n.offset));
    }
    case Op::div:
    case Op::mod: {
      Value a = arg(0), b = arg(1);
      const bool in = ints(a, b);
      if (in && b.i == 0) throw ExprError{"division by zero", n.offset};
      if (n.op == Op::div)
        return in ? Value::of_int(floordiv(a.i, b.i, n.offset)) : Value::of_float(a.number() / b.number());
      if (!in) return Value::of_float(std::fmod(a.number(), b.number()));
      if (b.i == -1) return Value::of_int(0);  // (INT64_MIN % -1 traps)
      std::int64_t r = a.i % b.i;               // the floor division's remainder: the divisor's sign
      if (r != 0 && ((r < 0) != (b.i < 0))) r += b.i;
      return Value::of_int(r);
    }
    case Op::pow: {
      Value a = arg(0), b = arg(1);
      if (ints(a, b) && b.i >= 0) {
        // |a| <= 1 in closed form; otherwise at most 63 products before an overflow
        if (a.i == 0 || a.i == 1) return Value::of_int(b.i == 0 ? 1 : a.i);
        if (a.i == -1) return Value::of_int(b.i % 2 ? -1 : 1);
        long long r = 1;
        for (std::int64_t k = 0; k < b.i; ++k)
          if (__builtin_mul_overflow(r, a.i, &r)) fits(true, r, n.offset);
        return Value::of_int(std::int64_t(r));
      }
      return Value::of_float(std::pow(a.number(), b.number()));
    }
    case Op::eq:
    case Op::ne: {
      Value a = eval(n.args[0], lookup), b = eval(n.args[1], lookup);
      bool eq;
      if (a.numeric() != b.numeric()) throw ExprError{"comparison of a string with a number", n.offset};
      eq = a.numeric() ? a.number() == b.number() : a.s == b.s;
      return Value::of_bool(n.op == Op::eq ? eq : !eq);
    }
    case Op::lt: return Value::of_bool(arg(0).number() < arg(1).number());
    case Op::le: return Value::of_bool(arg(0).number() <= arg(1).number());
    case Op::gt: return Value::of_bool(arg(0).number() > arg(1).number());
    case Op::ge: return Value::of_bool(arg(0).number() >= arg(1).number());
    case Op::and_: return Value::of_bool(arg(0).number() != 0 && arg(1).number() != 0);
    case Op::or_: return Value::of_bool(arg(0).number() != 0 || arg(1).number() != 0);
    case Op::cond: {
      const Value c = eval(n.args[0], lookup);
      if (!c.numeric()) throw ExprError{"condition is a string", n.offset};
      return eval(n.args[c.number() != 0 ? 1 : 2], lookup);
    }
    case Op::call: {
      std::vector<Value> v;
      for (size_t k = 0; k < n.args.size(); ++k) v.push_back(arg(k));
      const std::string& f = n.name;
      if (f == "min" || f == "max") {
        Value best = v[0];
        for (const auto& x : v)
          if ((f == "min") ? x.number() < best.number() : x.number() > best.number()) best = x;
        return best;
      }
      if (f == "abs")
        return v[0].kind == Value::Kind::float_ ? Value::of_float(std::fabs(v[0].f))
                                                : Value::of_int(v[0].i < 0 ? neg(v[0].i, n.offset) : v[0].i);
      if (f == "floor") return Value::of_int(to_int(std::floor(v[0].number()), n.offset));
      if (f == "ceil") return Value::of_int(to_int(std::ceil(v[0].number()), n.offset));
      if (f == "int") return Value::of_int(v[0].kind == Value::Kind::float_ ? to_int(v[0].f, n.offset) : v[0].i);
      if (f == "float") return Value::of_float(v[0].number());
      if (f == "sqrt") return Value::of_float(std::sqrt(v[0].number()));
      if (f == "log2") return Value::of_float(std::log2(v[0].number()));
      if (f == "ceildiv") {
        if (v[1].i == 0) throw ExprError{"division by zero", n.offset};
        return Value::of_int(neg(floordiv(neg(v[0].i, n.offset), v[1].i, n.offset), n.offset));
      }
      break;
    }
  }
  throw ExprError{"bad expression", n.offset};
}

std::string Template::render(const Lookup& lookup) const {
  if (parts_.size() == 1 && parts_[0].expr < 0) return parts_[0].text;
  std::string out;
  for (const auto& p : parts_) out += p.expr < 0 ? p.text : eval(p.expr, lookup).str();
  return out;
}

Value Template::value(const Lookup& lookup) const {
  if (parts_.size() == 1 && parts_[0].expr >= 0) return eval(parts_[0].expr, lookup);
  return Value::of_string(render(lookup));
}

}  // namespace ymlopt
