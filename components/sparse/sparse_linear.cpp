// The linear kernels y = x · Wᵀ of the sparse weight formats (CSR, BSR, 2:4);
// the formats' views and conversions are in sparse_formats.cpp.
//
// Layout strategy (m >= 4 tokens): a block of up to 64 tokens of x [m, k] is
// transposed into xt [k, L] (L = 16, 32, 48 or 64 lanes, padding lanes zero),
// and every stored weight w(j, c) becomes one vector update
//   yt[j, :] += w(j, c) * xt[c, :]
// over the tokens, so the sparse structure costs one scalar index per weight and
// the arithmetic is dense AVX-512 over tokens. Token blocks are transposed a
// group (~768 KiB) at a time; output rows go by super-blocks of ~1 MiB of
// weights (kept in L2 while every token block of the group runs over them),
// split into row blocks whose yt tile is 16 KiB (64 rows of 64 tokens). BSR and 2:4 walk k in
// chunks whose xt slice (16 KiB) stays in L1 with that tile, and interleave 4
// output rows; CSR takes whole rows (too few entries per chunk to pay for
// finding chunk boundaries) with 2-4 partial sums per row. yt is finally
// transposed back into y. m < 4 runs a GEMV per token: CSR gathers x
// (vgatherdps), 2:4 selects the 2 kept of every 4 x values with one vpermt2ps
// per 8 groups (8 rows sharing the x loads), BSR runs masked dot products per block row.
// A CSR weight with a CsrPlan (plan_gemv: 16 rows per lane group, 32-column
// windows) runs m < 8 on the plan instead: one vpermt2ps per 16 slots and token,
// up to 4 tokens per pass sharing the value and index loads.
//
// Every path has a portable C++ twin (same loop nests, one running sum per
// output); the AVX-512 versions are compiled with __attribute__((target)) and
// chosen at run time with __builtin_cpu_supports, so the library runs on any
// x86-64. Results of the two agree up to rounding: the AVX-512 path fuses
// multiply-adds and splits sums into 2-4 partial sums (16 lanes in the GEMVs).
#include "sparse/sparse_linear.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

// GCC 12 flags its own _mm512_undefined_* (used inside gathers, variable shifts
// and reductions) as "(may be) used uninitialized"; a known false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ymlopt::sparse {

using std::int64_t;
using std::to_string;

namespace {

#define YMLOPT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi2")))

std::atomic<bool> g_force_portable{false};

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

bool use_avx512() {
  static const bool has = cpu_has_avx512();
  return has && !g_force_portable.load(std::memory_order_relaxed);
}

// Tile sizes of the blocked path (the defaults were measured on a Sapphire
// Rapids-class Xeon with 48 KiB L1d and 2 MiB L2 per core; the macros let a
// tuning build override them, e.g. -DYMLOPT_SPARSE_XT_CHUNK_BYTES=32768).
#ifndef YMLOPT_SPARSE_XT_CHUNK_BYTES
#define YMLOPT_SPARSE_XT_CHUNK_BYTES 16384
#endif
#ifndef YMLOPT_SPARSE_YT_BLOCK_BYTES
#define YMLOPT_SPARSE_YT_BLOCK_BYTES 16384
#endif
#ifndef YMLOPT_SPARSE_WEIGHT_BLOCK_BYTES
#define YMLOPT_SPARSE_WEIGHT_BLOCK_BYTES (1 << 20)
#endif
#ifndef YMLOPT_SPARSE_XT_GROUP_BYTES
#define YMLOPT_SPARSE_XT_GROUP_BYTES (768 << 10)
#endif
/// Bytes of the xt slice (k chunk) that BSR and 2:4 keep in L1 across a row block.
constexpr int64_t kXtChunkBytes = YMLOPT_SPARSE_XT_CHUNK_BYTES;
/// Bytes of the yt tile (output rows x lanes) of a row block: with the xt slice it stays in L1.
constexpr int64_t kYtBlockBytes = YMLOPT_SPARSE_YT_BLOCK_BYTES;
/// Weight bytes of a row super-block, run over a group of token blocks while it sits in L2.
constexpr int64_t kWeightBlockBytes = YMLOPT_SPARSE_WEIGHT_BLOCK_BYTES;
/// Bytes of transposed activations (whole token blocks) that share one pass over the weights.
constexpr int64_t kXtGroupBytes = YMLOPT_SPARSE_XT_GROUP_BYTES;
constexpr int kRows = 4;          // output rows interleaved in the BSR and 2:4 blocked kernels

/// Per-thread scratch (xt, yt, cursors), grown on demand: kernels are called in
/// loops and a fresh allocation per call would page-fault each time.
struct Scratch {
  std::vector<float> xt_buf, yt_buf;
  std::vector<int64_t> cur;
};

/// n floats of `buf`, 64-byte aligned: every xt/yt row (a multiple of 16 floats)
/// then starts a cache line, so no AVX-512 load splits two lines.
float* aligned64(std::vector<float>& buf, int64_t n) {
  const std::size_t need = static_cast<std::size_t>(n) + 16;
  if (buf.size() < need) buf.resize(need);
  const auto addr = reinterpret_cast<std::uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64) / sizeof(float);
}
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void check_call(const char* fmt, int64_t m, int64_t ldx, int64_t n, int64_t k, int64_t ldy, const float* x,
                const float* y) {
  if (m < 0 || n < 0 || k < 0)
    throw std::invalid_argument(std::string("sparse::linear (") + fmt + "): negative dimension");
  if (m > 1 && ldx < k)
    throw std::invalid_argument(std::string("sparse::linear (") + fmt + "): ldx " + to_string(ldx) + " < k " +
                                to_string(k));
  if (m > 1 && ldy < n)
    throw std::invalid_argument(std::string("sparse::linear (") + fmt + "): ldy " + to_string(ldy) + " < n " +
                                to_string(n));
  if ((m > 0 && k > 0 && !x) || (m > 0 && n > 0 && !y))
    throw std::invalid_argument(std::string("sparse::linear (") + fmt + "): null x or y");
}

