// Test plugin: test.opencl_build, whose OpenCL kernel builds an OpenCL C
// program with a syntax error through the plain OpenCL API (as a plugin
// author's kernel would) and throws the compiler's log as a KernelError; its
// CPU kernel scales x by 2. Used by tests/e2e/cli_opencl.sh: the build
// failure fails that task on its OpenCL worker with its file:line, exit 1.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <ymlopt/sdk.hpp>

#include <string>
#include <vector>

namespace {

void twice_cpu(ymlopt::KernelContext& ctx) {
  const ymlopt::TensorView& x = ctx.port(0);
  auto* p = static_cast<float*>(x.data);
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t c = 0; c < x.cols; ++c) p[r * x.ld + c] *= 2;
}

void twice_opencl(ymlopt::KernelContext& ctx) {
  auto q = static_cast<cl_command_queue>(ctx.opencl_queue());
  cl_context context = nullptr;
  cl_device_id device = nullptr;
  clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof context, &context, nullptr);
  clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof device, &device, nullptr);
  const char* src = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2 }";  // no ';'
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(context, 1, &src, nullptr, &err);
  if (err != CL_SUCCESS) throw ymlopt::KernelError("clCreateProgramWithSource: error " + std::to_string(err));
  err = clBuildProgram(p, 1, &device, "", nullptr, nullptr);
  std::string log;
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::vector<char> text(n + 1, '\0');
    clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, n, text.data(), nullptr);
    log = text.data();
  }
  clReleaseProgram(p);
  if (err != CL_SUCCESS) throw ymlopt::KernelError("OpenCL build of 'twice' failed (error " + std::to_string(err) + "): " + log);
  throw ymlopt::KernelError("the broken OpenCL program of 'twice' built");
}

}  // namespace

YMLOPT_PLUGIN(reg) {
  ymlopt::ComponentSpec s;
  s.name = "test.opencl_build";
  s.doc = "x *= 2 on a CPU; its OpenCL kernel fails to build (test plugin)";
  s.ports = {{"x", ymlopt::Access::read_write, {ymlopt::DType::f32}, false, 8, "f32 tensor"}};
  s.cpu = twice_cpu;
  s.opencl = twice_opencl;
  s.check = [](const ymlopt::TaskShape& t) -> std::string {
    return t.ports.size() == 1 && t.ports[0].bound() ? "" : "port 'x' is not bound";
  };
  s.cost = [](const ymlopt::TaskShape&) { return ymlopt::Cost{}; };
  reg.add(std::move(s));
}
