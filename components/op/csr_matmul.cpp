// op::csr_matmul (semiring.hpp): Y = A X for a CSR A and a dense X. One body,
// compiled for AVX-512, AVX2 and the baseline (the target attribute of the
// function it is inlined into decides how the compiler vectorises the row
// update y += a x[j, :]); chosen at run time.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "op/semiring.hpp"
#include <ymlopt/sdk.hpp>

namespace ymlopt::op {
namespace {

using std::int64_t;
using std::to_string;

template <class T>
inline __attribute__((always_inline)) void rows_body(const T* __restrict v, const std::int32_t* __restrict c,
                                                     const std::int32_t* q, int64_t rows, const T* __restrict x,
                                                     int64_t ldx, int64_t n, int64_t f, T* __restrict y, int64_t ldy,
                                                     bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    T* __restrict yr = y + r * ldy;
    if (!accumulate) std::fill(yr, yr + f, T(0));
    for (std::int32_t e = q[r]; e < q[r + 1]; ++e) {
      const std::int32_t j = c[e];
      if (j < 0 || j >= n)
        throw KernelError("port 'a_index' entry " + to_string(e) + " is " + to_string(j) + ": columns are in [0, " +
                          to_string(n) + ")");
      const T a = v[e];
      const T* __restrict xr = x + int64_t(j) * ldx;
      for (int64_t k = 0; k < f; ++k) yr[k] += a * xr[k];
    }
  }
}

template <class T>
__attribute__((target("avx512f,avx512vl"))) void rows_avx512(const T* v, const std::int32_t* c, const std::int32_t* q,
                                                              int64_t rows, const T* x, int64_t ldx, int64_t n,
                                                              int64_t f, T* y, int64_t ldy, bool accumulate) {
  rows_body(v, c, q, rows, x, ldx, n, f, y, ldy, accumulate);
}

template <class T>
__attribute__((target("avx2"))) void rows_avx2(const T* v, const std::int32_t* c, const std::int32_t* q, int64_t rows,
                                               const T* x, int64_t ldx, int64_t n, int64_t f, T* y, int64_t ldy,
                                               bool accumulate) {
  rows_body(v, c, q, rows, x, ldx, n, f, y, ldy, accumulate);
}

template <class T>
void rows_scalar(const T* v, const std::int32_t* c, const std::int32_t* q, int64_t rows, const T* x, int64_t ldx,
                 int64_t n, int64_t f, T* y, int64_t ldy, bool accumulate) {
  rows_body(v, c, q, rows, x, ldx, n, f, y, ldy, accumulate);
}

template <class T>
void run(const T* vals, const std::int32_t* cols, const std::int32_t* ptr, int64_t rows, int64_t cap, const T* x,
         int64_t ldx, int64_t n, int64_t f, T* y, int64_t ldy, bool accumulate, Isa isa) {
  if (isa == Isa::avx512 && !cpu_has_avx512()) throw KernelError("op::csr_matmul: this CPU has no AVX-512");
  if (isa == Isa::avx2 && !cpu_has_avx2()) throw KernelError("op::csr_matmul: this CPU has no AVX2");
  if (ptr[0] < 0 || ptr[0] > cap)
    throw KernelError("port 'a_ptr' entry 0 is " + to_string(ptr[0]) + ": out of [0, " + to_string(cap) + "]");
  for (int64_t r = 0; r < rows; ++r)
    if (ptr[r + 1] < ptr[r] || ptr[r + 1] > cap)
      throw KernelError("port 'a_ptr' entry " + to_string(r + 1) + " is " + to_string(ptr[r + 1]) +
                        ": row pointers must not decrease and stay <= " + to_string(cap));
  const Isa path = isa != Isa::best ? isa : cpu_has_avx512() ? Isa::avx512 : cpu_has_avx2() ? Isa::avx2 : Isa::scalar;
  switch (path) {
    case Isa::avx512: return rows_avx512(vals, cols, ptr, rows, x, ldx, n, f, y, ldy, accumulate);
    case Isa::avx2: return rows_avx2(vals, cols, ptr, rows, x, ldx, n, f, y, ldy, accumulate);
    default: return rows_scalar(vals, cols, ptr, rows, x, ldx, n, f, y, ldy, accumulate);
  }
}

}  // namespace

void csr_matmul(const float* vals, const std::int32_t* cols, const std::int32_t* ptr, int64_t rows, int64_t cap,
                const float* x, int64_t ldx, int64_t n, int64_t f, float* y, int64_t ldy, bool accumulate, Isa isa) {
  run(vals, cols, ptr, rows, cap, x, ldx, n, f, y, ldy, accumulate, isa);
}

void csr_matmul(const double* vals, const std::int32_t* cols, const std::int32_t* ptr, int64_t rows, int64_t cap,
                const double* x, int64_t ldx, int64_t n, int64_t f, double* y, int64_t ldy, bool accumulate, Isa isa) {
  run(vals, cols, ptr, rows, cap, x, ldx, n, f, y, ldy, accumulate, isa);
}

namespace {

template <class T>
void skip_zeros(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc,
                bool accumulate) {
  if (m * k > INT32_MAX) throw KernelError("op::matmul_skip_zeros: A has more than 2^31 - 1 entries");
  std::vector<T> vals;
  std::vector<std::int32_t> cols, ptr(static_cast<std::size_t>(m + 1), 0);
  vals.reserve(static_cast<std::size_t>(m * k / 4));
  cols.reserve(vals.capacity());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk)
      if (const T x = a[i * lda + kk]; x != T(0)) {
        vals.push_back(x);
        cols.push_back(static_cast<std::int32_t>(kk));
      }
    ptr[static_cast<std::size_t>(i + 1)] = static_cast<std::int32_t>(vals.size());
  }
  csr_matmul(vals.data(), cols.data(), ptr.data(), m, static_cast<int64_t>(vals.size()), b, ldb, k, n, c, ldc,
             accumulate);
}

}  // namespace

void matmul_skip_zeros(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc, bool accumulate) {
  skip_zeros(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void matmul_skip_zeros(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
                       double* c, int64_t ldc, bool accumulate) {
  skip_zeros(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

}  // namespace ymlopt::op