void zero_y(int64_t m, int64_t n, float* y, int64_t ldy) {
  for (int64_t t = 0; t < m; ++t) std::fill(y + t * ldy, y + t * ldy + n, 0.0f);
}

/// xt[c*L + t] = x[t, c] for t < mb, 0 for mb <= t < L.
void pack_xt(const float* x, int64_t mb, int64_t ldx, int64_t k, int64_t L, float* xt) {
  for (int64_t c0 = 0; c0 < k; c0 += 64) {
    const int64_t c1 = std::min(k, c0 + 64);
    for (int64_t t = 0; t < mb; ++t) {
      const float* xr = x + t * ldx;
      for (int64_t c = c0; c < c1; ++c) xt[c * L + t] = xr[c];
    }
  }
  if (mb < L)
    for (int64_t c = 0; c < k; ++c) std::fill(xt + c * L + mb, xt + c * L + L, 0.0f);
}

/// y[t, j0 + j] = yt[j*L + t] for t < mb, j < rows.
void unpack_yt(const float* yt, int64_t rows, int64_t mb, int64_t L, float* y, int64_t ldy, int64_t j0) {
  for (int64_t jb = 0; jb < rows; jb += 64) {
    const int64_t je = std::min(rows, jb + 64);
    for (int64_t t = 0; t < mb; ++t) {
      float* yr = y + t * ldy + j0;
      for (int64_t j = jb; j < je; ++j) yr[j] = yt[j * L + t];
    }
  }
}

/// In-register transpose of a 16x16 float block (r[i] = row i on entry, column i on exit).
YMLOPT_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
}

/// pack_xt with 16x16 register transposes (x rows past mb read as zeros).
YMLOPT_AVX512 void pack_xt_avx512(const float* x, int64_t mb, int64_t ldx, int64_t k, int64_t L, float* xt) {
  for (int64_t t0 = 0; t0 < L; t0 += 16) {
    const int64_t tn = std::clamp<int64_t>(mb - t0, 0, 16);
    for (int64_t c0 = 0; c0 < k; c0 += 16) {
      const __mmask16 mc = first_lanes(k - c0);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        r[i] = i < tn ? _mm512_maskz_loadu_ps(mc, x + (t0 + i) * ldx + c0) : _mm512_setzero_ps();
      transpose16(r);
      const int64_t cn = std::min<int64_t>(16, k - c0);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        if (i < cn) _mm512_storeu_ps(xt + (c0 + i) * L + t0, r[i]);
    }
  }
}

/// unpack_yt with 16x16 register transposes.
YMLOPT_AVX512 void unpack_yt_avx512(const float* yt, int64_t rows, int64_t mb, int64_t L, float* y, int64_t ldy,
                                    int64_t j0) {
  for (int64_t jb = 0; jb < rows; jb += 16) {
    const int64_t jn = std::min<int64_t>(16, rows - jb);
    const __mmask16 mj = first_lanes(jn);
    for (int64_t t0 = 0; t0 < mb; t0 += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = i < jn ? _mm512_loadu_ps(yt + (jb + i) * L + t0) : _mm512_setzero_ps();
      transpose16(r);
      const int64_t tn = std::min<int64_t>(16, mb - t0);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        if (i < tn) _mm512_mask_storeu_ps(y + (t0 + i) * ldy + j0 + jb, mj, r[i]);
    }
  }
}

/// The blocked driver: chunk(V, j0, j1, c0, c1, cur, xt, yt) accumulates the
/// weights of rows [j0, j1) and columns [c0, c1) into yt (rows relative to j0);
/// begin(j0, j1, cur) resets the per-row cursors of a row block. Token blocks
/// are transposed a group at a time (about kXtGroupBytes); for each group, rows
/// go by super-blocks of about kWeightBlockBytes of weights (`row_bytes` each),
/// each run over every token block of the group, so the weights come from L2
/// rather than L3 for all but the first token block.
template <class Begin, class Chunk>
void blocked(const float* x, int64_t m, int64_t ldx, int64_t n, int64_t k, float* y, int64_t ldy, int64_t row_align,
             int64_t k_align, bool chunk_k, double row_bytes, Begin&& begin, Chunk&& chunk) {
  const int v = static_cast<int>(std::min<int64_t>(4, (m + 15) / 16));
  const int64_t L = 16 * v, lane_bytes = L * static_cast<int64_t>(sizeof(float));
  int64_t kc = k;
  if (chunk_k) {  // an xt slice of kXtChunkBytes, reused by every row of the row block
    kc = std::max<int64_t>(8, kXtChunkBytes / lane_bytes);
    kc = (kc + k_align - 1) / k_align * k_align;
  }
  const int64_t nb = std::max<int64_t>(1, std::max<int64_t>(16, kYtBlockBytes / lane_bytes) / row_align) * row_align;
  const int64_t super_rows =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(kWeightBlockBytes) / std::max(row_bytes, 1.0)) / nb) *
      nb;
  const int64_t nblk = (m + L - 1) / L;
  const int64_t group = std::clamp<int64_t>(kXtGroupBytes / (k * lane_bytes), 1, nblk);
  Scratch& s = scratch();
  float* xt_group = aligned64(s.xt_buf, group * k * L);
  float* yt = aligned64(s.yt_buf, nb * L);
  if (s.cur.size() < static_cast<std::size_t>(nb)) s.cur.resize(static_cast<std::size_t>(nb));
  for (int64_t g0 = 0; g0 < nblk; g0 += group) {
    const int64_t g1 = std::min(nblk, g0 + group);
    for (int64_t b = g0; b < g1; ++b)
      (use_avx512() ? pack_xt_avx512 : pack_xt)(x + b * L * ldx, std::min(L, m - b * L), ldx, k, L,
                                                xt_group + (b - g0) * k * L);
    for (int64_t s0 = 0; s0 < n; s0 += super_rows) {
      const int64_t s1 = std::min(n, s0 + super_rows);
      for (int64_t b = g0; b < g1; ++b) {
        const int64_t t0 = b * L, mb = std::min(L, m - t0);
        const float* xt = xt_group + (b - g0) * k * L;
        for (int64_t j0 = s0; j0 < s1; j0 += nb) {
          const int64_t j1 = std::min(s1, j0 + nb);
          std::fill(yt, yt + (j1 - j0) * L, 0.0f);
          begin(j0, j1, s.cur.data());
          for (int64_t c0 = 0; c0 < k; c0 += kc) chunk(v, j0, j1, c0, std::min(k, c0 + kc), s.cur.data(), xt, yt);
          (use_avx512() ? unpack_yt_avx512 : unpack_yt)(yt, j1 - j0, mb, L, y + t0 * ldy, ldy, j0);
        }
      }
    }
  }
}

