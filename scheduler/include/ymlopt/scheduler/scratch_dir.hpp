// A private temporary directory that is removed, with everything in it, when the
// object goes out of scope — on errors and cancellations too.
//
//   ymlopt::ScratchDir dir("compress");   // /tmp/ymlopt-compress-Ab12Cd
//   run_dag(dag, {}, dir.path(), nullptr);
#pragma once
#include <string>

namespace ymlopt {

/// mkdtemp under the system temporary directory ($TMPDIR or /tmp), named
/// "ymlopt-<what>-XXXXXX"; throws std::runtime_error if it cannot be created.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& what);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ymlopt
