#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ymlopt {

/// The value of a `${...}` expression or a parameter: int, float, bool or string.
struct Value {
  enum class Kind : std::uint8_t { int_, float_, bool_, string_ };
  Kind kind = Kind::int_;
  std::int64_t i = 0;
  double f = 0;
  std::string s;

  static Value of_int(std::int64_t v) { Value x; x.kind = Kind::int_; x.i = v; x.f = double(v); return x; }
  /// (i: v truncated, saturated at the 64-bit range; 0 for NaN)
  static Value of_float(double v) {
    Value x;
    x.kind = Kind::float_;
    x.f = v;
    x.i = v != v ? 0 : v >= 9223372036854775807.0 ? INT64_MAX : v <= -9223372036854775808.0 ? INT64_MIN : std::int64_t(v);
    return x;
  }
  static Value of_bool(bool v) { Value x; x.kind = Kind::bool_; x.i = v; x.f = v; return x; }
  static Value of_string(std::string v) { Value x; x.kind = Kind::string_; x.s = std::move(v); return x; }
  bool numeric() const { return kind != Kind::string_; }
  double number() const { return kind == Kind::float_ ? f : double(i); }
  std::string str() const;
};

/// Variable lookup used while evaluating: returns null for an unknown name.
using Lookup = std::function<const Value*(std::string_view)>;

/// Thrown for syntax and evaluation errors; `offset` is within the template text.
struct ExprError {
  std::string message;
  size_t offset = 0;
};

/// An attribute value with `${expr}` parts, compiled once, evaluated many times.
///
///   auto t = Template::compile("A[${i},${k+1}]");
///   std::string s = t->render(lookup);          // "A[2,4]"
///   Value v = Template::compile("${n/bs}")->value(lookup);   // int 4
class Template {
 public:
  /// Throws ExprError on a syntax error.
  static std::shared_ptr<const Template> compile(std::string_view text);
  /// Renders to text; throws ExprError.
  std::string render(const Lookup& lookup) const;
  /// A template that is exactly one `${}` gives its typed value; plain text
  /// gives a string value. Throws ExprError.
  Value value(const Lookup& lookup) const;

  struct Node;

 private:
  struct Part {
    std::string text;
    int expr = -1;  // root node index, or -1 for text
    size_t offset = 0;
  };
  Value eval(int node, const Lookup& lookup) const;
  std::vector<Part> parts_;
  std::vector<Node> nodes_;
  int exprs_ = 0;
  friend class ExprParser;
};

struct Template::Node {
  enum class Op : std::uint8_t {
    lit, var, neg, not_, add, sub, mul, div, mod, pow, eq, ne, lt, le, gt, ge, and_, or_, cond, call
  };
  Op op = Op::lit;
  Value lit;
  std::string name;        // var or function name
  std::vector<int> args;   // operands
  size_t offset = 0;
};

}  // namespace ymlopt
