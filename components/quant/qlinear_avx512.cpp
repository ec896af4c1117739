// The AVX-512 VNNI path of quant::linear: vpdpbusd on 64-byte chunks of k, int4
// nibbles unpacked in registers, register-blocked micro-kernels (per channel 4 x 4
// int32 accumulators, grouped 4 x 2 f32 + int32) run over cache blocks by drive().
#include "quant/qlinear_internal.hpp"

#include <immintrin.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <ymlopt/content_cache.hpp>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ymlopt::quant::linear_impl {

namespace {

/// 32 bytes of int4 codes -> 64 unsigned bytes in k_of order (see k_of).
YMLOPT_AVX512 inline __m512i unpack4(__m256i v) {
  const __m512i vz = _mm512_zextsi256_si512(v);
  const __m512i t = _mm512_shuffle_i64x2(vz, vz, 0x50);  // 128-bit lanes [0, 0, 1, 1]
  // lanes 1 and 3 (16-bit elements 8-15 and 24-31) take the high nibbles
  return _mm512_and_si512(_mm512_mask_srli_epi16(t, 0xff00ff00u, t, 4), _mm512_set1_epi8(0x0f));
}

/// Loads chunk c of a weight row (masked at the tail: missing codes read as 0).
/// Tail = false: k is a multiple of 64, every load is a plain full-width load.
template <bool W4, bool Tail>
YMLOPT_AVX512 inline __m512i load_w(const int8_t* row, int64_t c, int64_t nch, __mmask64 tail) {
  if constexpr (!Tail) {
    if constexpr (W4)
      return unpack4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c * (kChunk / 2))));
    else
      return _mm512_loadu_si512(row + c * kChunk);
  } else if constexpr (W4) {
    const __m256i v =
        _mm256_maskz_loadu_epi8(c + 1 == nch ? static_cast<__mmask32>(tail) : ~__mmask32{0}, row + c * (kChunk / 2));
    return unpack4(v);
  } else {
    return _mm512_maskz_loadu_epi8(c + 1 == nch ? tail : ~__mmask64{0}, row + c * kChunk);
  }
}

template <bool W4>
YMLOPT_AVX512 inline __m512i dp(__m512i acc, __m512i x, __m512i w) {
  if constexpr (W4)
    return _mm512_dpbusd_epi32(acc, w, x);  // u8 codes x s8 activations
  else
    return _mm512_dpbusd_epi32(acc, x, w);  // u8 activations x s8 codes
}

/// 16 int32 vectors -> one vector whose element e is the sum of the lanes of v[e].
YMLOPT_AVX512 inline __m512i hsum16_epi32(const __m512i* v) {
  __m512i a[8], b[4], c[2];
  for (int p = 0; p < 8; ++p)
    a[p] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
  for (int p = 0; p < 4; ++p)
    b[p] =
        _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * p], a[2 * p + 1]), _mm512_unpackhi_epi64(a[2 * p], a[2 * p + 1]));
  for (int p = 0; p < 2; ++p)
    c[p] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2 * p], b[2 * p + 1], 0x88),
                            _mm512_shuffle_i32x4(b[2 * p], b[2 * p + 1], 0xdd));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], 0x88), _mm512_shuffle_i32x4(c[0], c[1], 0xdd));
}

/// 8 float vectors -> 8 floats (element e = tree16(lanes of v[e])), the tree of hsum16_epi32 on floats.
YMLOPT_AVX512 inline __m256 hsum8_ps(const __m512* v) {
  __m512 a[4], b[2];
  for (int p = 0; p < 4; ++p)
    a[p] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]));
  for (int p = 0; p < 2; ++p) {
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(a[2 * p]), _mm512_castps_pd(a[2 * p + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(a[2 * p]), _mm512_castps_pd(a[2 * p + 1]));
    b[p] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  const __m512 c = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xdd));
  const __m512 d = _mm512_add_ps(_mm512_shuffle_f32x4(c, c, 0x88), _mm512_shuffle_f32x4(c, c, 0xdd));
  return _mm512_castps512_ps256(d);
}