// ============================================================ CSR

/// One CSR row over whole k (no k chunks: a row's entries are too few per chunk
/// to pay for finding chunk boundaries): yr[0, L) = sum_p val[p] * xt[col[p], :].
/// S partial sums (entries p, p+1, ... round robin) keep S*V accumulator chains
/// busy. Returns false on a column outside [0, k), before reading it.
template <int V>
YMLOPT_AVX512 bool csr_row_avx512(const float* val, const std::int32_t* col, int64_t p, int64_t e, int64_t k,
                                  const float* xt, float* yr) {
  constexpr int64_t L = 16 * V;
  constexpr int S = V == 1 ? 4 : 2;
  __m512 a[S][V];
  #pragma GCC unroll 16
  for (int q = 0; q < S; ++q)
    #pragma GCC unroll 16
    for (int u = 0; u < V; ++u) a[q][u] = _mm512_setzero_ps();
  const auto kk = static_cast<std::uint64_t>(k);
  for (; p + S <= e; p += S)
    #pragma GCC unroll 16
    for (int q = 0; q < S; ++q) {
      const std::uint32_t c = static_cast<std::uint32_t>(col[p + q]);
      if (c >= kk) return false;
      const __m512 wv = _mm512_set1_ps(val[p + q]);
      const float* xr = xt + static_cast<int64_t>(c) * L;
      #pragma GCC unroll 16
      for (int u = 0; u < V; ++u) a[q][u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + 16 * u), a[q][u]);
    }
  for (; p < e; ++p) {
    const std::uint32_t c = static_cast<std::uint32_t>(col[p]);
    if (c >= kk) return false;
    const __m512 wv = _mm512_set1_ps(val[p]);
    const float* xr = xt + static_cast<int64_t>(c) * L;
    #pragma GCC unroll 16
    for (int u = 0; u < V; ++u) a[0][u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + 16 * u), a[0][u]);
  }
  #pragma GCC unroll 16
  for (int u = 0; u < V; ++u) {
    __m512 t = a[0][u];
    #pragma GCC unroll 16
    for (int q = 1; q < S; ++q) t = _mm512_add_ps(t, a[q][u]);
    _mm512_storeu_ps(yr + 16 * u, t);
  }
  return true;
}

template <int V>
bool csr_row_portable(const float* val, const std::int32_t* col, int64_t p, int64_t e, int64_t k, const float* xt,
                      float* yr) {
  constexpr int64_t L = 16 * V;
  for (int64_t t = 0; t < L; ++t) yr[t] = 0;
  for (; p < e; ++p) {
    const std::uint32_t c = static_cast<std::uint32_t>(col[p]);
    if (c >= static_cast<std::uint64_t>(k)) return false;
    const float wv = val[p];
    const float* xr = xt + static_cast<int64_t>(c) * L;
    for (int64_t t = 0; t < L; ++t) yr[t] += wv * xr[t];
  }
  return true;
}

template <int V> void csr_chunk(const CsrWeight& w, int64_t j0, int64_t j1, const float* xt, float* yt) {
  constexpr int64_t L = 16 * V;
  const bool avx = use_avx512();
  for (int64_t j = j0; j < j1; ++j) {
    float* yr = yt + (j - j0) * L;
    const bool ok = avx ? csr_row_avx512<V>(w.values, w.col, w.row_ptr[j], w.row_ptr[j + 1], w.k, xt, yr)
                        : csr_row_portable<V>(w.values, w.col, w.row_ptr[j], w.row_ptr[j + 1], w.k, xt, yr);
    if (!ok)
      throw std::invalid_argument("sparse::linear (CSR): row " + to_string(j) + " has a column index outside [0, " +
                                  to_string(w.k) + ")");
  }
}

YMLOPT_AVX512 void csr_gemv_avx512(const float* x, const CsrWeight& w, float* y) {
  for (int64_t j = 0; j < w.n; ++j) {
    int64_t p = w.row_ptr[j];
    const int64_t e = w.row_ptr[j + 1];
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; p + 32 <= e; p += 32) {
      const __m512i i0 = _mm512_loadu_si512(w.col + p), i1 = _mm512_loadu_si512(w.col + p + 16);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w.values + p), _mm512_i32gather_ps(i0, x, 4), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w.values + p + 16), _mm512_i32gather_ps(i1, x, 4), a1);
    }
    for (; p < e; p += 16) {
      const __mmask16 msk = static_cast<__mmask16>(e - p >= 16 ? 0xFFFF : (1u << (e - p)) - 1);
      const __m512i i0 = _mm512_maskz_loadu_epi32(msk, w.col + p);
      const __m512 xv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), msk, i0, x, 4);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(msk, w.values + p), xv, a0);
    }
    y[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
  }
}

void csr_gemv_portable(const float* x, const CsrWeight& w, float* y) {
  for (int64_t j = 0; j < w.n; ++j) {
    float s = 0;
    for (int64_t p = w.row_ptr[j]; p < w.row_ptr[j + 1]; ++p) s += w.values[p] * x[w.col[p]];
    y[j] = s;
  }
}

