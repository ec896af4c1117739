// Quantized linear kernels (see qlinear.hpp for the arithmetic). Three code paths
// share every floating-point step: the AVX-512 VNNI one (vpdpbusd on 64-byte
// chunks of k, int4 nibbles unpacked in registers), an AVX2 one (vpmaddubsw on
// the two halves of each chunk) and a portable scalar one that emulates the 16
// int32 lanes. The family is built with -ffp-contract=off
// so that no compiler-made FMA makes the two paths differ.
//
// This file is the driver: QWeight, CPU detection, validate and linear(), which
// prepares the call (qlinear_prepare.cpp), runs one path (qlinear_scalar.cpp,
// qlinear_avx512.cpp, qlinear_avx2.cpp) and applies the zero points; the
// weight-only kernels are in qlinear_weight_only.cpp (qlinear_internal.hpp).
#include "quant/qlinear.hpp"

#include "quant/qlinear_internal.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace ymlopt::quant {

using namespace linear_impl;

QWeight QWeight::of(int bits, const TensorView& q, const TensorView& scale, const TensorView& zero, int64_t n,
                    int64_t k, int64_t group) {
  QWeight w;
  w.bits = bits;
  w.q = static_cast<const std::int8_t*>(q.data);
  w.q_ld = q.rows > 1 ? q.ld : q.cols;
  w.n = n;
  w.k = k;
  w.group = group;
  w.scale = scale.data;
  w.scale_dtype = scale.dtype;
  w.q_id = q.content_id;
  w.scale_id = scale.content_id;
  // per row the scales may be an [n] vector (a 1 x n view: stride 1 between rows) or [n, 1]
  w.scale_ld = group == 0 && scale.rows == 1 ? 1 : scale.ld;
  if (zero.bound()) {
    w.zero = zero.data;
    w.zero_dtype = zero.dtype;
    w.zero_ld = group == 0 && zero.rows == 1 ? 1 : zero.ld;
  }
  return w;
}

QWeight QWeight::rows(int64_t n0, int64_t n1) const {
  if (n0 < 0 || n1 < n0 || n1 > n)
    throw KernelError("QWeight::rows: [" + std::to_string(n0) + ", " + std::to_string(n1) + ") outside [0, " +
                      std::to_string(n) + ")");
  QWeight r = *this;
  r.n = n1 - n0;
  r.q = q ? q + n0 * q_ld : nullptr;
  if (scale) r.scale = static_cast<const char*>(scale) + n0 * scale_ld * static_cast<int64_t>(dtype_size(scale_dtype));
  if (zero) r.zero = static_cast<const char*>(zero) + n0 * zero_ld * static_cast<int64_t>(dtype_size(zero_dtype));
  if (code_sum) r.code_sum = code_sum + n0 * code_sum_ld;
  if (n0 != 0 || n1 != n) r.q_id = r.scale_id = 0;  // the ids name the whole weight's contents
  return r;
}

ContentCacheStats panel_cache_stats() { return linear_impl::kept_panel_stats(); }
void limit_panel_cache(std::int64_t bytes) {
  linear_impl::limit_kept_panels(bytes);
  linear_impl::limit_kept_acts(bytes / 8);
}
ContentCacheStats acts_cache_stats() { return linear_impl::kept_acts_stats(); }

bool keeps_panels(int64_t group, bool asymmetric, int64_t m) {
  return cpu_has_avx512_vnni() && panel_cache_stats().budget > 0 && !asymmetric &&
         (group == kBlock || (group == 0 && m >= 16));
}

bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

const char* best_isa_name() {
  return cpu_has_avx512_vnni() ? "AVX-512 VNNI" : cpu_has_avx2() ? "AVX2" : "scalar";
}

