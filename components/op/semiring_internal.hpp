// What the semiring kernels share (private to components/op): the operands of
// an f32 product after the driver has made them row-major with finite values,
// and the scalar finishing step of an accumulated product.
//
//   semiring.cpp         the driver: CPU detection, packing, the scalar path (f32 and f64)
//   semiring_avx512.cpp  the AVX-512 kernels (16 lanes)
//   semiring_avx2.cpp    the AVX2 kernels (8 lanes)
//   unary_math.inc       exp, tanh and erf over arrays, included by both (ElementProgram's functions)
//
// Each vector file instantiates one kernel template per (⊗, ⊕) pair on blocks
// of 4 rows x 2 vectors of C; logsumexp takes two passes over k per block (the
// max, then Σ exp(x - max) with a polynomial exp). The instruction sets are
// chosen per function (`target` attributes), not per file.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "op/semiring.hpp"

namespace ymlopt::op::impl {

/// A row-major product C (m x n, ldc) = A (m x k, lda) ⊗ B (k x n, ldb), k >= 1,
/// whose terms cannot make a NaN (semiring.cpp, fits_vector_path).
struct Operands {
  std::int64_t m, n, k;
  const float* a;
  std::int64_t lda;
  const float* b;
  std::int64_t ldb;
  float* c;
  std::int64_t ldc;
  bool accumulate;
  std::int32_t* arg = nullptr;  // max and min without accumulate: the first k attaining each entry, or -1
  std::int64_t ldarg = 0;
};

void run_avx512(Semiring s, const Operands& o);
void run_avx2(Semiring s, const Operands& o);
/// x = f(x) over n floats (unary_math.inc).
void unary_avx512(Unary f, float* x, std::int64_t n);
void unary_avx2(Unary f, float* x, std::int64_t n);

/// old ⊕ v (the reduction of two values, NaN when either is NaN).
template <class T> T reduce2(Reduce r, T old, T v) {
  if (std::isnan(old) || std::isnan(v)) return std::numeric_limits<T>::quiet_NaN();
  switch (r) {
    case Reduce::sum: return old + v;
    case Reduce::prod: return old * v;
    case Reduce::max: return v > old ? v : old;
    case Reduce::min: return v < old ? v : old;
    case Reduce::logsumexp: {
      const T hi = v > old ? v : old, lo = v > old ? old : v;
      if (hi == -std::numeric_limits<T>::infinity() || hi == std::numeric_limits<T>::infinity()) return hi;
      return static_cast<T>(hi + std::log1p(std::exp(static_cast<double>(lo) - hi)));
    }
  }
  return v;
}

}  // namespace ymlopt::op::impl
