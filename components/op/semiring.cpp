// The semiring product's driver (semiring.hpp): the identity and empty cases,
// (sum, a*b) on the GEMM, the choice between the vector kernels and the scalar
// path, and the scalar path itself (every pair, f32 and f64, IEEE semantics).
#include "op/semiring.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gemm/gemm.hpp"
#include "op/semiring_internal.hpp"
#include <ymlopt/sdk.hpp>

namespace ymlopt::op {

using std::int64_t;

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has;
}

const char* best_isa_name() { return cpu_has_avx512() ? "AVX-512" : cpu_has_avx2() ? "AVX2" : "scalar"; }

Isa resolve_isa(Isa isa, const char* who) {
  if (isa == Isa::avx512 && !cpu_has_avx512()) throw KernelError(std::string(who) + ": this CPU has no AVX-512");
  if (isa == Isa::avx2 && !cpu_has_avx2()) throw KernelError(std::string(who) + ": this CPU has no AVX2 and FMA");
  if (isa != Isa::best) return isa;
  return cpu_has_avx512() ? Isa::avx512 : cpu_has_avx2() ? Isa::avx2 : Isa::scalar;
}

Laws laws(Reduce add, const ElementProgram& mul) {
  Laws l;
  const std::string& m = mul.canonical();
  if (m.empty()) {
    l.why = "mul is not a*b or a+b: no distributive law is known for it";
  } else if (m == "a*b") {
    l.associative = add == Reduce::sum;
    if (!l.associative) l.why = "a*b does not distribute over max, min or logsumexp (negative factors), nor over prod";
  } else {
    l.associative = add == Reduce::max || add == Reduce::min || add == Reduce::logsumexp;
    if (!l.associative) l.why = "a+b does not distribute over sum or prod";
  }
  return l;
}

Reduce parse_reduce(const std::string& name) {
  if (name == "max") return Reduce::max;
  if (name == "min") return Reduce::min;
  if (name == "logsumexp") return Reduce::logsumexp;
  if (name == "prod") return Reduce::prod;
  return Reduce::sum;
}

double identity(Reduce r) {
  switch (r) {
    case Reduce::sum: return 0.0;
    case Reduce::max: return -std::numeric_limits<double>::infinity();
    case Reduce::min: return std::numeric_limits<double>::infinity();
    case Reduce::logsumexp: return -std::numeric_limits<double>::infinity();
    case Reduce::prod: return 1.0;
  }
  return 0.0;
}

namespace {

/// op(X)[i, j] of a row-major X.
template <class T> T at(const T* x, int64_t ld, bool trans, int64_t i, int64_t j) {
  return trans ? x[j * ld + i] : x[i * ld + j];
}

template <class T> T combine(Combine c, T a, T b) { return c == Combine::mul ? a * b : a + b; }

/// ⊕_k over the terms term(kk) (k >= 1) with the header's semantics.
template <class T, class Term> T reduce_terms(Reduce r, int64_t k, const Term& term) {
  constexpr T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  if (r == Reduce::sum || r == Reduce::prod) {  // IEEE, in the order of k
    T acc = r == Reduce::sum ? T(0) : T(1);
    for (int64_t kk = 0; kk < k; ++kk) acc = r == Reduce::sum ? acc + term(kk) : acc * term(kk);
    return acc;
  }
  // max, min and logsumexp's first pass: the extreme term, NaN if any term is.
  const bool want_min = r == Reduce::min;
  T best = want_min ? inf : -inf;
  for (int64_t kk = 0; kk < k; ++kk) {
    const T x = term(kk);
    if (std::isnan(x)) return nan;
    if (want_min ? x < best : x > best) best = x;
  }
  if (r != Reduce::logsumexp || best == inf || best == -inf) return best;
  double sum = 0;
  for (int64_t kk = 0; kk < k; ++kk) sum += std::exp(static_cast<double>(term(kk)) - best);
  return static_cast<T>(best + std::log(sum));
}

template <class T>
void scalar(Semiring s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
            int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const T v = reduce_terms<T>(s.add, k, [&](int64_t kk) {
        return combine(s.mul, at(a, lda, ta, i, kk), at(b, ldb, tb, kk, j));
      });
      T& out = c[i * ldc + j];
      out = accumulate ? impl::reduce2(s.add, out, v) : v;
    }
}

