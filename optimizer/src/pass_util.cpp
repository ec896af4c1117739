#include "pass_util.hpp"

#include <regex>

namespace ymlopt::opt::detail {

std::map<std::string, double> run_component(const ComponentRegistry& reg, const std::string& name,
                                            std::map<std::string, Buf*> ports,
                                            const std::map<std::string, std::string>& args) {
  const ComponentSpec* spec = reg.find(name);
  if (!spec) throw std::runtime_error("component '" + name + "' is not registered");
  std::vector<TensorView> views;
  for (const PortSpec& p : spec->ports) {
    auto it = ports.find(p.name);
    views.push_back(it == ports.end() ? TensorView{} : it->second->view());
    if (it != ports.end()) ports.erase(it);
  }
  if (!ports.empty()) throw std::runtime_error(name + " has no port '" + ports.begin()->first + "'");
  std::vector<ArgValue> values;
  for (const ParamSpec& p : spec->params) {
    auto it = args.find(p.name);
    ArgValue a;
    a.text = it != args.end() ? it->second : p.default_value;
    if (p.type == ParamType::bool_) a.number = (a.text == "true" || a.text == "1") ? 1 : 0;
    else if (p.type != ParamType::string_ && !a.text.empty()) a.number = std::stod(a.text);
    values.push_back(a);
  }
  for (const auto& [k, v] : args) {
    bool known = false;
    for (const ParamSpec& p : spec->params) known = known || p.name == k;
    if (!known) throw std::runtime_error(name + " has no param '" + k + "'");
  }
  LocalContext ctx(std::move(views), Args(&spec->params, std::move(values)));
  if (spec->check) {
    const std::string msg = spec->check(TaskShape{ctx.ports(), ctx.args()});
    if (!msg.empty()) throw std::runtime_error(name + ": " + msg);
  }
  spec->cpu(ctx);
  return ctx.reports;
}

// ---------------------------------------------------------------- options


std::string opt_str(const PassSpec& s, const std::string& k, const std::string& def) {
  auto it = s.options.find(k);
  return it == s.options.end() ? def : it->second;
}

double opt_num(const PassSpec& s, const std::string& k, double def) {
  auto it = s.options.find(k);
  if (it == s.options.end()) return def;
  try {
    std::size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw PassError("option '" + k + "' of " + s.name + " is '" + it->second + "': not a number");
}


std::function<bool(const std::string&)> name_matcher(const PassSpec& s) {
  const std::string pattern = opt_str(s, "match", "");
  if (pattern.empty()) return [](const std::string&) { return true; };
  try {
    return [re = std::regex(pattern)](const std::string& name) { return std::regex_search(name, re); };
  } catch (const std::regex_error&) {
    throw PassError("option 'match' of " + s.name + ": bad regular expression '" + pattern + "'");
  }
}

std::vector<WeightUse> selected(PassContext& ctx, const PassSpec& s) {
  const auto matches = name_matcher(s);
  std::vector<WeightUse> out;
  for (WeightUse& u : ctx.ed.linear_weights())
    if (matches(u.name)) out.push_back(std::move(u));
  return out;
}


std::vector<int64_t> shape_of(const Buf& b) {
  return b.rows == 1 ? std::vector<int64_t>{b.cols} : std::vector<int64_t>{b.rows, b.cols};
}


NewTensor tensor(const std::string& role, Buf& b) { return {role, b.dtype, shape_of(b), b.bytes, true}; }

bool touches(const TaskNode& t, std::int32_t d) {
  for (const Binding& b : t.bindings)
    if (b.ref.data == d) return true;
  return false;
}

std::vector<char> written_data(const Dag& dag) {
  std::vector<char> w(dag.data.size(), 0);
  for (const TaskNode& t : dag.tasks)
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0 && b.mode != Access::read) w[std::size_t(b.ref.data)] = 1;
  return w;
}

bool read_later(const Dag& dag, std::size_t from, std::int32_t d) {
  for (std::size_t j = from + 1; j < dag.tasks.size(); ++j) {
    const TaskNode& t = dag.tasks[j];
    bool reads = false, writes_whole = false;
    for (const Binding& b : t.bindings) {
      if (b.ref.data != d) continue;
      if (b.mode != Access::write) reads = true;
      else if (b.ref.tile < 0) writes_whole = true;
    }
    if (reads) return true;
    if (writes_whole) return false;
  }
  return false;
}

std::optional<Uses> value_users(const Dag& dag, std::size_t from, const DataRef& r) {
  Uses users;
  for (std::size_t j = from + 1; j < dag.tasks.size(); ++j) {
    const TaskNode& t = dag.tasks[j];
    bool rewrites = false, other_read = false, other_write = false;
    for (std::size_t p = 0; p < t.bindings.size(); ++p) {
      const Binding& b = t.bindings[p];
      if (!overlaps(b.ref, r)) continue;
      if (b.ref == r) {
        if (b.mode == Access::write) rewrites = true;
        else users.emplace_back(j, p);
      } else {
        (b.mode == Access::read ? other_read : other_write) = true;
      }
    }
    if (other_read) return std::nullopt;
    if (rewrites || other_write) {
      if (other_write && !users.empty() && users.back().first == j) return std::nullopt;
      break;
    }
  }
  return users;
}


}  // namespace ymlopt::opt::detail
