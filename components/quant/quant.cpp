// Weight quantizers (rules in quant.hpp) and the quant.* components.
#include "quant/quant.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>

#include <ymlopt/kernel_util.hpp>

#if YMLOPT_HAVE_CUDA
#include "quant/quant_cuda.hpp"
#endif

namespace ymlopt::quant {

using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::to_string;

QWeight QuantizedWeight::view() const {
  QWeight w;
  w.bits = bits;
  w.q = q.data();
  w.q_ld = q_ld;
  w.n = n;
  w.k = k;
  w.group = group;
  w.scale_dtype = scale_dtype;
  w.scale = scale_dtype == DType::f16 ? static_cast<const void*>(scale_f16.data()) : scale_f32.data();
  w.scale_ld = groups();
  w.zero = zero.empty() ? nullptr : zero.data();
  w.zero_ld = groups();
  w.code_sum = code_sum.empty() ? nullptr : code_sum.data();
  w.code_sum_ld = groups();
  return w;
}

namespace {

/// Codes (unsigned for int4, signed for int8) and scale/zero of one group.
struct GroupResult {
  float scale = 0, zero = 0;
};

/// ggml quantize_row_q8_0 rule: d = amax / 127, q = roundf(x / d) via x * (1/d).
GroupResult sym8(const float* x, int64_t len, int* q) {
  float amax = 0;
  for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int64_t i = 0; i < len; ++i) q[i] = static_cast<int>(std::roundf(x[i] * id));
  return {d, 0};
}

/// ggml quantize_row_q4_0 rule: d = (signed value of largest magnitude) / -8, q = min(15, (int)(x/d + 8.5)).
GroupResult sym4(const float* x, int64_t len, int* q) {
  float amax = 0, mx = 0;
  for (int64_t i = 0; i < len; ++i)
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      mx = x[i];
    }
  const float d = mx / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int64_t i = 0; i < len; ++i) q[i] = std::min(15, static_cast<int>(x[i] * id + 8.5f));
  return {d, 8};
}