/// Per-channel micro-kernel: MR activation rows x NR weight rows, int32 over all of k.
/// Accumulators are fully unrolled locals of a non-inlined function (kept in registers).
template <int MR, int NR, bool W4, bool Tail>
YMLOPT_AVX512 __attribute__((noinline)) void pc_tile(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                     int64_t q_ld, __mmask64 tail, const Fin& fin, int64_t i0,
                                                     int64_t j0, float* y, int64_t ldy) {
  __m512i acc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_si512();
  for (int64_t c = 0; c < nch; ++c) {
    __m512i wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = load_w<W4, Tail>(wq + j * q_ld, c, nch, tail);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512i xv = _mm512_loadu_si512(act + i * kp + c * kChunk);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = dp<W4>(acc[i][j], xv, wv[j]);
    }
  }
  if constexpr (MR == 4 && NR == 4) {
    const __m512i v[16] = {acc[0][0], acc[0][1], acc[0][2], acc[0][3], acc[1][0], acc[1][1], acc[1][2], acc[1][3],
                           acc[2][0], acc[2][1], acc[2][2], acc[2][3], acc[3][0], acc[3][1], acc[3][2], acc[3][3]};
    // finish_pc on 16 lanes (element 4i + j): the same integer and f32 operations
    __m512i t = hsum16_epi32(v);
    const __m512i rows = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    if (fin.ci)
      t = _mm512_sub_epi32(
          t, _mm512_permutexvar_epi32(
                 rows, _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fin.ci + i0)))));
    if (fin.cj)
      t = _mm512_sub_epi32(t, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fin.cj + j0))));
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(t), _mm512_broadcast_f32x4(_mm_loadu_ps(fin.s + j0)));
    if (fin.fold_a) f = _mm512_mul_ps(_mm512_permutexvar_ps(rows, _mm512_zextps128_ps512(_mm_loadu_ps(fin.a + i0))), f);
    _mm_storeu_ps(y, _mm512_extractf32x4_ps(f, 0));
    _mm_storeu_ps(y + ldy, _mm512_extractf32x4_ps(f, 1));
    _mm_storeu_ps(y + 2 * ldy, _mm512_extractf32x4_ps(f, 2));
    _mm_storeu_ps(y + 3 * ldy, _mm512_extractf32x4_ps(f, 3));
  } else {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) y[i * ldy + j] = finish_pc(fin, i0 + i, j0 + j, reduce_epi32(acc[i][j]));
  }
}

/// Grouped micro-kernel: per block, int32 lanes -> fma with the lane scales into f32 lanes.
template <int MR, int NR, bool W4, bool Tail, int CPB>
YMLOPT_AVX512 __attribute__((noinline)) void grp_tile(const uint8_t* act, int64_t kp, int64_t nch, const int8_t* wq,
                                                      int64_t q_ld, __mmask64 tail, const float* s, int64_t G, Blocks B,
                                                      const int32_t* zl, const Fin& fin, int64_t i0, int64_t j0,
                                                      float* y, int64_t ldy) {
  __m512 facc[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) facc[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < B.count; ++b) {
    __m512 sv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const float* sr = s + j * G;
      if (B.g32) {
        const float hi = 2 * b + 1 < G ? sr[2 * b + 1] : 0.0f;
        sv[j] = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(sr[2 * b]), _mm512_set1_ps(hi));
      } else {
        sv[j] = _mm512_set1_ps(sr[b]);
      }
    }
    __m512i acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      // int4 symmetric: lanes start at -8 · Σ xq of the block (precomputed per row)
      const __m512i init = zl ? _mm512_loadu_si512(zl + (i * B.count + b) * 16) : _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i][j] = init;
    }
    // CPB > 0: chunks per block known at compile time (fully unrolled: the int32
    // accumulators then stay in place instead of being copied every chunk)
    const int64_t cpb = CPB > 0 ? CPB : B.chunks;
