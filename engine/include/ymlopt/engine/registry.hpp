#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ymlopt/sdk.hpp>

namespace ymlopt {

/// The engine's component registry: built-ins plus plugins loaded with --plugin.
///
///   ComponentRegistry reg;
///   register_builtin_components(reg);
///   reg.load_plugin("libmyops.so");       // throws std::runtime_error on failure
///   const ComponentSpec* g = reg.find("blas.gemm");
class ComponentRegistry final : public Registry {
 public:
  void add(ComponentSpec spec) override;
  const ComponentSpec* find(std::string_view name) const override;
  /// Sorted names of every registered component.
  std::vector<std::string> names() const;
  std::vector<const ComponentSpec*> all() const;
  /// dlopen()s a plugin, checks its SDK ABI version and registers its components.
  void load_plugin(const std::string& path);

 private:
  std::vector<std::unique_ptr<ComponentSpec>> specs_;
  std::unordered_map<std::string, const ComponentSpec*> by_name_;
};

}  // namespace ymlopt
