// Small helpers shared by the ymlopt benchmark programs (tests/bench).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "starpu_backend.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/scheduler/executor.hpp"

namespace bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Minimal "--name value" parser: get("--n", 4096).
class Args {
 public:
  Args(int argc, char** argv) : a_(argv + 1, argv + argc) {}
  bool has(const char* name) const { return std::find(a_.begin(), a_.end(), name) != a_.end(); }
  std::string str(const char* name, const std::string& def) const {
    for (size_t i = 0; i + 1 < a_.size(); ++i)
      if (a_[i] == name) return a_[i + 1];
    return def;
  }
  long num(const char* name, long def) const {
    const std::string s = str(name, "");
    return s.empty() ? def : std::strtol(s.c_str(), nullptr, 10);
  }
  /// Every value of a repeatable or comma-separated option: "--bs 512,1024".
  std::vector<std::string> list(const char* name, const std::string& def) const {
    std::vector<std::string> out;
    std::string all;
    for (size_t i = 0; i + 1 < a_.size(); ++i)
      if (a_[i] == name) all += (all.empty() ? "" : ",") + a_[i + 1];
    if (all.empty()) all = def;
    size_t p = 0;
    while (p <= all.size()) {
      const size_t q = std::min(all.find(',', p), all.size());
      if (q > p) out.push_back(all.substr(p, q - p));
      p = q + 1;
    }
    return out;
  }

 private:
  std::vector<std::string> a_;
};

/// A private scratch directory (STARPU_HOME, run dirs), removed on exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ymlopt-bench-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::exit(1);
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A field of /proc/self/status in kB (VmRSS, VmHWM), or -1.
/// One timed run of `dag` on the StarPU backend (init .. shutdown included).
struct StarpuRun {
  ymlopt::ExecResult result;
  double seconds = 0;
};
inline StarpuRun run_starpu(const ymlopt::Dag& dag, ymlopt::DataStore& store, const std::string& dir,
                            const std::string& sched, int ncpu) {
  ymlopt::ExecOptions eo;
  eo.run_dir = dir;
  eo.sched = sched;
  eo.ncpu = ncpu;
  eo.starpu_home = dir;
  ymlopt::Progress progress;
  auto ex = ymlopt::make_starpu_executor();
  StarpuRun r;
  const double t0 = now_s();
  r.result = ex->execute(dag, store, eo, progress);
  r.seconds = now_s() - t0;
  return r;
}

inline long proc_status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  return -1;
}

/// Resets VmHWM to the current RSS (Linux >= 4.0); false if not possible.
inline bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return bool(f);
}

/// The first `model name` of /proc/cpuinfo.
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "?";
}

}  // namespace bench
