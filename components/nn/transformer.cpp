// Transformer building blocks (f32 and f64 unless noted), on row-major 2-D
// strided views; activations are [tokens, features] with tokens = batch*seq.
//
//   nn.embedding             y[i,:] = table[ids[i],:] (float table, or int8/int4 codes + scales)
//   nn.layernorm             y = (x - mean) / sqrt(var + eps) * gamma + beta   (biased variance)
//   nn.rmsnorm               y = x / sqrt(mean(x^2) + eps) * weight
//   nn.linear                y (+)= act(x W + b), one GEMM, W as [k,n] or [n,k]
//   nn.attention             multi-head / grouped-query scaled dot-product attention
//   nn.rope                  rotary position embedding, in place ("half" or "interleaved" pairs)
//   nn.sinusoidal_positions  the sinusoidal position table
//   nn.swiglu                y = silu(gate) * up
//   nn.tanh                  y = tanh(x)
//   nn.l2normalize           y = x / max(||x||_2, eps), row-wise
//   nn.pool                  per-sequence mean/sum/max/first/last pooling
//
// Reductions accumulate in double; matrix products go to OpenBLAS (one GEMM
// for nn.linear, two per head, sequence and query block for nn.attention).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm/gemm.hpp"
#include "nn/embedding_formats.hpp"
#include "nn/linear_formats.hpp"
#include "nn/nn.hpp"
#include "tensor/kernel_util.hpp"
#include "tensor/simd.hpp"

#if YMLOPT_HAVE_CUDA
#include "nn/nn_cuda.hpp"
#include "nn/transformer_cuda.hpp"
#include "quant/quant_cuda.hpp"
#endif

namespace ymlopt {
namespace {

using kutil::dims;
using std::int64_t;
using std::to_string;

const std::vector<DType> kFloat = {DType::f32, DType::f64};

using kutil::first_error;
std::string rc(int64_t r, int64_t c) { return to_string(r) + "x" + to_string(c); }

/// "" when the bound port i has dtype of port j (unbound optional ports pass).
std::string same_dtype_opt(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                           std::size_t j) {
  if (!p[i].bound()) return "";
  return kutil::same_dtype(s, p, i, j);
}

/// "" when port i is rows x cols, else "port 'i' is AxB but expected RxC (why)".
std::string expect_shape(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t rows,
                         int64_t cols, const std::string& why) {
  if (p[i].rows == rows && p[i].cols == cols) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but expected " + rc(rows, cols) + " (" + why + ")";
}

/// "" when the bound (optional) port i is a vector of n elements.
std::string expect_vector(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t n,
                          const std::string& why) {
  if (!p[i].bound()) return "";
  if (p[i].rows == 1 && p[i].cols == n) return "";
  return "port '" + s[i].name + "' is " + dims(p[i]) + " but expected [" + to_string(n) + "] (" + why + ")";
}

std::string positive_param(const Args& a, const char* name) {
  const int64_t v = a.get_int(name);
  if (v >= 1) return "";
  return "param '" + std::string(name) + "' is " + to_string(v) + ": must be >= 1";
}

std::string nonneg_param(const Args& a, const char* name) {
  const int64_t v = a.get_int(name);
  if (v >= 0) return "";
  return "param '" + std::string(name) + "' is " + to_string(v) + ": must be >= 0";
}

/// Effective sequence length: param `seq`, or all `tokens` when 0.
int64_t seq_len(const Args& a, int64_t tokens) {
  const int64_t s = a.get_int("seq");
  return s > 0 ? s : tokens;
}

/// "" when `tokens` rows split into whole sequences of param `seq`.
std::string whole_sequences(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
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
int64_t ld_of(const TensorView& v) { return std::max<int64_t>({v.ld, v.cols, 1}); }

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

double rows_cols(const TensorView& v) { return double(v.rows) * double(v.cols); }

// ============================================================ nn.embedding
// format dense: a row copy in the table's dtype; int8/int4: the rows requested are
// dequantized from codes + scales (nn/embedding_formats.hpp) into f32.

const std::vector<PortSpec>& embedding_ports() {
  static const std::vector<PortSpec> p = {
      {"ids", Access::read, {DType::i32}, false, 2, "token ids, shape [tokens] or [tokens, 1]"},
      {"table", Access::read, {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8}, false, 2,
       "embedding table [vocab, d]; format int8: i8 codes [vocab, d], int4: i8 [vocab, d/2] (two codes per byte)"},
      {"y", Access::write, {DType::f32, DType::f64, DType::f16, DType::bf16}, false, 2,
       "embeddings [tokens, d], dtype of table (f32 for int8/int4)"},
      {"table_scale", Access::read, {DType::f32, DType::f16}, true, 2,
       "format int8/int4: scales [vocab] (per row) or [vocab, d/group]"},
      {"table_zero", Access::read, {DType::f32, DType::f16}, true, 2,
       "format int8/int4: zero points like table_scale (asymmetric)"},
      {"table_hot", Access::read, {DType::i8}, true, 2,
       "format int8/int4, hot rows: ids below H read int8 codes [H, d] here (one scale per row); table, "
       "table_scale and table_zero then hold rows H.. only"},
      {"table_hot_scale", Access::read, {DType::f32, DType::f16}, true, 2, "hot rows: one scale per row [H]"},
  };
  return p;
}

/// Number of ids, or -1 when the ids port is neither [tokens] nor [tokens, 1].
int64_t num_ids(const TensorView& ids) {
  if (ids.shape.size() <= 1) return ids.rows * ids.cols;
  if (ids.cols == 1) return ids.rows;
  return -1;
}

/// 0 (dense), 8 (int8) or 4 (int4).
int embedding_bits(const Args& a) {
  const std::string& f = a.get_string("format");
  return f == "int8" ? 8 : f == "int4" ? 4 : 0;
}

std::string embedding_check(const TaskShape& t) {
  const auto& s = embedding_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "format", {"dense", "int8", "int4"}); !m.empty()) return m;
  const int64_t n = num_ids(p[0]);
  if (n < 0) return "port 'ids' is " + dims(p[0]) + ": expected shape [tokens] or [tokens, 1]";
  if (const int bits = embedding_bits(t.args); bits != 0) {
    if (p[2].rows != n)
      return "port 'y' is " + dims(p[2]) + " but there are " + to_string(n) + " ids (one row per id)";
    return nn::check_compressed_table(s, p, t.args, bits);
  }
  if (p[1].dtype == DType::i8)
    return "port 'table' has dtype i8: format=dense needs a float table (set format=int8 or int4 for codes)";
  for (std::size_t i : {nn::kEmbScale, nn::kEmbZero, nn::kEmbHot, nn::kEmbHotScale})
    if (p[i].bound()) return "port '" + s[i].name + "' is bound but format=dense does not use it";
  if (auto m = kutil::same_dtype(s, p, 2, 1); !m.empty()) return m;
  return expect_shape(s, p, 2, n, p[1].cols, to_string(n) + " ids x table width " + to_string(p[1].cols));
}

Cost embedding_cost(const TaskShape& t) {
  if (t.ports.size() != embedding_ports().size()) return {};
  Cost c;
  const double n = double(std::max<int64_t>(num_ids(t.ports[0]), 0));
  if (embedding_bits(t.args) != 0) {  // ids, the compressed rows read, y; one multiply-add per element
    c.bytes = kutil::bytes_of(t.ports[0]) + n * nn::compressed_row_bytes(t.ports) + kutil::bytes_of(t.ports[2]);
    c.flops = 2 * rows_cols(t.ports[2]);
    return c;
  }
  c.bytes = kutil::bytes_of(t.ports[0]) + 2 * kutil::bytes_of(t.ports[2]);  // ids, gathered rows, y
  return c;
}

void embedding_cpu(KernelContext& ctx) {
  kutil::validate(ctx, embedding_ports(), embedding_check);
  const TensorView &ids = ctx.port(0), &table = ctx.port(1), &y = ctx.port(2);
  const int64_t n = num_ids(ids), vocab = table.rows, d = table.cols;
  const auto* id = static_cast<const std::int32_t*>(ids.data);
  const int64_t icols = std::max<int64_t>(ids.cols, 1);
  if (const int bits = embedding_bits(ctx.args()); bits != 0) {
    nn::gather_compressed(ctx.ports(), ctx.args(), bits, id, n, ids.ld, ids.cols);
    return;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(d) * dtype_size(table.dtype);
  const auto* tab = static_cast<const unsigned char*>(table.data);
  auto* out = static_cast<unsigned char*>(y.data);
  const std::size_t es = dtype_size(table.dtype);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = id[(i / icols) * ids.ld + i % icols];
    if (v < 0 || v >= vocab)
      throw KernelError("id " + to_string(v) + " at position " + to_string(i) + " is out of range: table has " +
                        to_string(vocab) + " rows (ids must be in [0, " + to_string(vocab) + "))");
    if (row_bytes)
      std::memcpy(out + static_cast<std::size_t>(i * y.ld) * es, tab + static_cast<std::size_t>(v * table.ld) * es,
                  row_bytes);
  }
}

// ============================================================ nn.layernorm / nn.rmsnorm

const std::vector<PortSpec>& layernorm_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [tokens, d] (leading dims are flattened)"},
      {"gamma", Access::read, kFloat, true, 1, "scale [d] (optional: 1)"},
      {"beta", Access::read, kFloat, true, 1, "shift [d] (optional: 0)"},
      {"y", Access::write, kFloat, false, 8, "output, shape of x (may be the same data)"},
  };
  return p;
}