/// Min/max rule with a float zero point: q in [0, qmax].
GroupResult asym(const float* x, int64_t len, int qmax, int* q) {
  float lo = x[0], hi = x[0];
  for (int64_t i = 1; i < len; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  float scale = (hi - lo) / static_cast<float>(qmax);
  if (!(scale > 0.0f) || !std::isfinite(1.0f / scale)) {  // constant group: represent it exactly with q = 0
    scale = lo != 0.0f ? std::fabs(lo) : 1.0f;
    for (int64_t i = 0; i < len; ++i) q[i] = 0;
    return {scale, -lo / scale};
  }
  const float id = 1.0f / scale;
  for (int64_t i = 0; i < len; ++i) q[i] = std::clamp(static_cast<int>(std::roundf((x[i] - lo) * id)), 0, qmax);
  return {scale, -lo / scale};
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw KernelError(msg);
}

/// How scales are stored: f32; f16 after computing the codes with the f32 scale
/// (llama.cpp q8_0/q4_0); f16 with the codes computed against the stored values.
enum class Store { f32, f16_ggml, f16 };

/// The codes of one group against stored (f16-exact) parameters p (quant.hpp rules).
void codes_against(const float* x, int64_t len, int bits, bool symmetric, const StoredParams& p, int* q) {
  const float inv = p.scale != 0.0f ? 1.0f / p.scale : 0.0f;
  if (symmetric && bits == 8) {
    for (int64_t i = 0; i < len; ++i) q[i] = std::clamp(static_cast<int>(std::roundf(x[i] * inv)), -127, 127);
  } else if (symmetric) {
    for (int64_t i = 0; i < len; ++i) {
      const float v = x[i] * inv + 8.5f;
      q[i] = v <= 0.0f ? 0 : (v >= 15.0f ? 15 : static_cast<int>(v));
    }
  } else {
    const float qmax = bits == 8 ? 255.0f : 15.0f;
    for (int64_t i = 0; i < len; ++i)
      q[i] = static_cast<int>(std::roundf(std::clamp(x[i] * inv + p.zero, 0.0f, qmax)));
  }
}

QuantizedWeight quantize_impl(const float* w, int64_t n, int64_t k, int64_t ldw, int bits, int64_t group,
                              bool symmetric, Store store) {
  const bool f16 = store != Store::f32;
  require(bits == 8 || bits == 4, "quantize: bits is " + to_string(bits) + ", expected 4 or 8");
  require(n >= 0 && k >= 0, "quantize: negative dimension");
  require(n <= 1 || ldw >= k, "quantize: ldw " + to_string(ldw) + " < k " + to_string(k));
  require(group == 0 || group == 32 || group == 64 || group == 128,
          "quantize: group is " + to_string(group) + ", expected 32, 64 or 128 (0: per channel)");
  require(group == 0 || k % group == 0,
          "quantize: k = " + to_string(k) + " is not a multiple of group " + to_string(group));
  require(bits == 8 || k % 2 == 0, "quantize: int4 needs an even k, got " + to_string(k));
  require(n == 0 || k == 0 || w != nullptr, "quantize: no weights");
  QuantizedWeight r = QuantizedWeight::zeros(bits, n, k, group);
  const int64_t G = r.groups(), gs = group > 0 ? group : k;
  r.scale_dtype = f16 ? DType::f16 : DType::f32;
  (f16 ? r.scale_f16.resize(static_cast<std::size_t>(n * G)) : r.scale_f32.resize(static_cast<std::size_t>(n * G)));
  if (!symmetric) r.zero.resize(static_cast<std::size_t>(n * G));
  if (bits == 8) r.code_sum.assign(static_cast<std::size_t>(n * G), 0);
  std::vector<int> codes(static_cast<std::size_t>(std::max<int64_t>(gs, 1)));
  for (int64_t row = 0; row < n; ++row)
    for (int64_t g = 0; g < G; ++g) {
      const float* x = w + row * ldw + g * gs;
      const std::size_t gi = static_cast<std::size_t>(row * G + g);
      GroupResult res;
      if (gs == 0)
        res = {0, 0};
      else if (symmetric)
        res = bits == 8 ? sym8(x, gs, codes.data()) : sym4(x, gs, codes.data());
      else
        res = asym(x, gs, bits == 8 ? 255 : 15, codes.data());
      if (store == Store::f16 && gs > 0) {  // codes against the stored f16 scale / zero
        float lo = x[0];
        for (int64_t c = 1; c < gs; ++c) lo = std::min(lo, x[c]);
        const StoredParams sp = round_params_f16(res.scale, lo, bits, symmetric);
        codes_against(x, gs, bits, symmetric, sp, codes.data());
        res = {sp.scale, sp.zero};
      }
      if (f16)
        r.scale_f16[gi] = half::f16_bits_from_double(res.scale);
      else
        r.scale_f32[gi] = res.scale;
      if (!symmetric) r.zero[gi] = bits == 8 ? res.zero - 128.0f : res.zero;
      for (int64_t c = 0; c < gs; ++c) {
        const int64_t kk = g * gs + c;
        int code = codes[static_cast<std::size_t>(c)];
        if (bits == 8) {
          if (!symmetric) code -= 128;
          r.q[static_cast<std::size_t>(row * r.q_ld + kk)] = static_cast<int8_t>(code);
          r.code_sum[gi] += code;
        } else {
          auto& byte = r.q[static_cast<std::size_t>(row * r.q_ld + kk / 2)];
          byte = static_cast<int8_t>(static_cast<std::uint8_t>(byte) | (code << ((kk & 1) ? 4 : 0)));
        }
      }
    }
  return r;
}

}  // namespace

float round_to_f16(float x) { return static_cast<float>(half::f16_bits_to_double(half::f16_bits_from_double(x))); }

StoredParams round_params_f16(float scale, float lo, int bits, bool symmetric) {
  StoredParams p;
  p.scale = round_to_f16(scale);
  if (!std::isfinite(p.scale))
    throw KernelError("quantize: scale " + to_string(scale) + " does not fit f16 (|scale| <= 65504); use f32 scales");
  if (symmetric) {
    p.zero = bits == 4 ? 8.0f : 0.0f;
    return p;
  }
  if (!(p.scale > 0.0f)) p.scale = 0x1p-24f;  // the smallest f16 subnormal: the group's range is below it
  const float shift = bits == 8 ? 128.0f : 0.0f;  // int8 stores zero - 128 (qlinear.hpp)
  const float stored = round_to_f16(-lo / p.scale - shift);
  if (!std::isfinite(stored))
    throw KernelError("quantize: zero point " + to_string(-lo / p.scale - shift) +
                      " does not fit f16 (a group far from 0 with a tiny range); use f32 scales");
  p.zero = stored + shift;
  return p;
}

