// ScratchDir: a private temporary directory removed with its content on scope exit.
#include "ymlopt/scheduler/scratch_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace fs = std::filesystem;

TEST(ScratchDir, CreatesAPrivateDirectoryAndRemovesItWithItsContent) {
  std::string p;
  {
    const ymlopt::ScratchDir d("unit");
    p = d.path();
    EXPECT_TRUE(fs::is_directory(p));
    EXPECT_EQ(fs::path(p).filename().string().rfind("ymlopt-unit-", 0), 0u) << p;
    const ymlopt::ScratchDir other("unit");
    EXPECT_NE(other.path(), p);  // two at once never share a directory
    fs::create_directories(p + "/a/b");
    std::ofstream(p + "/a/b/f.txt") << "x";
  }
  EXPECT_FALSE(fs::exists(p));
}

TEST(ScratchDir, IsRemovedWhenAnExceptionUnwinds) {
  std::string p;
  try {
    const ymlopt::ScratchDir d("unit");
    p = d.path();
    std::ofstream(p + "/f.txt") << "x";
    throw std::runtime_error("a kernel failed");
  } catch (const std::runtime_error&) {
  }
  ASSERT_FALSE(p.empty());
  EXPECT_FALSE(fs::exists(p));
}

TEST(ScratchDir, ReportsWhyItCannotBeCreated) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", "/proc/ymlopt-no-such-dir", 1);
  try {
    ymlopt::ScratchDir d("unit");
    ADD_FAILURE() << "created " << d.path();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("temporary directory"), std::string::npos) << e.what();
  }
  if (old) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
}