const std::vector<PortSpec>& rmsnorm_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [tokens, d] (leading dims are flattened)"},
      {"weight", Access::read, kFloat, true, 1, "scale [d] (optional: 1)"},
      {"y", Access::write, kFloat, false, 8, "output, shape of x (may be the same data)"},
  };
  return p;
}

std::string eps_check(const Args& a) {
  const double e = a.get_float("eps");
  if (e >= 0) return "";
  return "param 'eps' is " + a.get("eps").text + ": must be >= 0";
}

std::string layernorm_check(const TaskShape& t) {
  const auto& s = layernorm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  const std::string feat = "x has " + to_string(p[0].cols) + " features";
  return first_error({kutil::float_dtype(s, p, 0), same_dtype_opt(s, p, 1, 0), same_dtype_opt(s, p, 2, 0),
                      kutil::same_dtype(s, p, 3, 0), kutil::same_shape(s, p, 3, 0),
                      expect_vector(s, p, 1, p[0].cols, feat), expect_vector(s, p, 2, p[0].cols, feat),
                      eps_check(t.args)});
}

std::string rmsnorm_check(const TaskShape& t) {
  const auto& s = rmsnorm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), same_dtype_opt(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                      kutil::same_shape(s, p, 2, 0),
                      expect_vector(s, p, 1, p[0].cols, "x has " + to_string(p[0].cols) + " features"),
                      eps_check(t.args)});
}

Cost layernorm_cost(const TaskShape& t) {
  if (t.ports.size() != layernorm_ports().size()) return {};
  return kutil::io_cost(layernorm_ports(), t, 8 * rows_cols(t.ports[0]));
}

Cost rmsnorm_cost(const TaskShape& t) {
  if (t.ports.size() != rmsnorm_ports().size()) return {};
  return kutil::io_cost(rmsnorm_ports(), t, 4 * rows_cols(t.ports[0]));
}

void layernorm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, layernorm_ports(), layernorm_check);
  const TensorView &x = ctx.port(0), &g = ctx.port(1), &b = ctx.port(2), &y = ctx.port(3);
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const int64_t d = x.cols;
    if (d == 0) return;
    const T* gp = g.bound() ? static_cast<const T*>(g.data) : nullptr;
    const T* bp = b.bound() ? static_cast<const T*>(b.data) : nullptr;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      const double mean = sum8(d, [xr](int64_t j) { return double(xr[j]); }) / double(d);
      const double sq = sum8(d, [xr, mean](int64_t j) {
        const double c = double(xr[j]) - mean;
        return c * c;
      });
      const T m = T(mean), rs = T(1.0 / std::sqrt(sq / double(d) + eps));
      if (gp && bp)
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs * gp[j] + bp[j];
      else if (gp)
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs * gp[j];
      else if (bp)
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs + bp[j];
      else
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * rs;
    }
  });
}

void rmsnorm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, rmsnorm_ports(), rmsnorm_check);
  const TensorView &x = ctx.port(0), &w = ctx.port(1), &y = ctx.port(2);
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const int64_t d = x.cols;
    if (d == 0) return;
    const T* wp = w.bound() ? static_cast<const T*>(w.data) : nullptr;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      const double sq = sum8(d, [xr](int64_t j) { return double(xr[j]) * double(xr[j]); });
      const T rs = T(1.0 / std::sqrt(sq / double(d) + eps));
      if (wp)
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * rs * wp[j];
      else
        for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * rs;
    }
  });
}

// ============================================================ activations

enum class Act { none, relu, gelu, gelu_tanh, silu };

Act parse_act(const std::string& s) {
  if (s == "relu") return Act::relu;
  if (s == "gelu") return Act::gelu;
  if (s == "gelu_tanh") return Act::gelu_tanh;
  if (s == "silu") return Act::silu;
  return Act::none;
}

template <Act A, class T> inline T act(T v) {
  if constexpr (A == Act::relu) return v > T(0) ? v : T(0);
  else if constexpr (A == Act::gelu) return T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476)));
  else if constexpr (A == Act::gelu_tanh)  // 0.5 v (1 + tanh(u)) = v sigmoid(2u): exp is cheaper than tanh
    return v / (T(1) + vexp(T(-1.5957691216057308) * (v + T(0.044715) * v * v * v)));
  else if constexpr (A == Act::silu) return v / (T(1) + vexp(-v));
  else return v;
}

/// Calls f(std::integral_constant<Act, a>{}).
template <class F> void dispatch_act(Act a, F&& f) {
  switch (a) {
    case Act::none: return f(std::integral_constant<Act, Act::none>{});
    case Act::relu: return f(std::integral_constant<Act, Act::relu>{});
    case Act::gelu: return f(std::integral_constant<Act, Act::gelu>{});
    case Act::gelu_tanh: return f(std::integral_constant<Act, Act::gelu_tanh>{});
    case Act::silu: return f(std::integral_constant<Act, Act::silu>{});
  }
}