QuantizedWeight quantize_int8(const float* w, int64_t n, int64_t k, int64_t ldw) {
  return quantize_impl(w, n, k, ldw, 8, 0, true, Store::f32);
}
QuantizedWeight quantize_int8(const float* w, int64_t n, int64_t k, int64_t ldw, DType scale_dtype) {
  if (scale_dtype != DType::f32 && scale_dtype != DType::f16)
    throw KernelError(std::string("quantize_int8: scale dtype ") + dtype_name(scale_dtype) + ", expected f32 or f16");
  return quantize_impl(w, n, k, ldw, 8, 0, true, scale_dtype == DType::f16 ? Store::f16 : Store::f32);
}
QuantizedWeight quantize_group(const float* w, int64_t n, int64_t k, int64_t ldw, int bits, int64_t group,
                               bool symmetric) {
  return quantize_group(w, n, k, ldw, bits, group, symmetric, DType::f32);
}
QuantizedWeight quantize_group(const float* w, int64_t n, int64_t k, int64_t ldw, int bits, int64_t group,
                               bool symmetric, DType scale_dtype) {
  if (group == 0) throw KernelError("quantize_group: group must be 32, 64 or 128");
  if (scale_dtype != DType::f32 && scale_dtype != DType::f16)
    throw KernelError(std::string("quantize_group: scale dtype ") + dtype_name(scale_dtype) + ", expected f32 or f16");
  return quantize_impl(w, n, k, ldw, bits, group, symmetric, scale_dtype == DType::f16 ? Store::f16 : Store::f32);
}
QuantizedWeight quantize_q8_0(const float* w, int64_t n, int64_t k, int64_t ldw) {
  return quantize_impl(w, n, k, ldw, 8, 32, true, Store::f16_ggml);
}
QuantizedWeight quantize_q4_0(const float* w, int64_t n, int64_t k, int64_t ldw) {
  return quantize_impl(w, n, k, ldw, 4, 32, true, Store::f16_ggml);
}

}  // namespace ymlopt::quant

// ---- components ------------------------------------------------------------------

namespace ymlopt {
namespace {

using quant::QuantizedWeight;
using std::int64_t;
using std::to_string;

using kutil::first_error;
/// [n, k] of the weight port under the layout arg ("nk" or "kn").
struct Nk {
  int64_t n = 0, k = 0;
};
Nk nk_of(const TaskShape& t) {
  const TensorView& w = t.ports[0];
  return t.args.get_string("layout") == "kn" ? Nk{w.cols, w.rows} : Nk{w.rows, w.cols};
}

std::string expect_dims(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t rows,
                        int64_t cols, const std::string& why) {
  if (p[i].rows == rows && p[i].cols == cols) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(p[i]) + ", expected " + to_string(rows) + "x" + to_string(cols) +
         " (" + why + ")";
}

const ParamSpec kLayout = {"layout", ParamType::string_, "nk", false,
                           "nk: w is [n, k] (torch Linear); kn: w is [k, n] (GPT-2 Conv1D); outputs are [n, k]-rowed"};

/// The scheme a quantizer component applies.
struct Scheme {
  int bits = 8;
  int64_t group = 0;
  bool symmetric = true;
  bool f16 = false;
};

Scheme scheme_of(const std::string& name, const Args& a) {
  if (name == "quant.int8") return {8, 0, true, false};
  if (name == "quant.q8_0") return {8, 32, true, true};
  if (name == "quant.q4_0") return {4, 32, true, true};
  return {static_cast<int>(a.get_int("bits")), a.get_int("group"), a.get_bool("symmetric"), false};
}

// Ports: w (in), q (out), scale (out), zero (out, optional: quant.group only).
const std::vector<PortSpec>& quantizer_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, {DType::f32}, false, 2, "weight [n, k] (layout nk) or [k, n] (layout kn)"},
      {"q",
       Access::write,
       {DType::i8},
       false,
       2,
       "codes [n, k] (8 bits) or [n, k/2] (4 bits, element 2j in the low nibble)"},
      {"scale", Access::write, {DType::f32, DType::f16}, false, 2,
       "scales [n] (per channel) or [n, k/group]; quant.int8 / quant.group: f16 stores them (and the zeros) in f16, "
       "codes computed against the stored values; quant.q8_0 / quant.q4_0: f16"},
      {"zero", Access::write, {DType::f32, DType::f16}, true, 2,
       "zero points [n, k/group] (asymmetric only), the scale's dtype"},
  };
  return p;
}