/// The extreme term of each entry and its k (scalar; ⊕ max or min).
template <class T>
void scalar_arg(Semiring s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                int64_t ldb, T* c, int64_t ldc, std::int32_t* arg, int64_t ldarg) {
  if (s.add != Reduce::max && s.add != Reduce::min)
    throw KernelError("op::matmul_arg: an argument exists for max and min only");
  const bool want_min = s.add == Reduce::min;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T best = static_cast<T>(identity(s.add));
      std::int32_t at_k = -1;
      for (int64_t kk = 0; kk < k; ++kk) {
        const T x = combine(s.mul, at(a, lda, ta, i, kk), at(b, ldb, tb, kk, j));
        if (std::isnan(x)) {
          best = x;
          at_k = -1;
          break;
        }
        if (want_min ? x < best : x > best) {
          best = x;
          at_k = static_cast<std::int32_t>(kk);
        }
      }
      c[i * ldc + j] = best;
      arg[i * ldarg + j] = at_k;
    }
}

/// What the vector kernels need to know of an operand: its largest finite
/// |x|, and whether it holds NaN, +inf or -inf.
struct Scan {
  float big = 0;
  bool nan = false, pinf = false, ninf = false;
};

Scan scan(const float* x, int64_t ld, int64_t rows, int64_t cols) {
  Scan s;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float v = x[i * ld + j];
      if (std::isnan(v)) s.nan = true;
      else if (v == std::numeric_limits<float>::infinity()) s.pinf = true;
      else if (v == -std::numeric_limits<float>::infinity()) s.ninf = true;
      else s.big = std::max(s.big, std::abs(v));
    }
  return s;
}

/// True when the vector kernels give the scalar path's semantics. (min, +) and
/// (max, +): no NaN can appear (no NaN in, not both infinities), infinities
/// and overflow are IEEE in both. (logsumexp, +): no +inf (-inf, its zero,
/// allowed). The others: every term finite. And no finite term or sum able to
/// overflow.
bool fits_vector_path(Semiring s, int64_t k, const Scan& a, const Scan& b) {
  if (a.nan || b.nan) return false;
  const bool pinf = a.pinf || b.pinf, ninf = a.ninf || b.ninf;
  if (s.mul == Combine::add && (s.add == Reduce::min || s.add == Reduce::max)) return !(pinf && ninf);
  // prod: the kernels multiply in the scalar path's order, IEEE in both (NaN aside, excluded above)
  if (s.add == Reduce::prod) return true;
  // (logsumexp, +): -inf is its zero (exp gives ~1e-38 for it, a row of them -inf); +inf is left to the scalar path
  const bool log_zero = s.mul == Combine::add && s.add == Reduce::logsumexp && !pinf;
  if (pinf || (ninf && !log_zero)) return false;
  const double term = s.mul == Combine::mul ? double(a.big) * b.big : double(a.big) + b.big;
  const double bound = s.add == Reduce::sum ? term * double(k) : term;
  return bound < 0.5 * double(std::numeric_limits<float>::max());
}

/// Row-major op(X) (rows x cols) in `buf` when trans, else X itself.
const float* row_major(const float* x, int64_t ld, bool trans, int64_t rows, int64_t cols, std::vector<float>& buf,
                       int64_t& ld_out) {
  if (!trans) {
    ld_out = ld;
    return x;
  }
  buf.resize(static_cast<std::size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[static_cast<std::size_t>(i * cols + j)] = x[j * ld + i];
  ld_out = cols;
  return buf.data();
}

/// The empty reduction (k = 0): C = identity, or C unchanged when accumulating.
template <class T> void empty(Reduce r, int64_t m, int64_t n, T* c, int64_t ldc, bool accumulate) {
  if (accumulate) return;
  for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, static_cast<T>(identity(r)));
}

Isa resolve(Isa isa) { return resolve_isa(isa, "op::matmul"); }

}  // namespace

void unary(Unary f, float* x, int64_t n, Isa isa) {
  switch (resolve(isa)) {
    case Isa::avx512: return impl::unary_avx512(f, x, n);
    case Isa::avx2: return impl::unary_avx2(f, x, n);
    default: break;
  }
  for (int64_t i = 0; i < n; ++i)
    x[i] = f == Unary::exp ? std::exp(x[i]) : f == Unary::tanh ? std::tanh(x[i]) : std::erf(x[i]);
}

