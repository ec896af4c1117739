// libFuzzer target: any bytes as a workflow file. Compiling them (XML, YvetteML
// <graph> text, expressions, params, loops, unites) must end with a DAG or with
// diagnostics: never a crash, a sanitizer report or a hang.
//
//   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DYMLOPT_FUZZ=ON
//       -DYMLOPT_BUILD_TESTS=OFF -DYMLOPT_CUDA=OFF
//   cmake --build build-fuzz -j2 --target ymlopt_fuzz_workflow
//   mkdir -p /tmp/corpus && build-fuzz/bin/ymlopt_fuzz_workflow -dict=tests/fuzz/workflow.dict
//       -max_total_time=600 -timeout=10 /tmp/corpus tests/fuzz/corpus_workflow workflows/linalg workflows/unite workflows/yml
//
// Without YMLOPT_FUZZ the same function is linked into ymlopt_fuzz_replay, which
// ctest runs over tests/fuzz/corpus_workflow (the inputs that once failed) and
// the shipped workflows.
#include <cstddef>
#include <cstdint>
#include <string>

#include "register_builtin.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/optimizer/compress_search.hpp"

namespace {

const ymlopt::ComponentRegistry& registry() {
  static const ymlopt::ComponentRegistry* reg = [] {
    auto* r = new ymlopt::ComponentRegistry;
    ymlopt::register_builtin_components(*r);
    ymlopt::opt::register_search_components(*r);
    return r;
  }();
  return *reg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ymlopt::CompileOptions o;
  o.file = "fuzz.xml";
  o.check_files = false;  // src= names are arbitrary here
  o.max_tasks = 20000;    // a huge loop must be refused, not expanded
  ymlopt::Diagnostics diags;
  const ymlopt::CompileResult r =
      ymlopt::compile_workflow_text(o.file, std::string(reinterpret_cast<const char*>(data), size), o, registry(), diags);
  // an outcome must be one or the other: a DAG without errors, or errors
  if (r.ok == (diags.error_count() > 0)) __builtin_trap();
  (void)diags.str();
  return 0;
}
