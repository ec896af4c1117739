// The AVX-512 semiring kernels (16 f32 lanes; semiring_kernel.inc).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "op/semiring_internal.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source
// (GCC bug 105593); nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define YMLOPT_TARGET __attribute__((target("avx512f,avx512dq")))

namespace ymlopt::op::impl {
namespace {

struct V {
  using T = __m512;
  static constexpr int W = 16;
  YMLOPT_TARGET static T zero() { return _mm512_setzero_ps(); }
  YMLOPT_TARGET static T set1(float x) { return _mm512_set1_ps(x); }
  YMLOPT_TARGET static __mmask16 mask(int cnt) { return static_cast<__mmask16>(cnt >= 16 ? 0xFFFF : (1u << cnt) - 1); }
  YMLOPT_TARGET static T load(const float* p, int cnt) { return _mm512_maskz_loadu_ps(mask(cnt), p); }
  YMLOPT_TARGET static void store(float* p, T v, int cnt) { _mm512_mask_storeu_ps(p, mask(cnt), v); }
  YMLOPT_TARGET static T add(T a, T b) { return _mm512_add_ps(a, b); }
  YMLOPT_TARGET static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  YMLOPT_TARGET static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  YMLOPT_TARGET static T max(T a, T b) { return _mm512_max_ps(a, b); }
  YMLOPT_TARGET static T min(T a, T b) { return _mm512_min_ps(a, b); }
  // e^x = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 (Cephes expf: degree-5 polynomial; relative error ~2e-7)
  YMLOPT_TARGET static T round_log2e(T x) {
    return _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  YMLOPT_TARGET static T poly_exp(T x, T n) {  // e^r
    T r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    T p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    return _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  }
  // exp(x) for x <= 0 (the kernels' logsumexp)
  YMLOPT_TARGET static T exp(T x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const T n = round_log2e(x);
    return _mm512_scalef_ps(poly_exp(x, n), n);
  }
  // for unary_math.inc: exp over the whole range (x clamped to [-104, 89]: 0 and inf beyond), selects
  using M = __mmask16;
  YMLOPT_TARGET static T exp_any(T x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    const T n = round_log2e(x);
    return _mm512_scalef_ps(poly_exp(x, n), n);
  }
  YMLOPT_TARGET static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  YMLOPT_TARGET static T div(T a, T b) { return _mm512_div_ps(a, b); }
  YMLOPT_TARGET static T abs(T a) { return _mm512_abs_ps(a); }
  YMLOPT_TARGET static T sign_of(T mag, T x) {  // |mag| with x's sign
    const T sign = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(sign, mag), _mm512_and_ps(sign, x));
  }
  YMLOPT_TARGET static M lt(T a, T b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  YMLOPT_TARGET static M is_nan(T a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  YMLOPT_TARGET static T select(M m, T yes, T no) { return _mm512_mask_blend_ps(m, no, yes); }
};

#include "op/semiring_kernel.inc"
#include "op/unary_math.inc"

}  // namespace

void run_avx512(Semiring s, const Operands& o) { run_all(s, o); }
void unary_avx512(Unary f, float* x, std::int64_t n) { unary_all(f, x, n); }

}  // namespace ymlopt::op::impl

#pragma GCC diagnostic pop