/// The linear's epilogue over m rows of n: y = act(y + b), or with z given y += act(z + b)
/// (b optional), on the widest vector instruction set the CPU has (GPT-2's gelu_tanh
/// epilogue: 2.3 -> 0.2-0.5 ns per element with AVX-512, docs/BENCHMARKS.md).
template <Act A, class T>
void epilogue(T* y, int64_t ldy, const T* z, int64_t ldz, const T* b, int64_t m, int64_t n) {
  kutil::run_widest([=] {
    for (int64_t r = 0; r < m; ++r) {
      T* __restrict yr = y + r * ldy;
      if (z) {
        const T* __restrict zr = z + r * ldz;
        if (b)
          for (int64_t j = 0; j < n; ++j) yr[j] += act<A>(zr[j] + b[j]);
        else
          for (int64_t j = 0; j < n; ++j) yr[j] += act<A>(zr[j]);
      } else if (b) {
        for (int64_t j = 0; j < n; ++j) yr[j] = act<A>(yr[j] + b[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) yr[j] = act<A>(yr[j]);
      }
    }
  });
}

double act_flops(Act a) {
  switch (a) {
    case Act::none: return 0;
    case Act::relu: return 1;
    case Act::gelu: return 8;
    case Act::gelu_tanh: return 8;
    case Act::silu: return 4;
  }
  return 0;
}

// ============================================================ nn.linear

const std::vector<PortSpec>& linear_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [m, k] (leading dims are flattened)"},
      {"w", Access::read, {DType::f32, DType::f64, DType::i8}, false, 2,
       "weight [k, n] (or [n, k] with transpose_w=true); may be a column tile. Compressed formats: see 'format'"},
      {"b", Access::read, kFloat, true, 1, "bias [n] (optional)"},
      {"y", Access::write, kFloat, false, 8, "output [m, n]; may be a column tile of a wider tensor"},
      {"r", Access::read, kFloat, true, 8,
       "residual [m, n] (optional): y = r + act(x W + b); r may be y itself (in-place residual add)"},
      {"w_scale", Access::read, {DType::f32, DType::f16}, true, 2,
       "format int8/int4: scales [n] (per row) or [n, k/group]"},
      {"w_zero", Access::read, {DType::f32, DType::f16}, true, 2,
       "format int8/int4: zero points like w_scale (asymmetric)"},
      {"w_index", Access::read, {DType::i32, DType::i8}, true, 2,
       "format csr: column of each nonzero; bsr: block column of each block; nm24: 2-bit positions [n, k/8]"},
      {"w_ptr", Access::read, {DType::i32}, true, 1, "format csr/bsr: row (block-row) pointers"},
  };
  return p;
}

nn::WeightFormat linear_format(const Args& a) {
  return nn::parse_weight_format(a.get_string("format")).value_or(nn::WeightFormat::dense);
}

struct LinearDims {
  int64_t m, k, kw, n;
};
LinearDims linear_dims(const TaskShape& t) {
  const TensorView &x = t.ports[0], &w = t.ports[1];
  if (linear_format(t.args) != nn::WeightFormat::dense)  // compressed W is [n, k]: sizes come from x and y
    return {x.rows, x.cols, x.cols, t.ports[3].cols};
  const bool tw = t.args.get_bool("transpose_w");
  return {x.rows, x.cols, tw ? w.cols : w.rows, tw ? w.rows : w.cols};
}

std::string linear_check(const TaskShape& t) {
  const auto& s = linear_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "format", {"dense", "int8", "int4", "csr", "bsr", "nm24"}); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "activations", {"int8", "f32"}); !m.empty()) return m;
  if (const nn::WeightFormat f = linear_format(t.args); f != nn::WeightFormat::dense) {
    const LinearDims d = linear_dims(t);
    return first_error({nn::check_compressed_weight(s, p, t.args, f, d.n, d.k), same_dtype_opt(s, p, 2, 0),
                        kutil::same_dtype(s, p, 3, 0),
                        kutil::one_of(t.args, "activation", {"none", "relu", "gelu", "gelu_tanh", "silu"}),
                        p[3].rows == d.m ? std::string()
                                         : "port 'y' is " + dims(p[3]) + " but x has " + to_string(d.m) + " rows",
                        expect_vector(s, p, 2, d.n, to_string(d.n) + " output features"),
                        p[4].bound() ? kutil::same_dtype(s, p, 4, 0) : std::string(),
                        p[4].bound() ? expect_shape(s, p, 4, d.m, d.n, "the residual is added to y") : std::string()});
  }
  for (std::size_t i : {nn::kWScale, nn::kWZero, nn::kWIndex, nn::kWPtr})
    if (p[i].bound()) return "port '" + s[i].name + "' is bound but format=dense does not use it";
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), same_dtype_opt(s, p, 2, 0),
                            kutil::same_dtype(s, p, 3, 0),
                            kutil::one_of(t.args, "activation", {"none", "relu", "gelu", "gelu_tanh", "silu"})});
      !m.empty())
    return m;
  const bool tw = t.args.get_bool("transpose_w");
  const LinearDims d = linear_dims(t);
  const std::string layout = tw ? "transpose_w=true: w is [n, k]" : "transpose_w=false: w is [k, n]";
  if (d.k != d.kw)
    return "port 'w' is " + dims(p[1]) + " but port 'x' is " + dims(p[0]) + ": x has " + to_string(d.k) +
           " columns but w has " + to_string(d.kw) + (tw ? " columns" : " rows") + " (" + layout + ")";
  return first_error({expect_shape(s, p, 3, d.m, d.n, "x W is " + rc(d.m, d.n) + ", " + layout),
                      expect_vector(s, p, 2, d.n, to_string(d.n) + " output features"),
                      p[4].bound() ? kutil::same_dtype(s, p, 4, 0) : std::string(),
                      p[4].bound() ? expect_shape(s, p, 4, d.m, d.n, "the residual is added to y") : std::string()});
}

Cost linear_cost(const TaskShape& t) {
  if (t.ports.size() != linear_ports().size()) return {};
  const LinearDims d = linear_dims(t);
  const double mn = double(d.m) * double(d.n);
  const bool acc = t.ports[4].bound();
  const Act a = parse_act(t.args.get_string("activation"));
  const nn::WeightFormat f = linear_format(t.args);
  const double product = f == nn::WeightFormat::dense ? 2 * mn * double(d.k) : nn::compressed_flops(t.ports, f, d.m, d.n, d.k);
  Cost c = kutil::io_cost(linear_ports(), t, product + mn * act_flops(a) + (t.ports[2].bound() ? mn : 0) + (acc ? mn : 0));
  if (acc && a != Act::none) c.extra_bytes = mn * double(dtype_size(t.ports[0].dtype));
  if (f == nn::WeightFormat::csr && nn::keeps_csr_plan(d.m))  // the GEMV plan, ~1.3x the arrays at 90% zeros
    c.kept_ports = 1u << nn::kW | 1u << nn::kWIndex | 1u << nn::kWPtr;
  return c;
}

void linear_cpu(KernelContext& ctx) {
  kutil::validate(ctx, linear_ports(), linear_check);
  const TensorView &x = ctx.port(0), &w = ctx.port(1), &b = ctx.port(2), &y = ctx.port(3), &r = ctx.port(4);
  const bool tw = ctx.arg_bool("transpose_w"), acc = r.bound();
  const Act a = parse_act(ctx.arg_string("activation"));
  const nn::WeightFormat f = linear_format(ctx.args());
  const int64_t m = y.rows, n = y.cols, k = x.cols;
  if (m == 0 || n == 0) return;
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T* bp = b.bound() ? static_cast<const T*>(b.data) : nullptr;
    const T* xp = static_cast<const T*>(x.data);
    T* yp = static_cast<T*>(y.data);
    if (acc && r.data != y.data)  // y = r + ...: start from a copy of the residual
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(static_cast<const T*>(r.data) + i * r.ld, n, yp + i * y.ld);
    // z = x W (dense: + beta z); compressed formats overwrite z
    auto product = [&](T* z, int64_t ldz, bool accumulate) {
      if (f == nn::WeightFormat::dense) {
        gemm::gemm(false, tw, m, n, k, T(1), xp, ld_of(x), static_cast<const T*>(w.data), ld_of(w),
                accumulate ? T(1) : T(0), z, ldz, kModelGemm);
      } else if constexpr (std::is_same_v<T, float>) {
        nn::compressed_product(ctx.ports(), ctx.args(), f, xp, m, ld_of(x), z, ldz);
      } else {
        throw KernelError("compressed weight formats need f32 activations");
      }
    };
    dispatch_act(a, [&](auto ac) {
      constexpr Act A = decltype(ac)::value;
      if (!acc || (A == Act::none && f == nn::WeightFormat::dense)) {
        // y = x W (+ y), then bias and activation in one pass over y
        product(yp, ld_of(y), acc);
        if (!bp && A == Act::none) return;
        epilogue<A, T>(yp, y.ld, nullptr, 0, bp, m, n);
      } else {
        // y += act(x W + b): the product goes to a temporary
        std::vector<T> z(static_cast<std::size_t>(m * n));
        product(z.data(), n, false);
        epilogue<A, T>(yp, y.ld, z.data(), n, bp, m, n);
      }
    });
  });
}

