// Runs LLVMFuzzerTestOneInput once on each file named, or on each file of each
// folder named: the fuzz targets' regression inputs under ctest, with GCC and
// without libFuzzer.
//
//   ymlopt_fuzz_replay_workflow tests/fuzz/corpus_workflow workflows
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::cerr << "ymlopt_fuzz_replay: " << p.string() << ": no such file or folder\n";
      return 2;
    }
  }
  if (files.empty()) {
    std::cerr << "usage: ymlopt_fuzz_replay_NAME FILE|FOLDER...\n";
    return 2;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replayed " << files.size() << " inputs\n";
  return 0;
}
