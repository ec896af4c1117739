// The tiny seeded GPT-2 the optimizer tests compress: a temporary folder with
// its weights (`ymlopt model init --arch gpt2 --preset tiny --seed SEED`) and
// 16 token ids (i * STRIDE + OFFSET) % 512 as .npy, removed when it goes.
//
//   static const TinyGpt2 t("compress", 3, 37, 5);
//   compile_workflow({kModel, t.set_pairs()}, reg, diags);  // or t.set_line()
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"

struct TinyGpt2 {
  std::filesystem::path dir;
  std::string weights, ids;

  TinyGpt2(const std::string& tag, int seed, std::int32_t stride, std::int32_t offset) {
    dir = std::filesystem::temp_directory_path() / ("ymlopt-" + tag + "-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    weights = (dir / "g.safetensors").string();
    if (ymlopt::cli_main({"model", "init", "--arch", "gpt2", "--preset", "tiny", "--seed", std::to_string(seed), weights}) !=
        0)
      throw std::runtime_error("model init failed");
    ids = (dir / "ids.npy").string();
    std::string hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (16,), }";
    hdr += std::string(63 - (10 + hdr.size()) % 64, ' ') + "\n";
    std::ofstream f(ids, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const std::uint16_t n = std::uint16_t(hdr.size());
    f.write(reinterpret_cast<const char*>(&n), 2);
    f << hdr;
    for (std::int32_t i = 0; i < 16; ++i) {
      const std::int32_t v = (i * stride + offset) % 512;
      f.write(reinterpret_cast<const char*>(&v), 4);
    }
  }
  TinyGpt2(const TinyGpt2&) = delete;
  ~TinyGpt2() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  /// The workflow parameters of gpt2.xml for this model, as compile sets.
  std::vector<std::pair<std::string, std::string>> set_pairs() const {
    return {{"weights", weights}, {"ids", ids},     {"batch", "1"},   {"seq", "16"},     {"layers", "2"},
            {"width", "96"},      {"heads", "3"}, {"vocab", "512"}, {"context", "64"}, {"tile_n", "32"}};
  }
  /// The same as one "k=v k=v ..." line.
  std::string set_line() const {
    std::string s;
    for (const auto& [k, v] : set_pairs()) s += (s.empty() ? "" : " ") + k + "=" + v;
    return s;
  }
};
