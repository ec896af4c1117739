// GPTQ (Frantar, Ashkboos, Hoefler & Alistarh 2022, "GPTQ: Accurate Post-Training
// Quantization for Generative Pre-trained Transformers", Algorithm 1): the C++
// quant::quantize_gptq and the component quant.gptq.
//
//   quant.gptq  w f32 [n, k] (layout nk) or [k, n] (layout kn), h f32|f64 [k, k]
//               (the layer Hessian 2/m XᵀX, e.g. from prune.hessian)
//               -> q i8, scale f32, zero f32 (asymmetric only): exactly the
//               outputs of quant.group (group 32/64/128) or quant.int8 (bits 8,
//               group 0), so nn.linear's int8/int4 formats and quant.dequant read
//               them unchanged.
//
// Algorithm: dead columns (H_jj == 0: inputs that were zero on every calibration
// token, e.g. ReLU units that never fired) get H_jj = 1 and keep their weights,
// which are then rounded to nearest without compensation (the reference GPTQ code
// zeroes them, which on held-out inputs where the unit does fire is a large error:
// on USE-lite with 30 calibration sentences that made int8 GPTQ worse than
// round-to-nearest); H += damp ·
// mean(diag H) · I; U = the upper Cholesky factor of H^-1 (H^-1 = UᵀU: dpotrf,
// dpotri, dpotrf, in double). Columns are processed left to right in blocks of
// `block` columns (rounded up to a multiple of the group so that a group never
// straddles two blocks). When a group starts, each row's scale (and zero) is
// computed from the group's *current* weights (already updated by the errors of
// the earlier columns), rounded to f32, with the rule of quant.group /
// quant.int8 (quant.hpp); per channel (group 0) the scale comes from the whole
// row at column 0. Column j is then rounded with that rule (codes clamped to the
// code range, since updated weights may leave the group's initial range), the
// error e = (w - dequant(q)) / U_jj, where dequant is the kernel's own formula
// (q - zero) · scale in f32, is propagated to the block's later columns
// (w -= e · U[j, j+1:]), and after the block the remaining columns get the lazy
// update W[:, end:] -= E · U[block, end:] (one dgemm).
//
// act_order (the paper's "act-order" heuristic, as in AutoGPTQ with static groups):
// columns are processed by decreasing diag H (ties: lower index first), and every
// group's scale/zero is computed up front from the original weights of its
// contiguous columns, so the storage layout is unchanged (no group index): each
// column is rounded with its own group's parameters whenever it comes up.
// With H = I (or any diagonal H) the result is exactly round-to-nearest
// (quant.group / quant.int8), with or without act_order.
//
// clip_search (the grid search of the GPTQ reference code's quantizer, with the
// H-diagonal as weights): when a group's parameters are chosen (from its current
// weights, or with act_order from its original ones), the rule is also applied to
// the group's values shrunk by a = 0.99, 0.98, ... down to clip_min (a · x in f32,
// so every rule's range shrinks: symmetric d = a·amax/127 or a·m/-8, asymmetric
// [a·lo, a·hi]), and the parameters with the least sum_j H_jj (x_j - dequant(code_j))²
// over the group's current values (codes clamped to the range, H_jj the damped
// diagonal) are kept; ties keep the larger range (a = 1 first). Storage is
// unchanged: only the stored scale (and zero) values differ. With H = I this is a
// plain mean-squared-error clip search on round-to-nearest.
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

#include "quant/quant.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt::quant {

