// Products over a semiring: C[i,j] = ⊕_k A[i,k] ⊗ B[k,j] with ⊗ one of a*b,
// a+b and ⊕ one of sum, max, min, logsumexp (log Σ exp), prod, on row-major
// matrices with leading dimensions. (sum, a*b) is the GEMM; (max, a+b) and
// (min, a+b) the tropical semirings (shortest paths, Viterbi); (logsumexp, a+b)
// the log semiring (a softmax's normaliser, the forward algorithm).
//
// Semantics (every path): ⊗ is IEEE arithmetic in the element type; ⊕ over an
// empty k is its identity (0, -inf, +inf, -inf, 1); a NaN term makes the result
// NaN (max and min too, unlike fmax); logsumexp is max + log Σ exp(x - max),
// +inf when a term is +inf, -inf when all terms are -inf. f32 runs vector
// kernels (AVX-512 or AVX2, chosen at run time; max, min and prod give the
// scalar path's values exactly, sum and logsumexp within rounding) when they
// cannot differ from the scalar path: (min, +) and (max, +) without NaN and
// without both infinities (the semiring's zero, +inf or -inf, is fine),
// (logsumexp, +) without NaN or +inf, prod without NaN, the others on finite
// inputs that cannot overflow; the rest, and f64 except (sum, a*b), run the
// scalar path.
//
//   op::matmul({op::Combine::add, op::Reduce::min}, false, false, n, n, n, d, n, d, n, d2, n, false);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "op/element_program.hpp"
#include "op/isa.hpp"

