// What the files of the transformer building blocks share (private to
// components/nn): the port/param check helpers, the vectorizable exp / sum / max
// loops, and each component's entry points, which transformer.cpp registers.
//
//   transformer.cpp               registration (register_transformer)
//   transformer_embedding.cpp     nn.embedding
//   transformer_norm.cpp          nn.layernorm, nn.rmsnorm
//   transformer_linear.cpp        the activations and nn.linear
//   transformer_attention.cpp     nn.attention
//   transformer_rope.cpp          nn.rope
//   transformer_kv.cpp            nn.positions, nn.kv_blocks, nn.kv_append, nn.kv_attention
//   transformer_sample.cpp        nn.sample
//   transformer_sinusoidal.cpp    nn.sinusoidal_positions
//   transformer_elementwise.cpp   nn.swiglu, nn.tanh, nn.l2normalize
//   transformer_pool.cpp          nn.pool
//   transformer_cuda_kernels.cpp  the CUDA kernels (host side; device code in *_cuda.cu)
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm/gemm.hpp"
#include "nn/linear_formats.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt::transformer {

using kutil::dims;
using std::int64_t;
using std::to_string;

using kutil::kFloat;

using kutil::first_error;
inline std::string rc(int64_t r, int64_t c) { return to_string(r) + "x" + to_string(c); }

/// "" when the bound port i has dtype of port j (unbound optional ports pass).
inline std::string same_dtype_opt(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                  std::size_t j) {
  if (!p[i].bound()) return "";
  return kutil::same_dtype(s, p, i, j);
}

/// "" when port i is rows x cols, else "port 'i' is AxB but expected RxC (why)".
inline std::string expect_shape(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                int64_t rows, int64_t cols, const std::string& why) {
  if (p[i].rows == rows && p[i].cols == cols) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but expected " + rc(rows, cols) + " (" + why + ")";
}

/// "" when the bound (optional) port i is a vector of n elements.
inline std::string expect_vector(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                 int64_t n, const std::string& why) {
  if (!p[i].bound()) return "";
  if (p[i].rows == 1 && p[i].cols == n) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but expected [" + to_string(n) + "] (" + why + ")";
}

inline std::string positive_param(const Args& a, const char* name) {
  const int64_t v = a.get_int(name);
  if (v >= 1) return "";
  return "param '" + std::string(name) + "' is " + to_string(v) + ": must be >= 1";
}

inline std::string nonneg_param(const Args& a, const char* name) {
  const int64_t v = a.get_int(name);
  if (v >= 0) return "";
  return "param '" + std::string(name) + "' is " + to_string(v) + ": must be >= 0";
}

/// Effective sequence length: param `seq`, or all `tokens` when 0.
inline int64_t seq_len(const Args& a, int64_t tokens) {
  const int64_t s = a.get_int("seq");
  return s > 0 ? s : tokens;
}

/// "" when `tokens` rows split into whole sequences of param `seq`.
inline std::string whole_sequences(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                   const Args& a) {
  if (auto m = nonneg_param(a, "seq"); !m.empty()) return m;
  const int64_t t = p[i].rows, sq = seq_len(a, t);
  if (t == 0 || t % sq == 0) return "";
  return "port '" + s[i].name + "' has " + to_string(t) + " rows (tokens): not a multiple of seq=" + to_string(sq);
}

template <class T> T* row(const TensorView& v, int64_t r) { return static_cast<T*>(v.data) + r * v.ld; }

/// The model kernels' GEMM library: OpenBLAS. With oneDNN's sgemm LLaMA 1.1B's
/// linears ran 1.35x slower in the whole forward (GPT-2 at seq 512 0.80x), a
/// cause not found yet (docs/BENCHMARKS.md, "oneDNN's sgemm in the model linears").
constexpr auto kModelGemm = gemm::Library::openblas;

/// Leading dimension as BLAS wants it: >= max(1, cols).
inline int64_t ld_of(const TensorView& v) { return std::max<int64_t>({v.ld, v.cols, 1}); }

/// exp(x). float: a branch-free, vectorizable Cephes expf (range reduction by
/// ln 2, degree-5 polynomial, ~1 ulp; libm's scalar expf is several times
/// slower in the softmax and activation loops): x < -87 gives 0, x > 88 gives
/// exp(88), NaN stays NaN; the clamps are integer selects on the bits so that
/// the loops vectorize without -ffast-math. double: std::exp.
template <class T> inline T vexp(T x) {
  if constexpr (std::is_same_v<T, double>) {
    return std::exp(x);
  } else {
    const std::uint32_t xb = std::bit_cast<std::uint32_t>(x);
    std::int32_t i = std::int32_t(xb > 0xC2AE0000u ? 0xC2AE0000u : xb);  // sign set, |x| > 87: -87
    i = i > 0x42B00000 ? 0x42B00000 : i;  // x > 88 (or a positive NaN): 88
    const float xc = std::bit_cast<float>(i);
    const float t = xc * 1.44269504088896341f + 12582912.0f;  // 1.5*2^23: t's low bits hold round(x/ln2)
    const float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    const std::uint32_t k = std::bit_cast<std::uint32_t>(t) - 0x4B400000u;  // round(x/ln2), two's complement
    const std::uint32_t res = std::bit_cast<std::uint32_t>(e * std::bit_cast<float>((k + 127u) << 23));
    const std::uint32_t nan = 0u - std::uint32_t((xb & 0x7FFFFFFFu) > 0x7F800000u);  // all ones for NaN
    const std::uint32_t zero = 0u - std::uint32_t(xb > 0xC2AE0000u);  // x < -87: 0
    return std::bit_cast<float>((xb & nan) | (res & ~nan & ~zero));
  }
}

