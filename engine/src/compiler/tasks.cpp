// <task> and <save>: the component, its ports bound to data, its arguments typed.
#include "compiler.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>

namespace ymlopt::compiler {

const std::vector<ArgValue>& Compiler::defaults(const ComponentSpec* c) {
  auto it = defaults_.find(c);
  if (it != defaults_.end()) return it->second;
  std::vector<ArgValue> v;
  for (const auto& p : c->params) v.push_back(parse_arg(p, p.default_value).value_or(ArgValue{}));
  return defaults_[c] = std::move(v);
}

std::optional<ArgValue> Compiler::parse_arg(const ParamSpec& p, const std::string& s) {
  ArgValue v;
  v.text = s;
  char* end = nullptr;
  switch (p.type) {
    case ParamType::string_: return v;
    case ParamType::bool_:
      if (s == "true" || s == "1") v.number = 1;
      else if (s == "false" || s == "0" || s.empty()) v.number = 0;
      else return std::nullopt;
      return v;
    case ParamType::int_: {
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end) {
        const double d = std::strtod(s.c_str(), &end);
        if (s.empty() || *end || d != double(std::int64_t(d))) return std::nullopt;
        v.number = d;
        return v;
      }
      v.number = double(x);
      return v;
    }
    case ParamType::float_: {
      v.number = std::strtod(s.c_str(), &end);
      if (s.empty() || *end) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

std::string Compiler::task_desc(const Element& e, const std::string& comp) {
  const Attr* n = e.find("name");
  if (n) {
    auto r = render(*n);
    return "task '" + r.value_or(n->value) + "'";
  }
  return "task '" + comp + "'";
}

void Compiler::task(const Element& e) {
  const Attr* ca = e.find("component");
  if (!ca) return;
  const auto cname = render(*ca);
  if (!cname) return;
  const ComponentSpec* c = reg_.find(*cname);
  if (!c) {
    diags_.error(ca->loc, task_desc(e, *cname) + ": unknown component '" + *cname + "'" +
                              did_you_mean(*cname, reg_.names()));
    return;
  }
  std::string who_text;
  auto who = [&]() -> const std::string& {
    if (who_text.empty()) who_text = task_desc(e, c->name);
    return who_text;
  };
  std::vector<Binding> binds(c->ports.size());
  std::vector<bool> bound(c->ports.size(), false);
  std::vector<ArgValue> args = defaults(c);
  std::vector<bool> arg_set(c->params.size(), false);
  bool bad = false, unknown_port = false;
  const Describe describe = [&] { return who(); };
  // <in>, <out>, <inout> and <arg>, also inside <if cond> / <else> (a port bound or an arg given only sometimes).
  std::function<void(const Element&)> child = [&](const Element& ch) {
    if (ch.name == "in" || ch.name == "out" || ch.name == "inout") {
      bad |= !bind_port(ch, c, binds, bound, unknown_port, describe);
    } else if (ch.name == "arg") {
      bad |= !bind_arg(ch, c, args, arg_set, describe);
    } else if (ch.name == "if") {
      const std::optional<bool> take = condition(ch);
      if (!take) {
        bad = true;
        return;
      }
      branch(ch, *take, child, [&](const std::vector<Element>& kids) {
        for (const auto& g : kids) child(g);
      });
    } else {
      diags_.error(ch.loc, "unknown element <" + ch.name +
                               "> in <task> (expected <in>, <out>, <inout>, <arg> or <if> around them)");
      bad = true;
    }
  };
  for (const auto& ch : e.children) child(ch);
  for (size_t k = 0; k < c->ports.size() && !unknown_port; ++k)
    if (!bound[k] && !c->ports[k].optional) {
      diags_.error(e.loc, who() + ": missing <" + std::string(access_name(c->ports[k].access)) + " port=\"" +
                              c->ports[k].name + "\"> of " + c->name);
      bad = true;
    }
  for (size_t k = 0; k < c->params.size(); ++k)
    if (!arg_set[k] && c->params[k].required) {
      diags_.error(e.loc, who() + ": missing <arg name=\"" + c->params[k].name + "\"> of " + c->name);
      bad = true;
    }
  if (bad) return;
  if (!bind_compressed(e, c, binds, args, arg_set, describe)) return;
  const size_t before = dag_.tasks.size();
  add_task(e.loc, c, std::move(binds), std::move(args), e.find("name"), describe);
  if (const Attr* w = e.find("where"); w && dag_.tasks.size() > before) pin_task(*w, dag_.tasks.back(), describe);
}

// where="cpu|opencl|cuda|any" on a task: the kind of worker it runs on; a
// device it has no kernel for (or whose kernel refuses its shapes) is an error.
void Compiler::pin_task(const Attr& a, TaskNode& t, const Describe& who) {
  const auto text = render(a);
  if (!text) return;
  if (!parse_where(*text, t.where)) {
    diags_.error(a.loc, who() + ": where=\"" + *text + "\" is not a kind of worker" +
                            did_you_mean(*text, {"any", "cpu", "opencl", "cuda"}) + " (any, cpu, opencl, cuda)");
    return;
  }
  const std::vector<TensorView> views = dag_.shape_views(t.bindings);
  if (std::string why = where_refusal(*t.comp, t.where, TaskShape{views, t.args}); !why.empty())
    diags_.error(a.loc, who() + ": where=\"" + *text + "\": " + why);
}

// A <in>/<out>/<inout> of task element `ch`: checked and bound to its port; false after reporting.
bool Compiler::bind_port(const Element& ch, const ComponentSpec* c, std::vector<Binding>& binds, std::vector<bool>& bound,
                         bool& unknown_port, const Describe& who) {
  auto port_names = [c] {
    std::vector<std::string> v;
    for (const auto& p : c->ports) v.push_back(p.name);
    return v;
  };
  check_attrs(ch);
  const Attr* pa = ch.find("port");
  const Attr* da = ch.find("data");
  if (!pa || !da) return false;
  size_t k = 0;
  while (k < c->ports.size() && c->ports[k].name != pa->value) ++k;
  if (k == c->ports.size()) {
    diags_.error(pa->loc, who() + ": unknown port '" + pa->value + "' of " + c->name + did_you_mean(pa->value, port_names()));
    unknown_port = true;
    return false;
  }
  const PortSpec& ps = c->ports[k];
  if (bound[k]) {
    diags_.error(ch.loc, who() + ": port '" + ps.name + "' is bound twice");
    return false;
  }
  bound[k] = true;  // attempted: a failed binding is not also reported missing
  const Access mode = ch.name == "in" ? Access::read : ch.name == "out" ? Access::write : Access::read_write;
  if (mode != ps.access) {
    diags_.error(ch.loc, who() + ": port '" + ps.name + "' of " + c->name + " is <" + access_name(ps.access) +
                             ">, bound with <" + ch.name + ">");
    return false;
  }
  auto text = render(*da);
  if (!text) return false;
  auto ref = resolve(*text, *da);
  if (!ref) return false;
  const DataDecl& d = dag_.data[size_t(ref->data)];
  if (!ps.dtypes.empty() && std::find(ps.dtypes.begin(), ps.dtypes.end(), d.dtype) == ps.dtypes.end()) {
    std::string list;
    for (size_t q = 0; q < ps.dtypes.size(); ++q) {
      if (q) list += q + 1 == ps.dtypes.size() ? " or " : ", ";
      list += dtype_name(ps.dtypes[q]);
    }
    diags_.error(da->loc, who() + ": port '" + ps.name + "' of " + c->name + " accepts " + list + ", but '" +
                              *text + "' is " + dtype_name(d.dtype));
    return false;
  }
  const std::vector<std::int64_t> shp = dag_.ref_shape(*ref);
  if (int(shp.size()) > ps.max_rank) {
    diags_.error(da->loc, who() + ": port '" + ps.name + "' of " + c->name + " takes rank <= " +
                              std::to_string(ps.max_rank) + ", but '" + *text + "' has shape " + shape_str(shp));
    return false;
  }
  binds[k] = Binding{*ref, mode};
  return true;
}

// An <arg> of task element `ch`: typed against its ParamSpec and set; false after reporting.
bool Compiler::bind_arg(const Element& ch, const ComponentSpec* c, std::vector<ArgValue>& args, std::vector<bool>& arg_set,
                        const Describe& who) {
  auto param_names = [c] {
    std::vector<std::string> v;
    for (const auto& p : c->params) v.push_back(p.name);
    return v;
  };
  check_attrs(ch);
  const Attr* na = ch.find("name");
  const Attr* va = ch.find("value");
  if (!na || !va) return false;
  size_t k = 0;
  while (k < c->params.size() && c->params[k].name != na->value) ++k;
  if (k == c->params.size()) {
    diags_.error(na->loc, who() + ": unknown argument '" + na->value + "' of " + c->name + did_you_mean(na->value, param_names()));
    return false;
  }
  auto v = eval(*va);
  if (!v) return false;
  auto parsed = parse_arg(c->params[k], v->kind == Value::Kind::bool_ ? (v->i ? "true" : "false") : v->str());
  if (!parsed) {
    diags_.error(va->loc, who() + ": argument '" + na->value + "' of " + c->name + " must be " +
                              param_type_name(c->params[k].type) + ", got '" + v->str() + "'");
    return false;
  }
  args[k] = std::move(*parsed);
  arg_set[k] = true;
  return true;
}

void Compiler::save(const Element& e) {
  const ComponentSpec* c = reg_.find("io.save");
  if (!c) {
    diags_.error(e.loc, "<save> needs component io.save, which is not registered");
    return;
  }
  auto text = render(*e.find("data"));
  auto path = render(*e.find("to"));
  if (!text || !path) return;
  auto ref = resolve(*text, *e.find("data"));
  if (!ref) return;
  std::vector<Binding> binds(c->ports.size());
  binds[0] = Binding{*ref, Access::read};
  std::vector<ArgValue> args = defaults(c);
  for (size_t k = 0; k < c->params.size(); ++k) {
    if (c->params[k].name == "path") args[k].text = *path;
    if (c->params[k].name == "key") {
      if (const Attr* ka = e.find("key")) args[k].text = render(*ka).value_or("");
      else args[k].text = dag_.data[size_t(ref->data)].name;
    }
  }
  add_task(e.loc, c, std::move(binds), std::move(args), nullptr, [&] { return "save of '" + *text + "'"; });
}

}  // namespace ymlopt::compiler
