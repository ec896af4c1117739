#include "blas_peak.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "report.hpp"
#include "ymlopt/engine/perf_model.hpp"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace ymlopt {
namespace {

double measure(int threads) {
  const int n = 1024;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.0f);
  openblas_set_num_threads(threads);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  openblas_set_num_threads(1);
  return best;
}

}  // namespace

double blas_peak_gflops(double achieved) {
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const std::string key = cpu_model_name() + " | " + openblas_get_corename() + " | " + std::to_string(threads) + " threads";
  const std::filesystem::path dir = ymlopt_cache_dir();
  const std::filesystem::path file = dir / "blas-peak.json";
  nlohmann::json cache = nlohmann::json::object();
  if (!dir.empty()) {
    std::ifstream in(file);
    if (in) {
      try {
        in >> cache;
      } catch (const std::exception&) {
        cache = nlohmann::json::object();
      }
    }
    if (cache.is_object() && cache.contains(key) && cache[key].is_number() && cache[key].get<double>() >= achieved)
      return cache[key].get<double>();
  }
  double g = measure(threads);
  if (cache.is_object() && cache.contains(key) && cache[key].is_number()) g = std::max(g, cache[key].get<double>());
  if (!dir.empty() && cache.is_object()) {
    try {
      std::filesystem::create_directories(dir);
      cache[key] = g;
      write_file_atomic(file.string(), cache.dump(1) + "\n");
    } catch (const std::exception&) {
      // a read-only home only costs a new measurement next time
    }
  }
  return g;
}

}  // namespace ymlopt