#pragma GCC unroll 4
    for (int64_t cc = 0; cc < cpb; ++cc) {
      const int64_t c = b * cpb + cc;
      if constexpr (CPB == 0) {  // with CPB > 0 every block is whole (k is a multiple of the group)
        if (c >= nch) break;
      }
      __m512i wv[NR];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) wv[j] = load_w<W4, Tail>(wq + j * q_ld, c, nch, tail);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512i xv = _mm512_loadu_si512(act + i * kp + c * kChunk);
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) acc[i][j] = dp<W4>(acc[i][j], xv, wv[j]);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) facc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][j]), sv[j], facc[i][j]);
  }
  if constexpr (MR == 4 && NR == 2) {
    const __m512 v[8] = {facc[0][0], facc[0][1], facc[1][0], facc[1][1],
                         facc[2][0], facc[2][1], facc[3][0], facc[3][1]};
    // finish_grp on 8 lanes (element 2i + j)
    __m256 f = hsum8_ps(v);
    if (fin.b) {
      const __m256 b2 = _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(fin.b + j0))));
      f = _mm256_sub_ps(f, _mm256_permutexvar_ps(_mm256_set_epi32(1, 0, 1, 0, 1, 0, 1, 0), b2));
    }
    if (fin.fold_a)
      f = _mm256_mul_ps(_mm256_permutexvar_ps(_mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0),
                                              _mm256_castps128_ps256(_mm_loadu_ps(fin.a + i0))),
                        f);
    const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
    _mm_storel_pi(reinterpret_cast<__m64*>(y), lo);
    _mm_storeh_pi(reinterpret_cast<__m64*>(y + ldy), lo);
    _mm_storel_pi(reinterpret_cast<__m64*>(y + 2 * ldy), hi);
    _mm_storeh_pi(reinterpret_cast<__m64*>(y + 3 * ldy), hi);
  } else {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) {
        alignas(64) float e[16];
        _mm512_store_ps(e, facc[i][j]);
        y[i * ldy + j] = finish_grp(fin, i0 + i, j0 + j, tree16(e));
      }
  }
}

template <bool W4, bool Tail, int CPB>
void grp_avx512(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rem_bytes = rem_bytes_of(w, A.nch);
  const __mmask64 tail = rem_bytes == 64 ? ~__mmask64{0} : ((__mmask64{1} << rem_bytes) - 1);
  const Blocks B = blocks_of(w, A.nch);
  const int64_t G = P.groups;
  auto zr = [&](int64_t i) { return A.zl.empty() ? nullptr : A.zl.data() + i * B.count * 16; };
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  auto sr = [&](int64_t j) { return P.s.data() + j * G; };
  constexpr int MR = 4, NR = 2;  // 8 f32 + 8 int32 accumulators stay in registers
  drive<MR, NR>(
      A.m, w.n, A.kp,
      [&](int64_t i, int64_t j) {
        grp_tile<MR, NR, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                        y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile<MR, 1, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile<1, NR, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                       y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        grp_tile<1, 1, W4, Tail, CPB>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, sr(j), G, B, zr(i), fin, i, j,
                                      y + i * ldy + j, ldy);
      });
}

}  // namespace

template <bool W4, bool Tail>
void pc_avx512(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy) {
  const int64_t rem_bytes = rem_bytes_of(w, A.nch);
  const __mmask64 tail = rem_bytes == 64 ? ~__mmask64{0} : ((__mmask64{1} << rem_bytes) - 1);
  const int64_t n = w.n;
  auto at = [&](int64_t i) { return A.q.data() + i * A.kp; };
  auto wr = [&](int64_t j) { return w.q + j * w.q_ld; };
  constexpr int MR = 4, NR = 4;
  drive<MR, NR>(
      A.m, n, A.kp,
      [&](int64_t i, int64_t j) {
        pc_tile<MR, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile<MR, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile<1, NR, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      },
      [&](int64_t i, int64_t j) {
        pc_tile<1, 1, W4, Tail>(at(i), A.kp, A.nch, wr(j), w.q_ld, tail, fin, i, j, y + i * ldy + j, ldy);
      });
}

template <bool W4>
void grp_dispatch(bool tail, int64_t chunks, const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y,
                  int64_t ldy) {
  if (tail)
    grp_avx512<W4, true, 1>(A, w, P, fin, y, ldy);  // only group 32 leaves a half chunk
  else if (chunks == 1)
    grp_avx512<W4, false, 1>(A, w, P, fin, y, ldy);
  else if (chunks == 2)
    grp_avx512<W4, false, 2>(A, w, P, fin, y, ldy);
  else
    grp_avx512<W4, false, 0>(A, w, P, fin, y, ldy);
}

// ---- the block path (symmetric group 32) ---------------------------------------------

