#include <gtest/gtest.h>

#include <map>

#include "ymlopt/engine/expr.hpp"

using namespace ymlopt;

namespace {
std::map<std::string, Value, std::less<>> vars = {
    {"n", Value::of_int(10)}, {"bs", Value::of_int(4)}, {"x", Value::of_float(0.5)}, {"s", Value::of_string("f64")}};
const Value* lookup(std::string_view n) {
  auto it = vars.find(n);
  return it == vars.end() ? nullptr : &it->second;
}
Value eval(const std::string& t) { return Template::compile(t)->value(lookup); }
std::string render(const std::string& t) { return Template::compile(t)->render(lookup); }
}  // namespace

TEST(Expr, IntegerArithmeticFollowsFloorDivision) {
  EXPECT_EQ(eval("${n/bs}").i, 2);
  EXPECT_EQ(eval("${-7/2}").i, -4);
  EXPECT_EQ(eval("${-7%2}").i, 1);
  EXPECT_EQ(eval("${ceildiv(n, bs)}").i, 3);
  EXPECT_EQ(eval("${2**10}").i, 1024);
  EXPECT_EQ(eval("${(n+2)*3 - 1}").i, 35);
  EXPECT_EQ(eval("${min(n, bs, 7)}").i, 4);
  EXPECT_EQ(eval("${max(1, n)}").i, 10);
}

TEST(Expr, FloatsAndConversions) {
  EXPECT_DOUBLE_EQ(eval("${x * 3}").f, 1.5);
  EXPECT_EQ(eval("${x * 3}").kind, Value::Kind::float_);
  EXPECT_DOUBLE_EQ(eval("${1.0 / sqrt(4)}").f, 0.5);
  EXPECT_DOUBLE_EQ(eval("${1e-3}").f, 1e-3);
  EXPECT_EQ(eval("${int(7.9)}").i, 7);
  EXPECT_EQ(eval("${floor(-0.5)}").i, -1);
}

TEST(Expr, LogicComparisonsStrings) {
  EXPECT_EQ(eval("${n > 3 && bs <= 4}").i, 1);
  EXPECT_EQ(eval("${!(n == 10) || false}").i, 0);
  EXPECT_EQ(eval("${s == 'f64' ? 1 : 2}").i, 1);
  EXPECT_EQ(eval("${s != 'f64' ? 1e-5 : 1e-12}").f, 1e-12);
}

TEST(Expr, RendersTemplates) {
  EXPECT_EQ(render("A[${n/bs},${bs-1}]"), "A[2,3]");
  EXPECT_EQ(render("${n},${n}"), "10,10");
  EXPECT_EQ(render("plain"), "plain");
  EXPECT_EQ(render("${s}"), "f64");
  EXPECT_EQ(eval("plain").kind, Value::Kind::string_);
}

TEST(Expr, ReportsErrorsWithOffsets) {
  auto err = [](const std::string& t) {
    try {
      eval(t);
    } catch (const ExprError& e) {
      return e.message + "@" + std::to_string(e.offset);
    }
    return std::string("no error");
  };
  EXPECT_EQ(err("${n +* 2}"), "unexpected '*'@5");
  EXPECT_EQ(err("ab${m}"), "unknown name 'm'@4");
  EXPECT_EQ(err("${n/0}"), "division by zero@3");
  EXPECT_EQ(err("${n"), "unterminated '${'@0");
  EXPECT_EQ(err("${}"), "empty '${}'@0");
  EXPECT_EQ(err("${foo(1)}"), "unknown function 'foo'@2");
  EXPECT_EQ(err("${min()}"), "wrong number of arguments to 'min'@2");
  EXPECT_EQ(err("${s + 1}"), "string 'f64' used in arithmetic@2");
  // integers beyond 64 bits and floats that are no integer are errors, not
  // undefined behaviour (found by tests/fuzz under UBSan)
  EXPECT_EQ(err("${9223372036854775807 + n}"), "integer overflow (beyond 64 bits)@22");
  EXPECT_EQ(err("${-9223372036854775807 - 2}"), "integer overflow (beyond 64 bits)@23");
  EXPECT_EQ(err("${4294967296 * 4294967296}"), "integer overflow (beyond 64 bits)@13");
  EXPECT_EQ(err("${3 ** 40}"), "integer overflow (beyond 64 bits)@3");
  EXPECT_EQ(err("${int(1e300)}"), "value 1e+300 is not an integer within 64 bits@2");
  EXPECT_EQ(err("${floor(sqrt(-1))}"), "value -nan is not an integer within 64 bits@2");
  EXPECT_EQ(eval("${2 ** 62}").i, std::int64_t(1) << 62);
  EXPECT_EQ(eval("${(-1) ** 1000000000000000001}").i, -1);  // closed form, no loop
  EXPECT_EQ(eval("${7 % -1}").i, 0);
  EXPECT_EQ(eval("${7 % -2}").i, -1);                              // the divisor's sign
  EXPECT_EQ(eval("${(-9223372036854775807 - 1) % 3}").i, 1);      // q * b would not fit
  EXPECT_EQ(eval("${ceildiv(n, 3)}").i, 4);
}