// The planned GEMV (CsrPlan) of T tokens at once (T <= 4, each value and index
// loaded once for all): per group of 16 rows, per 32-column window, one
// vpermt2ps per token selects each lane's x value; padding slots (bit 7 of the
// index clear) are masked so a non-finite x never reaches a row without that entry.
template <int T>
YMLOPT_AVX512 void csr_plan_gemv_avx512(const float* x, int64_t ldx, const CsrPlan& p, float* y, int64_t ldy) {
  const float* v = p.values.data();
  const std::uint8_t* ix = p.index.data();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t g = 0; g < p.groups(); ++g) {
    __m512 a0[T], a1[T];
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) a0[t] = a1[t] = _mm512_setzero_ps();
    for (int64_t e = p.group_windows[g]; e < p.group_windows[g + 1]; ++e) {
      const CsrPlan::Window win = p.windows[static_cast<std::size_t>(e)];
      const int64_t c0 = 32 * static_cast<int64_t>(win.window);
      __m512 xa[T], xb[T];
      const bool full = c0 + 32 <= p.k;
      const __mmask16 ma = first_lanes(p.k - c0), mb = first_lanes(std::max<int64_t>(p.k - c0 - 16, 0));
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const float* xt = x + t * ldx + c0;
        xa[t] = full ? _mm512_loadu_ps(xt) : _mm512_maskz_loadu_ps(ma, xt);
        xb[t] = full ? _mm512_loadu_ps(xt + 16) : _mm512_maskz_loadu_ps(mb, xt + 16);
      }
      uint32_t st = 0;
      for (; st + 2 <= win.steps; st += 2, v += 32, ix += 32) {
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ix));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ix + 16));
        const __mmask16 k0 = _mm_movepi8_mask(r0), k1 = _mm_movepi8_mask(r1);
        const __m512i i0 = _mm512_cvtepu8_epi32(r0), i1 = _mm512_cvtepu8_epi32(r1);
        const __m512 v0 = _mm512_load_ps(v), v1 = _mm512_load_ps(v + 16);
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          a0[t] = _mm512_fmadd_ps(v0, _mm512_maskz_permutex2var_ps(k0, xa[t], i0, xb[t]), a0[t]);
          a1[t] = _mm512_fmadd_ps(v1, _mm512_maskz_permutex2var_ps(k1, xa[t], i1, xb[t]), a1[t]);
        }
      }
      if (st < win.steps) {
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ix));
        const __mmask16 k0 = _mm_movepi8_mask(r0);
        const __m512i i0 = _mm512_cvtepu8_epi32(r0);
        const __m512 v0 = _mm512_load_ps(v);
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
          a0[t] = _mm512_fmadd_ps(v0, _mm512_maskz_permutex2var_ps(k0, xa[t], i0, xb[t]), a0[t]);
        v += 16, ix += 16;
      }
    }
    const __m512i rows = _mm512_loadu_si512(p.lane_row.data() + 16 * g);
    const __mmask16 used = _mm512_cmpge_epi32_mask(rows, zero);
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm512_mask_i32scatter_ps(y + t * ldy, used, rows, _mm512_add_ps(a0[t], a1[t]), 4);
  }
}

void csr_plan_gemv_portable(const float* x, const CsrPlan& p, float* y) {
  const float* v = p.values.data();
  const std::uint8_t* ix = p.index.data();
  for (int64_t g = 0; g < p.groups(); ++g) {
    float acc[16] = {};
    for (int64_t e = p.group_windows[g]; e < p.group_windows[g + 1]; ++e) {
      const CsrPlan::Window win = p.windows[static_cast<std::size_t>(e)];
      const float* xw = x + 32 * static_cast<int64_t>(win.window);
      for (uint32_t st = 0; st < win.steps; ++st, v += 16, ix += 16)
        for (int l = 0; l < 16; ++l)
          if (ix[l] & 0x80) acc[l] += v[l] * xw[ix[l] & 31];
    }
    for (int l = 0; l < 16; ++l)
      if (const std::int32_t r = p.lane_row[static_cast<std::size_t>(16 * g + l)]; r >= 0) y[r] = acc[l];
  }
}

// ============================================================ BSR

