// memory_limit's cgroup reading on a fake /sys/fs/cgroup: v1 and v2, the
// tightest of a cgroup and its ancestors, "max" and v1's huge "no limit".
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ymlopt/scheduler/memory_limit.hpp"

using namespace ymlopt;
namespace fs = std::filesystem;

namespace {

struct FakeRoot {
  fs::path root = fs::temp_directory_path() / ("ymlopt_cg_" + std::to_string(::getpid()));
  FakeRoot() { fs::create_directories(root); }
  ~FakeRoot() { fs::remove_all(root); }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text << "\n";
  }
};

}  // namespace

TEST(MemoryLimit, CgroupV2TakesTheTightestAncestor) {
  FakeRoot f;
  f.write("slurm/job_7/memory.max", "1073741824");
  f.write("slurm/job_7/step_0/memory.max", "max");
  f.write("slurm/job_7/step_0/task_1/memory.max", "2147483648");
  const MemoryLimit m = cgroup_memory_limit("0::/slurm/job_7/step_0/task_1\n", f.root.string());
  EXPECT_EQ(m.bytes, 1073741824);
  EXPECT_EQ(m.source, "cgroup /slurm/job_7 memory.max");
}

TEST(MemoryLimit, CgroupV1ReadsTheMemoryControllersLimit) {
  FakeRoot f;
  f.write("memory/docker/abc/memory.limit_in_bytes", "188743680");
  f.write("memory/docker/memory.limit_in_bytes", "9223372036854771712");  // v1's "no limit"
  const MemoryLimit m =
      cgroup_memory_limit("12:pids:/docker/abc\n4:cpu,memory:/docker/abc\n0::/\n", f.root.string());
  EXPECT_EQ(m.bytes, 188743680);
  EXPECT_EQ(m.source, "cgroup /docker/abc memory.limit_in_bytes");
}

TEST(MemoryLimit, NoLimitFilesOrUnlimitedMeanNone) {
  FakeRoot f;
  f.write("a/memory.max", "max");
  EXPECT_FALSE(cgroup_memory_limit("0::/a\n", f.root.string()).limited());
  EXPECT_FALSE(cgroup_memory_limit("0::/nowhere\n", f.root.string()).limited());
  EXPECT_FALSE(cgroup_memory_limit("garbage\n", f.root.string()).limited());
  EXPECT_GT(resident_bytes(), 0);
}