namespace {

using std::int64_t;
using std::to_string;

void require(bool ok, const std::string& msg) {
  if (!ok) throw KernelError(msg);
}

/// Scale, zero and rounding parameters of one group of one row (the quant.hpp rules).
struct GroupParams {
  float scale = 0;     // d
  float zero = 0;      // unsigned-code zero point (8 for symmetric int4, 0 for symmetric int8)
  float lo = 0;        // asymmetric: the group minimum
  float inv = 0;       // 1 / scale (0 when scale is 0)
  bool constant = false;  // asymmetric constant group: every code is 0
  bool stored = false;    // f16 storage: scale and zero are the stored values, code = round(x / scale + zero)
};

GroupParams params_of_f32(const float* x, int64_t len, int bits, bool symmetric) {
  GroupParams p;
  if (symmetric && bits == 8) {  // d = amax / 127
    float amax = 0;
    for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[i]));
    p.scale = amax / 127.0f;
  } else if (symmetric) {  // d = (signed value of largest magnitude) / -8
    float amax = 0, mx = 0;
    for (int64_t i = 0; i < len; ++i)
      if (amax < std::fabs(x[i])) {
        amax = std::fabs(x[i]);
        mx = x[i];
      }
    p.scale = mx / -8.0f;
    p.zero = 8;
  } else {  // min/max with a float zero point
    const int qmax = bits == 8 ? 255 : 15;
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < len; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    p.lo = lo;
    p.scale = (hi - lo) / static_cast<float>(qmax);
    if (!(p.scale > 0.0f) || !std::isfinite(1.0f / p.scale)) {
      p.scale = lo != 0.0f ? std::fabs(lo) : 1.0f;
      p.constant = true;
    }
    p.zero = -lo / p.scale;
    p.inv = p.constant ? 0.0f : 1.0f / p.scale;
    return p;
  }
  p.inv = p.scale != 0.0f ? 1.0f / p.scale : 0.0f;
  return p;
}

/// The group's parameters as they will be stored (f16: round_params_f16 of the f32 rule's).
GroupParams params_of(const float* x, int64_t len, int bits, bool symmetric, DType store) {
  GroupParams p = params_of_f32(x, len, bits, symmetric);
  if (store != DType::f16) return p;
  float lo = x[0];
  for (int64_t i = 1; i < len; ++i) lo = std::min(lo, x[i]);
  const StoredParams sp = round_params_f16(p.scale, lo, bits, symmetric);
  p.scale = sp.scale;
  p.zero = sp.zero;
  p.inv = p.scale != 0.0f ? 1.0f / p.scale : 0.0f;
  p.constant = false;
  p.stored = !symmetric;
  return p;
}

/// The code of x under p: unsigned [0, 15] / [0, 255] (int4, asymmetric) or signed [-127, 127] (symmetric int8).
int code_of(float x, const GroupParams& p, int bits, bool symmetric) {
  if (symmetric && bits == 8) return static_cast<int>(std::roundf(std::clamp(x * p.inv, -127.0f, 127.0f)));
  if (symmetric) {
    const float v = x * p.inv + 8.5f;  // ggml: min(15, (int)v); v < 0 only for updated weights
    return v <= 0.0f ? 0 : (v >= 15.0f ? 15 : static_cast<int>(v));
  }
  if (p.constant) return 0;
  const float qmax = bits == 8 ? 255.0f : 15.0f;
  if (p.stored) return static_cast<int>(std::roundf(std::clamp(x * p.inv + p.zero, 0.0f, qmax)));
  return static_cast<int>(std::roundf(std::clamp((x - p.lo) * p.inv, 0.0f, qmax)));
}

/// The stored code and zero (asymmetric int8 shifts both by -128, qlinear.hpp).
int stored_code(int c, int bits, bool symmetric) { return bits == 8 && !symmetric ? c - 128 : c; }
float stored_zero(const GroupParams& p, int bits, bool symmetric) {
  return bits == 8 && !symmetric ? p.zero - 128.0f : p.zero;
}

/// The dequantized value of code c (quant::dequantize's formula).
float value_of(int c, const GroupParams& p, int bits, bool symmetric) {
  return (static_cast<float>(stored_code(c, bits, symmetric)) - stored_zero(p, bits, symmetric)) * p.scale;
}

