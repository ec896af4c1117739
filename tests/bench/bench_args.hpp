// Command-line options of the standalone benchmark programs (header only, no
// engine): `--name value` pairs anywhere after the program name.
//
//   const long n = bench::arg(argc, argv, "--n", 2000);
//   const char* only = bench::arg_s(argc, argv, "--only", "");
#pragma once
#include <cstdlib>
#include <cstring>

namespace bench {

/// The value after `name`, else `def`.
inline const char* arg_s(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

/// The number after `name` (strtod: integers, decimals, exponents), else `def`.
inline double arg(int argc, char** argv, const char* name, double def) {
  const char* s = arg_s(argc, argv, name, nullptr);
  return s ? std::strtod(s, nullptr) : def;
}

}  // namespace bench
