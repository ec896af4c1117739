// libFuzzer target: any bytes as a tensor file. The first byte picks the
// reader: a .safetensors file, a .npy file, or a TF.js model.json (manifest and
// topology). Reading them must end with the data or an IoError: never a crash,
// a sanitizer report, a read outside the mapping or a hang. Built and replayed
// like fuzz_workflow.cpp:
//
//   build-fuzz/bin/ymlopt_fuzz_tensor_file -max_total_time=600 /tmp/tcorpus tests/fuzz/corpus_tensor_file
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "io/tensor_file.hpp"
#include "io/tfjs.hpp"

namespace {

/// A file of this process under /dev/shm (or /tmp), rewritten per input.
std::string scratch(const char* ext) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return dir + "/ymlopt_fuzz_" + std::to_string(getpid()) + ext;
}

void read_all(const std::string& path) {
  using namespace ymlopt::io;
  try {
    (void)read_metadata(path);
  } catch (const IoError&) {
  }
  std::vector<TensorInfo> infos;
  try {
    infos = list_tensors(path);
  } catch (const IoError&) {
    return;
  }
  try {
    MappedTensorFile f(path);
    for (const auto& i : infos) {
      TensorInfo got;
      std::byte* p = f.tensor(i.name, &got);
      std::int64_t n = got.dtype ? std::int64_t(ymlopt::dtype_size(*got.dtype)) : 0;
      for (auto d : got.shape) n *= d;
      // every byte the reader hands out must lie in the mapping (ASan sees a read past it)
      volatile std::byte sink{};
      if (n > 0) sink = p[n - 1];
      (void)sink;
    }
  } catch (const IoError&) {
  }
  for (const auto& i : infos) {
    try {
      (void)load_tensor(path, i.name);
    } catch (const IoError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 3;
  const std::string path = scratch(kind == 0 ? ".safetensors" : kind == 1 ? ".npy" : ".json");
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + 1), std::streamsize(size - 1));
  }
  if (kind < 2) {
    read_all(path);
  } else {
    try {
      (void)ymlopt::io::read_tfjs_manifest(path);
    } catch (const ymlopt::io::IoError&) {
    }
    try {
      (void)ymlopt::io::list_tfjs_nodes(path);
    } catch (const ymlopt::io::IoError&) {
    }
  }
  unlink(path.c_str());
  return 0;
}
