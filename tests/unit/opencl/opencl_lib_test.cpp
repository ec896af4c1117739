// ymlopt::opencl: the platform listing, the program cache and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <ymlopt/sdk.hpp>

#if YMLOPT_HAVE_OPENCL
#include "opencl/opencl.hpp"
#include "test_device.hpp"

namespace {

namespace cl = ymlopt::opencl;
using ymlopt::test::opencl_device;

TEST(OpenclDevice, PoclInstalledMeansADevice) {
  // the harness must run in CI, where PoCL is installed: finding no device there is a failure
  if (!std::filesystem::exists("/etc/OpenCL/vendors/pocl.icd")) GTEST_SKIP() << "PoCL is not installed";
  EXPECT_NE(opencl_device().device, nullptr) << opencl_device().why;
}

TEST(OpenclLib, PlatformsListTheirDevices) {
  std::string why;
  const auto ps = cl::platforms(&why);
  if (ps.empty()) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << why;
  }
  bool any = false;
  for (const auto& p : ps) {
    EXPECT_FALSE(p.name.empty());
    for (const auto& d : p.devices) {
      any = true;
      EXPECT_FALSE(d.name.empty());
      EXPECT_NE(d.version.find("OpenCL"), std::string::npos) << d.version;
      EXPECT_GT(d.global_mem, 0u) << d.name;
      EXPECT_GT(d.compute_units, 0u) << d.name;
      EXPECT_TRUE(d.type == "cpu" || d.type == "gpu" || d.type == "accelerator" || d.type == "custom" ||
                  d.type == "default")
          << d.type;
    }
  }
  EXPECT_TRUE(any);
}

TEST(OpenclLib, ErrorNames) {
  EXPECT_EQ(cl::error_name(CL_INVALID_VALUE), "CL_INVALID_VALUE");
  EXPECT_EQ(cl::error_name(-9999), "OpenCL error -9999");
  EXPECT_NO_THROW(cl::check(CL_SUCCESS, "x"));
  try {
    cl::check(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel(k)");
    FAIL();
  } catch (const ymlopt::KernelError& e) {
    EXPECT_STREQ(e.what(), "clEnqueueNDRangeKernel(k): CL_OUT_OF_RESOURCES");
  }
}

const char* const kTwice = R"CLC(
__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f * SCALE; }
)CLC";

TEST(OpenclLib, ProgramBuiltOncePerDeviceAndOptions) {
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  static const cl::Program p{"twice", kTwice};
  const std::size_t before = cl::built_programs();
  { cl::Kernel k = p.kernel(d.queue, "-DSCALE=1", "twice"); }
  { cl::Kernel k = p.kernel(d.queue, "-DSCALE=1", "twice"); }
  EXPECT_EQ(cl::built_programs(), before + 1);
  cl::Kernel k = p.kernel(d.queue, "-DSCALE=3", "twice");  // other options: another program
  EXPECT_EQ(cl::built_programs(), before + 2);
  float host[5] = {1, 2, 3, 4, 5};
  cl_int err = CL_SUCCESS;
  cl_mem buf = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  k.arg(0, buf);
  const std::size_t n = 5;
  ASSERT_EQ(clEnqueueNDRangeKernel(d.queue, k.get(), 1, nullptr, &n, nullptr, 0, nullptr, nullptr), CL_SUCCESS);
  ASSERT_EQ(clEnqueueReadBuffer(d.queue, buf, CL_TRUE, 0, sizeof host, host, 0, nullptr, nullptr), CL_SUCCESS);
  clReleaseMemObject(buf);
  EXPECT_EQ(host[4], 30.f);
}

TEST(OpenclLib, BuildErrorsNameTheProgramAndCarryTheLog) {
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  static const cl::Program bad{"broken", "__kernel void f(__global float* x) { x[0] = undeclared_name; }\n"};
  try {
    bad.kernel(d.queue, "", "f");
    FAIL() << "a program with an error built";
  } catch (const ymlopt::KernelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("OpenCL program 'broken' failed to build for device '" + d.name + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << m;
    EXPECT_NE(m.find("undeclared_name"), std::string::npos) << "no compiler log: " << m;
  }
  static const cl::Program ok{"twice", kTwice};
  try {
    ok.kernel(d.queue, "-DSCALE=1", "no_such_kernel");
    FAIL();
  } catch (const ymlopt::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("CL_INVALID_KERNEL_NAME"), std::string::npos) << e.what();
  }
}

}  // namespace
#else
TEST(OpenclLib, BuiltWithoutOpencl) { GTEST_SKIP() << "built without OpenCL (cmake/opencl.cmake found none, or -DYMLOPT_OPENCL=OFF)"; }
#endif