std::string quantizer_check_s(const TaskShape& t, const Scheme& sc) {
  const auto& s = quantizer_ports();
  const auto& p = t.ports;
  if (p.size() != s.size() && p.size() != s.size() - 1)
    return "expected " + to_string(s.size()) + " ports, got " + to_string(p.size());
  for (std::size_t i = 0; i < 3; ++i)
    if (!p[i].bound()) return "port '" + s[i].name + "' is not bound";
  if (auto m = kutil::one_of(t.args, "layout", {"nk", "kn"}); !m.empty()) return m;
  if (sc.bits != 8 && sc.bits != 4) return "param 'bits' is " + to_string(sc.bits) + ": expected 4 or 8";
  if (sc.group != 0 && sc.group != 32 && sc.group != 64 && sc.group != 128)
    return "param 'group' is " + to_string(sc.group) + ": expected 32, 64 or 128";
  const Nk d = nk_of(t);
  if (sc.group > 0 && d.k % sc.group)
    return "port 'w' is " + kutil::dims(p[0]) + ": k = " + to_string(d.k) + " is not a multiple of group " +
           to_string(sc.group);
  if (sc.bits == 4 && d.k % 2)
    return "port 'w' is " + kutil::dims(p[0]) + ": int4 needs an even k, got " + to_string(d.k);
  const int64_t G = sc.group > 0 ? d.k / sc.group : 1;
  if (sc.f16 && p[2].dtype != DType::f16)  // q8_0 / q4_0: f16 by definition
    return std::string("port 'scale' has dtype ") + dtype_name(p[2].dtype) + ", expected f16";
  if (p[2].dtype != DType::f32 && p[2].dtype != DType::f16)
    return std::string("port 'scale' has dtype ") + dtype_name(p[2].dtype) + ", expected f32 or f16";
  const bool zero_bound = p.size() == 4 && p[3].bound();
  if (!sc.symmetric && !zero_bound) return "port 'zero' is required with symmetric=false";
  if (sc.symmetric && zero_bound) return "port 'zero' is bound but the quantization is symmetric";
  if (zero_bound && p[3].dtype != p[2].dtype)
    return std::string("port 'zero' has dtype ") + dtype_name(p[3].dtype) + " but 'scale' is " +
           dtype_name(p[2].dtype) + ": zero points are stored like the scales";
  const std::string sdesc = sc.group > 0 ? "one scale per group of " + to_string(sc.group) : "one scale per row";
  return first_error({expect_dims(s, p, 1, d.n, sc.bits == 8 ? d.k : d.k / 2,
                                  sc.bits == 8 ? "one int8 code per weight" : "two 4-bit codes per byte"),
                      sc.group == 0 ? (p[2].size() == d.n ? std::string()
                                                          : "port 'scale' is " + kutil::dims(p[2]) + ", expected " +
                                                                to_string(d.n) + " elements (one scale per row)")
                                    : expect_dims(s, p, 2, d.n, G, sdesc),
                      zero_bound ? expect_dims(s, p, 3, d.n, G, "like scale") : std::string()});
}

template <int Kind>
std::string quantizer_check(const TaskShape& t);
const char* const kQuantNames[] = {"quant.int8", "quant.group", "quant.q8_0", "quant.q4_0"};
template <int Kind>
std::string quantizer_check(const TaskShape& t) {
  if (t.ports.size() < 3) return "expected at least 3 ports, got " + to_string(t.ports.size());
  return quantizer_check_s(t, scheme_of(kQuantNames[Kind], t.args));
}