template <int V, int R>
YMLOPT_AVX512 void bsr_rows_avx512(const BsrWeight& w, int64_t r0, int64_t p, int64_t e, const float* xt,
                                   float* yt_br) {
  constexpr int64_t L = 16 * V;
  const int64_t bs = w.bs;
  __m512 a[R][V];
  #pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
    #pragma GCC unroll 16
    for (int u = 0; u < V; ++u) a[i][u] = _mm512_loadu_ps(yt_br + (r0 + i) * L + 16 * u);
  for (int64_t q = p; q < e; ++q) {
    const float* b = w.values + q * bs * bs + r0 * bs;
    const float* xb = xt + static_cast<int64_t>(w.block_col[q]) * bs * L;
    for (int64_t c = 0; c < bs; ++c) {
      __m512 xv[V];
      #pragma GCC unroll 16
      for (int u = 0; u < V; ++u) xv[u] = _mm512_loadu_ps(xb + c * L + 16 * u);
      #pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const __m512 wv = _mm512_set1_ps(b[i * bs + c]);
        #pragma GCC unroll 16
        for (int u = 0; u < V; ++u) a[i][u] = _mm512_fmadd_ps(wv, xv[u], a[i][u]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
    #pragma GCC unroll 16
    for (int u = 0; u < V; ++u) _mm512_storeu_ps(yt_br + (r0 + i) * L + 16 * u, a[i][u]);
}

template <int V>
void bsr_rows_portable(const BsrWeight& w, int64_t r0, int64_t p, int64_t e, const float* xt, float* yt_br) {
  constexpr int64_t L = 16 * V;
  const int64_t bs = w.bs;
  float* yr = yt_br + r0 * L;
  for (int64_t q = p; q < e; ++q) {
    const float* b = w.values + q * bs * bs + r0 * bs;
    const float* xb = xt + static_cast<int64_t>(w.block_col[q]) * bs * L;
    for (int64_t c = 0; c < bs; ++c)
      for (int64_t t = 0; t < L; ++t) yr[t] += b[c] * xb[c * L + t];
  }
}

template <int V>
void bsr_chunk(const BsrWeight& w, int64_t j0, int64_t j1, int64_t c1, int64_t* cur, const float* xt, float* yt) {
  constexpr int64_t L = 16 * V;
  const int64_t bs = w.bs, b0 = j0 / bs, b1 = j1 / bs;
  const bool avx = use_avx512();
  for (int64_t br = b0; br < b1; ++br) {
    const int64_t p = cur[br - b0];
    int64_t e = p;
    while (e < w.block_row_ptr[br + 1] && static_cast<std::uint64_t>(static_cast<std::uint32_t>(w.block_col[e])) * bs <
                                              static_cast<std::uint64_t>(c1))
      ++e;
    float* yt_br = yt + (br - b0) * bs * L;
    if (e > p) {
      int64_t r = 0;
      if (avx) {
        for (; r + kRows <= bs; r += kRows) bsr_rows_avx512<V, kRows>(w, r, p, e, xt, yt_br);
        for (; r < bs; ++r) bsr_rows_avx512<V, 1>(w, r, p, e, xt, yt_br);
      } else {
        for (; r < bs; ++r) bsr_rows_portable<V>(w, r, p, e, xt, yt_br);
      }
    }
    cur[br - b0] = e;
  }
}

YMLOPT_AVX512 void bsr_gemv_avx512(const float* x, const BsrWeight& w, float* y) {
  const int64_t bs = w.bs;
  for (int64_t br = 0; br < w.n / bs; ++br) {
    const int64_t p0 = w.block_row_ptr[br], p1 = w.block_row_ptr[br + 1];
    for (int64_t r = 0; r < bs; ++r) {
      __m512 a = _mm512_setzero_ps();
      for (int64_t q = p0; q < p1; ++q) {
        const float* b = w.values + q * bs * bs + r * bs;
        const float* xb = x + static_cast<int64_t>(w.block_col[q]) * bs;
        for (int64_t c = 0; c < bs; c += 16) {
          const __mmask16 msk = static_cast<__mmask16>(bs - c >= 16 ? 0xFFFF : (1u << (bs - c)) - 1);
          a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(msk, b + c), _mm512_maskz_loadu_ps(msk, xb + c), a);
        }
      }
      y[br * bs + r] = _mm512_reduce_add_ps(a);
    }
  }
}

void bsr_gemv_portable(const float* x, const BsrWeight& w, float* y) {
  const int64_t bs = w.bs;
  for (int64_t br = 0; br < w.n / bs; ++br)
    for (int64_t r = 0; r < bs; ++r) {
      float s = 0;
      for (int64_t q = w.block_row_ptr[br]; q < w.block_row_ptr[br + 1]; ++q) {
        const float* b = w.values + q * bs * bs + r * bs;
        const float* xb = x + static_cast<int64_t>(w.block_col[q]) * bs;
        for (int64_t c = 0; c < bs; ++c) s += b[c] * xb[c];
      }
      y[br * bs + r] = s;
    }
}

// ============================================================ 2:4

/// R rows of 2:4 over columns [c0, c1) (multiples of 8): one index byte gives the
/// columns of 4 kept values (2 groups). V <= 2: two partial sums per row (values
/// 0-1 and 2-3 of each byte) for enough independent accumulator chains.
template <int V, int R>
YMLOPT_AVX512 void nm24_rows_avx512(const Nm24Weight& w, int64_t j, int64_t j0, int64_t c0, int64_t c1,
                                    const float* xt, float* yt) {
  constexpr int64_t L = 16 * V;
  constexpr int S = V <= 2 ? 2 : 1;
  __m512 a[S][R][V];
  const float* val[R];
  const std::uint8_t* idx[R];
  #pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    #pragma GCC unroll 16
    for (int u = 0; u < V; ++u) a[0][i][u] = _mm512_loadu_ps(yt + (j - j0 + i) * L + 16 * u);
    if constexpr (S == 2)
      #pragma GCC unroll 16
      for (int u = 0; u < V; ++u) a[S - 1][i][u] = _mm512_setzero_ps();
    val[i] = w.values + (j + i) * w.values_ld;
    idx[i] = w.index + (j + i) * w.index_ld;
  }
  for (int64_t b = c0 / 8; b < c1 / 8; ++b) {
    const float* xb = xt + 8 * b * L;
    #pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const unsigned byte = idx[i][b];
      const float* v = val[i] + 4 * b;
      const int64_t col[4] = {byte & 3u, (byte >> 2) & 3u, 4 + ((byte >> 4) & 3u), 4 + (byte >> 6)};
      #pragma GCC unroll 16
      for (int s = 0; s < 4; ++s) {
        const __m512 wv = _mm512_set1_ps(v[s]);
        const float* xr = xb + col[s] * L;
        auto& acc = a[S == 2 ? s / 2 : 0][i];
        #pragma GCC unroll 16
        for (int u = 0; u < V; ++u) acc[u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + 16 * u), acc[u]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
    #pragma GCC unroll 16
    for (int u = 0; u < V; ++u) {
      __m512 t = a[0][i][u];
      if constexpr (S == 2) t = _mm512_add_ps(t, a[S - 1][i][u]);
      _mm512_storeu_ps(yt + (j - j0 + i) * L + 16 * u, t);
    }
}

template <int V>
void nm24_rows_portable(const Nm24Weight& w, int64_t j, int64_t j0, int64_t c0, int64_t c1, const float* xt,
                        float* yt) {
  constexpr int64_t L = 16 * V;
  float* yr = yt + (j - j0) * L;
  const float* val = w.values + j * w.values_ld;
  const std::uint8_t* idx = w.index + j * w.index_ld;
  for (int64_t p = c0 / 2; p < c1 / 2; ++p) {
    const float wv = val[p];
    const float* xr = xt + Nm24Weight::column(idx, p) * L;
    for (int64_t t = 0; t < L; ++t) yr[t] += wv * xr[t];
  }
}

template <int V>
void nm24_chunk(const Nm24Weight& w, int64_t j0, int64_t j1, int64_t c0, int64_t c1, const float* xt, float* yt) {
  int64_t j = j0;
  if (use_avx512()) {
    for (; j + kRows <= j1; j += kRows) nm24_rows_avx512<V, kRows>(w, j, j0, c0, c1, xt, yt);
    for (; j < j1; ++j) nm24_rows_avx512<V, 1>(w, j, j0, c0, c1, xt, yt);
  } else {
    for (; j < j1; ++j) nm24_rows_portable<V>(w, j, j0, c0, c1, xt, yt);
  }
}

/// vpermt2ps indices from a row's 32-bit index word: ((word >> 2l) & 3) | 4*(l/2).
YMLOPT_AVX512 inline __m512i nm24_perm(std::uint32_t word, __m512i shift, __m512i three, __m512i base) {
  return _mm512_ternarylogic_epi32(_mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(word)), shift), three, base,
                                   0xEA);  // (A & B) | C
}

/// R rows of a 2:4 GEMV at once. Per 16 kept values of a row (8 groups, 32 columns of
/// x), lane l picks column 4*(l/2) + field l of the row's 32-bit index word through one
/// vpermt2ps; the two x loads of those 32 columns are shared by the R rows, and the
/// index decode is one variable shift and one ternary-logic op. With `prefetch`, the
/// next R rows' values and indices are prefetched into L2 as the loop goes (the
/// hardware prefetchers keep ~1/3 of the memory bandwidth busy on R parallel streams:
/// 2-3x on weights that come from DRAM, as in one-token decoding).
template <int R, bool prefetch>
YMLOPT_AVX512 void nm24_gemv_rows_avx512(const float* x, const Nm24Weight& w, int64_t j, float* y) {
  const int64_t nv = w.k / 2, vl = w.values_ld, il = w.index_ld;
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i shift = _mm512_slli_epi32(lane, 1);                      // 2*l
  const __m512i base = _mm512_slli_epi32(_mm512_srli_epi32(lane, 1), 2);  // 4*(l/2)
  const __m512i three = _mm512_set1_epi32(3);
  const float* val = w.values + j * vl;
  const std::uint8_t* idx = w.index + j * il;
  __m512 a[R];
  for (int r = 0; r < R; ++r) a[r] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= nv; p += 16) {
    if constexpr (prefetch) {
      for (int r = R; r < 2 * R; ++r) _mm_prefetch(reinterpret_cast<const char*>(val + r * vl + p), _MM_HINT_T1);
      if (p % 256 == 0)  // one 64-byte line of indices covers 256 values
        for (int r = R; r < 2 * R; ++r) _mm_prefetch(reinterpret_cast<const char*>(idx + r * il + p / 4), _MM_HINT_T1);
    }
    const __m512 xl = _mm512_loadu_ps(x + 2 * p), xh = _mm512_loadu_ps(x + 2 * p + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      std::uint32_t word;
      std::memcpy(&word, idx + r * il + p / 4, 4);
      a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(val + r * vl + p),
                             _mm512_permutex2var_ps(xl, nm24_perm(word, shift, three, base), xh), a[r]);
    }
  }
  if (p < nv) {  // nv - p is a multiple of 4 (k is a multiple of 8)
    const int64_t rem = nv - p;
    const __mmask16 mv = static_cast<__mmask16>((1u << rem) - 1);
    const int64_t xr = 2 * rem;  // x columns left (<= 24)
    const __mmask16 mlo = static_cast<__mmask16>(xr >= 16 ? 0xFFFF : (1u << xr) - 1);
    const __mmask16 mhi = static_cast<__mmask16>(xr > 16 ? (1u << (xr - 16)) - 1 : 0);
    const __m512 xl = _mm512_maskz_loadu_ps(mlo, x + 2 * p), xh = _mm512_maskz_loadu_ps(mhi, x + 2 * p + 16);
    for (int r = 0; r < R; ++r) {
      std::uint32_t word = 0;
      std::memcpy(&word, idx + r * il + p / 4, static_cast<std::size_t>(rem / 4));
      a[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mv, val + r * vl + p),
                             _mm512_permutex2var_ps(xl, nm24_perm(word, shift, three, base), xh), a[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[j + r] = _mm512_reduce_add_ps(a[r]);
}

/// 8 rows at a time (8 independent accumulators hide the FMA latency), prefetching the
/// next 8, then one by one.
YMLOPT_AVX512 void nm24_gemv_avx512(const float* x, const Nm24Weight& w, float* y) {
  int64_t j = 0;
  for (; j + 16 <= w.n; j += 8) nm24_gemv_rows_avx512<8, true>(x, w, j, y);
  for (; j + 8 <= w.n; j += 8) nm24_gemv_rows_avx512<8, false>(x, w, j, y);
  for (; j < w.n; ++j) nm24_gemv_rows_avx512<1, false>(x, w, j, y);
}

void nm24_gemv_portable(const float* x, const Nm24Weight& w, float* y) {
  for (int64_t j = 0; j < w.n; ++j) {
    const float* val = w.values + j * w.values_ld;
    const std::uint8_t* idx = w.index + j * w.index_ld;
    float s = 0;
    for (int64_t p = 0; p < w.k / 2; ++p) s += val[p] * x[Nm24Weight::column(idx, p)];
    y[j] = s;
  }
}

template <template <int> class F, class... A> void with_v(int v, A&&... a) {
  switch (v) {
    case 1: F<1>::run(a...); break;
    case 2: F<2>::run(a...); break;
    case 3: F<3>::run(a...); break;
    default: F<4>::run(a...); break;
  }
}
template <int V> struct CsrChunk {
  template <class... A> static void run(A&&... a) { csr_chunk<V>(a...); }
};
template <int V> struct BsrChunk {
  template <class... A> static void run(A&&... a) { bsr_chunk<V>(a...); }
};
template <int V> struct Nm24Chunk {
  template <class... A> static void run(A&&... a) { nm24_chunk<V>(a...); }
};

}  // namespace

bool avx512_available() { return cpu_has_avx512(); }
void force_portable(bool on) { g_force_portable.store(on); }

// ---- the CSR GEMV plan ---------------------------------------------------------

int64_t CsrPlan::bytes() const {
  return static_cast<int64_t>(values.size() * sizeof(float) + index.size() + windows.size() * sizeof(Window) +
                              (group_windows.size() + group_slots.size()) * sizeof(int64_t) +
                              lane_row.size() * sizeof(std::int32_t));
}

namespace {

/// The grouping of a plan: rows sorted longest first, 16 per group, and each
/// group's entries counted per lane and 32-column window.
struct Planner {
  const CsrWeight& w;
  int64_t nwin, ngroups;
  std::vector<std::int32_t> lane_row;  // [ngroups * 16], -1 unused
  std::vector<std::uint32_t> count;    // [16 * nwin]: entries of lane l in window c at l * nwin + c

  explicit Planner(const CsrWeight& wt) : w(wt), nwin((wt.k + 31) / 32), ngroups((wt.n + 15) / 16) {
    if (w.n < 0 || w.k < 0) throw std::invalid_argument("sparse::plan_gemv: negative dimension");
    if (nwin > std::numeric_limits<std::uint32_t>::max())
      throw std::length_error("sparse::plan_gemv: k = " + to_string(w.k) + " has too many 32-column windows");
    std::vector<std::int32_t> order(static_cast<std::size_t>(w.n));
    for (int64_t r = 0; r < w.n; ++r) order[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r);
    // Longest rows first, so that the 16 rows of a group have similar lengths.
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return w.row_ptr[a + 1] - w.row_ptr[a] > w.row_ptr[b + 1] - w.row_ptr[b];
    });
    lane_row.assign(static_cast<std::size_t>(16 * ngroups), -1);
    std::copy(order.begin(), order.end(), lane_row.begin());
    count.resize(static_cast<std::size_t>(16 * nwin));
  }
  std::int32_t row(int64_t g, int l) const { return lane_row[static_cast<std::size_t>(16 * g + l)]; }
  void count_group(int64_t g) {
    std::fill(count.begin(), count.end(), 0u);
    for (int l = 0; l < 16; ++l) {
      const std::int32_t r = row(g, l);
      if (r < 0) continue;
      for (int64_t q = w.row_ptr[r]; q < w.row_ptr[r + 1]; ++q) {
        const std::int32_t c = w.col[q];
        if (c < 0 || c >= w.k)
          throw std::invalid_argument("sparse::plan_gemv: row " + to_string(r) + " has column index " + to_string(c) +
                                      " outside [0, " + to_string(w.k) + ")");
        ++count[static_cast<std::size_t>(l * nwin + c / 32)];
      }
    }
  }
  std::uint32_t steps(int64_t c) const {
    std::uint32_t s = 0;
    for (int l = 0; l < 16; ++l) s = std::max(s, count[static_cast<std::size_t>(l * nwin + c)]);
    return s;
  }
};

}  // namespace

