// The AVX2 semiring kernels (8 f32 lanes; semiring_kernel.inc).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "op/semiring_internal.hpp"

#define YMLOPT_TARGET __attribute__((target("avx2,fma")))

namespace ymlopt::op::impl {
namespace {

struct V {
  using T = __m256;
  static constexpr int W = 8;
  YMLOPT_TARGET static T zero() { return _mm256_setzero_ps(); }
  YMLOPT_TARGET static T set1(float x) { return _mm256_set1_ps(x); }
  YMLOPT_TARGET static __m256i mask(int cnt) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  YMLOPT_TARGET static T load(const float* p, int cnt) {
    return cnt >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask(cnt));
  }
  YMLOPT_TARGET static void store(float* p, T v, int cnt) {
    if (cnt >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, mask(cnt), v);
  }
  YMLOPT_TARGET static T add(T a, T b) { return _mm256_add_ps(a, b); }
  YMLOPT_TARGET static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  YMLOPT_TARGET static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  YMLOPT_TARGET static T max(T a, T b) { return _mm256_max_ps(a, b); }
  YMLOPT_TARGET static T min(T a, T b) { return _mm256_min_ps(a, b); }
  // e^x = 2^n e^r as the AVX-512 file
  YMLOPT_TARGET static T round_log2e(T x) {
    return _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  YMLOPT_TARGET static T poly_exp(T x, T n) {  // e^r
    T r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    T p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    return _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  }
  // exp(x) for x <= 0 (the kernels' logsumexp); 2^n built in the exponent field (n >= -126 after the clamp)
  YMLOPT_TARGET static T exp(T x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const T n = round_log2e(x);
    return _mm256_mul_ps(poly_exp(x, n), pow2(_mm256_cvtps_epi32(n)));
  }
  // for unary_math.inc: exp over the whole range (x clamped to [-104, 89]: 0 and inf beyond), 2^n
  // applied in two halves so that every exponent field stays in range; selects
  using M = __m256;
  YMLOPT_TARGET static T exp_any(T x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    const T n = round_log2e(x);
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    return _mm256_mul_ps(_mm256_mul_ps(poly_exp(x, n), pow2(n1)), pow2(n2));
  }
  YMLOPT_TARGET static T pow2(__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  }
  YMLOPT_TARGET static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  YMLOPT_TARGET static T div(T a, T b) { return _mm256_div_ps(a, b); }
  YMLOPT_TARGET static T abs(T a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  YMLOPT_TARGET static T sign_of(T mag, T x) {
    const T sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, x));
  }
  YMLOPT_TARGET static M lt(T a, T b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  YMLOPT_TARGET static M is_nan(T a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  YMLOPT_TARGET static T select(M m, T yes, T no) { return _mm256_blendv_ps(no, yes, m); }
};

#include "op/semiring_kernel.inc"
#include "op/unary_math.inc"

}  // namespace

void run_avx2(Semiring s, const Operands& o) { run_all(s, o); }
void unary_avx2(Unary f, float* x, std::int64_t n) { unary_all(f, x, n); }

}  // namespace ymlopt::op::impl
