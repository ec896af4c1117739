// The OpenCL device the OpenCL tests run on: the first GPU of any platform,
// else the first device (PoCL's CPU device in CI), with one context and one
// in-order queue for the whole process. No device: `why` says so and the
// tests that need one skip with it. A machine with PoCL installed must have
// a device (OpenclDevice.PoclInstalledMeansADevice), so CI cannot skip them.
#pragma once
#include "opencl/opencl.hpp"

#include <string>
#include <vector>

namespace ymlopt::test {

struct OpenclDevice {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::string name;  // "pthread-..." for PoCL's CPU device
  std::string why;   // why there is none
};

inline const OpenclDevice& opencl_device() {
  static const OpenclDevice d = [] {
    OpenclDevice r;
    cl_uint n = 0;
    if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) {
      r.why = "no OpenCL platform (install pocl-opencl-icd for PoCL's CPU device)";
      return r;
    }
    std::vector<cl_platform_id> ps(n);
    clGetPlatformIDs(n, ps.data(), nullptr);
    for (cl_device_type type : {cl_device_type(CL_DEVICE_TYPE_GPU), cl_device_type(CL_DEVICE_TYPE_ALL)}) {
      for (cl_platform_id p : ps) {
        cl_device_id dev = nullptr;
        if (clGetDeviceIDs(p, type, 1, &dev, nullptr) != CL_SUCCESS || !dev) continue;
        cl_int err = CL_SUCCESS;
        r.context = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
        if (err != CL_SUCCESS) continue;
        r.queue = clCreateCommandQueue(r.context, dev, 0, &err);
        if (err != CL_SUCCESS) {
          clReleaseContext(r.context);
          r.context = nullptr;
          continue;
        }
        r.device = dev;
        r.name = opencl::device_info(dev).name;
        return r;
      }
    }
    r.why = "no OpenCL device could be opened on " + std::to_string(n) + " platform(s)";
    return r;
  }();
  return d;
}

}  // namespace ymlopt::test