/// The group's parameters: the rule's (clip_min >= 1), or the best of the rule applied to
/// a·x for a = 1, 0.99, ... >= clip_min by sum hd_j (x_j - value_j)² (hd: weights per value).
GroupParams search_params(const float* x, int64_t len, int bits, bool symmetric, DType store, double clip_min,
                          const double* hd, std::vector<float>& scaled) {
  GroupParams best = params_of(x, len, bits, symmetric, store);
  if (clip_min >= 1.0) return best;
  auto err_of = [&](const GroupParams& p) {
    double e = 0;
    for (int64_t i = 0; i < len; ++i) {
      const double d = static_cast<double>(x[i]) -
                       static_cast<double>(value_of(code_of(x[i], p, bits, symmetric), p, bits, symmetric));
      e += hd[i] * d * d;
    }
    return e;
  };
  double best_err = err_of(best);
  scaled.resize(static_cast<std::size_t>(len));
  for (int s = 1;; ++s) {
    const double a = 1.0 - 0.01 * s;
    if (a < clip_min - 1e-12) break;
    const float af = static_cast<float>(a);
    for (int64_t i = 0; i < len; ++i) scaled[static_cast<std::size_t>(i)] = af * x[i];
    const GroupParams p = params_of(scaled.data(), len, bits, symmetric, store);
    const double e = err_of(p);
    if (e < best_err) {
      best_err = e;
      best = p;
    }
  }
  return best;
}

/// h (k x k, row-major, positive definite) -> U, the upper Cholesky factor of h^-1 (lower triangle zeroed).
/// Returns whether h was diagonal: then U is diag(1/sqrt(h_jj)), computed directly (no O(k^3) factorisations),
/// and no error flows between columns (quant.group:clip_search passes H = I).
bool cholesky_of_inverse(std::vector<double>& h, int64_t k) {
  if (k == 0) return true;
  bool diagonal = true;
  for (int64_t i = 0; i < k && diagonal; ++i)
    for (int64_t j = 0; j < k; ++j)
      if (i != j && h[static_cast<std::size_t>(i * k + j)] != 0) {
        diagonal = false;
        break;
      }
  if (diagonal) {
    for (int64_t j = 0; j < k; ++j) {
      double& d = h[static_cast<std::size_t>(j * k + j)];
      if (!(d > 0))
        throw KernelError("gptq: the damped Hessian is not positive definite (diagonal entry " + to_string(j) +
                          " is " + to_string(d) + "); increase the damp arg");
      d = 1 / std::sqrt(d);
    }
    return true;
  }
  require(k <= static_cast<int64_t>(std::numeric_limits<lapack_int>::max()), "gptq: k too large for LAPACK");
  const auto lk = static_cast<lapack_int>(k);
  lapack_int info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', lk, h.data(), lk);
  if (info != 0)
    throw KernelError("gptq: the damped Hessian is not positive definite (dpotrf info " + to_string(info) +
                      "); increase the damp arg");
  info = LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', lk, h.data(), lk);
  if (info != 0) throw KernelError("gptq: dpotri failed on the damped Hessian (info " + to_string(info) + ")");
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < i; ++j) h[static_cast<std::size_t>(i * k + j)] = h[static_cast<std::size_t>(j * k + i)];
  info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', lk, h.data(), lk);
  if (info != 0)
    throw KernelError("gptq: the inverse Hessian is not positive definite (dpotrf info " + to_string(info) +
                      "); increase the damp arg");
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < i; ++j) h[static_cast<std::size_t>(i * k + j)] = 0;
  return false;
}

}  // namespace

