#pragma once
#include <string>

#include "register_builtin.hpp"
#include "ymlopt/engine/compiler.hpp"

namespace ymlopt::test {

inline const ComponentRegistry& builtins() {
  static const ComponentRegistry reg = [] {
    ComponentRegistry r;
    register_builtin_components(r);
    return r;
  }();
  return reg;
}

/// Compiles an in-memory workflow; on failure `diags` holds the messages.
inline CompileResult compile(const std::string& xml, Diagnostics& diags,
                             std::vector<std::pair<std::string, std::string>> sets = {}) {
  CompileOptions o;
  o.sets = std::move(sets);
  return compile_workflow_text("test.xml", xml, o, builtins(), diags);
}

}  // namespace ymlopt::test
