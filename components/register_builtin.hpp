#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers every built-in component family (explicit list, no static initializers).
void register_builtin_components(Registry& reg);
}  // namespace ymlopt
