// io.save / io.load components, driven through the SDK interfaces with a
// minimal registry and kernel context.
#include "io/io_components.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/tensor_file.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;

namespace {

class TestRegistry : public Registry {
 public:
  void add(ComponentSpec spec) override {
    const std::string name = spec.name;
    specs.emplace(name, std::move(spec));
  }
  const ComponentSpec* find(std::string_view name) const override {
    auto it = specs.find(std::string(name));
    return it == specs.end() ? nullptr : &it->second;
  }
  std::map<std::string, ComponentSpec> specs;
};

class TestContext : public KernelContext {
 public:
  TestContext(const ComponentSpec& spec, std::vector<TensorView> ports, std::vector<ArgValue> args,
              std::string dir)
      : ports_(std::move(ports)), args_(&spec.params, std::move(args)), dir_(std::move(dir)) {}
  std::span<const TensorView> ports() const override { return ports_; }
  const Args& args() const override { return args_; }
  void report(std::string, double) override {}
  const std::string& run_dir() const override { return dir_; }

 private:
  std::vector<TensorView> ports_;
  Args args_;
  std::string dir_;
};

TensorView view_of(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  TensorView t;
  t.data = v.data();
  t.dtype = DType::f32;
  t.rows = rows;
  t.cols = cols;
  t.ld = cols;
  t.shape = {rows, cols};
  return t;
}

class IoComponentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_io(reg_);
    dir_ = (fs::temp_directory_path() / ("ymlopt_io_comp_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  const ComponentSpec& spec(const char* name) {
    const ComponentSpec* s = reg_.find(name);
    EXPECT_NE(s, nullptr) << name;
    return *s;
  }
  void run(const char* name, TensorView v, const std::string& path, const std::string& key = "") {
    const ComponentSpec& s = spec(name);
    TestContext ctx(s, {v}, {{0, path}, {0, key}}, dir_);
    s.cpu(ctx);
  }
  std::string check(const char* name, TensorView v, const std::string& path) {
    const ComponentSpec& s = spec(name);
    v.data = nullptr;  // check time: no data
    const std::vector<TensorView> ports = {v};
    const Args args(&s.params, {{0, path}, {0, ""}});
    return s.check(TaskShape{ports, args});
  }
  std::string kernel_error(const char* name, TensorView v, const std::string& path,
                           const std::string& key = "") {
    try {
      run(name, v, path, key);
    } catch (const KernelError& e) {
      return e.what();
    }
    return "<no error>";
  }

  TestRegistry reg_;
  std::string dir_;
};

TEST_F(IoComponentsTest, Specs) {
  for (const char* name : {"io.save", "io.load"}) {
    const ComponentSpec& s = spec(name);
    EXPECT_TRUE(s.host_only) << name;
    EXPECT_NE(s.cpu, nullptr);
    EXPECT_TRUE(bool(s.check));
    EXPECT_TRUE(bool(s.cost));
    ASSERT_EQ(s.ports.size(), 1u);
    EXPECT_TRUE(s.ports[0].dtypes.empty());
    ASSERT_EQ(s.params.size(), 2u);
    EXPECT_EQ(s.params[0].name, "path");
    EXPECT_TRUE(s.params[0].required);
    EXPECT_EQ(s.params[1].name, "key");
    EXPECT_EQ(s.params[1].default_value, "");
  }
  EXPECT_EQ(spec("io.save").ports[0].access, Access::read);
  EXPECT_EQ(spec("io.load").ports[0].access, Access::write);
}

TEST_F(IoComponentsTest, SaveThenLoadRelativeToRunDir) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  run("io.save", view_of(x, 2, 3), "out/x.safetensors");  // parent folder created
  run("io.save", view_of(x, 2, 3), "x.npy");
  run("io.save", view_of(x, 2, 3), "named.safetensors", "weights");
  EXPECT_TRUE(fs::exists(dir_ + "/out/x.safetensors"));
  EXPECT_EQ(io::list_tensors(dir_ + "/out/x.safetensors").at(0).name, "x");  // default key
  EXPECT_EQ(io::list_tensors(dir_ + "/named.safetensors").at(0).name, "weights");

  for (const char* p : {"out/x.safetensors", "x.npy"}) {
    std::vector<float> y(6, 0);
    run("io.load", view_of(y, 2, 3), p);
    EXPECT_EQ(y, x) << p;
  }
  std::vector<float> y(6, 0);
  run("io.load", view_of(y, 2, 3), dir_ + "/named.safetensors", "weights");  // absolute path
  EXPECT_EQ(y, x);
}

TEST_F(IoComponentsTest, KernelErrors) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  run("io.save", view_of(x, 2, 3), "x.safetensors");
  std::vector<float> y(6);
  EXPECT_EQ(kernel_error("io.load", view_of(y, 3, 2), "x.safetensors"),
            dir_ + "/x.safetensors: tensor 'x' is f32 [2, 3] but the destination is f32 [3, 2]");
  EXPECT_EQ(kernel_error("io.load", view_of(y, 2, 3), "x.safetensors", "w"),
            dir_ + "/x.safetensors: no tensor 'w' (available: x)");
  EXPECT_EQ(kernel_error("io.load", view_of(y, 2, 3), "nope.npy"),
            dir_ + "/nope.npy: cannot open: No such file or directory");
  EXPECT_EQ(kernel_error("io.save", view_of(x, 2, 3), "x.bin"),
            dir_ + "/x.bin: unsupported file extension '.bin' (expected .safetensors or .npy)");
  EXPECT_EQ(kernel_error("io.save", view_of(x, 2, 3), "/nonexistent_ymlopt_dir/x.npy"),
            "/nonexistent_ymlopt_dir/x.npy: cannot create temporary file: No such file or directory");
}

TEST_F(IoComponentsTest, CheckHook) {
  std::vector<float> x(6);
  auto v = view_of(x, 2, 3);
  EXPECT_EQ(check("io.save", v, "a.safetensors"), "");
  EXPECT_EQ(check("io.load", v, "a.npy"), "");
  EXPECT_EQ(check("io.save", v, "a.bin"), "unsupported file extension '.bin' (expected .safetensors or .npy)");
  EXPECT_EQ(check("io.load", v, "a"), "unsupported file extension '' (expected .safetensors or .npy)");
  EXPECT_EQ(check("io.load", v, ""), "parameter 'path' is empty");
  v.dtype = DType::bf16;
  EXPECT_EQ(check("io.save", v, "a.npy"), "bf16 cannot be saved as .npy (use .safetensors)");
  EXPECT_EQ(check("io.save", v, "a.safetensors"), "");
  EXPECT_EQ(check("io.load", v, "a.npy"), "");  // fails at run time if the file is not bf16
}

TEST_F(IoComponentsTest, CostIsBytes) {
  std::vector<float> x(6);
  auto v = view_of(x, 2, 3);
  v.data = nullptr;
  const std::vector<TensorView> ports = {v};
  const ComponentSpec& s = spec("io.save");
  const Args args(&s.params, {{0, "a.npy"}, {0, ""}});
  const Cost c = s.cost(TaskShape{ports, args});
  EXPECT_EQ(c.bytes, 24.0);
  EXPECT_EQ(c.flops, 0.0);
}

}  // namespace
