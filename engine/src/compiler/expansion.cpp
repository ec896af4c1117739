// Expansion: params, let, par/seq loops, if and calls of sub-workflows, in program order.
#include "compiler.hpp"

#include <algorithm>
#include <cmath>
#include <cctype>

#include "ymlopt/xml/yvetteml.hpp"

namespace ymlopt::compiler {

void Compiler::declare_params(const Element& wf, const std::vector<std::pair<std::string, std::string>>& sets,
                    bool from_cli, const std::vector<const Attr*>& set_locs) {
  std::vector<std::string> names;
  std::vector<bool> used(sets.size(), false);
  for (const auto& e : wf.children) {
    if (e.name != "param") continue;
    check_attrs(e);
    const Attr* na = e.find("name");
    if (!na) continue;
    const std::string type = attr_or(e, "type", "int");
    if (type != "int" && type != "float" && type != "bool" && type != "string") {
      diags_.error(e.find("type")->loc, "unknown param type '" + type + "' (expected int, float, bool or string)");
      continue;
    }
    if (lookup(na->value) && std::find(names.begin(), names.end(), na->value) != names.end()) {
      diags_.error(na->loc, "parameter '" + na->value + "' declared twice");
      continue;
    }
    names.push_back(na->value);
    std::optional<Value> v;
    SrcLoc where = e.loc;
    std::string origin;
    for (size_t k = 0; k < sets.size(); ++k) {
      if (sets[k].first != na->value) continue;
      used[k] = true;
      v = Value::of_string(sets[k].second);
      origin = from_cli ? "--set " + sets[k].first + "=" + sets[k].second : "";
      if (!from_cli) where = set_locs[k]->loc;
    }
    if (!v && from_cli) v = model_param(na->value, origin);
    if (!v && from_cli && origin.empty() &&
        std::count(opts_.model_missing.begin(), opts_.model_missing.end(), na->value)) {
      diags_.add(Diagnostic{dag_.file, 0, 0, Severity::error,
                            opts_.model_origin + ": the checkpoint does not determine parameter '" + na->value +
                                "' (no config.json gives it, no tensor's shape fixes it): use --set " + na->value +
                                "=VALUE"});
      usage_error_ = true;  // the default stands in, so that nothing else is reported about it
    }
    if (!v) {
      const Attr* d = e.find("default");
      if (!d) {
        diags_.error(e.loc, "parameter '" + na->value + "' has no default and is not set" +
                                std::string(from_cli ? " (use --set " + na->value + "=VALUE)" : ""));
        continue;
      }
      v = eval(*d);
      if (!v) continue;
    }
    auto typed = convert(*v, type);
    if (!typed) {
      const std::string msg = "parameter '" + na->value + "' of type " + type + " cannot take value '" + v->str() + "'";
      if (from_cli && !origin.empty()) {
        diags_.add(Diagnostic{dag_.file, 0, 0, Severity::error, origin + ": " + msg});
        usage_error_ = true;
      } else {
        diags_.error(where, msg);
      }
      continue;
    }
    vars_.emplace_back(na->value, std::move(*typed));
  }
  if (from_cli)
    for (const auto& [name, value] : opts_.model_sets) {
      if (std::find(names.begin(), names.end(), name) != names.end() ||
          std::find(opts_.model_optional.begin(), opts_.model_optional.end(), name) != opts_.model_optional.end())
        continue;
      const auto req = std::find_if(opts_.model_required.begin(), opts_.model_required.end(),
                                    [&](const auto& r) { return r.first == name; });
      const std::string msg =
          opts_.model_origin + " gives " + name + "=" + value + " but the workflow has no parameter '" + name + "'";
      if (req != opts_.model_required.end())
        diags_.add(Diagnostic{dag_.file, 0, 0, Severity::error, msg + ": " + req->second});
      else
        diags_.add(Diagnostic{dag_.file, 0, 0, Severity::warning, msg + ": ignored"});
    }
  for (size_t k = 0; k < sets.size(); ++k) {
    if (used[k]) continue;
    const std::string msg = "unknown parameter '" + sets[k].first + "'" + did_you_mean(sets[k].first, names);
    if (from_cli) {
      diags_.add(Diagnostic{dag_.file, 0, 0, Severity::error, "--set " + sets[k].first + "=" + sets[k].second + ": " + msg});
      usage_error_ = true;
    } else {
      diags_.error(set_locs[k]->loc, msg);
    }
  }
}

// The checkpoint's value of parameter `name` (--model), with `origin` set; nullopt if it gives none.
std::optional<Value> Compiler::model_param(const std::string& name, std::string& origin) const {
  for (const auto& [n, value] : opts_.model_sets)
    if (n == name) {
      origin = opts_.model_origin + " (" + n + "=" + value + ")";
      return Value::of_string(value);
    }
  return std::nullopt;
}

// A block; the names its <let>s bind end with it.
void Compiler::body(const std::vector<Element>& children) {
  const size_t mark = vars_.size();
  for (const auto& e : children) {
    if (diags_.full()) break;
    statement(e);
  }
  vars_.erase(vars_.begin() + std::ptrdiff_t(mark), vars_.end());
}

// <let name value>: a name for the rest of the enclosing block (YvetteML's x := e).
void Compiler::let(const Element& e) {
  const Attr* n = e.find("name");
  auto v = eval(*e.find("value"));
  if (!v) return;
  const std::string& name = n->value;
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    diags_.error(n->loc, "'" + name + "' is not a name");
    return;
  }
  vars_.emplace_back(name, *v);
}