int64_t plan_gemv_bytes(const CsrWeight& w) {
  Planner pl(w);
  int64_t slots = 0, windows = 0;
  for (int64_t g = 0; g < pl.ngroups; ++g) {
    pl.count_group(g);
    for (int64_t c = 0; c < pl.nwin; ++c)
      if (const std::uint32_t s = pl.steps(c)) slots += s, ++windows;
  }
  return 16 * slots * static_cast<int64_t>(sizeof(float) + 1) +
         windows * static_cast<int64_t>(sizeof(CsrPlan::Window)) +
         2 * (pl.ngroups + 1) * static_cast<int64_t>(sizeof(int64_t)) +
         16 * pl.ngroups * static_cast<int64_t>(sizeof(std::int32_t));
}

CsrPlan plan_gemv(const CsrWeight& w) {
  Planner pl(w);
  CsrPlan p;
  p.n = w.n;
  p.k = w.k;
  p.nnz = w.n > 0 ? w.row_ptr[w.n] - w.row_ptr[0] : 0;
  p.group_windows.reserve(static_cast<std::size_t>(pl.ngroups + 1));
  p.group_slots.reserve(static_cast<std::size_t>(pl.ngroups + 1));
  p.group_windows.push_back(0);
  p.group_slots.push_back(0);
  std::vector<std::uint32_t> first(static_cast<std::size_t>(pl.nwin));  // a window's first step in its group
  for (int64_t g = 0; g < pl.ngroups; ++g) {
    pl.count_group(g);
    const int64_t base = p.group_slots.back();
    int64_t slot = base;
    for (int64_t c = 0; c < pl.nwin; ++c) {
      first[static_cast<std::size_t>(c)] = static_cast<std::uint32_t>(slot - base);
      if (const std::uint32_t s = pl.steps(c)) {
        p.windows.push_back({static_cast<std::uint32_t>(c), s});
        slot += s;
      }
    }
    p.group_windows.push_back(static_cast<int64_t>(p.windows.size()));
    p.group_slots.push_back(slot);
    p.values.resize(static_cast<std::size_t>(16 * slot), 0.0f);
    p.index.resize(static_cast<std::size_t>(16 * slot), 0);
    std::fill(pl.count.begin(), pl.count.end(), 0u);  // now the fill cursors
    for (int l = 0; l < 16; ++l) {
      const std::int32_t r = pl.row(g, l);
      if (r < 0) continue;
      for (int64_t q = w.row_ptr[r]; q < w.row_ptr[r + 1]; ++q) {
        const std::int32_t c = w.col[q];
        std::uint32_t& fill = pl.count[static_cast<std::size_t>(l * pl.nwin + c / 32)];
        const int64_t at = 16 * (base + first[static_cast<std::size_t>(c / 32)] + fill++) + l;
        p.values[static_cast<std::size_t>(at)] = w.values[q];
        p.index[static_cast<std::size_t>(at)] = static_cast<std::uint8_t>(0x80 | (c & 31));
      }
    }
  }
  p.lane_row = std::move(pl.lane_row);
  p.values.shrink_to_fit();  // grown group by group; a kept plan should hold what it uses
  p.index.shrink_to_fit();
  p.windows.shrink_to_fit();
  return p;
}

