// The AVX2 path of quant::linear (CPUs without AVX-512 VNNI: Zen 2/3, Haswell to
// Alder Lake).
//
// The integers and f32 steps of the other paths on the two 256-bit halves of each
// 64-byte chunk (half h holds lanes 8h..8h+7). vpmaddubsw multiplies u8 by s8 and
// adds pairs in saturating int16, so int8 weights meet the activation codes
// xq = act - 128 as |c| x sign(xq, c) (a pair is at most 2 * 128 * 127 < 2^15) and
// int4 codes (u8 <= 15) meet xq directly; vpmaddwd then adds pairs into int32 lanes.
// Per channel the exact dot product Σ xq·c is what the VNNI path has after
// subtracting 128·Σc, so that correction is left out; grouped, the 128·Σc of each
// lane is added back before the lanes are converted, as VNNI's u8 operand has it.
#include "quant/qlinear_internal.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ymlopt::quant::linear_impl {

namespace {

YMLOPT_AVX2 inline __m256i ones16_avx2() { return _mm256_set1_epi16(1); }

/// 16 code bytes -> 32 unsigned bytes [low nibbles, high nibbles] (k_of order of a half).
YMLOPT_AVX2 inline __m256i unpack4_avx2(__m128i b) {
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
}

/// Half h of chunk c of a weight row as 32 bytes (int8 codes, or int4 nibbles
/// unpacked); in the last chunk of a row whose k is not a multiple of 64 the
/// missing codes read as 0 (`rem_bytes`: the stored bytes of that chunk).
template <bool W4, bool Tail>
YMLOPT_AVX2 inline __m256i load_w_avx2(const int8_t* row, int64_t c, int h, int64_t nch, int64_t rem_bytes) {
  constexpr int64_t half = W4 ? 16 : 32;
  const int8_t* p = row + c * 2 * half + h * half;
  if constexpr (Tail) {
    if (c + 1 == nch) {
      alignas(32) int8_t buf[32] = {};
      const int64_t have = std::min(half, rem_bytes - h * half);
      if (have > 0) std::memcpy(buf, p, static_cast<std::size_t>(have));
      if constexpr (W4) return unpack4_avx2(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
      return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
    }
  }
  if constexpr (W4) return unpack4_avx2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// The activation codes of half h of chunk c as s8 xq (int8 weights store xq + 128).
template <bool W4>
YMLOPT_AVX2 inline __m256i load_x_avx2(const uint8_t* act, int64_t c, int h) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + c * kChunk + h * 32));
  if constexpr (W4) return v;
  return _mm256_xor_si256(v, _mm256_set1_epi8(-128));
}

/// acc + the int32 lane sums of xq · code over 4 bytes each (exact).
template <bool W4>
YMLOPT_AVX2 inline __m256i dp_avx2(__m256i acc, __m256i xq, __m256i w, __m256i w_abs) {
  __m256i p;
  if constexpr (W4)
    p = _mm256_maddubs_epi16(w, xq);
  else
    p = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xq, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones16_avx2()));
}

YMLOPT_AVX2 inline int32_t reduce8_epi32(__m256i v) {
  alignas(32) int32_t e[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(e), v);
  int32_t s = 0;
  for (int l = 0; l < 8; ++l) s += e[l];
  return s;
}

/// Per channel: MR activation rows x NR weight rows, the exact Σ xq · c over all of k.
template <int MR, int NR, bool W4, bool Tail>
YMLOPT_AVX2 __attribute__((noinline)) void pc_tile_avx2(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                          int64_t q_ld, int64_t rem_bytes, const Fin& fin, int64_t i0,
                                                          int64_t j0, float* y, int64_t ldy) {
  __m256i acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_si256();
  for (int64_t c = 0; c < nch; ++c)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i wv[NR], wa[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        wv[j] = load_w_avx2<W4, Tail>(wq + j * q_ld, c, h, nch, rem_bytes);
        wa[j] = W4 ? wv[j] : _mm256_abs_epi8(wv[j]);
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m256i xv = load_x_avx2<W4>(act + i * kp, c, h);
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j] = dp_avx2<W4>(acc[i][j], xv, wv[j], wa[j]);
      }
    }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_pc(fin, i0 + i, j0 + j, reduce8_epi32(acc[i][j]));
}

