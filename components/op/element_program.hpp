// An elementwise expression (op.matmul's `mul` over a and b, its `map` over c)
// compiled once into a postfix program whose instructions each run over a
// block of lanes, so nothing is interpreted per element.
//
//   numbers, the variables, + - * / (unary -), parentheses, and the functions
//   exp log abs sqrt tanh erf relu (one argument) and max min (two)
//
//   const ElementProgram p = ElementProgram::compile("a*relu(b)", {"a", "b"});
//   p.run({{&x, 0}, {row, 1}}, out, 64);  // out[l] = x * relu(row[l])
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "op/isa.hpp"

namespace ymlopt::op {

class ElementProgram {
 public:
  /// A variable's values: data[l * stride] (stride 0: one value for every lane).
  struct Input {
    const float* data;
    std::int64_t stride;
  };
  /// Lanes per block of run(): its registers' length; and the registers (values pending at once).
  static constexpr std::int64_t kLanes = 64;
  static constexpr int kRegisters = 16;

  /// Parses `text` over `vars`. Throws KernelError naming the position and
  /// what was expected (an unknown name lists the variables and functions).
  static ElementProgram compile(const std::string& text, std::vector<std::string> vars);

  /// out[l] = the expression at lane l, l < len <= kLanes; in[i] is vars[i].
  /// The loops are compiled for AVX-512, AVX2 and the baseline (isa: as
  /// op::matmul's; Isa::scalar also takes std::exp, std::tanh, std::erf).
  void run(std::span<const Input> in, float* out, std::int64_t len, Isa isa = Isa::best) const;

  /// "a*b", "a+b" or "" (another expression): the pairs with fast kernels.
  std::string canonical() const { return canonical_; }

  /// The compiled code: postfix instructions over a stack of registers.
  enum class Op : std::uint8_t { var, num, neg, add, sub, mul, div, max, min, exp, log, abs, sqrt, tanh, erf, relu };
  struct Instr {
    Op op;
    int var = 0;
    float num = 0;
  };

 private:
  std::vector<Instr> code_;
  int depth_ = 0;  // registers the program needs
  std::string canonical_;
  friend class ElementParser;
};

}  // namespace ymlopt::op