// ============================================================ nn.attention

const std::vector<PortSpec>& attention_ports() {
  static const std::vector<PortSpec> p = {
      {"q", Access::read, kFloat, false, 2, "queries [tokens, heads*dh] (may be a column slice of a fused qkv)"},
      {"k", Access::read, kFloat, false, 2, "keys [tokens, kv_heads*dh]"},
      {"v", Access::read, kFloat, false, 2, "values [tokens, kv_heads*dh]"},
      {"y", Access::write, kFloat, false, 2,
       "output [tokens, heads*dh]; only the columns of heads [head_begin, head_end) are written"},
  };
  return p;
}

struct AttnDims {
  int64_t t, heads, kv, dh, seq, batch, hb, he;
};

AttnDims attn_dims(const TaskShape& t) {
  AttnDims d{};
  const Args& a = t.args;
  d.t = t.ports[0].rows;
  d.heads = std::max<int64_t>(a.get_int("heads"), 1);
  d.kv = a.get_int("kv_heads") > 0 ? a.get_int("kv_heads") : d.heads;
  d.dh = t.ports[0].cols / d.heads;
  d.seq = seq_len(a, d.t);
  d.batch = d.seq > 0 ? d.t / d.seq : 0;
  d.hb = a.get_int("head_begin");
  d.he = a.get_int("head_end");
  if (d.hb == 0 && d.he == 0) d.he = d.heads;
  return d;
}

std::string attention_check(const TaskShape& t) {
  const auto& s = attention_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                            kutil::same_dtype(s, p, 3, 0), positive_param(a, "heads"), nonneg_param(a, "kv_heads")});
      !m.empty())
    return m;
  const int64_t heads = a.get_int("heads");
  const int64_t kv = a.get_int("kv_heads") > 0 ? a.get_int("kv_heads") : heads;
  if (heads % kv != 0)
    return "param 'kv_heads' is " + to_string(kv) + ": heads=" + to_string(heads) +
           " must be a multiple of kv_heads";
  if (p[0].cols % heads != 0 || p[0].cols == 0)
    return "port 'q' is " + dims(p[0]) + ": " + to_string(p[0].cols) +
           " columns are not a positive multiple of heads=" + to_string(heads);
  const AttnDims d = attn_dims(t);
  const std::string kvw = "kv_heads=" + to_string(kv) + " x head dim " + to_string(d.dh);
  if (auto m = first_error({expect_shape(s, p, 1, d.t, kv * d.dh, kvw), expect_shape(s, p, 2, d.t, kv * d.dh, kvw),
                            kutil::same_shape(s, p, 3, 0), whole_sequences(s, p, 0, a)});
      !m.empty())
    return m;
  if (d.hb < 0 || d.hb >= d.he || d.he > heads)
    return "head range [" + to_string(a.get_int("head_begin")) + ", " + to_string(a.get_int("head_end")) +
           ") (params head_begin, head_end) is not a non-empty range within [0, " + to_string(heads) + ")";
  if (a.get_float("scale") < 0 || !std::isfinite(a.get_float("scale")))
    return "param 'scale' is " + a.get("scale").text + ": must be finite and >= 0 (0: 1/sqrt(head dim))";
  return "";
}

constexpr int64_t kQueryBlock = 128;

Cost attention_cost(const TaskShape& t) {
  if (t.ports.size() != attention_ports().size() || t.args.get_int("heads") < 1) return {};
  const AttnDims d = attn_dims(t);
  if (d.seq <= 0 || d.he <= d.hb) return {};
  const double nh = double(d.he - d.hb), S = double(d.seq), B = double(d.batch);
  const double pairs = t.args.get_bool("causal") ? S * (S + 1) / 2 : S * S;
  Cost c;
  c.flops = B * nh * pairs * (4 * double(d.dh) + 5);
  const double es = double(dtype_size(t.ports[0].dtype));
  const int64_t group = d.heads / d.kv;
  const double kv_used = double((d.he - 1) / group - d.hb / group + 1);
  c.bytes = es * double(d.t) * double(d.dh) * (2 * nh + 2 * kv_used);
  c.extra_bytes = es * double(std::min<int64_t>(d.seq, kQueryBlock)) * S;
  return c;
}

template <class T>
void attention_kernel(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& y,
                      const AttnDims& d, bool causal, double scale) {
  const int64_t S = d.seq, dh = d.dh, group = d.heads / d.kv;
  const int64_t bq = std::min(S, kQueryBlock);
  std::vector<T> sc(static_cast<std::size_t>(bq * S));  // one [query block, seq] score block
  std::vector<double> inv(static_cast<std::size_t>(bq));
  const int64_t ldq = ld_of(q), ldk = ld_of(k), ldv = ld_of(v), ldy = ld_of(y);
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = d.hb; h < d.he; ++h) {
      const int64_t g = h / group;
      const T* Q = static_cast<const T*>(q.data) + b * S * ldq + h * dh;
      const T* K = static_cast<const T*>(k.data) + b * S * ldk + g * dh;
      const T* V = static_cast<const T*>(v.data) + b * S * ldv + g * dh;
      T* Y = static_cast<T*>(y.data) + b * S * ldy + h * dh;
      for (int64_t i0 = 0; i0 < S; i0 += bq) {
        const int64_t nq = std::min(bq, S - i0), nk = causal ? i0 + nq : S;
        // scores = scale * Q_blk K^T: [nq, nk], leading dimension nk
        gemm::gemm(false, true, nq, nk, dh, T(scale), Q + i0 * ldq, ldq, K, ldk, T(0), sc.data(), nk, kModelGemm);
        T* const scores = sc.data();
        double* const inv_sum = inv.data();
        kutil::run_widest([=] {  // the softmax rows: vexp on 16 lanes with AVX-512
          for (int64_t r = 0; r < nq; ++r) {
            T* srow = scores + r * nk;
            const int64_t lim = causal ? i0 + r + 1 : nk;
            const T mx = max8(srow, lim);
            for (int64_t j = 0; j < lim; ++j) srow[j] = vexp(srow[j] - mx);
            for (int64_t j = lim; j < nk; ++j) srow[j] = T(0);
            inv_sum[r] = 1.0 / sum8(lim, [srow](int64_t j) { return double(srow[j]); });
          }
        });
        // Y_blk = P V (unnormalized), then each row times 1/sum
        T* Yb = Y + i0 * ldy;
        gemm::gemm(false, false, nq, dh, nk, T(1), sc.data(), nk, V, ldv, T(0), Yb, ldy, kModelGemm);
        for (int64_t r = 0; r < nq; ++r) {
          T* yr = Yb + r * ldy;
          const T f = T(inv[static_cast<std::size_t>(r)]);
          for (int64_t c = 0; c < dh; ++c) yr[c] *= f;
        }
      }
    }
  }
}

void attention_cpu(KernelContext& ctx) {
  kutil::validate(ctx, attention_ports(), attention_check);
  const TensorView &q = ctx.port(0), &k = ctx.port(1), &v = ctx.port(2), &y = ctx.port(3);
  const AttnDims d = attn_dims(TaskShape{ctx.ports(), ctx.args()});
  if (d.t == 0) return;
  const double sp = ctx.arg_float("scale");
  const double scale = sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh));
  const bool causal = ctx.arg_bool("causal");
  kutil::dispatch_float(q.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    attention_kernel<T>(q, k, v, y, d, causal, scale);
  });
}

// ============================================================ nn.rope

const std::vector<PortSpec>& rope_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read_write, kFloat, false, 2, "queries or keys [tokens, heads*dh], rotated in place"},
  };
  return p;
}