/// Grouped: the 16 f32 lane partials of each output, half by half (lanes 8h..8h+7
/// see only half h of every chunk), then tree16 as on the other paths.
template <int MR, int NR, bool W4, bool Tail>
YMLOPT_AVX2 __attribute__((noinline)) void grp_tile_avx2(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                           int64_t q_ld, int64_t rem_bytes, const float* s, int64_t G,
                                                           Blocks B, const int32_t* zl, const Fin& fin, int64_t i0,
                                                           int64_t j0, float* y, int64_t ldy) {
  alignas(32) float lanes[MR][NR][16];
  for (int h = 0; h < 2; ++h) {
    __m256 facc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) facc[i][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < B.count; ++b) {
      __m256 sv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) sv[j] = _mm256_set1_ps(lane_scale(B, s + j * G, G, b, 8 * h));
      __m256i acc[MR][NR], cs[NR];
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        // int4 symmetric: lanes start at -8 · Σ xq of the block (precomputed per row)
        const __m256i init = zl ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zl + (i * B.count + b) * 16 + 8 * h))
                                : _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j] = init;
      }
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) cs[j] = _mm256_setzero_si256();
      for (int64_t c = b * B.chunks; c < (b + 1) * B.chunks && c < nch; ++c) {
        __m256i wv[NR], wa[NR];
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) {
          wv[j] = load_w_avx2<W4, Tail>(wq + j * q_ld, c, h, nch, rem_bytes);
          if constexpr (W4) {
            wa[j] = wv[j];
          } else {
            wa[j] = _mm256_abs_epi8(wv[j]);
            cs[j] = _mm256_add_epi32(
                cs[j], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), wv[j]), ones16_avx2()));
          }
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const __m256i xv = load_x_avx2<W4>(act + i * kp, c, h);
#pragma GCC unroll 16
          for (int j = 0; j < NR; ++j) acc[i][j] = dp_avx2<W4>(acc[i][j], xv, wv[j], wa[j]);
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) {
          const __m256i lane = W4 ? acc[i][j] : _mm256_add_epi32(acc[i][j], _mm256_slli_epi32(cs[j], 7));
          facc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane), sv[j], facc[i][j]);
        }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) _mm256_store_ps(lanes[i][j] + 8 * h, facc[i][j]);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_grp(fin, i0 + i, j0 + j, tree16(lanes[i][j]));
}

}  // namespace

template <bool W4, bool Tail>
void pc_avx2(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rb = rem_bytes_of(w, A.nch);
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  constexpr int MR = 4, NR = 2;  // 8 int32 accumulators, 2 + 2 weight registers
  drive<MR, NR>(
      A.m, w.n, A.kp,
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<MR, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<MR, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<1, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile_avx2<1, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, fin, i, j, y + i * ldy + j, ldy);
      });
}

template <bool W4, bool Tail>
void grp_avx2(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rb = rem_bytes_of(w, A.nch);
  const Blocks B = blocks_of(w, A.nch);
  const int64_t G = P.groups;
  auto zr = [&](int64_t i) { return A.zl.empty() ? nullptr : A.zl.data() + i * B.count * 16; };
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  auto sr = [&](int64_t j) { return P.s.data() + j * G; };
  constexpr int MR = 2, NR = 2;  // 4 int32 + 4 f32 accumulators
  drive<MR, NR>(
      A.m, w.n, A.kp,
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<MR, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                        y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<MR, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<1, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile_avx2<1, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, rb, sr(j), G, B, zr(i), fin, i, j,
                                      y + i * ldy + j, ldy);
      });
}

template void pc_avx2<false, false>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void pc_avx2<false, true>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void pc_avx2<true, false>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void pc_avx2<true, true>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void grp_avx2<false, false>(const Acts&, const QWeight&, const WPrep&, const Fin&, float*, int64_t);
template void grp_avx2<false, true>(const Acts&, const QWeight&, const WPrep&, const Fin&, float*, int64_t);
template void grp_avx2<true, false>(const Acts&, const QWeight&, const WPrep&, const Fin&, float*, int64_t);
template void grp_avx2<true, true>(const Acts&, const QWeight&, const WPrep&, const Fin&, float*, int64_t);