// <require cond= message=>: the workflow refuses parameters it cannot run with.
void Compiler::require(const Element& e) {
  const Attr& cond = *e.find("cond");
  auto c = eval(cond);
  if (!c) return;
  const auto n = as_number(*c);
  if (!n) {
    diags_.error(cond.loc, "cond=\"" + cond.value + "\" is not a boolean expression");
    return;
  }
  if (*n != 0) return;
  auto m = render(*e.find("message"));
  if (m) diags_.error(e.loc, *m + " (" + cond.value + " is false)");
}

void Compiler::loop(const Element& e, bool parallel) {
  const Attr* var = e.find("var");
  if (!var) {  // a block: for par each child is a branch of its own
    if (e.find("from") || e.find("to"))
      diags_.error(e.loc, "<" + e.name + "> with from/to needs var=");
    if (!parallel) {
      body(e.children);
      return;
    }
    for (const auto& c : e.children) {
      push_context();
      statement(c);
      pop_context();
    }
    return;
  }
  if (const Attr* va = e.find("values")) {  // <par var="m" values="5,7,10">
    if (e.find("from") || e.find("to") || e.find("step"))
      diags_.error(va->loc, "<" + e.name + "> takes values= or from/to/step, not both");
    auto vals = eval_list(*va);
    if (!vals) return;
    size_t k = 0;
    iterate(e, parallel, var->value, [&](std::int64_t& v) {
      if (k == vals->size()) return false;
      v = (*vals)[k++];
      return true;
    });
    return;
  }
  const Attr* from = e.find("from");
  const Attr* to = e.find("to");
  if (!to) {
    diags_.error(e.loc, "<" + e.name + " var=\"" + var->value + "\"> requires attribute 'to'");
    return;
  }
  std::int64_t lo = 0, step = 1;
  if (from) {
    auto v = eval_int(*from);
    if (!v) return;
    lo = *v;
  }
  auto hi = eval_int(*to);
  if (!hi) return;
  if (const Attr* s = e.find("step")) {
    auto v = eval_int(*s);
    if (!v) return;
    if (*v == 0) {
      diags_.error(s->loc, "step must not be 0");
      return;
    }
    step = *v;
  }
  // Iterations beyond the task limit, this loop's times its enclosing loops', cannot
  // compile: say so before expanding (an empty or if-guarded body, or tasks that
  // all fail, would otherwise spin through them).
  const long double trips = std::max<long double>(
      0, std::ceil(step > 0 ? (static_cast<long double>(*hi) - lo) / step
                            : (static_cast<long double>(lo) - *hi) / -static_cast<long double>(step)));
  if (nested_trips_ * trips > static_cast<long double>(opts_.max_tasks)) {
    const std::string n = std::to_string(static_cast<long long>(std::min<long double>(trips, 9e18L)));
    diags_.error(to->loc, "<" + e.name + " var=\"" + var->value + "\"> runs " + n + " iterations" +
                              (nested_trips_ > 1 ? " inside loops of " + std::to_string(static_cast<long long>(
                                                       std::min<long double>(nested_trips_, 9e18L))) +
                                                       " iterations"
                                                 : std::string()) +
                              ", more than the task limit (" + std::to_string(opts_.max_tasks) + "; --max-tasks)");
    return;
  }
  nested_trips_ *= std::max<long double>(trips, 1);
  std::int64_t i = lo;
  iterate(e, parallel, var->value, [&](std::int64_t& v) {
    if (step > 0 ? i >= *hi : i <= *hi) return false;
    v = i;
    i += step;
    return true;
  });
  nested_trips_ /= std::max<long double>(trips, 1);
}