std::string validate(const QWeight& w) {
  const std::string wd = "quantized weight " + std::to_string(w.n) + "x" + std::to_string(w.k);
  if (w.bits != 8 && w.bits != 4) return wd + ": bits is " + std::to_string(w.bits) + ", expected 4 or 8";
  if (w.n < 0 || w.k < 0) return wd + ": negative dimension";
  if (w.bits == 4 && w.k % 2) return wd + ": int4 needs an even k (two codes per byte)";
  if (w.k > 65536) return wd + ": k above 65536 would overflow the int32 accumulators";
  if (w.group < 0 || (w.group > 0 && w.group != 32 && w.group % 64))
    return wd + ": group is " + std::to_string(w.group) + ", expected 0 (per channel), 32 or a multiple of 64";
  if (w.group > 0 && w.k % w.group) return wd + ": k is not a multiple of group " + std::to_string(w.group);
  if (w.n == 0 || w.k == 0) return "";
  const int64_t row_bytes = w.bits == 8 ? w.k : w.k / 2;
  if (!w.q) return wd + ": no codes";
  if (w.n > 1 && w.q_ld < row_bytes)
    return wd + ": q_ld " + std::to_string(w.q_ld) + " < " + std::to_string(row_bytes) + " bytes per row";
  if (!w.scale) return wd + ": no scales";
  if (w.scale_dtype != DType::f32 && w.scale_dtype != DType::f16)
    return wd + ": scale dtype " + dtype_name(w.scale_dtype) + ", expected f32 or f16";
  if (w.n > 1 && w.scale_ld < w.groups())
    return wd + ": scale_ld " + std::to_string(w.scale_ld) + " < " + std::to_string(w.groups()) + " groups";
  if (w.zero && w.zero_dtype != DType::f32 && w.zero_dtype != DType::f16)
    return wd + ": zero dtype " + dtype_name(w.zero_dtype) + ", expected f32 or f16";
  if (w.zero && w.n > 1 && w.zero_ld < w.groups())
    return wd + ": zero_ld " + std::to_string(w.zero_ld) + " < " + std::to_string(w.groups()) + " groups";
  if (w.code_sum && w.bits != 8) return wd + ": code_sum is only used with 8-bit codes";
  if (w.code_sum && w.n > 1 && w.code_sum_ld < w.groups())
    return wd + ": code_sum_ld " + std::to_string(w.code_sum_ld) + " < " + std::to_string(w.groups()) + " groups";
  return "";
}

void linear(const float* x, int64_t m, int64_t ldx, const QWeight& w, float* y, int64_t ldy) {
  linear(x, m, ldx, w, y, ldy, Isa::best);
}

namespace linear_impl {

/// The arguments of a linear call (`who` names it in the errors); false when
/// there is nothing to compute (m or n is 0).
bool check_call(const char* who, const float* x, int64_t m, int64_t ldx, const QWeight& w, const float* y,
                int64_t ldy) {
  const std::string me = std::string("quant::") + who + ": ";
  if (const std::string e = validate(w); !e.empty()) throw KernelError(me + e);
  if (m < 0) throw KernelError(me + "negative m");
  if (m == 0 || w.n == 0) return false;
  if (!y || (w.k > 0 && !x)) throw KernelError(me + "null x or y");
  if (m > 1 && ldx < w.k) throw KernelError(me + "ldx " + std::to_string(ldx) + " < k " + std::to_string(w.k));
  if (m > 1 && ldy < w.n) throw KernelError(me + "ldy " + std::to_string(ldy) + " < n " + std::to_string(w.n));
  return true;
}

}  // namespace linear_impl

