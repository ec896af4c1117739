#pragma once
#include <string>
#include <vector>

namespace ymlopt {
/// Entry point of the `ymlopt` command line; returns the process exit code
/// (0 success, 1 bad workflow or failed run, 2 bad usage).
int cli_main(const std::vector<std::string>& args);
}  // namespace ymlopt