Cost quantizer_cost(const TaskShape& t) {
  const auto& s = quantizer_ports();
  Cost c = kutil::io_cost(s, t, 0);
  if (!t.ports.empty()) c.flops = 4.0 * static_cast<double>(t.ports[0].size());  // |x|, max, scale, round
  c.extra_bytes = t.ports.empty() ? 0 : kutil::bytes_of(t.ports[0]);
  return c;
}

/// Copies the weight port into a dense [n, k] f32 buffer (transposing layout kn).
std::vector<float> dense_nk(const TensorView& w, bool kn, int64_t n, int64_t k) {
  std::vector<float> out(static_cast<std::size_t>(n * k));
  const float* p = static_cast<const float*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out[static_cast<std::size_t>(kn ? c * k + r : r * k + c)] = p[r * w.ld + c];
  return out;
}

template <int Kind>
void quantizer_cpu(KernelContext& ctx) {
  auto check = [](const TaskShape& t) { return quantizer_check<Kind>(t); };
  const auto& specs = quantizer_ports();
  if (ctx.num_ports() == 3) {  // components without a zero port
    const std::vector<PortSpec> three(specs.begin(), specs.begin() + 3);
    kutil::validate(ctx, three, check);
  } else {
    kutil::validate(ctx, specs, check);
  }
  const Scheme sc = scheme_of(kQuantNames[Kind], ctx.args());
  const TensorView &w = ctx.port(0), &q = ctx.port(1), &sp = ctx.port(2);
  const bool kn = ctx.arg_string("layout") == "kn";
  const int64_t n = kn ? w.cols : w.rows, k = kn ? w.rows : w.cols;
  const std::vector<float> dense = dense_nk(w, kn, n, k);
  const DType sd = sp.dtype;  // quant.int8 / quant.group: f32 or f16 storage
  const QuantizedWeight qw =
      sc.group == 0 ? quant::quantize_int8(dense.data(), n, k, k, sd)
                    : (sc.f16 ? (sc.bits == 8 ? quant::quantize_q8_0(dense.data(), n, k, k)
                                              : quant::quantize_q4_0(dense.data(), n, k, k))
                              : quant::quantize_group(dense.data(), n, k, k, sc.bits, sc.group, sc.symmetric, sd));
  auto* qp = static_cast<std::int8_t*>(q.data);
  for (int64_t r = 0; r < n; ++r) std::copy_n(qw.q.data() + r * qw.q_ld, qw.q_ld, qp + r * q.ld);
  const int64_t G = qw.groups();
  // per channel: [n] or [n, 1] or [1, n], element r at flat index r (or r * ld for [n, 1]); groups: [n, G]
  auto at = [&](const TensorView& v, int64_t r, int64_t g) {
    return sc.group == 0 ? (v.cols == 1 && v.rows > 1 ? r * v.ld : r) : r * v.ld + g;
  };
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < G; ++g) {
      const std::size_t i = static_cast<std::size_t>(r * G + g);
      if (sd == DType::f16)
        static_cast<std::uint16_t*>(sp.data)[at(sp, r, g)] = qw.scale_f16[i];
      else
        static_cast<float*>(sp.data)[at(sp, r, g)] = qw.scale_f32[i];
    }
  if (!sc.symmetric) {
    const TensorView& z = ctx.port(3);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < G; ++g) {
        const float v = qw.zero[static_cast<std::size_t>(r * G + g)];  // f16-exact when sd is f16
        if (z.dtype == DType::f16)
          static_cast<std::uint16_t*>(z.data)[r * z.ld + g] = half::f16_bits_from_double(v);
        else
          static_cast<float*>(z.data)[r * z.ld + g] = v;
      }
  }
}

// quant.dequant: q, scale, zero? -> w
const std::vector<PortSpec>& dequant_ports() {
  static const std::vector<PortSpec> p = {
      {"q", Access::read, {DType::i8}, false, 2, "codes [n, k] (bits 8) or [n, k/2] (bits 4)"},
      {"scale", Access::read, {DType::f32, DType::f16}, false, 2, "scales [n] (group 0) or [n, k/group]"},
      {"zero", Access::read, {DType::f32, DType::f16}, true, 2, "zero points like scale (asymmetric); absent: symmetric"},
      {"w", Access::write, {DType::f32}, false, 2, "dequantized weight [n, k]"},
  };
  return p;
}

