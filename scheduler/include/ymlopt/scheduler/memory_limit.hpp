// The memory this process may use, as the kernel will enforce it: its
// address-space rlimit and its cgroup's memory limit (what Slurm's --mem and
// container runtimes set), so that a run can refuse data that cannot fit
// before it allocates them, instead of being killed halfway.
//
//   MemoryLimit m = memory_limit();
//   if (m.limited() && need + resident_bytes() > m.bytes) std::cerr << "over " << m.source << "\n";
#pragma once
#include <cstdint>
#include <string>

namespace ymlopt {

struct MemoryLimit {
  std::int64_t bytes = -1;  // -1: none
  std::string source;       // "RLIMIT_AS", "cgroup /slurm/uid_0/job_7 memory.max"
  bool limited() const { return bytes >= 0; }
};

/// The smallest of RLIMIT_AS and the memory limits of this process's cgroup
/// and its ancestors (cgroup v2 memory.max, v1 memory.limit_in_bytes).
MemoryLimit memory_limit();

/// The same, read from the given files: `proc_cgroup` the text of
/// /proc/self/cgroup, `root` where the cgroup hierarchies are mounted (tests).
MemoryLimit cgroup_memory_limit(const std::string& proc_cgroup, const std::string& root);

/// This process's resident set now (VmRSS), or 0 if unknown.
std::int64_t resident_bytes();

}  // namespace ymlopt