// ---- kernels ----------------------------------------------------------------

void linear(const float* x, int64_t m, int64_t ldx, const CsrWeight& w, float* y, int64_t ldy, const CsrPlan* plan) {
  check_call("CSR", m, ldx, w.n, w.k, ldy, x, y);
  const int64_t nnz = plan && w.n > 0 ? w.row_ptr[w.n] - w.row_ptr[0] : 0;
  if (plan && (plan->n != w.n || plan->k != w.k || plan->nnz != nnz))
    throw std::invalid_argument("sparse::linear (CSR): the plan is for " + to_string(plan->n) + "x" +
                                to_string(plan->k) + " with " + to_string(plan->nnz) + " entries, the weight " +
                                to_string(w.n) + "x" + to_string(w.k) + " with " + to_string(nnz));
  if (m == 0 || w.n == 0) return;
  if (w.k == 0) return zero_y(m, w.n, y, ldy);
  if (m < kCsrPlanMaxM && plan) {
    if (!use_avx512()) {
      for (int64_t t = 0; t < m; ++t) csr_plan_gemv_portable(x + t * ldx, *plan, y + t * ldy);
      return;
    }
    for (int64_t t = 0; t < m;) {  // passes of 4 tokens, then the rest in one
      const float* xt = x + t * ldx;
      float* yt = y + t * ldy;
      switch (std::min<int64_t>(m - t, 4)) {
        case 4: csr_plan_gemv_avx512<4>(xt, ldx, *plan, yt, ldy), t += 4; break;
        case 3: csr_plan_gemv_avx512<3>(xt, ldx, *plan, yt, ldy), t += 3; break;
        case 2: csr_plan_gemv_avx512<2>(xt, ldx, *plan, yt, ldy), t += 2; break;
        default: csr_plan_gemv_avx512<1>(xt, ldx, *plan, yt, ldy), t += 1; break;
      }
    }
    return;
  }
  if (m < kGemvMaxM) {
    for (int64_t t = 0; t < m; ++t)
      use_avx512() ? csr_gemv_avx512(x + t * ldx, w, y + t * ldy) : csr_gemv_portable(x + t * ldx, w, y + t * ldy);
    return;
  }
  blocked(
      x, m, ldx, w.n, w.k, y, ldy, 1, 1, false,
      w.n > 0 ? 8.0 * static_cast<double>(w.row_ptr[w.n] - w.row_ptr[0]) / static_cast<double>(w.n) : 0.0,
      [](int64_t, int64_t, int64_t*) {},
      [&](int v, int64_t j0, int64_t j1, int64_t, int64_t, int64_t*, const float* xt, float* yt) {
        with_v<CsrChunk>(v, w, j0, j1, xt, yt);
      });
}

