// The version `ymlopt version`, run logs and reports print.
#pragma once

namespace ymlopt {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace ymlopt
