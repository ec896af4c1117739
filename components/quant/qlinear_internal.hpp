// What the files of quant::linear share (private to components/quant): the
// per-call activation and weight data, the finishing step every path applies,
// the block geometry of grouped weights and the tile loop of the vector paths.
//
//   qlinear.cpp          the driver: QWeight, CPU detection, validate, linear()
//   qlinear_prepare.cpp  Acts and WPrep (activation codes, scales, code sums)
//   qlinear_scalar.cpp   the portable path (emulates the 16 int32 lanes)
//   qlinear_avx512.cpp   the AVX-512 VNNI path
//   qlinear_avx2.cpp     the AVX2 path
//   qlinear_weight_only.cpp  dequantize and linear_weight_only (f32 activations)
//   qlinear_gemv.inc     its one-token GEMVs, included once per ISA
//
// The instruction sets are chosen per function (`target` attributes, picked at
// run time), not per file: the library is built for baseline x86-64.
#pragma once
#include "quant/qlinear.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <ymlopt/half.hpp>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source of
// unmasked operations, which -W(maybe-)uninitialized reports as a use of an
// uninitialized value (GCC bug 105593). Nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define YMLOPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define YMLOPT_AVX2 __attribute__((target("avx2,fma")))

namespace ymlopt::quant::linear_impl {

using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::uint8_t;

constexpr int64_t kChunk = 64;  // k elements per vpdpbusd step (16 lanes x 4)

inline int code_at(const QWeight& w, int64_t r, int64_t c) {
  const int8_t* row = w.q + r * w.q_ld;
  if (w.bits == 8) return row[c];
  const auto b = static_cast<uint8_t>(row[c / 2]);
  return (c & 1) ? (b >> 4) : (b & 15);
}

inline float scale_at(const QWeight& w, int64_t r, int64_t g) {
  const int64_t i = r * w.scale_ld + g;
  if (w.scale_dtype == DType::f16)
    return static_cast<float>(half::f16_bits_to_double(static_cast<const std::uint16_t*>(w.scale)[i]));
  return static_cast<const float*>(w.scale)[i];
}

/// The stored zero point of row r, group g (w.zero non-null).
inline float stored_zero_at(const QWeight& w, int64_t r, int64_t g) {
  const int64_t i = r * w.zero_ld + g;
  if (w.zero_dtype == DType::f16)
    return static_cast<float>(half::f16_bits_to_double(static_cast<const std::uint16_t*>(w.zero)[i]));
  return static_cast<const float*>(w.zero)[i];
}

/// k offset (inside a 64-chunk) of activation byte p. int8: p. int4: the order in
/// which the unpacked nibbles of 32 code bytes land in the 4 128-bit lanes:
/// [low nibbles of bytes 0-15, high nibbles of bytes 0-15, low 16-31, high 16-31].
inline int64_t k_of(bool w4, int64_t p) { return w4 ? (p / 32) * 32 + 2 * (p % 16) + ((p / 16) % 2) : p; }

/// Per-call data on the activation side, shared by both code paths.
struct Acts {
  int64_t m = 0, k = 0, kp = 0, nch = 0, groups = 1;
  bool w4 = false;
  std::vector<uint8_t> q;     // [m, kp]: int8 weights: xq + 128 (u8); int4: xq (s8) in k_of order; padding = 0 code
  std::vector<float> a;       // [m] activation scales
  std::vector<int32_t> xsum;  // [m, groups] Σ xq per group
  std::vector<int32_t> zl;    // [m, blocks, 16] grouped int4 symmetric: -8 · Σ xq per block and lane
};

/// Per-call data on the weight side: scales in f32, code sums (int8), the
/// 128·Σc term of grouped int8, s·zero for asymmetric weights (transposed [G, n]).
struct WPrep {
  int64_t n = 0, groups = 1;
  std::vector<float> s;       // [n, G]
  std::vector<int32_t> csum;  // [n, G] (int8)
  std::vector<float> bterm;   // [n] (int8, grouped)
  std::vector<float> sz_t;    // [G, n] (asymmetric)
};

/// Sum of the 16 int32 lanes (exact; order irrelevant).
__attribute__((target("avx512f"))) inline int32_t reduce_epi32(__m512i v) {
  alignas(64) int32_t e[16];
  _mm512_store_si512(e, v);
  int32_t s = 0;
  for (int l = 0; l < 16; ++l) s += e[l];
  return s;
}

/// What turns a tile's raw result into y, shared by both paths (same float operations):
///   per channel: F = float(t - ci[i] - cj[j]) * s[j]     (t the exact int32 dot product)
///   grouped:     F = F_lanes - b[j]
///   then y = a[i] * F, unless the weight has zero points (the epilogue finishes those rows).
struct Fin {
  const float* a = nullptr;     // [m] activation scales
  const int32_t* ci = nullptr;  // [m] per-row integer correction (per-channel int4 symmetric: 8 Σxq)
  const int32_t* cj = nullptr;  // [n] per-column integer correction (per-channel int8: 128 Σc)
  const float* s = nullptr;     // [n] per-channel scales
  const float* b = nullptr;     // [n] grouped int8: Σ_g s · 128 Σc
  bool fold_a = true;
};
inline float finish_pc(const Fin& f, int64_t i, int64_t j, int32_t t) {
  if (f.ci) t -= f.ci[i];
  if (f.cj) t -= f.cj[j];
  const float v = static_cast<float>(t) * f.s[j];
  return f.fold_a ? f.a[i] * v : v;
}
inline float finish_grp(const Fin& f, int64_t i, int64_t j, float v) {
  if (f.b) v = v - f.b[j];
  return f.fold_a ? f.a[i] * v : v;
}

/// Sum of 16 lane partials in the order the vector path uses:
/// per 128-bit lane (e0 + e2) + (e1 + e3), then (L0 + L1) + (L2 + L3).
inline float tree16(const float* e) {
  float l[4];
  for (int q = 0; q < 4; ++q) l[q] = (e[4 * q] + e[4 * q + 2]) + (e[4 * q + 1] + e[4 * q + 3]);
  return (l[0] + l[1]) + (l[2] + l[3]);
}

/// Geometry of the accumulation blocks of a grouped weight: a block is the span of
/// chunks whose int32 lane sums are converted together (g >= 64: one group of g/64
/// chunks; g == 32: one chunk, lanes 0-7 in group 2c and 8-15 in group 2c+1).
struct Blocks {
  int64_t count = 0, chunks = 1;
  bool g32 = false;
};
inline Blocks blocks_of(const QWeight& w, int64_t nch) {
  Blocks b;
  b.g32 = w.group == 32;
  b.chunks = b.g32 ? 1 : w.group / kChunk;
  b.count = b.g32 ? nch : w.k / w.group;
  return b;
}
inline float lane_scale(const Blocks& B, const float* s_row, int64_t G, int64_t b, int lane) {
  if (!B.g32) return s_row[b];
  const int64_t g = 2 * b + (lane >= 8 ? 1 : 0);
  return g < G ? s_row[g] : 0.0f;
}

/// The stored bytes of the last chunk of a weight row (k need not be a multiple of 64).
inline int64_t rem_bytes_of(const QWeight& w, int64_t nch) {
  const int64_t rem = w.k - (nch - 1) * kChunk;
  return w.bits == 4 ? rem / 2 : rem;
}

namespace {  // internal linkage: each path's instantiations stay local to its file (and inlined there)

/// Runs tile function `tile(i0, j0, mr_tag, nr_tag)` over [m, n] in cache blocks of
/// weight rows; edges use 1-row / 1-column tiles.
template <int MR, int NR, class F4, class F1N, class FM1, class F11>
void drive(int64_t m, int64_t n, int64_t act_bytes, F4&& full, FM1&& rows_x1, F1N&& one_x_n, F11&& one_one) {
  // A panel of about 24 KiB of quantized activations (at least 2 row tiles) stays in L1
  // while the weight tiles stream past it in order; each weight tile is reused by every
  // row tile of the panel, and y is written row-panel by row-panel (few pages at a time).
  const int64_t ib = std::max<int64_t>(2 * MR, (24 * 1024 / std::max<int64_t>(act_bytes, 1)) / MR * MR);
  for (int64_t i0 = 0; i0 < m; i0 += ib) {
    const int64_t i1 = std::min(m, i0 + ib);
    const int64_t im = i0 + (i1 - i0) / MR * MR;  // rows [im, i1) use 1-row tiles
    int64_t j = 0;
    for (; j + NR <= n; j += NR) {
      for (int64_t i = i0; i < im; i += MR) full(i, j);
      for (int64_t i = im; i < i1; ++i) one_x_n(i, j);
    }
    for (; j < n; ++j) {
      for (int64_t i = i0; i < im; i += MR) rows_x1(i, j);
      for (int64_t i = im; i < i1; ++i) one_one(i, j);
    }
  }
}

}  // namespace

// ---- preparation (qlinear_prepare.cpp) -------------------------------------------

/// `path`: the kernel path that runs (Isa::best resolved).
Acts prepare_acts(const float* x, int64_t m, int64_t ldx, const QWeight& w, bool need_xsum, Isa path);
/// `code_sums`: whether int8 weights need their code sums (not on the AVX2 path per
/// channel, which forms Σ xq · c directly).
WPrep prepare_weights(const QWeight& w, Isa path, bool code_sums);
/// -8 · Σ xq per (row, block, lane) for symmetric int4 (exact integers).
void lane_zero_init(Acts& A, const Blocks& B);
YMLOPT_AVX512 void lane_zero_init_avx512(Acts& A, const Blocks& B);

// ---- the paths: y from Acts, WPrep and Fin ------------------------------------------

void pc_scalar(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy);
void grp_scalar(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy);

/// Instantiated for every W4 and Tail in qlinear_avx512.cpp.
template <bool W4, bool Tail>
void pc_avx512(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy);
/// Grouped AVX-512: picks the chunks-per-block instantiation (`chunks`: Blocks::chunks).
template <bool W4>
void grp_dispatch(bool tail, int64_t chunks, const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y,
                  int64_t ldy);

/// Instantiated for every W4 and Tail in qlinear_avx2.cpp.
template <bool W4, bool Tail>
void pc_avx2(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy);
template <bool W4, bool Tail>
void grp_avx2(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy);

// ---- symmetric group-32 weights (Q8_0, Q4_0): the block path --------------------------
//
// Activations are quantized per 32-element block (as llama.cpp quantizes them
// for Q8_0 / Q4_0), and y[i, j] = Σ_b float(d_ijb) · (s_jb · a_ib), one fma per
// block in block order (d the exact int32 dot product of block b). The vector
// paths pack 16-row groups of the weight into panels whose 32-bit lanes hold 4
// consecutive codes of one row, so one vpdpbusd (AVX2: vpmaddubsw + vpmaddwd)
// advances 16 (8) outputs of an activation row by 4 k, the activations broadcast.

constexpr int64_t kBlock = 32;
constexpr int kLanes = 16;  // weight rows per panel group

/// Activations of the panel kernels: the block path (span 32) and, on AVX-512,
/// symmetric per-channel weights (span k: one scale per token, the per-token rule).
struct PanelActs {
  int64_t m = 0, kq = 0, blocks = 0;  // kq: k rounded up to 4 (the row stride)
  std::vector<int8_t> q;    // [m, kq] codes in [-127, 127], 0 past k
  std::vector<float> a;     // [m, blocks] scales: max|x| / 127 of the span
  std::vector<int32_t> zc;  // [m, blocks] -offset · Σ codes of the span (the kernel's weight code offset)
};
PanelActs prepare_panel_acts(const float* x, int64_t m, int64_t ldx, int64_t k, int64_t span, int32_t offset,
                             Isa path);
/// prepare_panel_acts for activations named by x_id (TensorView::content_id;
/// 0: unnamed, computed for this call only): kept under that id, least
/// recently used out first (YMLOPT_QLINEAR_ACTS_CACHE_MB, default 16), so the
/// column-block tasks that read one version of x quantize it once, not once each.
std::shared_ptr<const PanelActs> shared_panel_acts(const float* x, int64_t m, int64_t ldx, int64_t k, int64_t span,
                                                   int32_t offset, Isa path, std::uint64_t x_id);
ContentCacheStats kept_acts_stats();
void limit_kept_acts(std::int64_t bytes);

/// Packs weight rows [j0, j0 + 16 nv) into q: [k/4][nv][16][4] bytes, the codes
/// (int8; int4 as unsigned 0..15) plus `add` modulo 256, and s: [k/32][nv][16]
/// f32 scales. Rows at or past n get zero codes and zero scales. (The AVX-512
/// version also packs per-channel weights: k/4 rounded up, one scale per row.)
void pack_panel(const QWeight& w, int64_t j0, int nv, uint8_t add, uint8_t* q, float* s);

void b32_scalar(const PanelActs& A, const QWeight& w, float* y, int64_t ldy);
void b32_avx2(const PanelActs& A, const QWeight& w, float* y, int64_t ldy);
void b32_avx512(const PanelActs& A, const QWeight& w, float* y, int64_t ldy);
/// Symmetric per-channel weights on AVX-512: the exact int32 dot products of the
/// other paths (so the same y), from panels: y = a_i · (float(t) · s_j).
void pc_panel_avx512(const PanelActs& A, const QWeight& w, float* y, int64_t ldy);
/// The kept panels of those two paths (qlinear_avx512.cpp).
ContentCacheStats kept_panel_stats();
void limit_kept_panels(std::int64_t bytes);

// ---- the driver (qlinear.cpp) ----------------------------------------------------

/// The arguments of a linear call (`who` names it in the errors); false when
/// there is nothing to compute (m or n is 0).
bool check_call(const char* who, const float* x, int64_t m, int64_t ldx, const QWeight& w, const float* y,
                int64_t ldy);

}  // namespace ymlopt::quant::linear_impl

#pragma GCC diagnostic pop