QuantizedWeight quantize_gptq(const float* w_in, int64_t n, int64_t k, int64_t ldw, const double* h_in,
                              const GptqOptions& opt, GptqStats* stats) {
  const int bits = opt.bits;
  const int64_t group = opt.group;
  const bool sym = opt.symmetric;
  require(bits == 8 || bits == 4, "gptq: bits is " + to_string(bits) + ", expected 4 or 8");
  require(n >= 0 && k >= 0, "gptq: negative dimension");
  require(n <= 1 || ldw >= k, "gptq: ldw " + to_string(ldw) + " < k " + to_string(k));
  require(group == 0 || group == 32 || group == 64 || group == 128,
          "gptq: group is " + to_string(group) + ", expected 32, 64 or 128 (0: per channel)");
  require(group == 0 || k % group == 0, "gptq: k = " + to_string(k) + " is not a multiple of group " + to_string(group));
  require(bits == 8 || k % 2 == 0, "gptq: int4 needs an even k, got " + to_string(k));
  require(opt.damp >= 0 && std::isfinite(opt.damp), "gptq: damp is " + to_string(opt.damp) + ", must be >= 0");
  require(opt.block >= 1, "gptq: block is " + to_string(opt.block) + ", must be >= 1");
  require(!opt.clip_search || (opt.clip_min > 0 && opt.clip_min <= 1),
          "gptq: clip_min is " + to_string(opt.clip_min) + ", must be in (0, 1]");
  require(n == 0 || k == 0 || (w_in != nullptr && h_in != nullptr), "gptq: no weights or no Hessian");

  QuantizedWeight r = QuantizedWeight::zeros(bits, n, k, group);
  const int64_t G = r.groups();
  require(opt.scale_dtype == DType::f32 || opt.scale_dtype == DType::f16,
          std::string("gptq: scale dtype ") + dtype_name(opt.scale_dtype) + ", expected f32 or f16");
  r.scale_f32.assign(static_cast<std::size_t>(n * G), 0.0f);
  if (!sym) r.zero.assign(static_cast<std::size_t>(n * G), 0.0f);
  if (bits == 8) r.code_sum.assign(static_cast<std::size_t>(n * G), 0);
  GptqStats st;
  if (n == 0 || k == 0) {
    if (opt.scale_dtype == DType::f16) {
      r.scale_dtype = DType::f16;
      r.scale_f16.assign(r.scale_f32.size(), 0);
      r.scale_f32.clear();
    }
    if (stats) *stats = st;
    return r;
  }

  std::vector<double> w(static_cast<std::size_t>(n * k));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const float v = w_in[i * ldw + j];
      require(std::isfinite(v), "gptq: w has a non-finite value at (" + to_string(i) + ", " + to_string(j) + ")");
      w[static_cast<std::size_t>(i * k + j)] = v;
    }
  std::vector<double> u(h_in, h_in + k * k);
  for (double v : u) require(std::isfinite(v), "gptq: h has a non-finite value");
  double diag_sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    double& d = u[static_cast<std::size_t>(j * k + j)];
    if (d == 0) {  // no calibration signal: its row and column of H are 0, so no error flows in or out
      ++st.dead_columns;
      d = 1;
    }
    diag_sum += d;
  }
  const double damp = opt.damp * diag_sum / static_cast<double>(k);
  for (int64_t j = 0; j < k; ++j) u[static_cast<std::size_t>(j * k + j)] += damp;

  const int64_t gs = group > 0 ? group : k;
  std::vector<float> buf(static_cast<std::size_t>(gs)), scratch;
  const double clip_min = opt.clip_search ? opt.clip_min : 1.0;
  std::vector<double> hdiag(static_cast<std::size_t>(k));  // the damped diagonal, original column order
  for (int64_t j = 0; j < k; ++j) hdiag[static_cast<std::size_t>(j)] = u[static_cast<std::size_t>(j * k + j)];
  // act_order: static group parameters from the original weights; columns and H permuted
  std::vector<int64_t> perm(static_cast<std::size_t>(k));
  for (int64_t j = 0; j < k; ++j) perm[static_cast<std::size_t>(j)] = j;
  std::vector<GroupParams> fixed;
  if (opt.act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return u[static_cast<std::size_t>(a * k + a)] > u[static_cast<std::size_t>(b * k + b)];
    });
    fixed.resize(static_cast<std::size_t>(n * G));
    for (int64_t row = 0; row < n; ++row)
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t c = 0; c < gs; ++c)
          buf[static_cast<std::size_t>(c)] = static_cast<float>(w[static_cast<std::size_t>(row * k + g * gs + c)]);
        const GroupParams p =
            search_params(buf.data(), gs, bits, sym, opt.scale_dtype, clip_min, &hdiag[static_cast<std::size_t>(g * gs)], scratch);
        fixed[static_cast<std::size_t>(row * G + g)] = p;
        r.scale_f32[static_cast<std::size_t>(row * G + g)] = p.scale;
        if (!sym) r.zero[static_cast<std::size_t>(row * G + g)] = stored_zero(p, bits, sym);
      }
    std::vector<double> wp(w.size()), up(u.size());
    for (int64_t a = 0; a < k; ++a) {
      const int64_t pa = perm[static_cast<std::size_t>(a)];
      for (int64_t row = 0; row < n; ++row) wp[static_cast<std::size_t>(row * k + a)] = w[static_cast<std::size_t>(row * k + pa)];
      for (int64_t b = 0; b < k; ++b)
        up[static_cast<std::size_t>(a * k + b)] = u[static_cast<std::size_t>(pa * k + perm[static_cast<std::size_t>(b)])];
    }
    w.swap(wp);
    u.swap(up);
  }
  const bool diagonal = cholesky_of_inverse(u, k);

  // without act_order a group's parameters come from its current weights when it starts,
  // so a group must not straddle two blocks
  const int64_t bs = group > 0 && !opt.act_order ? (opt.block + gs - 1) / gs * gs : opt.block;
  std::vector<int> codes(static_cast<std::size_t>(n * k));  // unsigned / signed codes as code_of returns them
  std::vector<GroupParams> par(static_cast<std::size_t>(n));
  std::vector<double> w1, err1;
  for (int64_t i1 = 0; i1 < k; i1 += bs) {
    const int64_t i2 = std::min(k, i1 + bs), cnt = i2 - i1;
    w1.resize(static_cast<std::size_t>(n * cnt));
    err1.assign(static_cast<std::size_t>(n * cnt), 0.0);
    for (int64_t row = 0; row < n; ++row)
      std::copy_n(&w[static_cast<std::size_t>(row * k + i1)], cnt, &w1[static_cast<std::size_t>(row * cnt)]);
    for (int64_t i = 0; i < cnt; ++i) {
      const int64_t j = i1 + i, oj = perm[static_cast<std::size_t>(j)];  // oj: the original column
      if (!opt.act_order && j % gs == 0) {  // a group starts: scales from the current weights (per channel: the whole row at j = 0)
        const int64_t g = j / gs;
        for (int64_t row = 0; row < n; ++row) {
          const double* src = group > 0 ? &w1[static_cast<std::size_t>(row * cnt + i)] : &w[static_cast<std::size_t>(row * k)];
          for (int64_t c = 0; c < gs; ++c) buf[static_cast<std::size_t>(c)] = static_cast<float>(src[c]);
          const GroupParams p =
              search_params(buf.data(), gs, bits, sym, opt.scale_dtype, clip_min, &hdiag[static_cast<std::size_t>(g * gs)], scratch);
          par[static_cast<std::size_t>(row)] = p;
          r.scale_f32[static_cast<std::size_t>(row * G + g)] = p.scale;
          if (!sym) r.zero[static_cast<std::size_t>(row * G + g)] = stored_zero(p, bits, sym);
        }
      }
      const double d = u[static_cast<std::size_t>(j * k + j)];
      const double* urow = &u[static_cast<std::size_t>(j * k + i1)];
      for (int64_t row = 0; row < n; ++row) {
        const GroupParams& p = opt.act_order ? fixed[static_cast<std::size_t>(row * G + oj / gs)]
                                             : par[static_cast<std::size_t>(row)];
        double* wr = &w1[static_cast<std::size_t>(row * cnt)];
        const int c = code_of(static_cast<float>(wr[i]), p, bits, sym);
        codes[static_cast<std::size_t>(row * k + oj)] = c;
        const float deq = value_of(c, p, bits, sym);  // quant::dequantize
        const double e = (wr[i] - static_cast<double>(deq)) / d;
        st.loss += e * e / 2;
        err1[static_cast<std::size_t>(row * cnt + i)] = e;
        for (int64_t jj = i + 1; jj < cnt; ++jj) wr[jj] -= e * urow[jj];
      }
    }
    if (i2 < k && !diagonal)  // lazy batch update of the columns after the block (nothing flows with a diagonal H)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(n), static_cast<blasint>(k - i2),
                  static_cast<blasint>(cnt), -1.0, err1.data(), static_cast<blasint>(cnt),
                  &u[static_cast<std::size_t>(i1 * k + i2)], static_cast<blasint>(k), 1.0,
                  &w[static_cast<std::size_t>(i2)], static_cast<blasint>(k));
  }

  for (int64_t row = 0; row < n; ++row)
    for (int64_t j = 0; j < k; ++j) {
      const int code = stored_code(codes[static_cast<std::size_t>(row * k + j)], bits, sym);
      if (bits == 8) {
        r.q[static_cast<std::size_t>(row * r.q_ld + j)] = static_cast<std::int8_t>(code);
        r.code_sum[static_cast<std::size_t>(row * G + j / gs)] += code;
      } else {
        auto& byte = r.q[static_cast<std::size_t>(row * r.q_ld + j / 2)];
        byte = static_cast<std::int8_t>(static_cast<std::uint8_t>(byte) | (code << ((j & 1) ? 4 : 0)));
      }
    }
  if (opt.scale_dtype == DType::f16) {  // the scales are f16-exact already (params_of)
    r.scale_dtype = DType::f16;
    r.scale_f16.resize(r.scale_f32.size());
    for (std::size_t i = 0; i < r.scale_f32.size(); ++i) r.scale_f16[i] = half::f16_bits_from_double(r.scale_f32[i]);
    r.scale_f32.clear();
  }
  if (stats) *stats = st;
  return r;
}

}  // namespace ymlopt::quant

