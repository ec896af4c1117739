// A GoogleTest fixture with a fresh temporary folder per test.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ymlopt::test {

/// Each test gets TMP/<prefix>_<pid>_<test name>/, removed afterwards.
///
///   class MyTest : public TempDirTest { public: MyTest() : TempDirTest("ymlopt_x") {} };
///   TEST_F(MyTest, Writes) { write_file(p("a.bin"), "abc"); }
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + "_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string p(const std::string& name) const { return (dir_ / name).string(); }

  static void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace ymlopt::test
