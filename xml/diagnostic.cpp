#include "ymlopt/xml/diagnostic.hpp"

#include <algorithm>
#include <tuple>

namespace ymlopt {

std::string Diagnostic::format() const {
  std::string s = file;
  if (line > 0) {
    s += ':' + std::to_string(line);
    if (col > 0) s += ':' + std::to_string(col);
  }
  s += severity == Severity::error ? ": error: " : severity == Severity::warning ? ": warning: " : ": note: ";
  return s + message;
}

void Diagnostics::add(const SrcLoc& at, Severity s, std::string msg) {
  add(Diagnostic{at.file ? *at.file : std::string("<input>"), at.line, at.col, s, std::move(msg)});
}

void Diagnostics::add(Diagnostic d) {
  if (d.severity == Severity::error && errors_ >= limit_) return;
  for (const auto& e : list_)
    if (std::tie(e.file, e.line, e.col, e.severity, e.message) ==
        std::tie(d.file, d.line, d.col, d.severity, d.message))
      return;
  if (d.severity == Severity::error) ++errors_;
  list_.push_back(std::move(d));
}

std::string Diagnostics::str() const {
  std::string out;
  for (const auto& d : list_) out += d.format() + '\n';
  return out;
}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = int(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = int(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 1 << 30;
  for (const auto& c : candidates) {
    const int d = edit_distance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  const int limit = std::max<int>(2, int(name.size()) / 3);
  return best_d <= limit ? best : std::string();
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string c = closest_name(name, candidates);
  return c.empty() ? std::string() : " (did you mean '" + c + "'?)";
}

}  // namespace ymlopt
