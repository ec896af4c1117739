#pragma once
#include <stdexcept>

namespace ymlopt {
/// A command-line mistake: the CLI prints it with the usage and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace ymlopt