namespace {

/// 16 x 16 int32 transpose in place: r[l] (lane s = element s of row l) -> r[s] (lane l = element s of row l).
YMLOPT_AVX512 inline void transpose16(__m512i* r) {
  __m512i t[16], u[16];
  for (int p = 0; p < 8; ++p) {
    t[2 * p] = _mm512_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g + s], 128-bit lane L: element 4L + s of rows 4g..4g+3
    u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512i a0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88), a1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xdd);
    const __m512i b0 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88),
                  b1 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xdd);
    r[q] = _mm512_shuffle_i32x4(a0, b0, 0x88);
    r[4 + q] = _mm512_shuffle_i32x4(a1, b1, 0x88);
    r[8 + q] = _mm512_shuffle_i32x4(a0, b0, 0xdd);
    r[12 + q] = _mm512_shuffle_i32x4(a1, b1, 0xdd);
  }
}

/// How a weight's panels are stored. The block path (Q8_0 / Q4_0) keeps what
/// the weight stores: int4 codes two per byte (steps 2p and 2p + 1 of 4 k in
/// the low and high nibbles of one 64-byte vector), f16 scales as f16. The
/// per-channel path keeps one byte per code and f32 scales.
struct PanelFormat {
  bool nibbles = false, half = false;
  static PanelFormat of(const QWeight& w) {
    const bool block = w.group == kBlock;
    return {block && w.bits == 4, block && w.scale_dtype == DType::f16};
  }
  /// Bytes of one panel of nv vectors: codes, then scales.
  std::size_t code_bytes(int64_t kq, int nv) const { return std::size_t(kq / (nibbles ? 8 : 4) * nv * 64); }
  std::size_t scale_bytes(int64_t blocks, int nv) const { return std::size_t(blocks * nv * kLanes) * (half ? 2 : 4); }
};

/// pack_panel with add = 128 for int8 (u8 = code + 128) and 0 for int4, 64 k of
/// 16 rows per transpose; k/4 rounded up (codes past k are 0, then + add); in
/// format f (nibbles: k a multiple of 8).
YMLOPT_AVX512 void pack_panel_avx512(const QWeight& w, int64_t j0, int nv, PanelFormat f, uint8_t* q, void* s) {
  const bool w4 = w.bits == 4;
  const __m512i flip = _mm512_set1_epi8(w4 ? 0 : -128), lo = _mm512_set1_epi16(0x0f), hi = _mm512_set1_epi16(0x0f00);
  for (int v = 0; v < nv; ++v)
    for (int64_t c = 0; c * kChunk < w.k; ++c) {
      const int64_t rem = std::min(kChunk, w.k - c * kChunk);  // k of this chunk (int4: even)
      const bool full = rem == kChunk;
      __m512i r[16];
      for (int l = 0; l < kLanes; ++l) {
        const int64_t row = j0 + kLanes * v + l;
        if (row >= w.n) {
          r[l] = _mm512_setzero_si512();
        } else if (w4) {
          const int8_t* src = w.q + row * w.q_ld + c * (kChunk / 2);
          const __m512i x =
              _mm512_cvtepu8_epi16(full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                                        : _mm256_maskz_loadu_epi8(static_cast<__mmask32>((1u << (rem / 2)) - 1), src));
          r[l] = _mm512_or_si512(_mm512_and_si512(x, lo), _mm512_and_si512(_mm512_slli_epi16(x, 4), hi));
        } else {
          const int8_t* src = w.q + row * w.q_ld + c * kChunk;
          r[l] = full ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi8((__mmask64{1} << rem) - 1, src);
        }
      }
      transpose16(r);
      if (f.nibbles) {  // codes 0..15: the odd step shifted into the high nibble stays within its byte
        for (int64_t t = 0; t < (rem + 7) / 8; ++t)
          _mm512_storeu_si512(q + ((8 * c + t) * nv + v) * 64, _mm512_or_si512(r[2 * t], _mm512_slli_epi16(r[2 * t + 1], 4)));
      } else {
        for (int64_t t = 0; t < (rem + 3) / 4; ++t)
          _mm512_storeu_si512(q + ((16 * c + t) * nv + v) * 64, _mm512_xor_si512(r[t], flip));
      }
    }
  const int64_t blocks = w.group == 0 ? 1 : w.k / kBlock;
  if (f.half) {
    for (int v = 0; v < nv; ++v)
      for (int l = 0; l < kLanes; ++l) {
        const int64_t row = j0 + kLanes * v + l;
        auto* dst = static_cast<std::uint16_t*>(s) + v * kLanes + l;
        const auto* src = static_cast<const std::uint16_t*>(w.scale) + row * w.scale_ld;
        for (int64_t b = 0; b < blocks; ++b) dst[b * nv * kLanes] = row < w.n ? src[b] : std::uint16_t{0};
      }
    return;
  }
  for (int v = 0; v < nv; ++v)
    for (int l = 0; l < kLanes; ++l) {
      const int64_t row = j0 + kLanes * v + l;
      float* dst = static_cast<float*>(s) + v * kLanes + l;
      if (row >= w.n) {
        for (int64_t b = 0; b < blocks; ++b) dst[b * nv * kLanes] = 0.0f;
      } else if (w.scale_dtype == DType::f16) {
        const auto* src = static_cast<const std::uint16_t*>(w.scale) + row * w.scale_ld;
        for (int64_t b0 = 0; b0 < blocks; b0 += 16) {
          const int64_t nb = std::min<int64_t>(16, blocks - b0);
          alignas(64) float e[16];
          _mm512_store_ps(e, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << nb) - 1), src + b0)));
          for (int64_t b = 0; b < nb; ++b) dst[(b0 + b) * nv * kLanes] = e[b];
        }
      } else {
        const float* src = static_cast<const float*>(w.scale) + row * w.scale_ld;
        for (int64_t b = 0; b < blocks; ++b) dst[b * nv * kLanes] = src[b];
      }
    }
}