std::string dequant_check(const TaskShape& t) {
  const auto& s = dequant_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  const int64_t bits = t.args.get_int("bits"), group = t.args.get_int("group");
  if (bits != 8 && bits != 4) return "param 'bits' is " + to_string(bits) + ": expected 4 or 8";
  if (group != 0 && group != 32 && group % 64)
    return "param 'group' is " + to_string(group) + ": expected 0, 32, 64 or 128";
  const int64_t n = p[3].rows, k = p[3].cols;
  if (group > 0 && k % group)
    return "port 'w' is " + kutil::dims(p[3]) + ": k is not a multiple of group " + to_string(group);
  if (bits == 4 && k % 2) return "port 'w' is " + kutil::dims(p[3]) + ": int4 needs an even k";
  const int64_t G = group > 0 ? k / group : 1;
  return first_error(
      {expect_dims(s, p, 0, n, bits == 8 ? k : k / 2, bits == 8 ? "one code per weight of w" : "two codes per byte"),
       group == 0 ? (p[1].size() == n ? std::string()
                                      : "port 'scale' is " + kutil::dims(p[1]) + ", expected " + to_string(n) +
                                            " elements (one scale per row)")
                  : expect_dims(s, p, 1, n, G, "one scale per group of " + to_string(group)),
       p[2].bound() && p[2].size() != n * G
           ? "port 'zero' is " + kutil::dims(p[2]) + ", expected " + to_string(n * G) + " elements like scale"
           : std::string()});
}

Cost dequant_cost(const TaskShape& t) {
  Cost c = kutil::io_cost(dequant_ports(), t, 0);
  if (t.ports.size() == 4) c.flops = 2.0 * static_cast<double>(t.ports[3].size());
  return c;
}

void dequant_cpu(KernelContext& ctx) {
  kutil::validate(ctx, dequant_ports(), dequant_check);
  const TensorView &q = ctx.port(0), &s = ctx.port(1), &z = ctx.port(2), &w = ctx.port(3);
  quant::QWeight qw;
  qw.bits = static_cast<int>(ctx.arg_int("bits"));
  qw.group = ctx.arg_int("group");
  qw.n = w.rows;
  qw.k = w.cols;
  qw.q = static_cast<const std::int8_t*>(q.data);
  qw.q_ld = q.ld;
  qw.scale = s.data;
  qw.scale_dtype = s.dtype;
  // per channel: [n] (a row vector, stride 1) or [n, 1] (stride ld)
  qw.scale_ld = qw.group == 0 ? (s.cols == 1 && s.rows > 1 ? s.ld : 1) : s.ld;
  if (z.bound()) {
    qw.zero = z.data;
    qw.zero_dtype = z.dtype;
    qw.zero_ld = qw.group == 0 ? (z.cols == 1 && z.rows > 1 ? z.ld : 1) : z.ld;
  }
  if (const std::string e = quant::validate(qw); !e.empty()) throw KernelError(e);
  quant::dequantize(qw, static_cast<float*>(w.data), w.ld);
}

#if YMLOPT_HAVE_CUDA
// CUDA kernel of quant.dequant (quant_cuda.cu): device pointers, ctx.cuda_stream();
// f32 scales and zeros only (f16 ones run on a CPU).
std::string dequant_cuda_check(const TaskShape& t) {
  if (t.ports.size() != dequant_ports().size()) return "wrong number of ports";
  for (std::size_t i : {std::size_t(1), std::size_t(2)})
    if (t.ports[i].bound() && t.ports[i].dtype != DType::f32)
      return std::string("CUDA kernel needs f32 scale and zero, got ") + dtype_name(t.ports[i].dtype);
  return "";
}

