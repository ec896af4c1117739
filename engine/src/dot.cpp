#include "ymlopt/engine/dot.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

namespace ymlopt {

namespace {
std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}
}  // namespace

std::string dag_to_dot(const Dag& dag) {
  static const char* palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                  "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
  std::map<std::string, int> colour;
  std::string o = "digraph \"" + escape(dag.name) + "\" {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  for (const auto& t : dag.tasks) {
    const int c = colour.emplace(t.comp->name, int(colour.size())).first->second;
    std::string label = t.comp->name;
    if (!t.label.empty()) label = t.label + "\\n" + label;
    std::string file = t.loc.file ? std::filesystem::path(*t.loc.file).filename().string() : "";
    label += "\\n" + file + ":" + std::to_string(t.loc.line);
    std::string args;
    for (const auto& b : t.bindings)
      if (b.ref.data >= 0) {
        if (!args.empty()) args += ' ';
        args += dag.ref_name(b.ref);
      }
    if (!args.empty()) label += "\\n" + escape(args);
    o += "  t" + std::to_string(t.id) + " [label=\"" + label + "\", fillcolor=\"" + palette[c % 12] + "\"];\n";
  }
  for (const auto& t : dag.tasks)
    for (auto p : t.preds) {
      const bool ev = std::binary_search(t.event_preds.begin(), t.event_preds.end(), p);
      o += "  t" + std::to_string(p) + " -> t" + std::to_string(t.id) + (ev ? " [style=dashed];\n" : ";\n");
    }
  return o + "}\n";
}

}  // namespace ymlopt