// ---- the block path (symmetric group 32) ---------------------------------------------

void pack_panel(const QWeight& w, int64_t j0, int nv, uint8_t add, uint8_t* q, float* s) {
  for (int v = 0; v < nv; ++v)
    for (int l = 0; l < kLanes; ++l) {
      const int64_t row = j0 + kLanes * v + l;
      for (int64_t c = 0; c < w.k; ++c) {
        const int code = row < w.n ? code_at(w, row, c) : 0;
        q[((c / 4) * nv + v) * 64 + 4 * l + c % 4] = static_cast<uint8_t>(code + add);
      }
      for (int64_t b = 0; b < w.k / kBlock; ++b) s[(b * nv + v) * kLanes + l] = row < w.n ? scale_at(w, row, b) : 0.0f;
    }
}

namespace {

/// MR activation rows x 16 outputs (two 8-lane halves) over all of k. int8: the
/// panel holds the s8 codes, met as |c| x sign(xq, c); int4: u8 codes x s8 xq,
/// lanes starting at zc = -8 Σ xq of the block.
template <int MR, bool W4>
YMLOPT_AVX2 __attribute__((noinline)) void b32_tile_avx2(const PanelActs& A, int64_t i0, const uint8_t* pq,
                                                         const float* ps, float* y, int64_t ldy, int64_t cols) {
  const int64_t B = A.blocks, k = A.kq;
  const int8_t* xq = A.q.data() + i0 * k;
  const __m256i ones = ones16_avx2();
  __m256 f[MR][2];
  for (int i = 0; i < MR; ++i) f[i][0] = f[i][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < B; ++b) {
    __m256i acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_set1_epi32(A.zc[(i0 + i) * B + b]);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const uint8_t* pt = pq + (b * 8 + t) * 64;
      __m256i wv[2];
      for (int h = 0; h < 2; ++h) wv[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pt + 32 * h));
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        int32_t x4;
        std::memcpy(&x4, xq + i * k + b * kBlock + 4 * t, 4);
        const __m256i xv = _mm256_set1_epi32(x4);
        for (int h = 0; h < 2; ++h) {
          const __m256i p = W4 ? _mm256_maddubs_epi16(wv[h], xv)
                               : _mm256_maddubs_epi16(_mm256_abs_epi8(wv[h]), _mm256_sign_epi8(xv, wv[h]));
          acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_madd_epi16(p, ones));
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_set1_ps(A.a[(i0 + i) * B + b]);
      for (int h = 0; h < 2; ++h)
        f[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][h]), _mm256_mul_ps(_mm256_loadu_ps(ps + b * kLanes + 8 * h), a),
                                  f[i][h]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    alignas(32) float e[16];
    _mm256_store_ps(e, f[i][0]);
    _mm256_store_ps(e + 8, f[i][1]);
    std::memcpy(y + i * ldy, e, static_cast<std::size_t>(std::min<int64_t>(cols, kLanes)) * sizeof(float));
  }
}

template <bool W4>
void b32_run_avx2(const PanelActs& A, const QWeight& w, float* y, int64_t ldy) {
  std::vector<uint8_t> pq(static_cast<std::size_t>(w.k / 4 * 64));
  std::vector<float> ps(static_cast<std::size_t>(A.blocks * kLanes));
  for (int64_t j0 = 0; j0 < w.n; j0 += kLanes) {
    const int64_t cols = std::min<int64_t>(kLanes, w.n - j0);
    pack_panel(w, j0, 1, 0, pq.data(), ps.data());
    int64_t i = 0;
    for (; i + 2 <= A.m; i += 2) b32_tile_avx2<2, W4>(A, i, pq.data(), ps.data(), y + i * ldy + j0, ldy, cols);
    if (i < A.m) b32_tile_avx2<1, W4>(A, i, pq.data(), ps.data(), y + i * ldy + j0, ldy, cols);
  }
}

}  // namespace

void b32_avx2(const PanelActs& A, const QWeight& w, float* y, int64_t ldy) {
  (w.bits == 4 ? b32_run_avx2<true> : b32_run_avx2<false>)(A, w, y, ldy);
}

}  // namespace ymlopt::quant::linear_impl

#pragma GCC diagnostic pop