struct RopeDims {
  int64_t heads, dh, rd, seq;
};
RopeDims rope_dims(const TaskShape& t) {
  const Args& a = t.args;
  RopeDims d{};
  d.heads = std::max<int64_t>(a.get_int("heads"), 1);
  d.dh = t.ports[0].cols / d.heads;
  d.rd = a.get_int("rotary_dim") > 0 ? a.get_int("rotary_dim") : d.dh;
  d.seq = seq_len(a, t.ports[0].rows);
  return d;
}

std::string rope_check(const TaskShape& t) {
  const auto& s = rope_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), positive_param(a, "heads"), nonneg_param(a, "seq"),
                            nonneg_param(a, "offset"), nonneg_param(a, "rotary_dim"),
                            kutil::one_of(a, "style", {"half", "interleaved"})});
      !m.empty())
    return m;
  const int64_t heads = a.get_int("heads");
  if (p[0].cols % heads != 0)
    return "port 'x' is " + dims(p[0]) + ": " + to_string(p[0].cols) + " columns are not a multiple of heads=" +
           to_string(heads);
  const RopeDims d = rope_dims(t);
  if (d.rd > d.dh)
    return "param 'rotary_dim' is " + to_string(d.rd) + ": more than the head dim " + to_string(d.dh);
  if (d.rd % 2 != 0)
    return a.get_int("rotary_dim") > 0
               ? "param 'rotary_dim' is " + to_string(d.rd) + ": must be even"
               : "port 'x' is " + dims(p[0]) + ": head dim " + to_string(d.dh) + " (columns / heads=" +
                     to_string(heads) + ") must be even";
  if (!(a.get_float("base") > 0)) return "param 'base' is " + a.get("base").text + ": must be > 0";
  return "";
}

Cost rope_cost(const TaskShape& t) {
  if (t.ports.size() != rope_ports().size() || t.args.get_int("heads") < 1) return {};
  const RopeDims d = rope_dims(t);
  return kutil::io_cost(rope_ports(), t, 3 * double(t.ports[0].rows) * double(d.heads) * double(d.rd));
}

void rope_cpu(KernelContext& ctx) {
  kutil::validate(ctx, rope_ports(), rope_check);
  const TensorView& x = ctx.port(0);
  const RopeDims d = rope_dims(TaskShape{ctx.ports(), ctx.args()});
  const int64_t t = x.rows, half = d.rd / 2;
  if (t == 0 || half == 0) return;
  const double base = ctx.arg_float("base");
  const int64_t offset = ctx.arg_int("offset");
  const bool interleaved = ctx.arg_string("style") == "interleaved";
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    // cos/sin table for the positions that occur: [min(seq, t), half]
    const int64_t npos = std::min(d.seq, t);
    std::vector<double> inv_freq(static_cast<std::size_t>(half));
    for (int64_t i = 0; i < half; ++i)
      inv_freq[static_cast<std::size_t>(i)] = std::pow(base, -2.0 * double(i) / double(d.rd));
    std::vector<T> cs(static_cast<std::size_t>(npos * half)), sn(cs.size());
    for (int64_t p = 0; p < npos; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double ang = double(p + offset) * inv_freq[static_cast<std::size_t>(i)];
        cs[static_cast<std::size_t>(p * half + i)] = T(std::cos(ang));
        sn[static_cast<std::size_t>(p * half + i)] = T(std::sin(ang));
      }
    for (int64_t r = 0; r < t; ++r) {
      const int64_t p = r % d.seq;
      const T* c = cs.data() + p * half;
      const T* s = sn.data() + p * half;
      T* xr = row<T>(x, r);
      for (int64_t h = 0; h < d.heads; ++h) {
        T* xh = xr + h * d.dh;
        if (interleaved) {
          for (int64_t i = 0; i < half; ++i) {
            const T a = xh[2 * i], b = xh[2 * i + 1];
            xh[2 * i] = a * c[i] - b * s[i];
            xh[2 * i + 1] = b * c[i] + a * s[i];
          }
        } else {
          T* x2 = xh + half;
          for (int64_t i = 0; i < half; ++i) {
            const T a = xh[i], b = x2[i];
            xh[i] = a * c[i] - b * s[i];
            x2[i] = b * c[i] + a * s[i];
          }
        }
      }
    }
  });
}

// ============================================================ nn.sinusoidal_positions

const std::vector<PortSpec>& sinus_ports() {
  static const std::vector<PortSpec> p = {
      {"y", Access::write, kFloat, false, 2, "position table [seq, d] (row p: position p + offset)"},
  };
  return p;
}

std::string sinus_check(const TaskShape& t) {
  const auto& s = sinus_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), nonneg_param(a, "offset"),
                            kutil::one_of(a, "layout", {"interleaved", "concat"})});
      !m.empty())
    return m;
  if (!(a.get_float("base") > 0)) return "param 'base' is " + a.get("base").text + ": must be > 0";
  return "";
}

Cost sinus_cost(const TaskShape& t) {
  if (t.ports.size() != sinus_ports().size()) return {};
  return kutil::io_cost(sinus_ports(), t, 2 * rows_cols(t.ports[0]));
}

void sinus_cpu(KernelContext& ctx) {
  kutil::validate(ctx, sinus_ports(), sinus_check);
  const TensorView& y = ctx.port(0);
  const double base = ctx.arg_float("base");
  const int64_t offset = ctx.arg_int("offset"), d = y.cols;
  const bool concat = ctx.arg_string("layout") == "concat";
  kutil::dispatch_float(y.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const int64_t nf = concat ? d / 2 : (d + 1) / 2;  // frequencies
    std::vector<double> inv(static_cast<std::size_t>(nf));
    for (int64_t i = 0; i < nf; ++i)
      inv[static_cast<std::size_t>(i)] =
          concat ? std::exp(-double(i) * std::log(base) / double(std::max<int64_t>(nf - 1, 1)))
                 : std::pow(base, -2.0 * double(i) / double(d));
    for (int64_t r = 0; r < y.rows; ++r) {
      T* yr = row<T>(y, r);
      const double pos = double(r + offset);
      if (concat) {
        for (int64_t i = 0; i < nf; ++i) {
          const double ang = pos * inv[static_cast<std::size_t>(i)];
          yr[i] = T(std::sin(ang));
          yr[nf + i] = T(std::cos(ang));
        }
        if (d % 2) yr[d - 1] = T(0);
      } else {
        for (int64_t j = 0; j < d; ++j) {
          const double ang = pos * inv[static_cast<std::size_t>(j / 2)];
          yr[j] = T(j % 2 ? std::cos(ang) : std::sin(ang));
        }
      }
    }
  });
}

// ============================================================ nn.swiglu, nn.tanh, nn.l2normalize

const std::vector<PortSpec>& swiglu_ports() {
  static const std::vector<PortSpec> p = {
      {"gate", Access::read, kFloat, false, 8, "gate projection [tokens, f]"},
      {"up", Access::read, kFloat, false, 8, "up projection [tokens, f]"},
      {"y", Access::write, kFloat, false, 8, "silu(gate) * up [tokens, f] (may be the data of gate or up)"},
  };
  return p;
}

std::string swiglu_check(const TaskShape& t) {
  const auto& s = swiglu_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                      kutil::same_shape(s, p, 1, 0), kutil::same_shape(s, p, 2, 0)});
}

Cost swiglu_cost(const TaskShape& t) {
  if (t.ports.size() != swiglu_ports().size()) return {};
  return kutil::io_cost(swiglu_ports(), t, 5 * rows_cols(t.ports[0]));
}

void swiglu_cpu(KernelContext& ctx) {
  kutil::validate(ctx, swiglu_ports(), swiglu_check);
  const TensorView &g = ctx.port(0), &u = ctx.port(1), &y = ctx.port(2);
  kutil::dispatch_float(g.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    kutil::run_widest([&] {
      for (int64_t r = 0; r < g.rows; ++r) {
        const T* gr = row<const T>(g, r);
        const T* ur = row<const T>(u, r);
        T* yr = row<T>(y, r);
        for (int64_t j = 0; j < g.cols; ++j) {
          const T a = gr[j];
          yr[j] = a / (T(1) + vexp(-a)) * ur[j];
        }
      }
    });
  });
}

