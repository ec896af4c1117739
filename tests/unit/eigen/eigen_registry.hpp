// The eigen.* components, registered once per test binary, and the message of a
// run that throws: what the eigen tests share.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen/eigen.hpp"

namespace ymlopt::eigtest {

inline const test::TestRegistry& registry() {
  static const test::TestRegistry reg = [] {
    test::TestRegistry r;
    register_eigen(r);
    return r;
  }();
  return reg;
}

/// The KernelError message of running component `name`, or "" when it runs.
inline std::string run_error(const std::string& name, std::vector<TensorView> ports,
                             const std::map<std::string, std::string>& args) {
  try {
    test::run(registry(), name, std::move(ports), args);
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

}  // namespace ymlopt::eigtest
