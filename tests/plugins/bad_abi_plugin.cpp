// Test plugin that claims an SDK ABI version this ymlopt does not provide.
// The entry points are written by hand (not with YMLOPT_PLUGIN) so that the
// version can be wrong; the engine must refuse it before calling register.
#include <ymlopt/sdk.hpp>

#include <cstdio>
#include <cstdlib>

extern "C" int ymlopt_plugin_abi_version() { return 999; }

extern "C" void ymlopt_plugin_register(::ymlopt::Registry&) {
  std::fputs("bad_abi_plugin: ymlopt_plugin_register must not be called\n", stderr);
  std::abort();
}
