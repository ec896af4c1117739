#pragma once
#include <string>
#include <vector>

namespace ymlopt {

/// A position in a source file (1-based line and column; 0 = unknown).
struct SrcLoc {
  const std::string* file = nullptr;  // interned path, lives as long as the Document
  int line = 0;
  int col = 0;
};

enum class Severity { error, warning, note };

/// One compiler-format message: `FILE:LINE:COL: error: MESSAGE`.
struct Diagnostic {
  std::string file;
  int line = 0;
  int col = 0;
  Severity severity = Severity::error;
  std::string message;
  std::string format() const;
};

/// Collects diagnostics, dropping exact duplicates (a bad task in a loop is
/// reported once) and stopping after `limit` errors.
///
///   Diagnostics d; d.error(loc, "unknown component 'x'");
///   if (d.has_errors()) d.print(stderr);
class Diagnostics {
 public:
  void error(const SrcLoc& at, std::string msg) { add(at, Severity::error, std::move(msg)); }
  void add(const SrcLoc& at, Severity s, std::string msg);
  void add(Diagnostic d);
  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  bool full() const { return errors_ >= limit_; }
  const std::vector<Diagnostic>& all() const { return list_; }
  std::string str() const;

 private:
  std::vector<Diagnostic> list_;
  int errors_ = 0;
  int limit_ = 50;
};

/// Edit distance, and the closest candidate within a sensible distance ("" if none).
int edit_distance(const std::string& a, const std::string& b);
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);
/// " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace ymlopt