// ---- component ---------------------------------------------------------------

namespace ymlopt {
namespace {

using std::int64_t;
using std::to_string;

const std::vector<PortSpec>& gptq_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, {DType::f32}, false, 2, "weight [n, k] (layout nk) or [k, n] (layout kn)"},
      {"h", Access::read, {DType::f32, DType::f64}, false, 2, "layer Hessian [k, k] (2/m XᵀX, prune.hessian)"},
      {"q",
       Access::write,
       {DType::i8},
       false,
       2,
       "codes [n, k] (8 bits) or [n, k/2] (4 bits, element 2j in the low nibble)"},
      {"scale", Access::write, {DType::f32, DType::f16}, false, 2,
       "scales [n] (group 0) or [n, k/group]; f16: scales and zeros stored f16, codes against the stored values"},
      {"zero", Access::write, {DType::f32, DType::f16}, true, 2,
       "zero points like scale (symmetric=false only), the scale's dtype"},
  };
  return p;
}

std::string dims_msg(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t rows,
                     int64_t cols, const std::string& why) {
  if (p[i].rows == rows && p[i].cols == cols) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(p[i]) + ", expected " + to_string(rows) + "x" + to_string(cols) +
         " (" + why + ")";
}

/// One scale per row: [n], [1, n] or [n, 1].
std::string per_row_msg(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t n) {
  if (p[i].size() == n && (p[i].rows == 1 || p[i].cols == 1)) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(p[i]) + ", expected " + to_string(n) +
         " elements (group 0: one per row)";
}