void matmul(Semiring s, bool transa, bool transb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
            const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate, Isa isa) {
  const Isa path = resolve(isa);
  if (m == 0 || n == 0) return;
  if (k == 0) return empty(s.add, m, n, c, ldc, accumulate);
  if (s.mul == Combine::mul && s.add == Reduce::sum && isa == Isa::best)
    // OpenBLAS, as nn.linear: oneDNN's sgemm on two StarPU workers at once ran GPT-2's 128 x 768 x 64 products
    // at 32 GFLOP/s against 89 on one worker and 75 on OpenBLAS (docs/BENCHMARKS.md, issue 36)
    return gemm::gemm(transa, transb, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc,
                      gemm::Library::openblas);
  std::vector<float> abuf, bbuf;
  int64_t la = 0, lb = 0;
  if (path != Isa::scalar) {
    // The bounds on op(A) and op(B) are those of A and B, whatever the transposes.
    const Scan sa = transa ? scan(a, lda, k, m) : scan(a, lda, m, k);
    const Scan sb = transb ? scan(b, ldb, n, k) : scan(b, ldb, k, n);
    if (fits_vector_path(s, k, sa, sb)) {
      auto run = [&](const impl::Operands& o) { path == Isa::avx512 ? impl::run_avx512(s, o) : impl::run_avx2(s, o); };
      if (n < 4 && m >= 64) {
        // A matrix times a vector or two: ⊗ commutes, so Cᵀ = op(B)ᵀ op(A)ᵀ puts the lanes along m.
        const float* ap = row_major(b, ldb, !transb, n, k, abuf, la);
        const float* bp = row_major(a, lda, !transa, k, m, bbuf, lb);
        std::vector<float> ct(static_cast<std::size_t>(n * m));
        if (accumulate)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) ct[static_cast<std::size_t>(j * m + i)] = c[i * ldc + j];
        run(impl::Operands{n, m, k, ap, la, bp, lb, ct.data(), m, accumulate});
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = ct[static_cast<std::size_t>(j * m + i)];
        return;
      }
      const float* ap = row_major(a, lda, transa, m, k, abuf, la);
      const float* bp = row_major(b, ldb, transb, k, n, bbuf, lb);
      return run(impl::Operands{m, n, k, ap, la, bp, lb, c, ldc, accumulate});
    }
  }
  scalar(s, transa, transb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void matmul(Semiring s, bool transa, bool transb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
            const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate, Isa isa) {
  resolve(isa);
  if (m == 0 || n == 0) return;
  if (k == 0) return empty(s.add, m, n, c, ldc, accumulate);
  if (s.mul == Combine::mul && s.add == Reduce::sum && isa == Isa::best)
    return gemm::gemm(transa, transb, m, n, k, 1.0, a, lda, b, ldb, accumulate ? 1.0 : 0.0, c, ldc);
  scalar(s, transa, transb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

namespace {

template <class T>
void masked(Semiring s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
            int64_t ldb, T* c, int64_t ldc, bool accumulate, const Mask& mask) {
  const int64_t kBlock = mask.block > 0 ? mask.block : 128;
  const T id = static_cast<T>(mask.fill.value_or(identity(s.add)));
  const bool keep_old = accumulate && !mask.fill;  // masked entries keep C's value
  std::vector<T> old;
  for (int64_t i0 = 0; i0 < m; i0 += kBlock)
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t bm = std::min(kBlock, m - i0), bn = std::min(kBlock, n - j0);
      int64_t kept = 0;
      for (int64_t i = 0; i < bm; ++i)
        for (int64_t j = 0; j < bn; ++j) kept += mask.at(i0 + i, j0 + j) ? 1 : 0;
      T* cb = c + i0 * ldc + j0;
      if (kept == 0) {
        if (!keep_old)
          for (int64_t i = 0; i < bm; ++i) std::fill_n(cb + i * ldc, bn, id);
        continue;
      }
      if (keep_old && kept < bm * bn) {
        old.resize(static_cast<std::size_t>(bm * bn));
        for (int64_t i = 0; i < bm; ++i) std::copy_n(cb + i * ldc, bn, old.begin() + i * bn);
      }
      const T* ab = ta ? a + i0 : a + i0 * lda;  // op(A)'s rows i0..
      const T* bb = tb ? b + j0 * ldb : b + j0;  // op(B)'s columns j0..
      matmul(s, ta, tb, bm, bn, k, ab, lda, bb, ldb, cb, ldc, accumulate);
      if (kept == bm * bn) continue;
      for (int64_t i = 0; i < bm; ++i)
        for (int64_t j = 0; j < bn; ++j)
          if (!mask.at(i0 + i, j0 + j)) cb[i * ldc + j] = keep_old ? old[static_cast<std::size_t>(i * bn + j)] : id;
    }
}

}  // namespace

void matmul_masked(Semiring s, bool transa, bool transb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate, const Mask& mask) {
  masked(s, transa, transb, m, n, k, a, lda, b, ldb, c, ldc, accumulate, mask);
}

void matmul_masked(Semiring s, bool transa, bool transb, int64_t m, int64_t n, int64_t k, const double* a,
                   int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate,
                   const Mask& mask) {
  masked(s, transa, transb, m, n, k, a, lda, b, ldb, c, ldc, accumulate, mask);
}

void matmul_program(const ElementProgram& mul, Reduce add, bool transa, bool transb, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int64_t L = ElementProgram::kLanes;
  constexpr float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float id = static_cast<float>(identity(add));
  float t[L], acc[L], sum[L];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j0 = 0; j0 < n; j0 += L) {
      const int64_t len = std::min(L, n - j0);
      std::fill_n(acc, len, id);
      std::fill_n(sum, len, 0.0f);
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = at(a, lda, transa, i, kk);
        const ElementProgram::Input in[2] = {{&av, 0}, {transb ? b + j0 * ldb + kk : b + kk * ldb + j0, transb ? ldb : 1}};
        mul.run(in, t, len);
        switch (add) {
          case Reduce::sum: for (int64_t l = 0; l < len; ++l) acc[l] += t[l]; break;
          case Reduce::prod: for (int64_t l = 0; l < len; ++l) acc[l] *= t[l]; break;
          case Reduce::max:
            for (int64_t l = 0; l < len; ++l) acc[l] = std::isnan(t[l]) || t[l] > acc[l] ? t[l] : acc[l];
            break;
          case Reduce::min:
            for (int64_t l = 0; l < len; ++l) acc[l] = std::isnan(t[l]) || t[l] < acc[l] ? t[l] : acc[l];
            break;
          case Reduce::logsumexp:  // online: acc the largest term so far, sum Σ exp(term - acc)
            for (int64_t l = 0; l < len; ++l) {
              const float x = t[l];
              if (std::isnan(acc[l]) || acc[l] == inf || x == -inf) continue;
              if (std::isnan(x)) acc[l] = nan;
              else if (x > acc[l]) sum[l] = sum[l] * std::exp(acc[l] - x) + 1.0f, acc[l] = x;
              else sum[l] += std::exp(x - acc[l]);
            }
            break;
        }
      }
      float* row = c + i * ldc + j0;
      for (int64_t l = 0; l < len; ++l) {
        float v = acc[l];
        if (add == Reduce::logsumexp && std::isfinite(v)) v += std::log(sum[l]);
        row[l] = accumulate ? impl::reduce2(add, row[l], v) : v;
      }
    }
}

