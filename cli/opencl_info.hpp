// What `ymlopt info` says about OpenCL: whether the OpenCL kernels were built
// (and with CLBlast), the platforms and devices the ICD loader finds, and the
// OpenCL workers StarPU starts here.
//
//   const nlohmann::json j = opencl_info_json(starpu_worker_names(), starpu_build_info().opencl);
//   std::cout << format_opencl_info(j);
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ymlopt {

/// {"built", "clblast", "platforms": [{"name", "vendor", "version", "devices": [{"name",
/// "vendor", "version", "type", "global_mem", "compute_units", "fp64"}]}], "why" (no
/// platform), "starpu": {"opencl", "workers", "note"}}.
nlohmann::json opencl_info_json(const std::vector<std::string>& starpu_workers, bool starpu_opencl);

/// The same as text lines ("OpenCL kernels: ...", one line per device, "StarPU OpenCL workers: ...").
std::string format_opencl_info(const nlohmann::json& info);

}  // namespace ymlopt