std::string gptq_check(const TaskShape& t) {
  const auto& s = gptq_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "layout", {"nk", "kn"}); !m.empty()) return m;
  const int64_t bits = t.args.get_int("bits"), group = t.args.get_int("group"), block = t.args.get_int("block");
  const bool sym = t.args.get_bool("symmetric");
  const double damp = t.args.get_float("damp");
  if (bits != 8 && bits != 4) return "param 'bits' is " + to_string(bits) + ": expected 4 or 8";
  if (group != 0 && group != 32 && group != 64 && group != 128)
    return "param 'group' is " + to_string(group) + ": expected 32, 64 or 128 (0: per channel)";
  if (!(damp >= 0) || !std::isfinite(damp)) return "param 'damp' is " + to_string(damp) + ": must be >= 0";
  if (block < 1) return "param 'block' is " + to_string(block) + ": must be >= 1";
  const double clip_min = t.args.get_float("clip_min");
  if (t.args.get_bool("clip_search") && !(clip_min > 0 && clip_min <= 1))
    return "param 'clip_min' is " + to_string(clip_min) + ": must be in (0, 1]";
  const bool kn = t.args.get_string("layout") == "kn";
  const int64_t n = kn ? p[0].cols : p[0].rows, k = kn ? p[0].rows : p[0].cols;
  if (group > 0 && k % group)
    return "port 'w' is " + kutil::dims(p[0]) + ": k = " + to_string(k) + " is not a multiple of group " +
           to_string(group);
  if (bits == 4 && k % 2) return "port 'w' is " + kutil::dims(p[0]) + ": int4 needs an even k, got " + to_string(k);
  const bool zero_bound = p[4].bound();
  if (!sym && !zero_bound) return "port 'zero' is required with symmetric=false";
  if (sym && zero_bound) return "port 'zero' is bound but the quantization is symmetric";
  const int64_t G = group > 0 ? k / group : 1;
  if (zero_bound && p[4].dtype != p[3].dtype)
    return std::string("port 'zero' has dtype ") + dtype_name(p[4].dtype) + " but 'scale' is " +
           dtype_name(p[3].dtype) + ": zero points are stored like the scales";
  return kutil::first_error(
      {dims_msg(s, p, 1, k, k, "k x k, k = input features of w"),
       dims_msg(s, p, 2, n, bits == 8 ? k : k / 2, bits == 8 ? "one int8 code per weight" : "two 4-bit codes per byte"),
       group == 0 ? per_row_msg(s, p, 3, n) : dims_msg(s, p, 3, n, G, "one scale per group of " + to_string(group)),
       !zero_bound ? std::string() : (group == 0 ? per_row_msg(s, p, 4, n) : dims_msg(s, p, 4, n, G, "like scale"))});
}

