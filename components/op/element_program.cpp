// ElementProgram (element_program.hpp): a recursive-descent parser to postfix
// code, and the block interpreter (one loop over the lanes per instruction).
#include "op/element_program.hpp"
#include "op/semiring.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include <ymlopt/sdk.hpp>

namespace ymlopt::op {

class ElementParser {
 public:
  using Op = ElementProgram::Op;
  ElementParser(const std::string& text, const std::vector<std::string>& vars, ElementProgram& out)
      : t_(text), vars_(vars), p_(out) {}

  void parse() {
    expr();
    skip();
    if (i_ != t_.size()) fail("an operator or the end");
  }

 private:
  const std::string& t_;
  const std::vector<std::string>& vars_;
  ElementProgram& p_;
  std::size_t i_ = 0;
  int stack_ = 0;

  [[noreturn]] void fail(const std::string& expected) const {
    throw KernelError("expression '" + t_ + "' at column " + std::to_string(i_ + 1) + ": expected " + expected);
  }
  void skip() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void emit(Op op, int var = 0, float num = 0) {
    p_.code_.push_back({op, var, num});
    if (op == Op::var || op == Op::num) p_.depth_ = std::max(p_.depth_, ++stack_);
    else if (op == Op::add || op == Op::sub || op == Op::mul || op == Op::div || op == Op::max || op == Op::min)
      --stack_;
  }
  void expr() {
    term();
    for (;;) {
      if (eat('+')) term(), emit(Op::add);
      else if (eat('-')) term(), emit(Op::sub);
      else return;
    }
  }
  void term() {
    unary();
    for (;;) {
      if (eat('*')) unary(), emit(Op::mul);
      else if (eat('/')) unary(), emit(Op::div);
      else return;
    }
  }
  void unary() {
    if (eat('-')) {
      unary();
      emit(Op::neg);
    } else {
      primary();
    }
  }
  void primary() {
    skip();
    if (eat('(')) {
      expr();
      if (!eat(')')) fail("')'");
      return;
    }
    if (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.')) {
      char* end = nullptr;
      const float v = std::strtof(t_.c_str() + i_, &end);
      i_ = static_cast<std::size_t>(end - t_.c_str());
      emit(Op::num, 0, v);
      return;
    }
    const std::size_t start = i_;
    while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_')) ++i_;
    const std::string name = t_.substr(start, i_ - start);
    if (name.empty()) fail("a number, a variable, a function or '('");
    for (std::size_t v = 0; v < vars_.size(); ++v)
      if (vars_[v] == name) return emit(Op::var, static_cast<int>(v));
    static const std::pair<const char*, Op> unary_fns[] = {{"exp", Op::exp},   {"log", Op::log},   {"abs", Op::abs},
                                                           {"sqrt", Op::sqrt}, {"tanh", Op::tanh}, {"erf", Op::erf},
                                                           {"relu", Op::relu}};
    for (auto [fn, op] : unary_fns)
      if (name == fn) {
        if (!eat('(')) fail("'(' after " + name);
        expr();
        if (!eat(')')) fail("')' closing " + name);
        return emit(op);
      }
    if (name == "max" || name == "min") {
      if (!eat('(')) fail("'(' after " + name);
      expr();
      if (!eat(',')) fail("',' (" + name + " takes two arguments)");
      expr();
      if (!eat(')')) fail("')' closing " + name);
      return emit(name == "max" ? Op::max : Op::min);
    }
    std::string known;
    for (const auto& v : vars_) known += v + ", ";
    i_ = start;
    fail("a variable (" + known + "or a function: exp log abs sqrt tanh erf relu max min), not '" + name + "'");
  }
};

ElementProgram ElementProgram::compile(const std::string& text, std::vector<std::string> vars) {
  ElementProgram p;
  ElementParser(text, vars, p).parse();
  if (p.depth_ > kRegisters)
    throw KernelError("expression '" + text + "' needs " + std::to_string(p.depth_) +
                      " pending values at once: at most " + std::to_string(kRegisters));
  // The pairs with fast kernels, whatever the spacing: a*b, b*a, a+b, b+a.
  if (vars.size() == 2 && p.code_.size() == 3 && p.code_[0].op == Op::var && p.code_[1].op == Op::var &&
      p.code_[0].var != p.code_[1].var) {
    if (p.code_[2].op == Op::mul) p.canonical_ = "a*b";
    if (p.code_[2].op == Op::add) p.canonical_ = "a+b";
  }
  return p;
}

namespace {

/// The program over one block: a stack of registers of kLanes floats; each
/// instruction is one loop over the lanes, which the target attribute of the
/// function it is inlined into vectorises.
using Instr = ElementProgram::Instr;
using Input = ElementProgram::Input;
using Op = ElementProgram::Op;
using Code = std::span<const Instr>;
using Inputs = std::span<const Input>;

inline __attribute__((always_inline)) void run_body(Code code, Inputs in, float* out, std::int64_t len, Isa isa) {
  constexpr std::int64_t kLanes = ElementProgram::kLanes;
  float regs[ElementProgram::kRegisters][kLanes];
  int top = -1;
  for (const Instr& ins : code) {
    switch (ins.op) {
      case Op::var: {
        float* r = regs[++top];
        const Input& x = in[static_cast<std::size_t>(ins.var)];
        if (x.stride == 0) std::fill_n(r, len, x.data[0]);
        else for (std::int64_t l = 0; l < len; ++l) r[l] = x.data[l * x.stride];
        break;
      }
      case Op::num: std::fill_n(regs[++top], len, ins.num); break;
      case Op::neg: for (std::int64_t l = 0; l < len; ++l) regs[top][l] = -regs[top][l]; break;
      case Op::exp: unary(Unary::exp, regs[top], len, isa); break;
      case Op::log: for (std::int64_t l = 0; l < len; ++l) regs[top][l] = std::log(regs[top][l]); break;
      case Op::abs: for (std::int64_t l = 0; l < len; ++l) regs[top][l] = std::abs(regs[top][l]); break;
      case Op::sqrt: for (std::int64_t l = 0; l < len; ++l) regs[top][l] = std::sqrt(regs[top][l]); break;
      case Op::tanh: unary(Unary::tanh, regs[top], len, isa); break;
      case Op::erf: unary(Unary::erf, regs[top], len, isa); break;
      case Op::relu:
        for (std::int64_t l = 0; l < len; ++l) regs[top][l] = regs[top][l] > 0 ? regs[top][l] : 0.0f;
        break;
      default: {  // binary: regs[top - 1] op= regs[top]
        float* x = regs[top - 1];
        const float* y = regs[top--];
        switch (ins.op) {
          case Op::add: for (std::int64_t l = 0; l < len; ++l) x[l] += y[l]; break;
          case Op::sub: for (std::int64_t l = 0; l < len; ++l) x[l] -= y[l]; break;
          case Op::mul: for (std::int64_t l = 0; l < len; ++l) x[l] *= y[l]; break;
          case Op::div: for (std::int64_t l = 0; l < len; ++l) x[l] /= y[l]; break;
          case Op::max:
            for (std::int64_t l = 0; l < len; ++l) x[l] = std::isnan(y[l]) || y[l] > x[l] ? y[l] : x[l];
            break;
          case Op::min:
            for (std::int64_t l = 0; l < len; ++l) x[l] = std::isnan(y[l]) || y[l] < x[l] ? y[l] : x[l];
            break;
          default: break;
        }
      }
    }
  }
  std::copy_n(regs[0], len, out);
}

__attribute__((target("avx512f,avx512dq"))) void run_avx512(Code code, Inputs in, float* out, std::int64_t len) {
  run_body(code, in, out, len, Isa::avx512);
}
__attribute__((target("avx2,fma"))) void run_avx2(Code code, Inputs in, float* out, std::int64_t len) {
  run_body(code, in, out, len, Isa::avx2);
}
void run_scalar(Code code, Inputs in, float* out, std::int64_t len) { run_body(code, in, out, len, Isa::scalar); }

}  // namespace

void ElementProgram::run(std::span<const Input> in, float* out, std::int64_t len, Isa isa) const {
  switch (resolve_isa(isa, "op::ElementProgram")) {
    case Isa::avx512: return run_avx512(code_, in, out, len);
    case Isa::avx2: return run_avx2(code_, in, out, len);
    default: return run_scalar(code_, in, out, len);
  }
}

}  // namespace ymlopt::op
