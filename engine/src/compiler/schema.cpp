// The element schema: the attributes each element takes, the statements a body holds.
#include "compiler.hpp"

#include <algorithm>
#include <map>

namespace ymlopt::compiler {

namespace {

// Attributes each element accepts (first list: required).
struct ElementRule {
  std::vector<std::string> required;
  std::vector<std::string> optional;
};

const std::map<std::string, ElementRule>& rules() {
  static const std::map<std::string, ElementRule> r = {
      {"workflow", {{}, {"name", "version", "xmlns", "checkpoint"}}},
      {"description", {{}, {}}},
      {"param", {{"name"}, {"type", "default", "doc"}}},
      {"data", {{"name", "shape"}, {"dtype", "tile", "split", "init", "seed", "value", "src", "key", "reshape", "distribute", "owner", "ranks"}}},
      {"task", {{"component"}, {"name", "where"}}},
      {"in", {{"port", "data"}, {}}},
      {"out", {{"port", "data"}, {}}},
      {"inout", {{"port", "data"}, {}}},
      {"arg", {{"name", "value"}, {}}},
      {"par", {{}, {"var", "from", "to", "step", "values"}}},
      {"seq", {{}, {"var", "from", "to", "step", "values"}}},
      {"if", {{"cond"}, {}}},
      {"else", {{}, {}}},
      {"call", {{"workflow"}, {"name"}}},
      {"set", {{"param", "value"}, {}}},
      {"bind", {{"data", "to"}, {}}},
      {"notify", {{"event"}, {}}},
      {"wait", {{"event"}, {}}},
      {"save", {{"data", "to"}, {"key"}}},
      {"let", {{"name", "value"}, {}}},
      {"require", {{"cond", "message"}, {}}},
      {"unite", {{}, {"name", "exit", "budget_s", "budget_iters", "save_exit", "mapping", "better"}}},
      {"comethod", {{"name"}, {"keep", "priority", "workers"}}},
      {"until", {{"cond"}, {"max"}}},
      {"while", {{"cond"}, {"max"}}},
      {"publish", {{"name", "data", "score"}, {}}},
      {"gather", {{"name", "into", "score"}, {"better"}}},
  };
  return r;
}

const std::vector<std::string>& body_elements() {
  static const std::vector<std::string> v = {"param",  "data",    "task",     "par",   "seq",   "if",
                                             "call",   "notify",  "wait",     "save",  "description", "let",   "require",
                                             "unite",  "comethod", "until",   "while", "publish", "gather"};
  return v;
}

}  // namespace

// Attributes are checked once per element, not once per loop iteration.
// Returns false when a required attribute is missing (then the element is
// reported once and skipped: its handler may rely on every required one).
bool Compiler::check_attrs(const Element& e) {
  if (!checked_.insert(&e).second) return !incomplete_.count(&e);
  const auto it = rules().find(e.name);
  if (it == rules().end()) return true;
  std::vector<std::string> allowed = it->second.required;
  allowed.insert(allowed.end(), it->second.optional.begin(), it->second.optional.end());
  for (const auto& a : e.attrs)
    if (std::find(allowed.begin(), allowed.end(), a.name) == allowed.end())
      diags_.error(a.loc, "unknown attribute '" + a.name + "' on <" + e.name + ">" + did_you_mean(a.name, allowed));
  for (const auto& r : it->second.required)
    if (!e.find(r)) {
      diags_.error(e.loc, "<" + e.name + "> requires attribute '" + r + "'");
      incomplete_.insert(&e);
    }
  return !incomplete_.count(&e);
}

void Compiler::statement(const Element& e) {
  if (e.name == "param" || e.name == "description") return;  // handled by declare_params
  if (!checked_.count(&e) &&
      std::find(body_elements().begin(), body_elements().end(), e.name) == body_elements().end()) {
    diags_.error(e.loc, "unknown element <" + e.name + ">" + did_you_mean(e.name, body_elements()));
    return;
  }
  if (!check_attrs(e)) return;
  if (!region_stack_.empty() && dag_.regions[size_t(region_stack_.back())].kind == Region::Kind::unite &&
      e.name != "comethod" && e.name != "par" && e.name != "seq" && e.name != "if" && e.name != "let" &&
      e.name != "require") {
    diags_.error(e.loc, "<" + e.name + "> directly inside <unite>: a unite holds <comethod>s (possibly in <par>, <seq> "
                                       "or <if>), and each co-method holds its own steps");
    return;
  }
  if (e.name == "data") data(e);
  else if (e.name == "task") task(e);
  else if (e.name == "par" || e.name == "seq") loop(e, e.name == "par");
  else if (e.name == "if") if_(e);
  else if (e.name == "call") call(e);
  else if (e.name == "notify") notify(e);
  else if (e.name == "wait") wait(e);
  else if (e.name == "save") save(e);
  else if (e.name == "let") let(e);
  else if (e.name == "require") require(e);
  else if (e.name == "unite") unite(e);
  else if (e.name == "comethod") comethod(e);
  else if (e.name == "until" || e.name == "while") runtime_loop(e);
  else if (e.name == "publish" || e.name == "gather") exchange(e);
}

}  // namespace ymlopt::compiler