namespace ymlopt::op {

enum class Combine { mul, add };
enum class Reduce { sum, max, min, logsumexp, prod };

/// "sum", "max", "min", "logsumexp" or "prod" (op.matmul's add); sum for any
/// other name, which op.matmul's check refuses first.
Reduce parse_reduce(const std::string& name);

struct Semiring {
  Combine mul = Combine::mul;
  Reduce add = Reduce::sum;
};


/// x = f(x) in place over n floats. The vector paths are polynomials
/// (relative error ~2e-7 for exp and erf, ~3e-7 for tanh; results below
/// 1e-38 flush to 0; NaN propagates); Isa::scalar is std::exp, std::tanh, std::erf.
enum class Unary { exp, tanh, erf };
void unary(Unary f, float* x, std::int64_t n, Isa isa = Isa::best);

/// C = op(A) ⊗ op(B) over `s` (op(X) = Xᵀ when the flag is set), A m x k, B k x
/// n; with `accumulate`, C[i,j] = C[i,j] ⊕ that. Throws KernelError when the
/// forced `isa` is not on this CPU.
void matmul(Semiring s, bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
            std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate,
            Isa isa = Isa::best);
void matmul(Semiring s, bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a,
            std::int64_t lda, const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool accumulate,
            Isa isa = Isa::best);

/// An output mask: entry (i, j) of C is computed when mask(i, j) is nonzero
/// (any of i8, i32, f32 through `at`). Masked entries are `fill` when set,
/// else the reduction over nothing: the identity, or C's old value with
/// accumulate.
/// With block > 0 the mask holds one entry per block x block tile of C
/// (a block-sparse pattern: [ceil(m / block), ceil(n / block)]).
struct Mask {
  const void* data = nullptr;
  int kind = 0;  // 0: i8, 1: i32, 2: f32
  std::int64_t ld = 0;
  std::optional<double> fill;
  std::int64_t block = 0;
  bool at(std::int64_t i, std::int64_t j) const {
    const std::int64_t e = block > 0 ? (i / block) * ld + j / block : i * ld + j;
    return kind == 0 ? static_cast<const std::int8_t*>(data)[e] != 0
           : kind == 1 ? static_cast<const std::int32_t*>(data)[e] != 0
                       : static_cast<const float*>(data)[e] != 0.0f;
  }
};

/// matmul() under an output mask, in blocks of 128 x 128 of C (of the mask's
/// block size for a block mask): a block with no kept entry costs nothing (a
/// causal mask skips half the work), the others are computed whole and their
/// masked entries reset.
void matmul_masked(Semiring s, bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k,
                   const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                   bool accumulate, const Mask& mask);
void matmul_masked(Semiring s, bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k,
                   const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double* c, std::int64_t ldc,
                   bool accumulate, const Mask& mask);

/// matmul() for ⊕ max or min that also writes, per entry of C, the k that
/// attains it (the first on ties; -1 when no term passes the identity, for
/// k = 0, and when the result is NaN):
/// the back-pointers of a Viterbi or shortest-path recurrence. f32 on the
/// vector kernels where matmul() would take them (the same values and
/// arguments as the scalar path), else and f64 on the scalar path.
void matmul_arg(Semiring s, bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc, std::int32_t* arg,
                std::int64_t ldarg, Isa isa = Isa::best);
void matmul_arg(Semiring s, bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, const double* a,
                std::int64_t lda, const double* b, std::int64_t ldb, double* c, std::int64_t ldc, std::int32_t* arg,
                std::int64_t ldarg);

/// Y (rows x f, ldy) = A X (or Y + A X with accumulate) for a CSR A of `rows`
/// rows (values and global columns [cap], row pointers [rows+1]) and a dense X
/// (n x f, ldx): a GCN layer's aggregation. Every pointer and column is checked
/// as read (KernelError naming the entry). The vector paths give the scalar
/// path's values exactly (the same operations in the same order, no FMA).
void csr_matmul(const float* vals, const std::int32_t* cols, const std::int32_t* ptr, std::int64_t rows,
                std::int64_t cap, const float* x, std::int64_t ldx, std::int64_t n, std::int64_t f, float* y,
                std::int64_t ldy, bool accumulate, Isa isa = Isa::best);
void csr_matmul(const double* vals, const std::int32_t* cols, const std::int32_t* ptr, std::int64_t rows,
                std::int64_t cap, const double* x, std::int64_t ldx, std::int64_t n, std::int64_t f, double* y,
                std::int64_t ldy, bool accumulate, Isa isa = Isa::best);

/// C = A B (or C + A B) skipping A's zeros: A's nonzeros gathered row by row
/// (CSR), then csr_matmul. For a product whose A is mostly zero (the ReLU
/// output a next layer multiplies); B's infinities and NaNs meet no zero of A
/// (0 x inf is not formed). A row-major m x k, B k x n; no transposes.
void matmul_skip_zeros(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                       const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate);
void matmul_skip_zeros(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
                       const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool accumulate);

/// C = ⊕_k mul(op(A)[i,k], op(B)[k,j]) for any `mul` program over a and b
/// (f32): per row of C, blocks of ElementProgram::kLanes columns, each k one
/// run of the program over the block, reduced as matmul() reduces
/// (logsumexp online). With accumulate, C = C ⊕ that.
void matmul_program(const ElementProgram& mul, Reduce add, bool transa, bool transb, std::int64_t m, std::int64_t n,
                    std::int64_t k, const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                    std::int64_t ldc, bool accumulate);

/// C = map(C) for a program over c (f32), a row block at a time.
void apply_map(const ElementProgram& map, std::int64_t m, std::int64_t n, float* c, std::int64_t ldc);

/// The laws a (⊕, mul) pair obeys, which say where a rewrite of products holds.
///   columns: A [B1 | B2] = [A B1 | A B2]           every pair (columns are independent)
///   inner:   [A1 A2] [B1; B2] = A1 B1 ⊕ A2 B2      ⊕ associative and commutative: every reduction here
///                                                   (within rounding for sum, logsumexp and prod)
///   associative: (A B) C = A (B C)                  a semiring: (sum, a*b), (max|min, a+b), (logsumexp, a+b)
/// `why` says why a pair is not associative ("" when it is).
struct Laws {
  bool columns = true, inner = true, associative = false;
  std::string why;
};
Laws laws(Reduce add, const ElementProgram& mul);

/// The reduction's identity: 0, -inf, +inf, -inf, 1.
double identity(Reduce r);

}  // namespace ymlopt::op
