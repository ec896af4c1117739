// The portable path of quant::linear: exact integer dot products and, for grouped
// weights, the 16 int32 lanes of the vector paths emulated one by one, so that
// it gives their y bit for bit (see qlinear.hpp).
#include "quant/qlinear_internal.hpp"

#include <cmath>
#include <vector>

namespace ymlopt::quant::linear_impl {

namespace {

/// The codes of weight row j laid out like the activations (k_of order for int4),
/// 0 beyond k, as int16, and the activations of row i as int16 (u8 or s8).
void decode_row(const QWeight& w, int64_t j, int64_t kp, bool w4, int16_t* out) {
  for (int64_t c0 = 0; c0 < kp; c0 += kChunk)
    for (int64_t p = 0; p < kChunk; ++p) {
      const int64_t kk = c0 + k_of(w4, p);
      out[c0 + p] = static_cast<int16_t>(kk < w.k ? code_at(w, j, kk) : 0);
    }
}
std::vector<int16_t> widen_acts(const Acts& A) {
  std::vector<int16_t> v(A.q.size());
  for (std::size_t q = 0; q < v.size(); ++q)
    v[q] = A.w4 ? static_cast<int16_t>(static_cast<int8_t>(A.q[q])) : static_cast<int16_t>(A.q[q]);
  return v;
}

}  // namespace

/// Per channel: exact integer dot products T[i, j] = Σ act · code.
void pc_scalar(const Acts& A, const QWeight& w, const Fin& fin, float* y, int64_t ldy) {
  const std::vector<int16_t> act = widen_acts(A);
  std::vector<int16_t> wc(static_cast<std::size_t>(A.kp));
  for (int64_t j = 0; j < w.n; ++j) {
    decode_row(w, j, A.kp, A.w4, wc.data());
    for (int64_t i = 0; i < A.m; ++i) {
      const int16_t* a = act.data() + i * A.kp;
      int32_t s = 0;
      for (int64_t q = 0; q < A.kp; ++q) s += int32_t(a[q]) * int32_t(wc[static_cast<std::size_t>(q)]);
      y[i * ldy + j] = finish_pc(fin, i, j, s);
    }
  }
}

/// Grouped: F[i, j] = Σ_blocks lane-wise fma(float(int lanes), scale, f), then tree16
/// (the 16 lanes of vpdpbusd: lane l of a chunk holds activation bytes 4l..4l+3).
void grp_scalar(const Acts& A, const QWeight& w, const WPrep& P, const Fin& fin, float* y, int64_t ldy) {
  const Blocks B = blocks_of(w, A.nch);
  const int64_t G = P.groups;
  const bool zinit = A.w4 && !w.zero;  // int4 symmetric: lanes start at -8 Σ xq
  const std::vector<int16_t> act = widen_acts(A);
  std::vector<int16_t> wc(static_cast<std::size_t>(A.kp));
  for (int64_t j = 0; j < w.n; ++j) {
    decode_row(w, j, A.kp, A.w4, wc.data());
    const float* s_row = P.s.data() + j * G;
    for (int64_t i = 0; i < A.m; ++i) {
      const int16_t* a = act.data() + i * A.kp;
      float f[16] = {};
      for (int64_t b = 0; b < B.count; ++b) {
        int32_t lanes[16] = {};
        for (int64_t c = b * B.chunks; c < (b + 1) * B.chunks && c < A.nch; ++c)
          for (int64_t p = 0; p < kChunk; ++p) {
            const int32_t xv = a[c * kChunk + p];
            lanes[p / 4] += xv * (int32_t(wc[static_cast<std::size_t>(c * kChunk + p)]) - (zinit ? 8 : 0));
          }
        for (int l = 0; l < 16; ++l)
          f[l] = std::fmaf(static_cast<float>(lanes[l]), lane_scale(B, s_row, G, b, l), f[l]);
      }
      y[i * ldy + j] = finish_grp(fin, i, j, tree16(f));
    }
  }
}

/// Block path: exact int32 per block, then one fma per block in block order.
void b32_scalar(const PanelActs& A, const QWeight& w, float* y, int64_t ldy) {
  std::vector<int16_t> wc(static_cast<std::size_t>(w.k));
  for (int64_t j = 0; j < w.n; ++j) {
    for (int64_t c = 0; c < w.k; ++c)
      wc[static_cast<std::size_t>(c)] = static_cast<int16_t>(code_at(w, j, c) - (w.bits == 4 ? 8 : 0));
    for (int64_t i = 0; i < A.m; ++i) {
      const int8_t* xq = A.q.data() + i * A.kq;
      float f = 0;
      for (int64_t b = 0; b < A.blocks; ++b) {
        int32_t d = 0;
        for (int64_t c = b * kBlock; c < (b + 1) * kBlock; ++c) d += int32_t(xq[c]) * wc[static_cast<std::size_t>(c)];
        f = std::fmaf(static_cast<float>(d), scale_at(w, j, b) * A.a[static_cast<std::size_t>(i * A.blocks + b)], f);
      }
      y[i * ldy + j] = f;
    }
  }
}

}  // namespace ymlopt::quant::linear_impl