void apply_map(const ElementProgram& map, int64_t m, int64_t n, float* c, int64_t ldc) {
  constexpr int64_t L = ElementProgram::kLanes;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j0 = 0; j0 < n; j0 += L) {
      float* row = c + i * ldc + j0;
      const ElementProgram::Input in[1] = {{row, 1}};
      map.run(in, row, std::min(L, n - j0));
    }
}

void matmul_arg(Semiring s, bool transa, bool transb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float* c, int64_t ldc, std::int32_t* arg, int64_t ldarg, Isa isa) {
  const Isa path = resolve(isa);
  if (path != Isa::scalar && (s.add == Reduce::max || s.add == Reduce::min) && m > 0 && n > 0 && k > 0 &&
      k < (int64_t(1) << 24)) {
    const Scan sa = transa ? scan(a, lda, k, m) : scan(a, lda, m, k);
    const Scan sb = transb ? scan(b, ldb, n, k) : scan(b, ldb, k, n);
    if (fits_vector_path(s, k, sa, sb)) {
      std::vector<float> abuf, bbuf;
      int64_t la = 0, lb = 0;
      const float* ap = row_major(a, lda, transa, m, k, abuf, la);
      const float* bp = row_major(b, ldb, transb, k, n, bbuf, lb);
      const impl::Operands o{m, n, k, ap, la, bp, lb, c, ldc, false, arg, ldarg};
      return path == Isa::avx512 ? impl::run_avx512(s, o) : impl::run_avx2(s, o);
    }
  }
  scalar_arg(s, transa, transb, m, n, k, a, lda, b, ldb, c, ldc, arg, ldarg);
}

void matmul_arg(Semiring s, bool transa, bool transb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                const double* b, int64_t ldb, double* c, int64_t ldc, std::int32_t* arg, int64_t ldarg) {
  scalar_arg(s, transa, transb, m, n, k, a, lda, b, ldb, c, ldc, arg, ldarg);
}

}  // namespace ymlopt::op
