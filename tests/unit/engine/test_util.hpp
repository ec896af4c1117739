#pragma once
#include <gtest/gtest.h>

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

/// The DAG of a workflow that must compile (a failure is reported, with the diagnostics).
inline Dag compile_ok(const std::string& xml) {
  Diagnostics diags;
  CompileResult r = compile(xml, diags);
  EXPECT_TRUE(r.ok) << diags.str();
  return std::move(r.dag);
}

}  // namespace ymlopt::test