Cost gptq_cost(const TaskShape& t) {
  const auto& s = gptq_ports();
  Cost c = kutil::io_cost(s, t, 0);
  if (t.ports.size() < 2) return c;
  const double k = static_cast<double>(t.ports[1].rows), nk = static_cast<double>(t.ports[0].size());
  c.flops = 4.0 / 3.0 * k * k * k + 2.0 * nk * k;  // potrf + potri + potrf, then the error updates
  c.extra_bytes = 8.0 * (k * k + nk) + 4.0 * nk;
  return c;
}

void gptq_cpu(KernelContext& ctx) {
  kutil::validate(ctx, gptq_ports(), gptq_check);
  const TensorView &wv = ctx.port(0), &hv = ctx.port(1), &qv = ctx.port(2), &sv = ctx.port(3);
  const bool kn = ctx.arg_string("layout") == "kn";
  const int64_t n = kn ? wv.cols : wv.rows, k = kn ? wv.rows : wv.cols;
  std::vector<float> w(static_cast<std::size_t>(n * k));
  const auto* wp = static_cast<const float*>(wv.data);
  for (int64_t a = 0; a < wv.rows; ++a)
    for (int64_t b = 0; b < wv.cols; ++b) w[static_cast<std::size_t>(kn ? b * k + a : a * k + b)] = wp[a * wv.ld + b];
  std::vector<double> h(static_cast<std::size_t>(k * k));
  kutil::dispatch_float(hv.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T* hp = static_cast<const T*>(hv.data);
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = 0; b < k; ++b) h[static_cast<std::size_t>(a * k + b)] = static_cast<double>(hp[a * hv.ld + b]);
  });
  quant::GptqOptions o;
  o.bits = static_cast<int>(ctx.arg_int("bits"));
  o.group = ctx.arg_int("group");
  o.symmetric = ctx.arg_bool("symmetric");
  o.damp = ctx.arg_float("damp");
  o.block = ctx.arg_int("block");
  o.act_order = ctx.arg_bool("act_order");
  o.clip_search = ctx.arg_bool("clip_search");
  o.clip_min = ctx.arg_float("clip_min");
  o.scale_dtype = sv.dtype;
  quant::GptqStats st;
  const quant::QuantizedWeight qw = quant::quantize_gptq(w.data(), n, k, k, h.data(), o, &st);
  auto* qp = static_cast<std::int8_t*>(qv.data);
  for (int64_t r = 0; r < n; ++r) std::copy_n(qw.q.data() + r * qw.q_ld, qw.q_ld, qp + r * qv.ld);
  const int64_t G = qw.groups();
  // per channel: element r at flat index r ([n] / [1, n]) or at r * ld ([n, 1]); groups: [n, G]
  auto at = [&](const TensorView& v, int64_t r, int64_t g) {
    return o.group == 0 ? (v.cols == 1 && v.rows > 1 ? r * v.ld : r) : r * v.ld + g;
  };
  const bool f16 = o.scale_dtype == DType::f16;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < G; ++g) {
      const std::size_t i = static_cast<std::size_t>(r * G + g);
      if (f16)
        static_cast<std::uint16_t*>(sv.data)[at(sv, r, g)] = qw.scale_f16[i];
      else
        static_cast<float*>(sv.data)[at(sv, r, g)] = qw.scale_f32[i];
      if (o.symmetric) continue;
      const TensorView& zv = ctx.port(4);  // f16-exact values when f16
      if (f16)
        static_cast<std::uint16_t*>(zv.data)[at(zv, r, g)] = half::f16_bits_from_double(qw.zero[i]);
      else
        static_cast<float*>(zv.data)[at(zv, r, g)] = qw.zero[i];
    }
  ctx.report("gptq_loss", st.loss);
  ctx.report("dead_columns", static_cast<double>(st.dead_columns));
}

}  // namespace

