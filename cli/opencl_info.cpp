#include "opencl_info.hpp"

#include <cstdint>
#include <sstream>

#if YMLOPT_HAVE_OPENCL
#include "opencl/opencl.hpp"
#endif

namespace ymlopt {

nlohmann::json opencl_info_json(const std::vector<std::string>& starpu_workers, bool starpu_opencl) {
  nlohmann::json j;
#if YMLOPT_HAVE_OPENCL
  j["built"] = true;
#if YMLOPT_HAVE_CLBLAST
  j["clblast"] = true;
#else
  j["clblast"] = false;
#endif
  std::string why;
  nlohmann::json ps = nlohmann::json::array();
  for (const opencl::PlatformInfo& p : opencl::platforms(&why)) {
    nlohmann::json ds = nlohmann::json::array();
    for (const opencl::DeviceInfo& d : p.devices)
      ds.push_back({{"name", d.name}, {"vendor", d.vendor}, {"version", d.version}, {"type", d.type},
                    {"global_mem", d.global_mem}, {"compute_units", d.compute_units}, {"fp64", d.fp64}});
    ps.push_back({{"name", p.name}, {"vendor", p.vendor}, {"version", p.version}, {"devices", ds}});
  }
  j["platforms"] = ps;
  if (!why.empty()) j["why"] = why;
#else
  j["built"] = false;
  j["clblast"] = false;
  j["platforms"] = nlohmann::json::array();
  j["why"] = "not probed (built without OpenCL: none found when ymlopt was configured, or -DYMLOPT_OPENCL=OFF)";
#endif
  int workers = 0;
  for (const std::string& w : starpu_workers) workers += w.rfind("OpenCL", 0) == 0;
  std::string note;
  if (!starpu_opencl) note = "this StarPU is built without OpenCL";
  else if (workers == 0)
    note = "StarPU takes OpenCL devices of type GPU or accelerator; for a CPU device (PoCL's): "
           "ymlopt run --opencl 1 --opencl-on-cpus";
  else
    note = "ymlopt run uses them with --opencl N (none by default)";
  j["starpu"] = {{"opencl", starpu_opencl}, {"workers", workers}, {"note", note}};
  return j;
}

std::string format_opencl_info(const nlohmann::json& j) {
  std::ostringstream os;
  os << "OpenCL kernels: "
     << (j["built"].get<bool>() ? std::string("built, CLBlast ") + (j["clblast"].get<bool>() ? "yes" : "no")
                                : std::string("not built"));
  if (j.contains("why")) os << "; " << j["why"].get<std::string>();
  os << "\n";
  for (const auto& p : j["platforms"]) {
    os << "OpenCL platform: " << p["name"].get<std::string>() << " (" << p["vendor"].get<std::string>() << ", "
       << p["version"].get<std::string>() << ")\n";
    for (const auto& d : p["devices"]) {
      const double gib = double(d["global_mem"].get<std::uint64_t>()) / double(1ull << 30);
      os << "  [" << d["type"].get<std::string>() << "] " << d["name"].get<std::string>() << " ("
         << d["vendor"].get<std::string>() << ", " << d["version"].get<std::string>() << ", " << std::fixed;
      os.precision(1);
      os << gib << " GiB, " << d["compute_units"].get<unsigned>() << " compute units"
         << (d["fp64"].get<bool>() ? ", fp64" : "") << ")\n";
      os.unsetf(std::ios::floatfield);
    }
  }
  const auto& s = j["starpu"];
  os << "StarPU OpenCL workers: " << s["workers"].get<int>();
  if (!s["note"].get<std::string>().empty()) os << " (" << s["note"].get<std::string>() << ")";
  os << "\n";
  return os.str();
}

}  // namespace ymlopt
