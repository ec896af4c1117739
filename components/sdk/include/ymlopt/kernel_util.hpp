// Kernel helpers for component authors (installed with the SDK; the built-in
// families and examples/plugin use them alike): dtype sets and dispatch, scalar
// conversions between storage types, shape descriptions and checks for `check`
// messages, a default cost, runtime validation of bound views, and one way to
// register a component.
//
//   #include <ymlopt/kernel_util.hpp>
//   using namespace ymlopt;
//   std::string scale_check(const TaskShape& t) {
//     return kutil::first_error({kutil::float_dtype(ports, t.ports, 0), kutil::same_shape(ports, t.ports, 0, 1)});
//   }
//   void scale_cpu(KernelContext& ctx) {
//     kutil::validate(ctx, ports, scale_check);
//     kutil::dispatch_float(ctx.port(0).dtype, [&](auto tag) { using T = typename decltype(tag)::type; ... });
//   }
//   kutil::add_component(reg, "my.scale", "y = a x", ports, params, scale_cpu, scale_check, scale_cost);
#pragma once

#include <ymlopt/sdk.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <ymlopt/half.hpp>

namespace ymlopt::kutil {

using half::bf16_t;
using half::f16_t;

/// Storage type of each dtype.
template <DType D> struct storage;
template <> struct storage<DType::f32> { using type = float; };
template <> struct storage<DType::f64> { using type = double; };
template <> struct storage<DType::f16> { using type = f16_t; };
template <> struct storage<DType::bf16> { using type = bf16_t; };
template <> struct storage<DType::i8> { using type = std::int8_t; };
template <> struct storage<DType::i32> { using type = std::int32_t; };

/// The floating-point dtypes most kernels accept (PortSpec::dtypes).
inline const std::vector<DType> kFloat = {DType::f32, DType::f64};

template <class T> struct tag {
  using type = T;
};

/// Calls f(tag<T>{}) with T the storage type of `t`.
template <class F> decltype(auto) dispatch_any(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(tag<float>{});
    case DType::f64: return f(tag<double>{});
    case DType::f16: return f(tag<f16_t>{});
    case DType::bf16: return f(tag<bf16_t>{});
    case DType::i8: return f(tag<std::int8_t>{});
    case DType::i32: return f(tag<std::int32_t>{});
  }
  throw KernelError("unknown dtype");
}

/// Calls f(tag<float>{}) or f(tag<double>{}); other dtypes are a KernelError.
template <class F> decltype(auto) dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(tag<float>{});
    case DType::f64: return f(tag<double>{});
    default: break;
  }
  throw KernelError(std::string("unsupported dtype ") + dtype_name(t) + " (expected f32 or f64)");
}

// ---- scalar conversions (one rounding, saturating integers) ----------------

template <class S> inline double to_double(S v) {
  if constexpr (std::is_same_v<S, f16_t>) return half::f16_bits_to_double(v.bits);
  else if constexpr (std::is_same_v<S, bf16_t>) return half::bf16_bits_to_double(v.bits);
  else return static_cast<double>(v);
}

/// double -> integer: round to nearest (ties to even), saturate, NaN -> 0.
template <class I> inline I saturate_round(double d) {
  if (std::isnan(d)) return I{0};
  const double r = std::nearbyint(d);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}

template <class D> inline D from_double(double d) {
  if constexpr (std::is_same_v<D, f16_t>) return f16_t{half::f16_bits_from_double(d)};
  else if constexpr (std::is_same_v<D, bf16_t>) return bf16_t{half::bf16_bits_from_double(d)};
  else if constexpr (std::is_integral_v<D>) return saturate_round<D>(d);
  else return static_cast<D>(d);
}

/// Converts one element from storage type S to storage type D.
template <class D, class S> inline D convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bf16_t>)
    return bf16_t{half::bf16_bits_from_float(v)};
  else if constexpr (std::is_same_v<S, bf16_t> && std::is_same_v<D, float>)
    return half::bf16_bits_to_float(v.bits);
  else return from_double<D>(to_double(v));
}

// ---- descriptions for check messages ----------------------------------------

/// "4x3" (rows x cols of the 2-D view), plus the logical shape when it is not 2-D.
inline std::string dims(const TensorView& v) {
  std::string s = std::to_string(v.rows) + "x" + std::to_string(v.cols);
  if (v.shape.size() != 2 && !v.shape.empty()) {
    s += " (shape ";
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
      if (i) s += 'x';
      s += std::to_string(v.shape[i]);
    }
    s += ")";
  }
  return s;
}

/// The first non-empty message of a list of checks ("" when all pass).
inline std::string first_error(std::initializer_list<std::string> msgs) {
  for (const std::string& m : msgs)
    if (!m.empty()) return m;
  return "";
}

/// "" when the dtypes of ports i and j agree, else a message.
inline std::string same_dtype(const std::vector<PortSpec>& specs, std::span<const TensorView> p,
                              std::size_t i, std::size_t j) {
  if (p[i].dtype == p[j].dtype) return "";
  return "port '" + specs[i].name + "' has dtype " + dtype_name(p[i].dtype) + " but port '" +
         specs[j].name + "' has dtype " + dtype_name(p[j].dtype) + ": dtypes must match";
}

/// "" when port i's dtype is f32 or f64, else a message.
inline std::string float_dtype(const std::vector<PortSpec>& specs, std::span<const TensorView> p,
                               std::size_t i) {
  if (p[i].dtype == DType::f32 || p[i].dtype == DType::f64) return "";
  return "port '" + specs[i].name + "' has dtype " + dtype_name(p[i].dtype) +
         ": only f32 and f64 are supported";
}

