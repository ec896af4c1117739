// libFuzzer target: any bytes as a GGUF file. Parsing must end with the file or
// an IoError, and every tensor's bytes it hands out must lie in the input; a
// parsed file is then converted as `ymlopt convert X.gguf Y.safetensors`
// would, which must end with the file written or an error: never a crash, a
// sanitizer report or a hang. Built and replayed like fuzz_workflow.cpp:
//
//   build-fuzz/bin/ymlopt_fuzz_gguf -max_total_time=600 /tmp/gcorpus tests/fuzz/corpus_gguf
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "gguf_model.hpp"
#include "io/gguf.hpp"
#include "io/tensor_file.hpp"

namespace {

std::string scratch(const char* ext) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return dir + "/ymlopt_fuzz_gguf_" + std::to_string(getpid()) + ext;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace gg = ymlopt::io::gguf;
  const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(data), size};
  try {
    const gg::File f = gg::parse(bytes, "fuzz.gguf");
    volatile std::byte sink{};
    for (const gg::TensorInfo& t : f.tensors) {
      const auto d = f.data(t);
      if (d.empty()) continue;
      sink = d[0];  // ASan sees a read outside the input
      sink = d[d.size() - 1];
    }
    (void)sink;
  } catch (const ymlopt::io::IoError&) {
    return 0;
  }
  const std::string in = scratch(".gguf"), out = scratch(".safetensors");
  {
    std::ofstream f(in, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    (void)ymlopt::import_gguf(in, out);
  } catch (const std::exception&) {
  }
  unlink(in.c_str());
  unlink(out.c_str());
  return 0;
}