// The body of loop `e` once per value `next` yields (false: no more), bound
// to `var`; each iteration of a par is a branch of its own.
void Compiler::iterate(const Element& e, bool parallel, const std::string& var, const std::function<bool(std::int64_t&)>& next) {
  if (!parallel) push_context();
  vars_.emplace_back(var, Value::of_int(0));
  const size_t slot = vars_.size() - 1;
  for (std::int64_t v = 0; next(v);) {
    vars_[slot].second = Value::of_int(v);
    if (parallel) push_context();
    body(e.children);
    if (parallel) pop_context();
    if (diags_.full() || too_many()) break;
  }
  vars_.pop_back();
  if (!parallel) pop_context();
}

bool Compiler::too_many() {
  if (dag_.tasks.size() <= opts_.max_tasks) return false;
  if (!too_many_reported_)
    diags_.error(SrcLoc{dag_.docs[0]->path.get(), 1, 1},
                 "workflow expands to more than " + std::to_string(opts_.max_tasks) + " tasks (--max-tasks)");
  too_many_reported_ = true;
  return true;
}

std::optional<bool> Compiler::condition(const Element& e) {
  if (!check_attrs(e)) return std::nullopt;
  auto c = eval(*e.find("cond"));
  if (!c) return std::nullopt;
  const auto n = as_number(*c);
  if (!n) {
    diags_.error(e.find("cond")->loc, "cond=\"" + e.find("cond")->value + "\" is not a boolean expression");
    return std::nullopt;
  }
  return *n != 0;
}

void Compiler::branch(const Element& e, bool take, const std::function<void(const Element&)>& each,
                      const std::function<void(const std::vector<Element>&)>& otherwise) {
  int elses = 0;
  for (const auto& ch : e.children) {
    if (ch.name == "else") {
      if (++elses > 1) diags_.error(ch.loc, "<if> has more than one <else>");
      check_attrs(ch);
      if (!take) otherwise(ch.children);
    } else if (take) {
      each(ch);
    }
  }
}

void Compiler::if_(const Element& e) {
  const std::optional<bool> c = condition(e);
  if (!c) return;
  branch(e, *c, [&](const Element& ch) { statement(ch); }, [&](const std::vector<Element>& kids) { body(kids); });
}