/// y[i, 16 v + l] = f[i][v] lane l for the first `cols` outputs of the tile.
template <int MR, int NV>
YMLOPT_AVX512 inline void store_tile(const __m512 (&f)[MR][NV], float* y, int64_t ldy, int64_t cols) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const int64_t c = cols - kLanes * v;
      if (c >= kLanes)
        _mm512_storeu_ps(y + i * ldy + kLanes * v, f[i][v]);
      else if (c > 0)
        _mm512_mask_storeu_ps(y + i * ldy + kLanes * v, static_cast<__mmask16>((1u << c) - 1), f[i][v]);
    }
}

/// MR activation rows x 16 NV outputs over all of k: per block, int32 lanes from
/// zc (the offset correction) through 8 vpdpbusd steps, then one fma with s · a.
/// Nib: the panel's codes are nibble pairs (PanelFormat); Half: f16 scales.
template <int MR, int NV, bool Nib, bool Half>
YMLOPT_AVX512 __attribute__((noinline)) void b32_tile(const PanelActs& A, int64_t i0, const uint8_t* pq, const void* ps,
                                                      float* y, int64_t ldy, int64_t cols) {
  const int64_t B = A.blocks, k = A.kq;
  const int8_t* xq = A.q.data() + i0 * k;
  const float* xa = A.a.data() + i0 * B;
  const int32_t* xz = A.zc.data() + i0 * B;
  const __m512i low = _mm512_set1_epi8(0x0f);
  __m512 f[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) f[i][v] = _mm512_setzero_ps();
  for (int64_t b = 0; b < B; ++b) {
    __m512i acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512i z = _mm512_set1_epi32(xz[i * B + b]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[i][v] = z;
    }
    const uint8_t* pb = pq + b * (Nib ? 4 : 8) * NV * 64;
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      __m512i wv[NV];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        if constexpr (Nib) {
          const __m512i x = _mm512_loadu_si512(pb + ((t / 2) * NV + v) * 64);
          wv[v] = _mm512_and_si512(t % 2 ? _mm512_srli_epi16(x, 4) : x, low);
        } else {
          wv[v] = _mm512_loadu_si512(pb + (t * NV + v) * 64);
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        int32_t x4;
        std::memcpy(&x4, xq + i * k + b * kBlock + 4 * t, 4);
        const __m512i xv = _mm512_set1_epi32(x4);
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], wv[v], xv);
      }
    }
    __m512 sv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if constexpr (Half)
        sv[v] = _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(ps) + (b * NV + v) * kLanes)));
      else
        sv[v] = _mm512_loadu_ps(static_cast<const float*>(ps) + (b * NV + v) * kLanes);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(xa[i * B + b]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v)
        f[i][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][v]), _mm512_mul_ps(sv[v], a), f[i][v]);
    }
  }
  store_tile<MR, NV>(f, y, ldy, cols);
}

