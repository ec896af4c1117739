#include "ymlopt/engine/registry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace ymlopt {

void ComponentRegistry::add(ComponentSpec spec) {
  const std::string& n = spec.name;
  const auto dot = n.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == n.size())
    throw std::invalid_argument("component name '" + n + "' must be 'family.op'");
  if (by_name_.count(n)) throw std::invalid_argument("component '" + n + "' is registered twice");
  if (!spec.cpu) throw std::invalid_argument("component '" + n + "' has no CPU implementation");
  std::set<std::string> seen;
  for (const auto& p : spec.ports)
    if (!seen.insert(p.name).second)
      throw std::invalid_argument("component '" + n + "': port '" + p.name + "' declared twice");
  for (const auto& p : spec.params)
    if (!seen.insert(p.name).second)
      throw std::invalid_argument("component '" + n + "': parameter '" + p.name + "' clashes with another port or parameter");
  specs_.push_back(std::make_unique<ComponentSpec>(std::move(spec)));
  by_name_[specs_.back()->name] = specs_.back().get();
}

const ComponentSpec* ComponentRegistry::find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> ComponentRegistry::names() const {
  std::vector<std::string> v;
  for (const auto& s : specs_) v.push_back(s->name);
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<const ComponentSpec*> ComponentRegistry::all() const {
  std::vector<const ComponentSpec*> v;
  for (const auto& s : specs_) v.push_back(s.get());
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return v;
}

void ComponentRegistry::load_plugin(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(path + ": cannot load plugin: " + dlerror());
  using VersionFn = int (*)();
  using RegisterFn = void (*)(Registry&);
  auto version = reinterpret_cast<VersionFn>(dlsym(h, "ymlopt_plugin_abi_version"));
  auto reg = reinterpret_cast<RegisterFn>(dlsym(h, "ymlopt_plugin_register"));
  if (!version || !reg) {
    dlclose(h);
    throw std::runtime_error(path + ": not a ymlopt plugin (no ymlopt_plugin_abi_version/ymlopt_plugin_register; use YMLOPT_PLUGIN)");
  }
  const int v = version();
  if (v != kSdkAbiVersion) {
    dlclose(h);
    throw std::runtime_error(path + ": plugin built for SDK ABI version " + std::to_string(v) +
                             ", this ymlopt provides version " + std::to_string(kSdkAbiVersion) +
                             "; rebuild it against this ymlopt");
  }
  try {
    reg(*this);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": plugin registration failed: " + e.what());
  }
  // The handle stays open: the registered kernels live in the plugin.
}

}  // namespace ymlopt