void linear(const float* x, int64_t m, int64_t ldx, const BsrWeight& w, float* y, int64_t ldy) {
  check_call("BSR", m, ldx, w.n, w.k, ldy, x, y);
  if (w.bs < 1 || w.n % w.bs || w.k % w.bs)
    throw std::invalid_argument("sparse::linear (BSR): " + to_string(w.n) + "x" + to_string(w.k) +
                                " is not a multiple of the block size " + to_string(w.bs));
  if (m == 0 || w.n == 0) return;
  if (w.k == 0) return zero_y(m, w.n, y, ldy);
  if (m < kGemvMaxM) {
    for (int64_t t = 0; t < m; ++t)
      use_avx512() ? bsr_gemv_avx512(x + t * ldx, w, y + t * ldy) : bsr_gemv_portable(x + t * ldx, w, y + t * ldy);
    return;
  }
  blocked(
      x, m, ldx, w.n, w.k, y, ldy, w.bs, w.bs, true,
      static_cast<double>(w.block_row_ptr[w.n / w.bs] - w.block_row_ptr[0]) * 4.0 * static_cast<double>(w.bs) /
          static_cast<double>(w.n / w.bs),
      [&](int64_t j0, int64_t j1, int64_t* cur) {
        for (int64_t br = j0 / w.bs; br < j1 / w.bs; ++br) cur[br - j0 / w.bs] = w.block_row_ptr[br];
      },
      [&](int v, int64_t j0, int64_t j1, int64_t, int64_t c1, int64_t* cur, const float* xt, float* yt) {
        with_v<BsrChunk>(v, w, j0, j1, c1, cur, xt, yt);
        if (c1 == w.k)
          for (int64_t br = j0 / w.bs; br < j1 / w.bs; ++br)
            if (cur[br - j0 / w.bs] != w.block_row_ptr[br + 1])
              throw std::invalid_argument("sparse::linear (BSR): block row " + to_string(br) +
                                          " has a block column outside [0, k/bs)");
      });
}

void linear(const float* x, int64_t m, int64_t ldx, const Nm24Weight& w, float* y, int64_t ldy) {
  check_call("2:4", m, ldx, w.n, w.k, ldy, x, y);
  if (w.k % 8) throw std::invalid_argument("sparse::linear (2:4): k = " + to_string(w.k) + " is not a multiple of 8");
  if (m == 0 || w.n == 0) return;
  if (w.k == 0) return zero_y(m, w.n, y, ldy);
  if (m < kGemvMaxM) {
    for (int64_t t = 0; t < m; ++t)
      use_avx512() ? nm24_gemv_avx512(x + t * ldx, w, y + t * ldy) : nm24_gemv_portable(x + t * ldx, w, y + t * ldy);
    return;
  }
  blocked(
      x, m, ldx, w.n, w.k, y, ldy, 1, 8, true, 2.125 * static_cast<double>(w.k), [](int64_t, int64_t, int64_t*) {},
      [&](int v, int64_t j0, int64_t j1, int64_t c0, int64_t c1, int64_t*, const float* xt, float* yt) {
        with_v<Nm24Chunk>(v, w, j0, j1, c0, c1, xt, yt);
      });
}

}  // namespace ymlopt::sparse

#pragma GCC diagnostic pop