/// Registers quant.gptq.
///
///   <task component="prune.hessian" x="acts" h="H"/>
///   <task component="quant.gptq" w="fc1.weight" h="H" q="fc1.q" scale="fc1.s" bits="4" group="128"/>
void register_quant_gptq(Registry& reg) {
  kutil::add_component(
      reg, "quant.gptq",
      "GPTQ (Frantar et al. 2022): int4/int8 weights rounded column by column with the OBS error compensation "
      "through the Cholesky factor of H^-1 (h = 2/m XᵀX of calibration inputs); outputs laid out exactly like "
      "quant.group (group 32/64/128) or quant.int8 (group 0); act_order: columns by decreasing diag H with "
      "static group scales; clip_search: per group the range shrink with the least diag-H-weighted error; an f16 scale port stores scales and zeros in f16 and rounds against those values "
      "(the error compensation sees the stored weights)",
      gptq_ports(),
      {{"bits", ParamType::int_, "4", false, "4 or 8"},
       {"group", ParamType::int_, "128", false, "weights per scale along k: 32, 64 or 128; 0: one scale per row"},
       {"symmetric", ParamType::bool_, "true", false,
        "true: the symmetric rules of quant.group / quant.int8; false: min/max range with a float zero point"},
       {"damp", ParamType::float_, "0.01", false, "H += damp * mean(diag H) * I before inverting"},
       {"block", ParamType::int_, "128", false,
        "columns per lazy-update block (without act_order rounded up to a multiple of group)"},
       {"act_order", ParamType::bool_, "false", false,
        "process columns by decreasing diag H; group scales then come from the original weights (static groups)"},
       {"clip_search", ParamType::bool_, "false", false,
        "choose each group's scale (and zero) from the rule applied to the values shrunk by 1, 0.99, ... clip_min, "
        "by the least diag-H-weighted squared error (same storage)"},
       {"clip_min", ParamType::float_, "0.75", false, "the smallest shrink factor of clip_search, in (0, 1]"},
       {"layout", ParamType::string_, "nk", false,
        "nk: w is [n, k] (torch Linear); kn: w is [k, n] (GPT-2 Conv1D); outputs are [n, k]-rowed"}},
      gptq_cpu, gptq_check, gptq_cost);
}

}  // namespace ymlopt