/// Per channel: MR rows x 16 NV outputs, int32 over all of k from zc, then
/// y = a · (float(t) · s) (finish_pc's operations).
template <int MR, int NV>
YMLOPT_AVX512 __attribute__((noinline)) void pc_panel_tile(const PanelActs& A, int64_t i0, const uint8_t* pq,
                                                           const void* scales, float* y, int64_t ldy, int64_t cols) {
  const auto* ps = static_cast<const float*>(scales);
  const int64_t kq = A.kq, nq = kq / 4;
  const int8_t* xq = A.q.data() + i0 * kq;
  __m512i acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const __m512i z = _mm512_set1_epi32(A.zc[i0 + i]);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[i][v] = z;
  }
#pragma GCC unroll 4
  for (int64_t t = 0; t < nq; ++t) {
    __m512i wv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_si512(pq + (t * NV + v) * 64);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      int32_t x4;
      std::memcpy(&x4, xq + i * kq + 4 * t, 4);
      const __m512i xv = _mm512_set1_epi32(x4);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], wv[v], xv);
    }
  }
  __m512 f[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const __m512 a = _mm512_set1_ps(A.a[i0 + i]);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      f[i][v] = _mm512_mul_ps(a, _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][v]), _mm512_loadu_ps(ps + v * kLanes)));
  }
  store_tile<MR, NV>(f, y, ldy, cols);
}

using TileFn = void (*)(const PanelActs&, int64_t, const uint8_t*, const void*, float*, int64_t, int64_t);
constexpr int kMR = 6, kNV = 2;

// ------------------------------------------------------------ kept panels

/// Bytes for kept panels, mapped: packing writes every byte, so they are not
/// cleared first (a vector would, a pass over the pages before the packing's).
/// Not in transparent huge pages: asked for, they made the steps 10% faster
/// but the first step 2-4 times slower, stalled in the kernel's compaction.
class PanelBytes {
 public:
  PanelBytes() = default;
  PanelBytes(const PanelBytes&) = delete;
  PanelBytes& operator=(const PanelBytes&) = delete;
  void resize(std::size_t n) {
    if (p_) ::munmap(p_, n_), p_ = nullptr;
    n_ = std::max<std::size_t>(n, 1);
    void* p = ::mmap(nullptr, n_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw KernelError("quant::linear: out of memory for " + std::to_string(n_) + " bytes of panels");
    p_ = static_cast<uint8_t*>(p);
  }
  ~PanelBytes() {
    if (p_) ::munmap(p_, n_);
  }
  uint8_t* data() const { return p_; }

 private:
  uint8_t* p_ = nullptr;
  std::size_t n_ = 0;
};

/// Every panel of one weight, as run_panels packs them one at a time.
struct Panels {
  PanelBytes q;  // panel p at p * qsize
  PanelBytes s;  // panel p at p * ssize (f32 or f16 scales)
};
struct PanelKey {
  std::uint64_t q_id, scale_id;
  int64_t n, k, group;
  int bits;
  bool operator==(const PanelKey&) const = default;
};
struct PanelKeyHash {
  std::size_t operator()(const PanelKey& k) const {
    return hash_fields(k.q_id, k.scale_id, k.n, k.k, k.group, k.bits);
  }
};

// As gemm's f32 panels (sgemm_panels.cpp): never evicting (a forward reads its
// weights in the same order each time), and packing a weight on its second
// use in a run (one use costs the same packing either way).
ContentCache<PanelKey, Panels, PanelKeyHash>& kept() {
  static ContentCache<PanelKey, Panels, PanelKeyHash> c(cache_budget_from_env("YMLOPT_QLINEAR_PACK_CACHE_MB", 2048),
                                                        Eviction::keep, Admission::second);
  return c;
}

/// Packs 16 kNV weight rows at a time in format f and runs every row tile of A
/// on the panel; a named weight's panels come packed from kept() from its
/// second use on.
void run_panels(const PanelActs& A, const QWeight& w, PanelFormat f, const TileFn (&tiles)[kNV][kMR], float* y,
                int64_t ldy) {
  constexpr int MR = kMR, NV = kNV;
  const std::size_t qsize = f.code_bytes(A.kq, NV), ssize = f.scale_bytes(A.blocks, NV);
  const int64_t panels = (w.n + NV * kLanes - 1) / (NV * kLanes);
  auto nv_of = [&](int64_t j0) { return static_cast<int>((std::min<int64_t>(NV * kLanes, w.n - j0) + kLanes - 1) / kLanes); };
  std::shared_ptr<const Panels> all;
  if (w.q_id && w.scale_id)
    all = kept().get(
        PanelKey{w.q_id, w.scale_id, w.n, w.k, w.group, w.bits}, w.q_id >> 32,
        [&] { return std::int64_t(panels) * std::int64_t(qsize + ssize); },
        [&](Panels& p) {
          p.q.resize(qsize * std::size_t(panels));
          p.s.resize(ssize * std::size_t(panels));
          for (int64_t j0 = 0, i = 0; j0 < w.n; j0 += NV * kLanes, ++i)
            pack_panel_avx512(w, j0, nv_of(j0), f, p.q.data() + std::size_t(i) * qsize,
                              p.s.data() + std::size_t(i) * ssize);
        });
  std::vector<uint8_t> own_q(all ? 0 : qsize), own_s(all ? 0 : ssize);
  for (int64_t j0 = 0, p = 0; j0 < w.n; j0 += NV * kLanes, ++p) {
    const int64_t cols = std::min<int64_t>(NV * kLanes, w.n - j0);
    const int nv = nv_of(j0);
    const uint8_t* pq = all ? all->q.data() + std::size_t(p) * qsize : own_q.data();
    const void* ps = all ? all->s.data() + std::size_t(p) * ssize : own_s.data();
    if (!all) pack_panel_avx512(w, j0, nv, f, own_q.data(), own_s.data());
    for (int64_t i = 0; i < A.m; i += MR) {
      const int64_t mr = std::min<int64_t>(MR, A.m - i);
      tiles[nv - 1][mr - 1](A, i, pq, ps, y + i * ldy + j0, ldy, cols);
    }
  }
}

template <bool Nib, bool Half>
constexpr TileFn b32_tiles[kNV][kMR] = {
    {b32_tile<1, 1, Nib, Half>, b32_tile<2, 1, Nib, Half>, b32_tile<3, 1, Nib, Half>, b32_tile<4, 1, Nib, Half>,
     b32_tile<5, 1, Nib, Half>, b32_tile<6, 1, Nib, Half>},
    {b32_tile<1, 2, Nib, Half>, b32_tile<2, 2, Nib, Half>, b32_tile<3, 2, Nib, Half>, b32_tile<4, 2, Nib, Half>,
     b32_tile<5, 2, Nib, Half>, b32_tile<6, 2, Nib, Half>}};

}  // namespace

