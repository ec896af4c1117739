// Helpers shared by the eigen.* component files (components.cpp,
// workflow_components.cpp): check-message pieces and the double copy of an
// f32/f64 input matrix. Internal to the family.
//
//   const eigen_util::DoubleMatrix d(ctx.port(0));   // d.data, d.ld: row-major doubles
//   if (auto m = eigen_util::k_and_subspace(args, n); !m.empty()) return m;
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ymlopt/kernel_util.hpp>

namespace ymlopt::eigen_util {

/// "" when the (optional, unbound passes) port i is rows x cols.
inline std::string expect_shape(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                                std::int64_t rows, std::int64_t cols, const std::string& why) {
  if (!p[i].bound()) return "";
  if (p[i].rows == rows && p[i].cols == cols) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(p[i]) + " but expected " + std::to_string(rows) + "x" +
         std::to_string(cols) + " (" + why + ")";
}

/// "" when int param `name` is >= lo.
inline std::string int_at_least(const Args& a, const char* name, std::int64_t lo) {
  const std::int64_t v = a.get_int(name);
  if (v >= lo) return "";
  return "param '" + std::string(name) + "' is " + std::to_string(v) + ": must be >= " + std::to_string(lo);
}

/// k in [1, n] and subspace 0 (auto) or in (k, n] (or exactly n).
inline std::string k_and_subspace(const Args& a, std::int64_t n) {
  const std::int64_t k = a.get_int("k"), m = a.get_int("subspace");
  if (k < 1 || k > n) return "param 'k' is " + std::to_string(k) + ": must be in [1, n = " + std::to_string(n) + "]";
  if (m < 0) return "param 'subspace' is " + std::to_string(m) + ": must be >= 0 (0: automatic)";
  const std::int64_t me = std::min(m, n);
  if (m != 0 && me <= k && me < n)
    return "param 'subspace' is " + std::to_string(m) + ": must exceed k = " + std::to_string(k) +
           " (or be >= n = " + std::to_string(n) + ")";
  return "";
}

/// The subspace size used: min(n, subspace), or min(n, max(2k+1, k+20)) for 0.
inline std::int64_t auto_subspace(const Args& a, std::int64_t n) {
  const std::int64_t k = a.get_int("k"), m = a.get_int("subspace");
  return std::min(n, m > 0 ? m : std::max<std::int64_t>(2 * k + 1, k + 20));
}

/// The input as a row-major double matrix: a view on f64 data, or a copy of f32 data.
struct DoubleMatrix {
  const double* data = nullptr;
  std::int64_t ld = 0;
  std::vector<double> copy;
  explicit DoubleMatrix(const TensorView& v) {
    if (v.dtype == DType::f64) {
      data = static_cast<const double*>(v.data);
      ld = std::max<std::int64_t>(v.ld, v.cols);
      return;
    }
    copy.resize(static_cast<std::size_t>(v.rows * v.cols));
    for (std::int64_t r = 0; r < v.rows; ++r)
      for (std::int64_t c = 0; c < v.cols; ++c)
        copy[static_cast<std::size_t>(r * v.cols + c)] = static_cast<const float*>(v.data)[r * v.ld + c];
    data = copy.data();
    ld = v.cols;
  }
};

}  // namespace ymlopt::eigen_util
