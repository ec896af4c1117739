// Test helpers for the built-in components: a std::map Registry, an owning
// strided matrix, a KernelContext that runs one component's CPU kernel, and
// naive long-double references.
#pragma once

#include <ymlopt/sdk.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ymlopt::test {

/// Minimal Registry: a map from name to spec.
class TestRegistry : public Registry {
 public:
  void add(ComponentSpec spec) override {
    if (spec.name.empty() || !spec.cpu) throw std::invalid_argument("bad spec '" + spec.name + "'");
    if (specs.count(spec.name)) throw std::invalid_argument("duplicate component '" + spec.name + "'");
    std::string name = spec.name;
    specs.emplace(std::move(name), std::move(spec));
  }
  const ComponentSpec* find(std::string_view name) const override {
    auto it = specs.find(std::string(name));
    return it == specs.end() ? nullptr : &it->second;
  }
  const ComponentSpec& get(const std::string& name) const {
    const ComponentSpec* s = find(name);
    if (!s) throw std::out_of_range("no component '" + name + "'");
    return *s;
  }
  std::map<std::string, ComponentSpec> specs;
};

template <class T> constexpr DType default_dtype() {
  if constexpr (std::is_same_v<T, std::uint16_t>) return DType::f16;  // or bf16, pass it explicitly
  else return dtype_of<T>();
}

/// An owning row-major matrix with a leading dimension (ld >= cols; padding is
/// filled with a sentinel so tests can check that kernels leave it alone).
template <class T> struct Mat {
  std::int64_t rows = 0, cols = 0, ld = 0;
  DType dtype = default_dtype<T>();
  std::vector<T> buf;

  Mat() = default;
  Mat(std::int64_t r, std::int64_t c, std::int64_t pad = 0, DType dt = default_dtype<T>(), T sentinel = T(77))
      : rows(r), cols(c), ld(c + pad), dtype(dt), buf(static_cast<std::size_t>(std::max<std::int64_t>(r * (c + pad), 1)), sentinel) {}

  T& operator()(std::int64_t r, std::int64_t c) { return buf[static_cast<std::size_t>(r * ld + c)]; }
  const T& operator()(std::int64_t r, std::int64_t c) const { return buf[static_cast<std::size_t>(r * ld + c)]; }

  TensorView view() {
    TensorView v;
    v.data = buf.data();
    v.dtype = dtype;
    v.rows = rows;
    v.cols = cols;
    v.ld = ld;
    v.shape = {rows, cols};
    return v;
  }
  void random(std::uint32_t seed, double lo = -1, double hi = 1) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) (*this)(r, c) = static_cast<T>(d(gen));
  }
};

/// A view with a shape and no data, as `check` and `cost` see it.
inline TensorView shape_view(DType dt, std::int64_t rows, std::int64_t cols) {
  TensorView v;
  v.dtype = dt;
  v.rows = rows;
  v.cols = cols;
  v.ld = cols;
  v.shape = {rows, cols};
  return v;
}

/// Args from the spec's defaults and `overrides` (name -> text).
inline Args make_args(const ComponentSpec& spec, const std::map<std::string, std::string>& overrides) {
  for (const auto& [k, v] : overrides) {
    bool known = false;
    for (const ParamSpec& p : spec.params) known = known || p.name == k;
    if (!known) throw std::invalid_argument("no param '" + k + "' in " + spec.name);
  }
  std::vector<ArgValue> values;
  for (const ParamSpec& p : spec.params) {
    auto it = overrides.find(p.name);
    const std::string text = it != overrides.end() ? it->second : p.default_value;
    ArgValue a;
    a.text = text;
    switch (p.type) {
      case ParamType::bool_: a.number = (text == "true" || text == "1") ? 1 : 0; break;
      case ParamType::int_:
      case ParamType::float_: a.number = std::stod(text); break;
      case ParamType::string_: break;
    }
    values.push_back(a);
  }
  return Args(&spec.params, std::move(values));
}