void Compiler::call(const Element& e) {
  auto rel = render(*e.find("workflow"));
  if (!rel) return;
  fs::path p(*rel);
  if (p.is_relative()) p = frames_.back().dir / p;
  const std::string canon = canonical_path(p);
  if (!path_exists(p)) {
    diags_.error(e.find("workflow")->loc, "cannot open called workflow '" + p.string() + "'");
    return;
  }
  if (std::find(call_stack_.begin(), call_stack_.end(), canon) != call_stack_.end()) {
    diags_.error(e.loc, "recursive call of '" + p.string() + "' (call chain: " + chain(canon) + ")");
    return;
  }
  const xml::Document* doc = nullptr;
  if (auto it = docs_by_path_.find(canon); it != docs_by_path_.end()) {
    doc = it->second;
  } else {
    auto d = xml::parse_file(p.string(), diags_);
    if (!d) return;
    if (d->root.name == "application" && !translate_application(d->root, diags_)) return;
    doc = d.get();
    docs_by_path_[canon] = doc;
    dag_.docs.push_back(std::move(d));
  }
  if (doc->root.name != "workflow") {
    diags_.error(doc->root.loc, "root element must be <workflow> (or a YML <application>), not <" + doc->root.name + ">");
    return;
  }
  // parameter values and data bindings, evaluated in the caller's scope
  std::vector<std::pair<std::string, std::string>> sets;
  std::vector<const Attr*> set_locs;
  std::map<std::string, std::pair<std::int32_t, const Attr*>> binds;
  for (const auto& ch : e.children) {
    check_attrs(ch);
    if (ch.name == "set") {
      const Attr* pa = ch.find("param");
      const Attr* va = ch.find("value");
      if (!pa || !va) continue;
      auto v = eval(*va);
      if (!v) continue;
      sets.emplace_back(pa->value, v->str());
      set_locs.push_back(pa);
    } else if (ch.name == "bind") {
      const Attr* da = ch.find("data");
      const Attr* ta = ch.find("to");
      if (!da || !ta) continue;
      auto text = render(*ta);
      if (!text) continue;
      auto ref = resolve(*text, *ta);
      if (!ref) continue;
      if (ref->tile >= 0) {
        diags_.error(ta->loc, "<bind> takes whole data, not the tile '" + *text + "'");
        continue;
      }
      binds[da->value] = {ref->data, da};
    } else {
      diags_.error(ch.loc, "unknown element <" + ch.name + "> in <call> (expected <set> or <bind>)");
    }
  }
  const std::string prefix = attr_or(e, "name", fs::path(*rel).stem().string()) + "#" + std::to_string(call_count_++) + "/";
  Frame f;
  f.doc = doc;
  f.dir = p.parent_path();
  f.var_base = vars_.size();
  f.prefix = frames_.back().prefix + prefix;
  // bound data declared in the callee alias the caller's
  std::set<std::string> declared;
  for (const auto& ch : doc->root.children)
    if (ch.name == "data" && ch.find("name")) {
      bound_.erase(&ch);
      declared.insert(ch.find("name")->value);
      auto it = binds.find(ch.find("name")->value);
      if (it != binds.end()) bound_[&ch] = it->second.first;
    }
  for (const auto& [name, b] : binds)
    if (!declared.count(name))
      diags_.error(b.second->loc, "<bind data=\"" + name + "\">: '" + p.string() + "' declares no data '" + name + "'" +
                                      did_you_mean(name, std::vector<std::string>(declared.begin(), declared.end())));
  frames_.push_back(std::move(f));
  call_stack_.push_back(canon);
  check_attrs(doc->root);
  declare_params(doc->root, sets, false, set_locs);
  push_context();
  body(doc->root.children);
  pop_context();
  call_stack_.pop_back();
  vars_.resize(frames_.back().var_base);
  frames_.pop_back();
}

std::string Compiler::chain(const std::string& last) const {
  std::string s;
  for (const auto& c : call_stack_) s += fs::path(c).filename().string() + " -> ";
  return s + fs::path(last).filename().string();
}

}  // namespace ymlopt::compiler