const std::vector<PortSpec>& tanh_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input"},
      {"y", Access::write, kFloat, false, 8, "tanh(x), shape of x (may be the same data)"},
  };
  return p;
}

std::string tanh_check(const TaskShape& t) {
  const auto& s = tanh_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_shape(s, p, 1, 0)});
}

Cost tanh_cost(const TaskShape& t) {
  if (t.ports.size() != tanh_ports().size()) return {};
  return kutil::io_cost(tanh_ports(), t, 6 * rows_cols(t.ports[0]));
}

void tanh_cpu(KernelContext& ctx) {
  kutil::validate(ctx, tanh_ports(), tanh_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      for (int64_t j = 0; j < x.cols; ++j) yr[j] = std::tanh(xr[j]);
    }
  });
}

const std::vector<PortSpec>& l2n_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [tokens, d]"},
      {"y", Access::write, kFloat, false, 8, "x / max(||x||, eps) row-wise, shape of x (may be the same data)"},
  };
  return p;
}

std::string l2n_check(const TaskShape& t) {
  const auto& s = l2n_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_shape(s, p, 1, 0),
                      eps_check(t.args)});
}

Cost l2n_cost(const TaskShape& t) {
  if (t.ports.size() != l2n_ports().size()) return {};
  return kutil::io_cost(l2n_ports(), t, 3 * rows_cols(t.ports[0]));
}

void l2n_cpu(KernelContext& ctx) {
  kutil::validate(ctx, l2n_ports(), l2n_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  const double eps = ctx.arg_float("eps");
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    for (int64_t r = 0; r < x.rows; ++r) {
      const T* xr = row<const T>(x, r);
      T* yr = row<T>(y, r);
      const double sq = sum8(x.cols, [xr](int64_t j) { return double(xr[j]) * double(xr[j]); });
      const T f = T(1.0 / std::max(std::sqrt(sq), eps));
      for (int64_t j = 0; j < x.cols; ++j) yr[j] = xr[j] * f;
    }
  });
}

// ============================================================ nn.pool

const std::vector<PortSpec>& pool_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 2, "input [batch*seq, d]"},
      {"y", Access::write, kFloat, false, 2, "pooled [batch, d]"},
  };
  return p;
}

std::string pool_check(const TaskShape& t) {
  const auto& s = pool_ports();
  const auto& p = t.ports;
  const Args& a = t.args;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0),
                            kutil::one_of(a, "mode", {"mean", "sum", "max", "first", "last"}),
                            kutil::one_of(a, "scale", {"none", "sqrt_len"}), whole_sequences(s, p, 0, a),
                            nonneg_param(a, "length")});
      !m.empty())
    return m;
  if (a.get_string("scale") == "sqrt_len" && a.get_string("mode") != "sum")
    return "param 'scale' is 'sqrt_len' but param 'mode' is '" + a.get_string("mode") + "': sqrt_len needs mode 'sum'";
  const int64_t t_ = p[0].rows, sq = seq_len(a, t_), len = a.get_int("length");
  if (len > sq)
    return "param 'length' is " + to_string(len) + ": more than the sequence length " + to_string(sq);
  const int64_t batch = sq > 0 ? t_ / sq : 0;
  return expect_shape(s, p, 1, batch, p[0].cols,
                      to_string(batch) + " sequences of " + to_string(sq) + " rows, " + to_string(p[0].cols) +
                          " features");
}

Cost pool_cost(const TaskShape& t) {
  if (t.ports.size() != pool_ports().size()) return {};
  return kutil::io_cost(pool_ports(), t, rows_cols(t.ports[0]));
}

void pool_cpu(KernelContext& ctx) {
  kutil::validate(ctx, pool_ports(), pool_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  const int64_t t = x.rows, d = x.cols;
  if (t == 0 || d == 0) return;
  const int64_t S = seq_len(ctx.args(), t), batch = t / S;
  const int64_t L = ctx.arg_int("length") > 0 ? ctx.arg_int("length") : S;
  const std::string& mode = ctx.arg_string("mode");
  const bool sqrt_len = ctx.arg_string("scale") == "sqrt_len";
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    std::vector<double> acc(static_cast<std::size_t>(d));
    for (int64_t b = 0; b < batch; ++b) {
      T* yr = row<T>(y, b);
      const int64_t r0 = b * S;
      if (mode == "first" || mode == "last") {
        const T* xr = row<const T>(x, mode == "first" ? r0 : r0 + L - 1);
        std::copy(xr, xr + d, yr);
      } else if (mode == "max") {
        const T* x0 = row<const T>(x, r0);
        std::copy(x0, x0 + d, yr);
        for (int64_t r = 1; r < L; ++r) {
          const T* xr = row<const T>(x, r0 + r);
          for (int64_t j = 0; j < d; ++j) yr[j] = std::max(yr[j], xr[j]);
        }
      } else {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t r = 0; r < L; ++r) {
          const T* xr = row<const T>(x, r0 + r);
          for (int64_t j = 0; j < d; ++j) acc[static_cast<std::size_t>(j)] += double(xr[j]);
        }
        const double div = mode == "mean" ? double(L) : sqrt_len ? std::sqrt(double(L)) : 1.0;
        for (int64_t j = 0; j < d; ++j) yr[j] = T(acc[static_cast<std::size_t>(j)] / div);
      }
    }
  });
}


#if YMLOPT_HAVE_CUDA
// ============================================================ CUDA kernels
// Port data are device pointers; kernels launch on ctx.cuda_stream(). Each
// *_cuda_check says which tasks the CUDA kernel handles (f32, and per op the
// layout it needs); the engine runs the others on a CPU.

std::string f32_only(const TaskShape& t, std::size_t n_ports) {
  if (t.ports.size() != n_ports) return "wrong number of ports";
  for (const TensorView& v : t.ports)
    if (v.bound() && v.dtype != DType::f32)
      return std::string("CUDA kernel is f32 only, a port has dtype ") + dtype_name(v.dtype);
  return "";
}