/// Runs one task's CPU kernel in-process.
class TestContext : public KernelContext {
 public:
  TestContext(const ComponentSpec& spec, std::vector<TensorView> ports,
              const std::map<std::string, std::string>& args = {})
      : spec_(spec), ports_(std::move(ports)), args_(make_args(spec, args)) {}

  std::span<const TensorView> ports() const override { return ports_; }
  const Args& args() const override { return args_; }
  void report(std::string key, double value) override { reports[std::move(key)] = value; }
  const std::string& run_dir() const override { return run_dir_; }

  void run() { spec_.cpu(*this); }
  std::string check() const { return spec_.check(TaskShape{ports_, args_}); }
  Cost cost() const { return spec_.cost(TaskShape{ports_, args_}); }

  std::map<std::string, double> reports;

 private:
  const ComponentSpec& spec_;
  std::vector<TensorView> ports_;
  Args args_;
  std::string run_dir_ = ".";
};

/// Appends unbound views for trailing optional ports the caller left out
/// (components grow optional ports; tests name only those they use).
inline std::vector<TensorView> pad_optional(const ComponentSpec& s, std::vector<TensorView> ports) {
  bool optional_tail = ports.size() < s.ports.size();
  for (std::size_t i = ports.size(); i < s.ports.size(); ++i) optional_tail = optional_tail && s.ports[i].optional;
  if (optional_tail) ports.resize(s.ports.size());
  return ports;
}

/// Runs component `name` on `ports`; returns its reports.
inline std::map<std::string, double> run(const Registry& reg, const std::string& name, std::vector<TensorView> ports,
                                         const std::map<std::string, std::string>& args = {}) {
  const ComponentSpec* s = reg.find(name);
  if (!s) throw std::out_of_range("no component '" + name + "'");
  TestContext ctx(*s, pad_optional(*s, std::move(ports)), args);
  ctx.run();
  return ctx.reports;
}

/// The KernelError message of running component `name`, or "" when it runs.
inline std::string run_error(const Registry& reg, const std::string& name, std::vector<TensorView> ports,
                             const std::map<std::string, std::string>& args = {}) {
  try {
    run(reg, name, std::move(ports), args);
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

/// `check` of component `name` on shape-only views.
inline std::string check(const Registry& reg, const std::string& name, std::vector<TensorView> ports,
                         const std::map<std::string, std::string>& args = {}) {
  const ComponentSpec* s = reg.find(name);
  if (!s) throw std::out_of_range("no component '" + name + "'");
  return TestContext(*s, pad_optional(*s, std::move(ports)), args).check();
}

/// Naive reference C = alpha*op(A)*op(B) + beta*C in long double.
template <class T>
std::vector<long double> naive_gemm(const Mat<T>& a, const Mat<T>& b, const Mat<T>& c, bool ta, bool tb,
                                    long double alpha, long double beta) {
  const std::int64_t m = c.rows, n = c.cols, k = ta ? a.rows : a.cols;
  std::vector<long double> out(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double s = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const long double av = ta ? a(p, i) : a(i, p);
        const long double bv = tb ? b(j, p) : b(p, j);
        s += av * bv;
      }
      out[static_cast<std::size_t>(i * n + j)] = alpha * s + beta * static_cast<long double>(c(i, j));
    }
  return out;
}

/// max |x - ref| / max(|ref|) over the matrix (ref row-major, x.rows x x.cols).
template <class T> double max_rel_err(const Mat<T>& x, const std::vector<long double>& ref) {
  long double err = 0, scale = 0;
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t j = 0; j < x.cols; ++j) {
      const long double r = ref[static_cast<std::size_t>(i * x.cols + j)];
      err = std::max(err, std::fabs(static_cast<long double>(x(i, j)) - r));
      scale = std::max(scale, std::fabs(r));
    }
  return static_cast<double>(err / std::max(scale, 1e-30L));
}

template <class T> constexpr double eps() { return std::is_same_v<T, float> ? 1e-5 : 1e-13; }

}  // namespace ymlopt::test