/// gelu(v) = 0.5 v (1 + erf(v / sqrt 2)) without a libm call, so that the
/// epilogue loops vectorize (float): erfc(|u|) by Abramowitz & Stegun 7.1.26
/// (absolute error <= 1.5e-7), then 1 + erf(u) = 2 - erfc(u) for u >= 0 and
/// erfc(-u) below (no cancellation for negative v). double: std::erf.
template <class T> inline T gelu_erf(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return 0.5 * v * (1.0 + std::erf(v * 0.7071067811865476));
  } else {
    const float u = v * 0.70710678118654752f;
    const float a = std::fabs(u);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float c = p * t * vexp(-a * a);  // erfc(|u|)
    return 0.5f * v * (u >= 0.0f ? 2.0f - c : c);
  }
}

/// sum_{j<n} f(j) in double with 8 independent partial sums (vectorizable,
/// and no less accurate than one running sum).
template <class F> inline double sum8(int64_t n, F&& f) {
  double a[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) a[l] += f(j + l);
  for (int l = 0; j < n; ++j, ++l) a[l] += f(j);
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/// max of x[0..n), n >= 1 (NaN entries are skipped; the exp pass propagates them).
template <class T> inline T max8(const T* x, int64_t n) {
  T m[8];
  for (int l = 0; l < 8; ++l) m[l] = x[0];
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
  for (int l = 0; j < n; ++j, ++l) m[l] = x[j] > m[l] ? x[j] : m[l];
  T r = m[0];
  for (int l = 1; l < 8; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

inline double rows_cols(const TensorView& v) { return double(v.rows) * double(v.cols); }

/// "" when param eps is >= 0 (nn.layernorm, nn.rmsnorm, nn.l2normalize).
inline std::string eps_check(const Args& a) {
  const double e = a.get_float("eps");
  if (e >= 0) return "";
  return "param 'eps' is " + a.get("eps").text + ": must be >= 0";
}

// ---- each component: ports, check, cost, CPU kernel (one file each, see above) ----

// nn.embedding
const std::vector<PortSpec>& embedding_ports();
/// Number of ids, or -1 when the ids port is neither [tokens] nor [tokens, 1].
int64_t num_ids(const TensorView& ids);
/// 0 (dense), 8 (int8) or 4 (int4).
int embedding_bits(const Args& a);
std::string embedding_check(const TaskShape& t);
Cost embedding_cost(const TaskShape& t);
void embedding_cpu(KernelContext& ctx);
/// Reading a table stored compressed at port 'table' (ComponentSpec::compressed).
CompressedReader embedding_reader();

// nn.layernorm, nn.rmsnorm
const std::vector<PortSpec>& layernorm_ports();
const std::vector<PortSpec>& rmsnorm_ports();
std::string layernorm_check(const TaskShape& t);
std::string rmsnorm_check(const TaskShape& t);
Cost layernorm_cost(const TaskShape& t);
Cost rmsnorm_cost(const TaskShape& t);
void layernorm_cpu(KernelContext& ctx);
void rmsnorm_cpu(KernelContext& ctx);

// nn.linear
const std::vector<PortSpec>& linear_ports();
nn::WeightFormat linear_format(const Args& a);
struct LinearDims {
  int64_t m, k, kw, n;
};
LinearDims linear_dims(const TaskShape& t);
std::string linear_check(const TaskShape& t);
Cost linear_cost(const TaskShape& t);
void linear_cpu(KernelContext& ctx);
/// The GEMM, or the compressed format's kernel, at y's shape; the activation as an epilogue.
TaskRate linear_rate(const TaskShape& t);
/// Reading a weight stored compressed at port 'w' (ComponentSpec::compressed).
CompressedReader linear_reader();

// nn.attention
const std::vector<PortSpec>& attention_ports();
struct AttnDims {
  int64_t t, heads, kv, dh, seq, batch, hb, he;
};
AttnDims attn_dims(const TaskShape& t);
std::string attention_check(const TaskShape& t);
Cost attention_cost(const TaskShape& t);
void attention_cpu(KernelContext& ctx);
/// The first position a query at `pos` attends: pos - window + 1 under a
/// sliding window (Mistral's: the last `window` positions, its own included),
/// 0 without one (window 0). Shared by nn.attention, nn.kv_attention and
/// nn.kv_blocks (which gives back the blocks before it).
inline int64_t window_first(int64_t pos, int64_t window) { return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0; }

/// One head's attention for nq query rows against keys [0, nk): row r attends
/// keys lo[r] <= j < lim[r] (<= nk; lo null: 0); scores = scale Q K^T, softmax,
/// Y = P V. Scratch: sc [nq * nk], inv [nq]. Shared by nn.attention and
/// nn.kv_attention.
template <class T>
void attend_block(const T* Q, int64_t ldq, const T* K, int64_t ldk, const T* V, int64_t ldv, T* Y, int64_t ldy,
                  int64_t nq, int64_t nk, int64_t dh, const int64_t* lo, const int64_t* lim, double scale, T* sc,
                  double* inv);

// nn.positions, nn.kv_append, nn.kv_attention (a KV cache at runtime positions)
const std::vector<PortSpec>& positions_ports();
std::string positions_check(const TaskShape& t);
Cost positions_cost(const TaskShape& t);
void positions_cpu(KernelContext& ctx);
const std::vector<PortSpec>& kv_blocks_ports();
std::string kv_blocks_check(const TaskShape& t);
Cost kv_blocks_cost(const TaskShape& t);
void kv_blocks_cpu(KernelContext& ctx);
const std::vector<PortSpec>& kv_append_ports();
std::string kv_append_check(const TaskShape& t);
Cost kv_append_cost(const TaskShape& t);
void kv_append_cpu(KernelContext& ctx);
const std::vector<PortSpec>& kv_attention_ports();
std::string kv_attention_check(const TaskShape& t);
Cost kv_attention_cost(const TaskShape& t);
void kv_attention_cpu(KernelContext& ctx);
/// f16 bit patterns widened (an f16 cache's rows): F16C where the CPU has it,
/// else the scalar conversion (exact both ways; tested against each other).
void widen_f16(const std::uint16_t* c, int64_t n, float* o);
void widen_f16(const std::uint16_t* c, int64_t n, double* o);
void widen_f16_scalar(const std::uint16_t* c, int64_t n, float* o);

// nn.sample
const std::vector<PortSpec>& sample_ports();
std::string sample_check(const TaskShape& t);
Cost sample_cost(const TaskShape& t);
void sample_cpu(KernelContext& ctx);

// nn.rope
const std::vector<PortSpec>& rope_ports();
struct RopeDims {
  int64_t heads, dh, rd, seq;
};
RopeDims rope_dims(const TaskShape& t);
std::string rope_check(const TaskShape& t);
Cost rope_cost(const TaskShape& t);
void rope_cpu(KernelContext& ctx);

// nn.sinusoidal_positions
const std::vector<PortSpec>& sinus_ports();
std::string sinus_check(const TaskShape& t);
Cost sinus_cost(const TaskShape& t);
void sinus_cpu(KernelContext& ctx);

// nn.swiglu, nn.tanh, nn.l2normalize
const std::vector<PortSpec>& swiglu_ports();
std::string swiglu_check(const TaskShape& t);
Cost swiglu_cost(const TaskShape& t);
void swiglu_cpu(KernelContext& ctx);
const std::vector<PortSpec>& tanh_ports();
std::string tanh_check(const TaskShape& t);
Cost tanh_cost(const TaskShape& t);
void tanh_cpu(KernelContext& ctx);
const std::vector<PortSpec>& l2n_ports();
std::string l2n_check(const TaskShape& t);
Cost l2n_cost(const TaskShape& t);
void l2n_cpu(KernelContext& ctx);

// nn.pool
const std::vector<PortSpec>& pool_ports();
std::string pool_check(const TaskShape& t);
Cost pool_cost(const TaskShape& t);
void pool_cpu(KernelContext& ctx);

#if YMLOPT_HAVE_CUDA
// The CUDA kernels and the tasks each handles (transformer_cuda_kernels.cpp).
std::string embedding_cuda_check(const TaskShape& t);
void embedding_cuda(KernelContext& ctx);
std::string layernorm_cuda_check(const TaskShape& t);
void layernorm_cuda(KernelContext& ctx);
std::string rmsnorm_cuda_check(const TaskShape& t);
void rmsnorm_cuda(KernelContext& ctx);
std::string linear_cuda_check(const TaskShape& t);
void linear_cuda(KernelContext& ctx);
std::string attention_cuda_check(const TaskShape& t);
void attention_cuda(KernelContext& ctx);
std::string rope_cuda_check(const TaskShape& t);
void rope_cuda(KernelContext& ctx);
#endif

}  // namespace ymlopt::transformer