/// Validates like the CPU kernel (check), then the CUDA kernel's own cuda_check.
void cuda_validate(KernelContext& ctx, const std::vector<PortSpec>& ports, std::string (*check)(const TaskShape&),
                   std::string (*cuda_check)(const TaskShape&)) {
  kutil::validate(ctx, ports, check);
  if (auto m = cuda_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
}

template <class T> T* dptr(const TensorView& v) { return v.bound() ? static_cast<T*>(v.data) : nullptr; }

std::string layernorm_cuda_check(const TaskShape& t) {
  if (auto m = f32_only(t, layernorm_ports().size()); !m.empty()) return m;
  if (!t.ports[0].contiguous() || !t.ports[3].contiguous()) return "CUDA kernel needs contiguous rows (ld == cols)";
  return "";
}

void layernorm_cuda(KernelContext& ctx) {
  cuda_validate(ctx, layernorm_ports(), layernorm_check, layernorm_cuda_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(3);
  if (x.cols == 0) return;
  nn::cuda::layernorm_rows(dptr<const float>(x), dptr<const float>(ctx.port(1)), dptr<const float>(ctx.port(2)),
                           dptr<float>(y), x.rows, x.cols, float(ctx.arg_float("eps")), ctx.cuda_stream());
}

std::string rmsnorm_cuda_check(const TaskShape& t) {
  if (auto m = f32_only(t, rmsnorm_ports().size()); !m.empty()) return m;
  if (!t.ports[0].contiguous() || !t.ports[2].contiguous()) return "CUDA kernel needs contiguous rows (ld == cols)";
  return "";
}

void rmsnorm_cuda(KernelContext& ctx) {
  cuda_validate(ctx, rmsnorm_ports(), rmsnorm_check, rmsnorm_cuda_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(2);
  if (x.cols == 0) return;
  nn::cuda::rmsnorm_rows(dptr<const float>(x), dptr<const float>(ctx.port(1)), dptr<float>(y), x.rows, x.cols,
                         float(ctx.arg_float("eps")), ctx.cuda_stream());
}

nn::cuda::AttentionShape attention_cuda_shape(const TaskShape& t) {
  const AttnDims d = attn_dims(t);
  nn::cuda::AttentionShape s;
  s.batch = d.batch;
  s.seq = d.seq;
  s.heads = d.heads;
  s.kv_heads = d.kv;
  s.head_dim = d.dh;
  s.head_begin = d.hb;
  s.head_end = d.he;
  s.ldq = ld_of(t.ports[0]);
  s.ldk = ld_of(t.ports[1]);
  s.ldv = ld_of(t.ports[2]);
  s.ldy = ld_of(t.ports[3]);
  return s;
}

std::string attention_cuda_check(const TaskShape& t) {
  if (auto m = f32_only(t, attention_ports().size()); !m.empty()) return m;
  if (t.args.get_int("heads") < 1 || t.ports[0].rows == 0) return "";
  return nn::cuda::attention_shape_error(attention_cuda_shape(t));
}

void attention_cuda(KernelContext& ctx) {
  cuda_validate(ctx, attention_ports(), attention_check, attention_cuda_check);
  const TaskShape t{ctx.ports(), ctx.args()};
  const AttnDims d = attn_dims(t);
  if (d.t == 0) return;
  const double sp = ctx.arg_float("scale");
  const double scale = sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh));
  nn::cuda::attention_f32(dptr<const float>(ctx.port(0)), dptr<const float>(ctx.port(1)),
                          dptr<const float>(ctx.port(2)), dptr<float>(ctx.port(3)), attention_cuda_shape(t),
                          ctx.arg_bool("causal"), float(scale), ctx.cuda_stream());
}

std::string embedding_cuda_check(const TaskShape& t) {
  if (t.ports.size() != embedding_ports().size()) return "wrong number of ports";
  if (embedding_bits(t.args) != 0) return "CUDA kernel handles format=dense only";
  if (t.ports[1].dtype != DType::f32) return std::string("CUDA kernel is f32 only, table is ") + dtype_name(t.ports[1].dtype);
  return "";
}

void embedding_cuda(KernelContext& ctx) {
  cuda_validate(ctx, embedding_ports(), embedding_check, embedding_cuda_check);
  const TensorView &ids = ctx.port(0), &table = ctx.port(1), &y = ctx.port(2);
  const int64_t n = num_ids(ids);
  if (n == 0) return;
  const int64_t icols = std::max<int64_t>(ids.cols, 1);
  std::int64_t bad_id = 0;
  const std::int64_t pos = nn::cuda::embedding_f32(
      dptr<const std::int32_t>(ids), n, icols, std::max<int64_t>(ids.ld, icols), dptr<const float>(table),
      table.rows, table.cols, ld_of(table), dptr<float>(y), ld_of(y), &bad_id, ctx.cuda_stream());
  if (pos >= 0)
    throw KernelError("id " + to_string(bad_id) + " at position " + to_string(pos) + " is out of range: table has " +
                      to_string(table.rows) + " rows (ids must be in [0, " + to_string(table.rows) + "))");
}

std::string rope_cuda_check(const TaskShape& t) { return f32_only(t, rope_ports().size()); }

void rope_cuda(KernelContext& ctx) {
  cuda_validate(ctx, rope_ports(), rope_check, rope_cuda_check);
  const TensorView& x = ctx.port(0);
  const RopeDims d = rope_dims(TaskShape{ctx.ports(), ctx.args()});
  if (x.rows == 0 || d.rd == 0) return;
  nn::cuda::rope_f32(dptr<float>(x), x.rows, ld_of(x), d.heads, d.dh, d.rd, d.seq, ctx.arg_int("offset"),
                     ctx.arg_float("base"), ctx.arg_string("style") == "interleaved", ctx.cuda_stream());
}

/// The CUDA kernel computes y = x W for dense f32 W (cuBLAS) and for a
/// symmetric per-channel int8 W (cuBLASLt int8 GEMM with per-token activation
/// quantization, the arithmetic of quant::linear); bias, residual, activation
/// and the other formats run on a CPU.
std::string linear_cuda_check(const TaskShape& t) {
  const auto& p = t.ports;
  if (p.size() != linear_ports().size()) return "wrong number of ports";
  if (p[nn::kX].dtype != DType::f32 || p[nn::kY].dtype != DType::f32)
    return std::string("CUDA kernel is f32 only, x is ") + dtype_name(p[nn::kX].dtype);
  if (p[nn::kB].bound() || p[nn::kR].bound() || t.args.get_string("activation") != "none")
    return "CUDA kernel computes y = x W only (no bias, residual or activation)";
  const nn::WeightFormat f = linear_format(t.args);
  if (f == nn::WeightFormat::dense)
    return p[nn::kW].dtype == DType::f32 ? "" : std::string("CUDA kernel needs an f32 w, got ") + dtype_name(p[nn::kW].dtype);
  if (f != nn::WeightFormat::int8) return "CUDA kernel handles format dense and int8 only";
  if (t.args.get_string("activations") != "int8") return "CUDA int8 kernel quantizes the activations (activations=int8 only)";
  const TensorView& sc = p[nn::kWScale];
  if (t.args.get_int("group") != 0 || p[nn::kWZero].bound() || sc.dtype != DType::f32 ||
      !(sc.rows <= 1 || (sc.cols == 1 && sc.ld == 1)))
    return "CUDA int8 kernel: symmetric per-channel weights only (group=0, no w_zero, contiguous f32 w_scale)";
  const LinearDims d = linear_dims(t);
  const TensorView& w = p[nn::kW];
  // the scratch codes and int32 products are packed: ld k and n
  return quant::cuda::gemm_i8_shape_error(nullptr, d.k, nullptr, w.rows > 1 ? w.ld : w.cols, nullptr, d.n, d.m, d.n,
                                          d.k);
}

void linear_cuda(KernelContext& ctx) {
  cuda_validate(ctx, linear_ports(), linear_check, linear_cuda_check);
  const TensorView &x = ctx.port(nn::kX), &w = ctx.port(nn::kW), &y = ctx.port(nn::kY);
  const int64_t m = y.rows, n = y.cols, k = x.cols;
  if (m == 0 || n == 0) return;
  if (linear_format(ctx.args()) == nn::WeightFormat::dense) {
    nn::cuda::gemm_f32_op(false, ctx.arg_bool("transpose_w"), dptr<const float>(x), ld_of(x), dptr<const float>(w),
                          ld_of(w), dptr<float>(y), ld_of(y), m, n, k, 1.f, 0.f, ctx.cuda_stream());
    return;
  }
  quant::cuda::linear_i8(dptr<const float>(x), m, k, ld_of(x), dptr<const std::int8_t>(w), w.rows > 1 ? w.ld : w.cols,
                         dptr<const float>(ctx.port(nn::kWScale)), n, dptr<float>(y), ld_of(y), ctx.cuda_stream());
}

#define YMLOPT_CUDA_KERNEL(op) op##_cuda, op##_cuda_check
#else
#define YMLOPT_CUDA_KERNEL(op) nullptr, nullptr
#endif

/// kutil::add_component plus the CUDA kernel and its cuda_check (both nullptr
/// without nvcc: YMLOPT_CUDA_KERNEL).
void add_component(Registry& reg, const char* name, const char* doc, const std::vector<PortSpec>& ports,
                   std::vector<ParamSpec> params, KernelFn cpu, std::string (*check)(const TaskShape&),
                   Cost (*cost)(const TaskShape&), KernelFn cuda, std::string (*cuda_check)(const TaskShape&)) {
  ComponentSpec s;
  s.name = name;
  s.doc = doc;
  s.ports = ports;
  s.params = std::move(params);
  s.cpu = cpu;
  s.check = check;
  s.cost = cost;
  s.cuda = cuda;
  if (cuda_check) s.cuda_check = cuda_check;
  reg.add(std::move(s));
}

}  // namespace