void b32_avx512(const PanelActs& A, const QWeight& w, float* y, int64_t ldy) {
  const PanelFormat f = PanelFormat::of(w);
  if (f.nibbles)
    run_panels(A, w, f, f.half ? b32_tiles<true, true> : b32_tiles<true, false>, y, ldy);
  else
    run_panels(A, w, f, f.half ? b32_tiles<false, true> : b32_tiles<false, false>, y, ldy);
}

ContentCacheStats kept_panel_stats() { return kept().stats(); }
void limit_kept_panels(std::int64_t bytes) { kept().lower_budget(bytes); }

void pc_panel_avx512(const PanelActs& A, const QWeight& w, float* y, int64_t ldy) {
  static constexpr TileFn tiles[kNV][kMR] = {{pc_panel_tile<1, 1>, pc_panel_tile<2, 1>, pc_panel_tile<3, 1>,
                                              pc_panel_tile<4, 1>, pc_panel_tile<5, 1>, pc_panel_tile<6, 1>},
                                             {pc_panel_tile<1, 2>, pc_panel_tile<2, 2>, pc_panel_tile<3, 2>,
                                              pc_panel_tile<4, 2>, pc_panel_tile<5, 2>, pc_panel_tile<6, 2>}};
  run_panels(A, w, PanelFormat{}, tiles, y, ldy);
}

template void pc_avx512<false, false>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void pc_avx512<false, true>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void pc_avx512<true, false>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void pc_avx512<true, true>(const Acts&, const QWeight&, const Fin&, float*, int64_t);
template void grp_dispatch<false>(bool, int64_t, const Acts&, const QWeight&, const WPrep&, const Fin&, float*,
                                  int64_t);
template void grp_dispatch<true>(bool, int64_t, const Acts&, const QWeight&, const WPrep&, const Fin&, float*,
                                 int64_t);

}  // namespace ymlopt::quant::linear_impl

#pragma GCC diagnostic pop