/// "" when ports i and j have the same 2-D shape, else a message.
inline std::string same_shape(const std::vector<PortSpec>& specs, std::span<const TensorView> p,
                              std::size_t i, std::size_t j) {
  if (p[i].rows == p[j].rows && p[i].cols == p[j].cols) return "";
  return "port '" + specs[i].name + "' is " + dims(p[i]) + " but port '" + specs[j].name + "' is " +
         dims(p[j]) + ": shapes must match";
}

/// "" when port i is square, else a message.
inline std::string square(const std::vector<PortSpec>& specs, std::span<const TensorView> p,
                          std::size_t i) {
  if (p[i].rows == p[i].cols) return "";
  return "port '" + specs[i].name + "' is " + dims(p[i]) + ": a square matrix is required";
}

/// Number of ports, and that the required ones are bound (shape-wise).
inline std::string ports_present(const std::vector<PortSpec>& specs, std::span<const TensorView> p) {
  if (p.size() != specs.size())
    return "expected " + std::to_string(specs.size()) + " ports, got " + std::to_string(p.size());
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (!specs[i].optional && !p[i].bound()) return "port '" + specs[i].name + "' is not bound";
  return "";
}

/// Returns a message when one of `values` is not accepted for string param `name`.
inline std::string one_of(const Args& args, const char* name, std::initializer_list<const char*> values) {
  const std::string& v = args.get_string(name);
  std::string list;
  for (const char* a : values) {
    if (v == a) return "";
    list += list.empty() ? "'" : ", '";
    list += a;
    list += '\'';
  }
  return "param '" + std::string(name) + "' is '" + v + "': expected one of " + list;
}

/// Bytes of the 2-D view (rows x cols elements).
inline double bytes_of(const TensorView& v) {
  return static_cast<double>(v.rows) * static_cast<double>(v.cols) * static_cast<double>(dtype_size(v.dtype));
}

/// Default cost: every bound port read once (in), written once (out), or both (inout).
inline Cost io_cost(const std::vector<PortSpec>& specs, const TaskShape& t, double flops) {
  Cost c;
  c.flops = flops;
  for (std::size_t i = 0; i < t.ports.size() && i < specs.size(); ++i) {
    const double b = bytes_of(t.ports[i]);
    c.bytes += specs[i].access == Access::read_write ? 2 * b : b;
  }
  return c;
}

// ---- runtime validation ------------------------------------------------------

/// Runs `check` on the kernel's bound views, and validates what the kernels
/// rely on (data present, ld >= cols); throws KernelError on a problem. Cheap
/// compared to any kernel, and turns a binding bug into an error instead of UB.
template <class Check>
void validate(KernelContext& ctx, const std::vector<PortSpec>& specs, Check&& check) {
  if (ctx.num_ports() != specs.size())
    throw KernelError("expected " + std::to_string(specs.size()) + " ports, got " +
                      std::to_string(ctx.num_ports()));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorView& v = ctx.port(i);
    const bool unbound = !v.bound();
    if (!unbound) {
      if (v.rows < 0 || v.cols < 0)
        throw KernelError("port '" + specs[i].name + "' has a negative dimension");
      if (v.size() > 0 && v.data == nullptr) throw KernelError("port '" + specs[i].name + "' has no data");
      if (v.rows > 1 && v.ld < v.cols)
        throw KernelError("port '" + specs[i].name + "' has ld " + std::to_string(v.ld) + " < cols " +
                          std::to_string(v.cols));
    } else if (!specs[i].optional) {
      throw KernelError("port '" + specs[i].name + "' is not bound");
    }
    if (!specs[i].dtypes.empty() && !unbound) {
      bool ok = false;
      for (DType d : specs[i].dtypes) ok = ok || d == v.dtype;
      if (!ok)
        throw KernelError("port '" + specs[i].name + "' has unsupported dtype " + dtype_name(v.dtype));
    }
  }
  const std::string msg = check(TaskShape{ctx.ports(), ctx.args()});
  if (!msg.empty()) throw KernelError(msg);
}

/// A component from its parts (the common shape of every family's list);
/// `cuda` and `cuda_check` are optional (ComponentSpec::cuda). Set further
/// hooks on it, then Registry::add it:
///   ComponentSpec s = kutil::make_component("my.gemm", "C = A B", ports, {}, gemm_cpu, gemm_check, gemm_cost);
///   s.rate = gemm_rate;
///   reg.add(std::move(s));
inline ComponentSpec make_component(const char* name, const char* doc, const std::vector<PortSpec>& ports,
                                    std::vector<ParamSpec> params, KernelFn cpu,
                                    std::string (*check)(const TaskShape&), Cost (*cost)(const TaskShape&),
                                    KernelFn cuda = nullptr, std::string (*cuda_check)(const TaskShape&) = nullptr) {
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
  return s;
}

/// Registers a component from its parts (make_component).
inline void add_component(Registry& reg, const char* name, const char* doc, const std::vector<PortSpec>& ports,
                          std::vector<ParamSpec> params, KernelFn cpu, std::string (*check)(const TaskShape&),
                          Cost (*cost)(const TaskShape&), KernelFn cuda = nullptr,
                          std::string (*cuda_check)(const TaskShape&) = nullptr) {
  reg.add(make_component(name, doc, ports, std::move(params), cpu, check, cost, cuda, cuda_check));
}

}  // namespace ymlopt::kutil
