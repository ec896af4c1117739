// The eigen.* components, registered once per test binary, and the message of a
// run that throws: what the eigen tests share.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen/eigen.hpp"
#include <cstdint>

namespace ymlopt::eigtest {

inline const test::TestRegistry& registry() {
  static const test::TestRegistry reg = [] {
    test::TestRegistry r;
    register_eigen(r);
    return r;
  }();
  return reg;
}

/// A row vector's view as a 1-D port [cols].
template <class T> TensorView vec_view(test::Mat<T>& m) {
  TensorView v = m.view();
  v.shape = {m.cols};
  return v;
}

/// A CSR matrix on ports: values [cap] (T), columns and row pointers (i32); the
/// tail past nnz holds `tail` (never read).
template <class T> struct CsrPorts {
  test::Mat<T> val;
  test::Mat<std::int32_t> col, ptr;
  CsrPorts(const eigen::CsrMatrix& s, std::int64_t cap, T tail = T(0))
      : val(1, cap, 0, test::default_dtype<T>(), tail), col(1, cap, 0, DType::i32, -5), ptr(1, s.rows + 1) {
    for (std::int64_t i = 0; i <= s.rows; ++i) ptr(0, i) = static_cast<std::int32_t>(s.row_ptr[static_cast<std::size_t>(i)]);
    for (std::int64_t e = 0; e < s.nnz(); ++e) {
      val(0, e) = static_cast<T>(s.val[static_cast<std::size_t>(e)]);
      col(0, e) = static_cast<std::int32_t>(s.col[static_cast<std::size_t>(e)]);
    }
  }
  TensorView a() { return vec_view(val); }
  TensorView index() { return vec_view(col); }
  TensorView rows() { return vec_view(ptr); }
};

/// The KernelError message of running eigen component `name`, or "" when it runs.
inline std::string run_error(const std::string& name, std::vector<TensorView> ports,
                             const std::map<std::string, std::string>& args) {
  return test::run_error(registry(), name, std::move(ports), args);
}

}  // namespace ymlopt::eigtest
