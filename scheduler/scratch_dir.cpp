#include "ymlopt/scheduler/scratch_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ymlopt {

ScratchDir::ScratchDir(const std::string& what) {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) throw std::runtime_error("cannot create a temporary directory: " + ec.message() + " (TMPDIR?)");
  std::string tmpl = (base / ("ymlopt-" + what + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error("cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace ymlopt