void dequant_cuda(KernelContext& ctx) {
  kutil::validate(ctx, dequant_ports(), dequant_check);
  if (auto m = dequant_cuda_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
  const TensorView &q = ctx.port(0), &s = ctx.port(1), &z = ctx.port(2), &w = ctx.port(3);
  quant::cuda::GroupWeight g;  // the strides of dequant_cpu
  g.bits = static_cast<int>(ctx.arg_int("bits"));
  g.group = ctx.arg_int("group");
  g.n = w.rows;
  g.k = w.cols;
  g.q = static_cast<const std::int8_t*>(q.data);
  g.q_ld = std::max<int64_t>(q.ld, q.cols);
  g.scale = static_cast<const float*>(s.data);
  g.scale_ld = g.group == 0 ? (s.cols == 1 && s.rows > 1 ? s.ld : 1) : s.ld;
  if (z.bound()) {
    g.zero = static_cast<const float*>(z.data);
    g.zero_ld = g.group == 0 ? (z.cols == 1 && z.rows > 1 ? z.ld : 1) : z.ld;
  }
  if (const std::string e = quant::cuda::group_weight_error(g); !e.empty()) throw KernelError(e);
  quant::cuda::dequantize_group(g, static_cast<float*>(w.data), std::max<int64_t>(w.ld, w.cols), ctx.cuda_stream());
}
#endif

}  // namespace

void register_quant(Registry& reg) {
  const ParamSpec bits = {"bits", ParamType::int_, "4", false, "4 or 8"};
  const ParamSpec group = {"group", ParamType::int_, "128", false, "weights per scale along k: 32, 64 or 128"};
  const ParamSpec sym = {"symmetric", ParamType::bool_, "true", false,
                         "true: value = (q - 8) d (int4, ggml Q4_0 rule) or q d (int8, amax/127); "
                         "false: min/max range with a float zero point (port 'zero')"};
  const std::vector<PortSpec> three(quantizer_ports().begin(), quantizer_ports().begin() + 3);
  kutil::add_component(reg, "quant.int8",
                       "symmetric int8 per output channel: scale[r] = amax(row r) / 127, q = roundf(w / scale); an f16 scale "
                       "port stores the scale rounded to f16 and the codes use that value",
                       three,
                       {kLayout}, quantizer_cpu<0>, quantizer_check<0>, quantizer_cost);
  kutil::add_component(reg, "quant.group",
                       "group-wise int8/int4 (bits, group 32/64/128, symmetric or asymmetric with float zero points); "
                       "int4 codes two per byte, element 2j in the low nibble; asymmetric int8 stores q - 128; f16 scale/zero "
                       "ports store both rounded to f16, codes computed against the stored values",
                       quantizer_ports(), {bits, group, sym, kLayout}, quantizer_cpu<1>, quantizer_check<1>,
                       quantizer_cost);
  kutil::add_component(reg, "quant.q8_0",
                       "llama.cpp Q8_0 values: int8 codes, groups of 32, f16 scale = amax/127 (scales stored apart)",
                       three, {kLayout}, quantizer_cpu<2>, quantizer_check<2>, quantizer_cost);
  kutil::add_component(reg, "quant.q4_0",
                       "llama.cpp Q4_0 values: 4-bit codes, groups of 32, f16 scale d = max/-8, value = (q - 8) d; "
                       "pairs (2j, 2j+1) low nibble first",
                       three, {kLayout}, quantizer_cpu<3>, quantizer_check<3>, quantizer_cost);
#if YMLOPT_HAVE_CUDA
  const KernelFn dequant_gpu = dequant_cuda;
  std::string (*const dequant_gpu_check)(const TaskShape&) = dequant_cuda_check;
#else
  const KernelFn dequant_gpu = nullptr;
  std::string (*const dequant_gpu_check)(const TaskShape&) = nullptr;
#endif
  kutil::add_component(
      reg, "quant.dequant",
      "w = (q - zero) * scale (zero absent: 0 for 8 bits, 8 for 4 bits); the inverse of the quantizers",
      dequant_ports(),
      {{"bits", ParamType::int_, "8", false, "4 or 8"},
       {"group", ParamType::int_, "0", false, "weights per scale along k; 0: one scale per row"}},
      dequant_cpu, dequant_check, dequant_cost, dequant_gpu, dequant_gpu_check);
  register_quant_gptq(reg);
}

}  // namespace ymlopt
