#include "ymlopt/scheduler/memory_limit.hpp"

#include <sys/resource.h>

#include <fstream>
#include <sstream>

namespace ymlopt {

namespace {

// A limit file's value: a number of bytes; "max" or a huge v1 value: none.
std::int64_t read_limit(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return -1;
  try {
    const long long n = std::stoll(v);
    return n <= 0 || n >= (1LL << 60) ? -1 : std::int64_t(n);  // v1 says "none" as 2^63 rounded to pages
  } catch (const std::exception&) {
    return -1;
  }
}

void take(MemoryLimit& m, std::int64_t bytes, const std::string& source) {
  if (bytes >= 0 && (!m.limited() || bytes < m.bytes)) m.bytes = bytes, m.source = source;
}

}  // namespace

MemoryLimit cgroup_memory_limit(const std::string& proc_cgroup, const std::string& root) {
  MemoryLimit m;
  std::istringstream lines(proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "ID:CONTROLLERS:PATH": v2 is "0::PATH", v1's memory controller "N:memory:PATH"
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    bool v1 = false;
    std::string name;
    for (std::istringstream c(controllers); std::getline(c, name, ',');) v1 |= name == "memory";
    if (!v1 && !controllers.empty()) continue;
    const std::string base = v1 ? root + "/memory" : root;
    const char* file = v1 ? "memory.limit_in_bytes" : "memory.max";
    // the limits of its ancestors bind it too
    for (;;) {
      take(m, read_limit(base + path + "/" + file), "cgroup " + (path.empty() ? "/" : path) + " " + file);
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
    }
  }
  return m;
}

MemoryLimit memory_limit() {
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  MemoryLimit m = cgroup_memory_limit(text.str(), "/sys/fs/cgroup");
  if (!m.limited()) m = cgroup_memory_limit(text.str(), "/sys/fs/cgroup/unified");  // v2 beside v1 (hybrid)
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) take(m, std::int64_t(r.rlim_cur), "RLIMIT_AS");
  return m;
}

std::int64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      std::int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace ymlopt
