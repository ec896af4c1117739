// nn.linear: y (+)= act(x W + b), one GEMM (or a compressed-weight kernel) and
// one fused epilogue (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include <type_traits>

#include "nn/linear_formats.hpp"
#include "nn/nn.hpp"
#include "quant/qlinear.hpp"
#include "tensor/simd.hpp"

namespace ymlopt::transformer {

namespace {

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
  else if constexpr (A == Act::gelu) return gelu_erf(v);
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

}  // namespace

// ============================================================ nn.linear

const std::vector<PortSpec>& linear_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "input [m, k] (leading dims are flattened)"},
      {"w", Access::read, {DType::f32, DType::f64, DType::i8, DType::bf16}, false, 2,
       "weight [k, n] (or [n, k] with transpose_w=true); may be a column tile. Compressed formats (bf16 included): "
       "see 'format'"},
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
  if (auto m = kutil::one_of(t.args, "format", {"dense", "int8", "int4", "csr", "bsr", "nm24", "bf16"}); !m.empty()) return m;
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
  if (p[1].dtype == DType::bf16 && p[0].dtype != DType::bf16)
    return "port 'w' is bf16 but x is " + std::string(dtype_name(p[0].dtype)) +
           ": format=\"bf16\" computes with bf16 weights ([n, k], f32 x and y)";
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
  if (!t.args.get_bool("keep_panels")) return c;
  if (f == nn::WeightFormat::csr && nn::keeps_csr_plan(d.m))  // the GEMV plan, ~1.3x the arrays at 90% zeros
    c.kept_ports = 1u << nn::kW | 1u << nn::kWIndex | 1u << nn::kWPtr;
  if (f == nn::WeightFormat::dense && t.ports[0].dtype == DType::f32 && gemm::keeps_sgemm_panels(d.m, d.n, d.k))
    c.kept_ports = 1u << nn::kW;  // packed into column panels once per weight
  if ((f == nn::WeightFormat::int8 || f == nn::WeightFormat::int4) && t.args.get_string("activations") != "f32" &&
      quant::keeps_panels(t.args.get_int("group"), t.ports[nn::kWZero].bound(), d.m))
    c.kept_ports = 1u << nn::kW | 1u << nn::kWScale;  // the VNNI panels, packed once per weight
  return c;
}

void linear_cpu(KernelContext& ctx) {
  kutil::validate(ctx, linear_ports(), linear_check);
  const TensorView &x = ctx.port(0), &w = ctx.port(1), &b = ctx.port(2), &y = ctx.port(3), &r = ctx.port(4);
  const bool tw = ctx.arg_bool("transpose_w"), acc = r.bound(), keep = ctx.arg_bool("keep_panels");
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
        if constexpr (std::is_same_v<T, float>)  // a named weight is packed once (gemm::sgemm_panels)
          gemm::gemm(false, tw, m, n, k, T(1), xp, ld_of(x), static_cast<const T*>(w.data), ld_of(w),
                     accumulate ? T(1) : T(0), z, ldz, gemm::OperandIds{0, keep ? w.content_id : 0}, kModelGemm);
        else
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

TaskRate linear_rate(const TaskShape& t) {
  TaskRate r;
  const TensorView &x = t.ports[nn::kX], &y = t.ports[nn::kY];
  if (!x.bound() || !y.bound()) return r;
  r.m = y.rows;
  r.n = y.cols;
  r.k = x.cols;
  const std::string& f = t.args.get_string("format");
  // weight-only int8/int4 (activations=f32): an f32 GEMM on rows dequantized in cache
  const bool weight_only = (f == "int8" || f == "int4") && t.args.get_string("activations") == "f32";
  if (f.empty() || f == "dense" || weight_only) {
    r.kind = RateKind::gemm;
    r.name = x.dtype == DType::f64 ? "dgemm" : "sgemm";
  } else {
    r.kind = RateKind::kernel;
    r.name = f;
  }
  // the activation at its calibrated rate ("nn.linear.gelu", "nn.linear.silu"), as linear_cost counts it
  const std::string& a = t.args.get_string("activation");
  const bool gelu = a == "gelu" || a == "gelu_tanh";
  if (gelu || a == "silu") {
    r.epilogue = gelu ? "nn.linear.gelu" : "nn.linear.silu";
    r.epilogue_flops = double(r.m) * double(r.n) * (gelu ? 8 : 4);
  }
  return r;
}

// A weight stored compressed: its companions on the ports of the same names, and
// format/group/block (or transpose_w for a dense [n, k] companion) from its record.
namespace {

std::string linear_bind(const CompressedWeight& w, CompanionBinding& out) {
  for (const std::string& role : w.roles)
    if (role == "w_hot")
      return "'" + w.name + "' is stored " + w.format + " with int8 hot rows in " + w.src +
             ": only nn.embedding's port 'table' can read it";
  if (const ArgValue* f = w.given("format"); f && f->text != "dense")
    return "format=\"" + f->text + "\" but '" + w.name + "' is stored " + w.format + " (leave format out)";
  if (const ArgValue* tw = w.given("transpose_w"); tw && (tw->number != 0) != w.nk)
    return "transpose_w=" + tw->text + " but '" + w.name + "' is declared " + (w.nk ? "[n, k]" : "[k, n]");
  for (const std::string& role : w.roles) out.ports.emplace_back(role, role);
  if (w.format == "dense") {
    out.args.emplace_back("transpose_w", ArgValue{1, "true"});  // the companion is [n, k]
  } else {
    out.args.emplace_back("format", ArgValue{0, w.format});
    out.args.emplace_back("group", ArgValue{double(w.group), std::to_string(w.group)});
    out.args.emplace_back("block", ArgValue{double(w.block), std::to_string(w.block)});
    if (!w.activations.empty()) out.args.emplace_back("activations", ArgValue{0, w.activations});
  }
  return "";
}

}  // namespace

CompressedReader linear_reader() {
  CompressedReader r;
  r.port = "w";
  r.roles = {"w", "w_scale", "w_zero", "w_index", "w_ptr"};
  r.bind = linear_bind;
  return r;
}

}  // namespace ymlopt::transformer
