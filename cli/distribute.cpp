#include "distribute.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "usage_error.hpp"
#include "ymlopt/xml/parser.hpp"

namespace ymlopt {

namespace {

// The names of the workflow's top-level <param>s ({} when it does not parse:
// compiling it reports why).
std::vector<std::string> declared_params(const std::string& file) {
  Diagnostics diags;
  const auto doc = xml::parse_file(file, diags);
  std::vector<std::string> names;
  if (!doc) return names;
  for (const auto& e : doc->root.children)
    if (const xml::Attr* n = e.name == "param" ? e.find("name") : nullptr) names.push_back(n->value);
  return names;
}

int positive(const std::string& spec, const std::string& v) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 1 || n > (1 << 20))
    throw UsageError("--distribute " + spec + ": '" + v + "' is not a positive number of ranks");
  return int(n);
}

}  // namespace

std::vector<std::string> distribute_sets(const std::string& spec, const std::string& file,
                                         const std::vector<std::string>& sets, int ranks, int per_node) {
  const std::vector<std::string> params = declared_params(file);
  const bool has_tp = std::count(params.begin(), params.end(), "tp") > 0;
  const bool has_pp = std::count(params.begin(), params.end(), "stages") > 0;
  per_node = std::clamp(per_node, 1, ranks);
  int tp = 0, pp = 0;  // 0: not asked for
  bool want_tp = spec != "pp" && spec != "auto", want_pp = spec != "tp" && spec != "auto";
  if (spec == "tp") {
    tp = ranks;
  } else if (spec == "pp") {
    pp = ranks;
  } else if (spec == "tpxpp") {
    if (ranks % per_node)
      throw UsageError("--distribute tpxpp: " + std::to_string(ranks) + " ranks are not whole nodes of " +
                       std::to_string(per_node) + " (give tp=N,pp=M)");
    tp = per_node, pp = ranks / per_node;
  } else if (spec == "auto") {
    if (has_tp && has_pp && per_node < ranks && ranks % per_node == 0) tp = per_node, pp = ranks / per_node;
    else if (has_tp) tp = ranks;
    else if (has_pp) pp = ranks;
    else return {};  // the workflow's own placement (distribute=, owner=, ranks=)
  } else {
    want_tp = want_pp = false;
    size_t p = 0;
    while (p <= spec.size()) {
      const size_t q = std::min(spec.find(',', p), spec.size());
      const std::string item = spec.substr(p, q - p), key = item.substr(0, item.find('='));
      if (item.find('=') == std::string::npos || (key != "tp" && key != "pp"))
        throw UsageError("--distribute '" + spec + "': expected tp, pp, tpxpp, auto or tp=N,pp=M");
      (key == "tp" ? tp : pp) = positive(spec, item.substr(key.size() + 1));
      (key == "tp" ? want_tp : want_pp) = (key == "tp" ? tp : pp) > 1;
      p = q + 1;
    }
    if (std::max(tp, 1) * std::max(pp, 1) != ranks)
      throw UsageError("--distribute " + spec + ": " + std::to_string(std::max(tp, 1)) + " x " +
                       std::to_string(std::max(pp, 1)) + " shards and stages, but the run has " +
                       std::to_string(ranks) + " ranks");
  }
  const std::filesystem::path path(file);
  const std::string name = path.filename().string();
  // a pipeline sibling to suggest (gpt2.xml -> gpt2_pipeline.xml), when there is one
  const std::filesystem::path sibling = path.parent_path() / (path.stem().string() + "_pipeline.xml");
  std::error_code ec;
  const std::string hint = std::filesystem::exists(sibling, ec) ? " (" + sibling.string() + " has)" : "";
  if (want_tp && !has_tp)
    throw UsageError("--distribute " + spec + ": " + name + " has no tensor-parallel parameter 'tp'");
  if (want_pp && !has_pp)
    throw UsageError("--distribute " + spec + ": " + name + " has no pipeline parameter 'stages'" + hint);
  std::vector<std::string> out;
  if (has_tp && tp > 1) out.push_back("tp=" + std::to_string(tp));  // else its default: no shards
  if (has_pp) out.push_back("stages=" + std::to_string(std::max(pp, 1)));
  for (const auto& s : sets)
    for (const auto& o : out)
      if (s.substr(0, s.find('=')) == o.substr(0, o.find('=')))
        throw UsageError("--distribute " + spec + " sets " + o + ": drop --set " + s);
  return out;
}

}  // namespace ymlopt