void register_transformer(Registry& reg) {
  const ParamSpec seq = {"seq", ParamType::int_, "0", false,
                         "sequence length (rows per sequence); 0: all rows are one sequence"};

  add_component(reg, "nn.embedding",
      "y[i, :] = table[ids[i], :]; an id outside [0, vocab) is an error naming its position. format int8/int4: "
      "only the rows requested are dequantized, (code - zero) * scale, into f32 y",
      embedding_ports(),
      {{"format", ParamType::string_, "dense", false,
        "table representation: dense (float table), int8 or int4 (codes in table, table_scale, optional "
        "table_zero; the layout of quant.int8 / quant.group on W = table [vocab, d]); compressed tables give f32 y"},
       {"group", ParamType::int_, "0", false, "int8/int4: table elements per scale along d; 0: one scale per row"}},
      embedding_cpu, embedding_check, embedding_cost, YMLOPT_CUDA_KERNEL(embedding));
  add_component(reg, "nn.layernorm",
      "row-wise layer normalization: y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance (as PyTorch)",
      layernorm_ports(), {{"eps", ParamType::float_, "1e-5", false, "added to the variance"}}, layernorm_cpu,
      layernorm_check, layernorm_cost, YMLOPT_CUDA_KERNEL(layernorm));
  add_component(reg, "nn.rmsnorm", "row-wise RMS normalization: y = x / sqrt(mean(x^2) + eps) * weight (as LLaMA)", rmsnorm_ports(),
      {{"eps", ParamType::float_, "1e-6", false, "added to the mean square"}}, rmsnorm_cpu, rmsnorm_check,
      rmsnorm_cost, YMLOPT_CUDA_KERNEL(rmsnorm));
  add_component(reg, "nn.linear",
      "y = act(x W + b), or y = r + act(x W + b) with the optional residual r (fused residual add; r may be y "
      "itself); one GEMM, bias and "
      "activation fused in one pass over y. W is [k, n] (GPT-2 Conv1D) or [n, k] with transpose_w (torch Linear). "
      "y and w may be column tiles (ld > cols) of wider tensors.",
      linear_ports(),
      {{"transpose_w", ParamType::bool_, "false", false, "false: w is [k, n]; true: w is [n, k]"},
       {"activation", ParamType::string_, "none", false,
        "none, relu, gelu (exact erf form), gelu_tanh (tanh approximation, GPT-2 'gelu_new') or silu"},
       {"format", ParamType::string_, "dense", false,
        "weight representation: dense, int8 or int4 (codes in w, w_scale, optional w_zero), csr (w values, "
        "w_index columns, w_ptr rows), bsr (blocks, arg block), nm24 (2:4: w kept values, w_index positions); "
        "compressed W is [n, k] and needs f32 x"},
       {"group", ParamType::int_, "0", false, "int8/int4: weights per scale along k; 0: one scale per row"},
       {"block", ParamType::int_, "0", false, "bsr: block size"},
       {"activations", ParamType::string_, "int8", false,
        "int8/int4: int8 (x quantized per token, the integer VNNI kernels) or f32 (weight-only: the codes "
        "dequantized a block of rows at a time in cache, then an f32 GEMM)"}},
      linear_cpu, linear_check, linear_cost, YMLOPT_CUDA_KERNEL(linear));
  add_component(reg, "nn.attention",
      "scaled dot-product attention per head and sequence: y_h = softmax(scale * q_h k_g^T [+ causal mask]) v_g, "
      "g = h / (heads / kv_heads) (grouped-query attention); rows are batch*seq tokens; only heads "
      "[head_begin, head_end) are computed and written. Memory: one [128, seq] score block.",
      attention_ports(),
      {{"heads", ParamType::int_, "", true, "number of query heads (q has heads*dh columns)"},
       {"kv_heads", ParamType::int_, "0", false, "number of key/value heads; 0: heads (must divide heads)"},
       seq,
       {"causal", ParamType::bool_, "false", false, "mask keys after the query position"},
       {"scale", ParamType::float_, "0", false, "score scale; 0: 1/sqrt(dh)"},
       {"head_begin", ParamType::int_, "0", false, "first head computed"},
       {"head_end", ParamType::int_, "0", false, "one past the last head computed; 0 with head_begin=0: all heads"}},
      attention_cpu, attention_check, attention_cost, YMLOPT_CUDA_KERNEL(attention));
  add_component(reg, "nn.rope",
      "rotary position embedding in place: each head's pairs (x_a, x_b) are rotated by angle "
      "pos * base^(-2i/rotary_dim), pos = row % seq + offset; style 'half' pairs (i, i + rotary_dim/2) (LLaMA/HF "
      "rotate_half, GPT-NeoX), 'interleaved' pairs (2i, 2i+1) (GPT-J)",
      rope_ports(),
      {{"heads", ParamType::int_, "", true, "number of heads (x has heads*dh columns)"},
       seq,
       {"base", ParamType::float_, "10000", false, "frequency base (theta)"},
       {"offset", ParamType::int_, "0", false, "position of the first row of each sequence"},
       {"style", ParamType::string_, "half", false, "'half' (rotate_half) or 'interleaved' (GPT-J)"},
       {"rotary_dim", ParamType::int_, "0", false, "rotate only the first rotary_dim dims of each head; 0: dh"}},
      rope_cpu, rope_check, rope_cost, YMLOPT_CUDA_KERNEL(rope));
  kutil::add_component(reg, "nn.sinusoidal_positions",
      "sinusoidal position table: layout 'interleaved' (Attention is all you need): y[p, 2i] = sin(p / "
      "base^(2i/d)), y[p, 2i+1] = cos(p / base^(2i/d)); layout 'concat' (tensor2tensor get_timing_signal_1d, USE): "
      "y[p, i] = sin(p * f_i), y[p, d/2 + i] = cos(p * f_i), f_i = base^(-i/(d/2 - 1)), a zero last column when d "
      "is odd. p = row + offset",
      sinus_ports(),
      {{"layout", ParamType::string_, "interleaved", false, "'interleaved' or 'concat'"},
       {"base", ParamType::float_, "10000", false, "maximum timescale"},
       {"offset", ParamType::int_, "0", false, "position of the first row"}},
      sinus_cpu, sinus_check, sinus_cost);
  kutil::add_component(reg, "nn.swiglu", "y = silu(gate) * up = gate * sigmoid(gate) * up", swiglu_ports(), {}, swiglu_cpu, swiglu_check,
      swiglu_cost);
  kutil::add_component(reg, "nn.tanh", "y = tanh(x)", tanh_ports(), {}, tanh_cpu, tanh_check, tanh_cost);
  kutil::add_component(reg, "nn.l2normalize", "row-wise y = x / max(||x||_2, eps)", l2n_ports(),
      {{"eps", ParamType::float_, "1e-12", false, "lower bound of the norm"}}, l2n_cpu, l2n_check, l2n_cost);
  kutil::add_component(reg, "nn.pool",
      "pools each sequence of seq rows to one row: mean, sum (optionally / sqrt(length)), max, first (CLS) or last "
      "row; only the first `length` rows of each sequence count",
      pool_ports(),
      {seq,
       {"mode", ParamType::string_, "mean", false, "mean, sum, max, first or last"},
       {"scale", ParamType::string_, "none", false, "none, or sqrt_len (mode sum: divide by sqrt(length), as USE)"},
       {"length", ParamType::int_, "0", false, "rows of each sequence that count (padding after); 0: seq"}},
      pool_cpu, pool_check, pool_cost);
}

}  // namespace ymlopt