void linear(const float* x, int64_t m, int64_t ldx, const QWeight& w, float* y, int64_t ldy, Isa isa,
            std::uint64_t x_id) {
  if (!check_call("linear", x, m, ldx, w, y, ldy)) return;
  if (w.k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(y + i * ldy, y + i * ldy + w.n, 0.0f);
    return;
  }
  if (isa == Isa::avx512_vnni && !cpu_has_avx512_vnni())
    throw KernelError("quant::linear: this CPU has no AVX-512 VNNI");
  if (isa == Isa::avx2 && !cpu_has_avx2()) throw KernelError("quant::linear: this CPU has no AVX2 and FMA");
  const Isa path = isa != Isa::best      ? isa
                   : cpu_has_avx512_vnni() ? Isa::avx512_vnni
                   : cpu_has_avx2()        ? Isa::avx2
                                           : Isa::scalar;
  const bool w4 = w.bits == 4;
  if (w.group == kBlock && !w.zero) {  // Q8_0 / Q4_0: activations per block (qlinear_internal.hpp)
    const int32_t offset = path == Isa::scalar ? 0 : w4 ? 8 : path == Isa::avx512_vnni ? 128 : 0;
    const auto A = shared_panel_acts(x, m, ldx, w.k, kBlock, offset, path, x_id);
    if (path == Isa::avx512_vnni)
      b32_avx512(*A, w, y, ldy);
    else if (path == Isa::avx2)
      b32_avx2(*A, w, y, ldy);
    else
      b32_scalar(*A, w, y, ldy);
    return;
  }
  const bool per_channel = w.group == 0;
  // Symmetric per channel on AVX-512 from 16 rows: the same exact int32 dot products
  // from panels (fewer rows do not repay packing them; measured on Zen 5).
  if (per_channel && !w.zero && path == Isa::avx512_vnni && m >= 16) {
    pc_panel_avx512(*shared_panel_acts(x, m, ldx, w.k, w.k, w4 ? 8 : 128, path, x_id), w, y, ldy);
    return;
  }
  const int64_t G = w.groups(), n = w.n;
  const bool need_xsum = w.zero != nullptr || (w4 && per_channel);
  Acts A = prepare_acts(x, m, ldx, w, need_xsum, path);
  if (w4 && !w.zero && !per_channel) {
    if (path == Isa::avx512_vnni)
      lane_zero_init_avx512(A, blocks_of(w, A.nch));
    else
      lane_zero_init(A, blocks_of(w, A.nch));
  }
  const WPrep P = prepare_weights(w, path, !(path == Isa::avx2 && per_channel));

  const bool tail = w.k % kChunk != 0;
  Fin fin;
  fin.a = A.a.data();
  fin.fold_a = w.zero == nullptr;
  std::vector<int32_t> ci, cj;
  if (per_channel) {
    fin.s = P.s.data();
    if (w4 && !w.zero) {
      ci.resize(static_cast<std::size_t>(m));
      for (int64_t i = 0; i < m; ++i) ci[static_cast<std::size_t>(i)] = 8 * A.xsum[static_cast<std::size_t>(i)];
      fin.ci = ci.data();
    }
    if (!w4 && path != Isa::avx2) {  // the AVX2 path forms Σ xq · c directly: no 128 Σc to take off
      cj.resize(static_cast<std::size_t>(n));
      for (int64_t j = 0; j < n; ++j) cj[static_cast<std::size_t>(j)] = 128 * P.csum[static_cast<std::size_t>(j)];
      fin.cj = cj.data();
    }
    if (path == Isa::avx2) {
      if (w4)
        (tail ? pc_avx2<true, true> : pc_avx2<true, false>)(A, w, fin, y, ldy);
      else
        (tail ? pc_avx2<false, true> : pc_avx2<false, false>)(A, w, fin, y, ldy);
    } else if (path == Isa::scalar)
      pc_scalar(A, w, fin, y, ldy);
    else if (w4)
      (tail ? pc_avx512<true, true> : pc_avx512<true, false>)(A, w, fin, y, ldy);
    else
      (tail ? pc_avx512<false, true> : pc_avx512<false, false>)(A, w, fin, y, ldy);
  } else {
    fin.b = P.bterm.empty() ? nullptr : P.bterm.data();
    if (path == Isa::avx2) {
      if (w4)
        (tail ? grp_avx2<true, true> : grp_avx2<true, false>)(A, w, P, fin, y, ldy);
      else
        (tail ? grp_avx2<false, true> : grp_avx2<false, false>)(A, w, P, fin, y, ldy);
    } else if (path == Isa::scalar)
      grp_scalar(A, w, P, fin, y, ldy);
    else if (w4)
      grp_dispatch<true>(tail, blocks_of(w, A.nch).chunks, A, w, P, fin, y, ldy);
    else
      grp_dispatch<false>(tail, blocks_of(w, A.nch).chunks, A, w, P, fin, y, ldy);
  }
  if (!w.zero) return;

  // Zero points: y = a_i · (F - Σ_g s·zero · Σxq), a small [m, G] x [G, n] product.
  std::vector<float> corr(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    float* yr = y + i * ldy;
    {
      std::fill(corr.begin(), corr.end(), 0.0f);
      for (int64_t g = 0; g < G; ++g) {
        const float xs = static_cast<float>(A.xsum[static_cast<std::size_t>(i * G + g)]);
        const float* szr = P.sz_t.data() + g * n;
        for (int64_t j = 0; j < n; ++j)
          corr[static_cast<std::size_t>(j)] = corr[static_cast<std::size_t>(j)] + szr[j] * xs;
      }
      for (int64_t j = 0; j < n; ++j) yr[j] = yr[j] - corr[static_cast<std::size_t>(j)];
    }
    const float a = A.a[static_cast<std::size_t>(i)];
    for (int64_t j = 0; j < n; ++j) yr[j] = a * yr[j];
  }
}

}  // namespace ymlopt::quant
