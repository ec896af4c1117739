#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/yvetteml.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <map>
#include <sstream>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "io/tensor_file.hpp"
#include "ymlopt/engine/expr.hpp"

namespace fs = std::filesystem;

namespace {
/// fs::exists and fs::weakly_canonical without throwing: a name the system
/// refuses (too long, a loop of links) is a file that is not there.
bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}
std::string canonical_path(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}
/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b for a huge b.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }
}  // namespace

namespace ymlopt {

namespace {

using xml::Attr;
using xml::Element;

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
      {"data", {{"name", "shape"}, {"dtype", "tile", "split", "init", "seed", "value", "src", "key", "reshape", "distribute", "owner"}}},
      {"task", {{"component"}, {"name"}}},
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
                                             "call",   "notify",  "wait",     "save",  "description", "let",
                                             "unite",  "comethod", "until",   "while", "publish", "gather"};
  return v;
}

struct AccessState {
  std::int32_t writer = -1;
  std::vector<std::int32_t> readers;
  // for a tile: how many of the tensor's whole readers its writer already
  // follows (later writers follow that writer, so only newer readers matter)
  std::size_t whole_readers_done = 0;
};

struct DataState {
  AccessState whole;
  std::vector<AccessState> tiles;
  std::vector<std::uint8_t> tile_init;
  std::int64_t uninit_tiles = 0;  // tiles never written (when not initialised)
  bool init = false;
};

struct Frame {
  const xml::Document* doc = nullptr;
  fs::path dir;
  std::unordered_map<std::string, std::int32_t> data;  // name -> data index
  size_t var_base = 0;                                  // first variable of this frame
  std::string prefix;                                   // for local data of calls
  std::set<std::string> failed_data;                    // declarations that had errors
};

struct Context {  // a sequential context: workflow body, par branch, seq loop
  std::int32_t start_task = 0;
  std::vector<int> ranges;  // its waits so far: indices of WaitRanges (closed when it ends)
  int last_wait = -1;       // the latest WaitRange open here (its own or an enclosing context's)
  int last_notify = -1;              // event of its latest notify, or -1
  std::int32_t last_notify_end = 0;  // tasks emitted before that notify: [start_task, this)
};

/// The tasks one <wait> holds back: those emitted after it until its context
/// ends, a contiguous range of task ids (nested contexts included). The waits
/// open at a point of the program are a list through `parent`, latest first
/// (shared, not copied, by every task and notify there).
struct WaitRange {
  int event = -1;
  std::int32_t first = 0, end = -1;
  int parent = -1;  // the wait open before this one, or -1
};

/// One <notify>: its context's tasks [lo, hi) (their sinks are its sources) and
/// the waits open there (`waits`: the head of their list). `prev`: the event its
/// context notified before it, with `since` its tasks then ([lo, since)).
struct NotifyAt {
  int waits = -1;
  std::int32_t lo = 0, hi = 0;
  int prev = -1;
  std::int32_t since = 0;
};

struct EventInfo {
  std::string name;
  std::vector<std::int32_t> sources;  // tasks a waiter must follow
  std::vector<NotifyAt> notifies;
  SrcLoc first_wait;
};

class Compiler {
 public:
  Compiler(const CompileOptions& o, const ComponentRegistry& r, Diagnostics& d)
      : opts_(o), reg_(r), diags_(d) {}

  CompileResult run(std::unique_ptr<xml::Document> doc) {
    CompileResult res;
    if (!doc) return res;
    if (doc->root.name == "application" && !translate_application(doc->root, diags_)) return res;  // YvetteML
    const xml::Document* root = doc.get();
    dag_.file = *doc->path;
    dag_.docs.push_back(std::move(doc));
    call_stack_.push_back(canonical_path(dag_.file));
    if (root->root.name != "workflow") {
      diags_.error(root->root.loc, "root element must be <workflow> (or a YML <application>), not <" + root->root.name + ">");
      return res;
    }
    dag_.name = attr_or(root->root, "name", fs::path(dag_.file).stem().string());
    if (const Attr* c = root->root.find("checkpoint")) {
      if (c->value == "tasks" || c->value == "none") dag_.checkpoint = c->value;
      else diags_.error(c->loc, "checkpoint must be 'tasks' or 'none', not '" + c->value + "'");
    }
    Frame f;
    f.doc = root;
    f.dir = fs::path(dag_.file).parent_path();
    frames_.push_back(std::move(f));
    check_attrs(root->root);
    declare_params(root->root, opts_.sets, true, {});
    if (res.usage_error = usage_error_; usage_error_) return res;
    push_context();
    body(root->root.children);
    pop_context();
    if (!dag_.regions.empty()) finish_regions();
    if (!diags_.has_errors()) finish_events();
    if (!diags_.has_errors()) order();
    res.ok = !diags_.has_errors();
    res.dag = std::move(dag_);
    return res;
  }

 private:
  // ---------- helpers ----------
  static std::string attr_or(const Element& e, std::string_view n, std::string def) {
    const Attr* a = e.find(n);
    return a ? a->value : def;
  }

  // Attributes are checked once per element, not once per loop iteration.
  // Returns false when a required attribute is missing (then the element is
  // reported once and skipped: its handler may rely on every required one).
  bool check_attrs(const Element& e) {
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

  const Template* tmpl(const Attr& a) {
    auto it = templates_.find(&a);
    if (it != templates_.end()) return it->second.get();
    std::shared_ptr<const Template> t;
    try {
      t = Template::compile(a.value);
    } catch (const ExprError& e) {
      diags_.error(at_offset(a, e.offset), "bad expression in " + a.name + "=\"" + a.value + "\": " + e.message);
    }
    return (templates_[&a] = t).get();
  }

  static SrcLoc at_offset(const Attr& a, size_t off) {
    SrcLoc l = a.loc;
    if (l.col > 0 && !a.embedded) l.col += int(a.name.size() + 2 + off);
    return l;
  }

  const Value* lookup(std::string_view n) const {
    for (size_t i = vars_.size(); i-- > frames_.back().var_base;)
      if (vars_[i].first == n) return &vars_[i].second;
    return nullptr;
  }

  Lookup lookup_fn() const {
    return [this](std::string_view n) { return lookup(n); };
  }

  // Evaluates an attribute; nullopt after reporting an error.
  std::optional<Value> eval(const Attr& a) {
    const Template* t = tmpl(a);
    if (!t) return std::nullopt;
    try {
      return t->value(lookup_fn());
    } catch (const ExprError& e) {
      diags_.error(at_offset(a, e.offset), "bad expression in " + a.name + "=\"" + a.value + "\": " + e.message);
      return std::nullopt;
    }
  }
  std::optional<std::string> render(const Attr& a) {
    const Template* t = tmpl(a);
    if (!t) return std::nullopt;
    try {
      return t->render(lookup_fn());
    } catch (const ExprError& e) {
      diags_.error(at_offset(a, e.offset), "bad expression in " + a.name + "=\"" + a.value + "\": " + e.message);
      return std::nullopt;
    }
  }
  // A value as a number: numeric values, and literals such as cond="1",
  // cond="true" or budget_s="0.5" (an attribute without ${} is a string).
  static std::optional<double> as_number(const Value& v) {
    if (v.numeric()) return v.number();
    if (v.s == "true") return 1.0;
    if (v.s == "false") return 0.0;
    char* end = nullptr;
    const double x = std::strtod(v.s.c_str(), &end);
    if (v.s.empty() || *end != 0 || !std::isfinite(x)) return std::nullopt;  // not "nan", "inf"
    return x;
  }
  std::optional<std::int64_t> eval_int(const Attr& a) {
    auto v = eval(a);
    if (!v) return std::nullopt;
    if (v->kind == Value::Kind::int_ || v->kind == Value::Kind::bool_) return v->i;
    if (v->kind == Value::Kind::string_) {
      char* end = nullptr;
      const long long x = std::strtoll(v->s.c_str(), &end, 10);
      if (!v->s.empty() && *end == 0) return x;
    }
    diags_.error(a.loc, a.name + "=\"" + a.value + "\" must be an integer, got '" + v->str() + "'");
    return std::nullopt;
  }
  std::optional<std::vector<std::int64_t>> eval_list(const Attr& a) {
    auto s = render(a);
    if (!s) return std::nullopt;
    std::vector<std::int64_t> out;
    size_t p = 0;
    while (p <= s->size()) {
      size_t q = s->find(',', p);
      if (q == std::string::npos) q = s->size();
      std::string tok = s->substr(p, q - p);
      tok.erase(0, tok.find_first_not_of(" \t"));
      tok.erase(tok.find_last_not_of(" \t") + 1);
      char* end = nullptr;
      const long long x = std::strtoll(tok.c_str(), &end, 10);
      if (tok.empty() || *end != 0) {
        diags_.error(a.loc, a.name + "=\"" + a.value + "\" must be a comma-separated list of integers, got '" + *s + "'");
        return std::nullopt;
      }
      out.push_back(x);
      p = q + 1;
    }
    return out;
  }

  // ---------- params ----------
  void declare_params(const Element& wf, const std::vector<std::pair<std::string, std::string>>& sets,
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

  static std::optional<Value> convert(const Value& v, const std::string& type) {
    if (type == "string") return Value::of_string(v.str());
    if (v.kind != Value::Kind::string_) {
      if (type == "int") {
        if (v.kind == Value::Kind::float_ && v.f != double(std::int64_t(v.f))) return std::nullopt;
        return Value::of_int(v.kind == Value::Kind::float_ ? std::int64_t(v.f) : v.i);
      }
      if (type == "float") return Value::of_float(v.number());
      return Value::of_bool(v.number() != 0);
    }
    const std::string& s = v.s;
    if (type == "bool") {
      if (s == "true" || s == "1" || s == "yes") return Value::of_bool(true);
      if (s == "false" || s == "0" || s == "no") return Value::of_bool(false);
      return std::nullopt;
    }
    char* end = nullptr;
    if (type == "int") {
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end) return std::nullopt;
      return Value::of_int(x);
    }
    const double x = std::strtod(s.c_str(), &end);
    if (s.empty() || *end) return std::nullopt;
    return Value::of_float(x);
  }

  // ---------- body ----------
  // A block; the names its <let>s bind end with it.
  void body(const std::vector<Element>& children) {
    const size_t mark = vars_.size();
    for (const auto& e : children) {
      if (diags_.full()) break;
      statement(e);
    }
    vars_.erase(vars_.begin() + std::ptrdiff_t(mark), vars_.end());
  }

  // <let name value>: a name for the rest of the enclosing block (YvetteML's x := e).
  void let(const Element& e) {
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

  void statement(const Element& e) {
    if (e.name == "param" || e.name == "description") return;  // handled by declare_params
    if (!checked_.count(&e) &&
        std::find(body_elements().begin(), body_elements().end(), e.name) == body_elements().end()) {
      diags_.error(e.loc, "unknown element <" + e.name + ">" + did_you_mean(e.name, body_elements()));
      return;
    }
    if (!check_attrs(e)) return;
    if (!region_stack_.empty() && dag_.regions[size_t(region_stack_.back())].kind == Region::Kind::unite &&
        e.name != "comethod" && e.name != "par" && e.name != "seq" && e.name != "if" && e.name != "let") {
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
    else if (e.name == "unite") unite(e);
    else if (e.name == "comethod") comethod(e);
    else if (e.name == "until" || e.name == "while") runtime_loop(e);
    else if (e.name == "publish" || e.name == "gather") exchange(e);
  }

  void loop(const Element& e, bool parallel) {
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
  void iterate(const Element& e, bool parallel, const std::string& var, const std::function<bool(std::int64_t&)>& next) {
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

  bool too_many() {
    if (dag_.tasks.size() <= opts_.max_tasks) return false;
    if (!too_many_reported_)
      diags_.error(SrcLoc{dag_.docs[0]->path.get(), 1, 1},
                   "workflow expands to more than " + std::to_string(opts_.max_tasks) + " tasks (--max-tasks)");
    too_many_reported_ = true;
    return true;
  }

  void if_(const Element& e) {
    auto c = eval(*e.find("cond"));
    if (!c) return;
    const auto n = as_number(*c);
    if (!n) {
      diags_.error(e.find("cond")->loc, "cond=\"" + e.find("cond")->value + "\" is not a boolean expression");
      return;
    }
    const bool take = *n != 0;
    int elses = 0;
    for (const auto& ch : e.children) {
      if (ch.name == "else") {
        if (++elses > 1) diags_.error(ch.loc, "<if> has more than one <else>");
        check_attrs(ch);
        if (!take) body(ch.children);
      } else if (take) {
        statement(ch);
      }
    }
  }

  // ---------- data ----------
  void data(const Element& e) {
    const Attr* na = e.find("name");
    const Attr* sa = e.find("shape");
    if (!na || !sa) return;
    Frame& fr = frames_.back();
    // names may be computed (one tensor per layer in a loop: name="w_${l}")
    const auto rendered = render(*na);
    if (!rendered) return;
    const std::string& name = *rendered;
    DataDecl d;
    d.name = fr.prefix + name;
    d.loc = e.loc;
    // until the declaration succeeds, uses of the name are not reported again
    fr.failed_data.insert(name);
    if (const Attr* a = e.find("dtype")) {
      auto text = render(*a);
      if (!text) return;
      auto t = parse_dtype(*text);
      if (!t) {
        diags_.error(a->loc, "unknown dtype '" + *text + "' (expected f32, f64, f16, bf16, i8 or i32)");
        return;
      }
      d.dtype = *t;
    }
    auto shape = eval_list(*sa);
    if (!shape) return;
    for (auto x : *shape)
      if (x <= 0) {
        diags_.error(sa->loc, "shape " + shape_str(*shape) + " has a dimension <= 0");
        return;
      }
    if (shape->size() > Shape::kMaxRank) {
      diags_.error(sa->loc, "shape " + shape_str(*shape) + " has rank " + std::to_string(shape->size()) +
                                "; at most " + std::to_string(Shape::kMaxRank) + " dimensions are supported");
      return;
    }
    {  // 2^62 bytes at most: sizes and offsets stay in int64 everywhere
      std::int64_t bytes = dtype_size(d.dtype);
      for (auto x : *shape)
        if (__builtin_mul_overflow(bytes, x, &bytes) || bytes > (std::int64_t(1) << 62)) {
          diags_.error(sa->loc, "shape " + shape_str(*shape) + " of " + dtype_name(d.dtype) +
                                    " is too large (more than 2^62 bytes)");
          return;
        }
    }
    d.shape = *shape;
    if (d.shape.size() == 1) d.rows = 1, d.cols = d.shape[0];
    else {
      d.cols = d.shape.back();
      d.rows = 1;
      for (size_t i = 0; i + 1 < d.shape.size(); ++i) d.rows *= d.shape[i];
    }
    if (const Attr* ta = e.find("tile")) {
      auto t = eval_list(*ta);
      if (!t) return;
      if (d.shape.size() > 2 || t->size() != d.shape.size()) {
        diags_.error(ta->loc, "tile " + shape_str(*t) + " does not match shape " + shape_str(d.shape) +
                                  " (tiles are given per dimension, for rank 1 or 2)");
        return;
      }
      for (auto x : *t)
        if (x <= 0) {
          diags_.error(ta->loc, "tile " + shape_str(*t) + " has a dimension <= 0");
          return;
        }
      if (t->size() == 1) d.tile_rows = 1, d.tile_cols = (*t)[0];
      else d.tile_rows = (*t)[0], d.tile_cols = (*t)[1];
      d.ntile_r = ceil_div(d.rows, d.tile_rows);
      d.ntile_c = ceil_div(d.cols, d.tile_cols);
      if (static_cast<long double>(d.ntile_r) * d.ntile_c > static_cast<long double>(opts_.max_tasks)) {
        diags_.error(ta->loc, "tile " + shape_str(*t) + " cuts '" + name + "' " + shape_str(d.shape) + " into " +
                                  std::to_string(d.ntile_r) + " x " + std::to_string(d.ntile_c) +
                                  " tiles, more than the task limit (" + std::to_string(opts_.max_tasks) +
                                  "; --max-tasks)");
        return;
      }
    }
    if (const Attr* sa = e.find("split")) {
      auto w = eval_list(*sa);
      if (!w) return;
      if (e.find("tile")) {
        diags_.error(sa->loc, "data '" + name + "' has both tile= and split=");
        return;
      }
      if (d.shape.size() > 2) {
        diags_.error(sa->loc, "split= is for rank 1 or 2 data; '" + name + "' has shape " + shape_str(d.shape));
        return;
      }
      std::int64_t sum = 0;
      for (auto x : *w) {
        if (x <= 0) {
          diags_.error(sa->loc, "split " + shape_str(*w) + " has a width <= 0");
          return;
        }
        sum += x;
      }
      if (sum != d.cols) {
        diags_.error(sa->loc, "split " + shape_str(*w) + " adds up to " + std::to_string(sum) + " columns, but '" +
                                  name + "' has " + std::to_string(d.cols));
        return;
      }
      d.set_split(*w);
    }
    if (const Attr* a = e.find("distribute")) {  // placement on MPI ranks (--backend starpu-mpi)
      static const std::vector<std::string> kinds = {"block-cyclic-2d", "rows", "cols", "replicate"};
      if (std::find(kinds.begin(), kinds.end(), a->value) == kinds.end())
        diags_.error(a->loc, "unknown distribute '" + a->value + "'" + did_you_mean(a->value, kinds) +
                                 " (expected block-cyclic-2d, rows, cols or replicate)");
      d.distribute = a->value;
    }
    if (const Attr* a = e.find("owner")) {
      if (auto v = eval_int(*a)) {
        if (*v < 0) diags_.error(a->loc, "owner=" + std::to_string(*v) + " is negative (expected a rank >= 0)");
        d.owner = std::int32_t(*v);
      }
    }
    const Attr* init = e.find("init");
    const Attr* src = e.find("src");
    if (init && src) diags_.error(src->loc, "data '" + name + "' has both init= and src=");
    if (init) {
      static const std::vector<std::pair<std::string, InitKind>> kinds = {
          {"zeros", InitKind::zeros},   {"ones", InitKind::ones}, {"identity", InitKind::identity},
          {"random", InitKind::random}, {"spd", InitKind::spd},   {"dominant", InitKind::dominant},
          {"value", InitKind::value}};
      std::vector<std::string> names;
      for (auto& [k, v] : kinds) {
        names.push_back(k);
        if (init->value == k) d.init = v;
      }
      if (d.init == InitKind::none)
        diags_.error(init->loc, "unknown init '" + init->value + "'" + did_you_mean(init->value, names) +
                                    " (expected zeros, ones, identity, random, spd, dominant or value)");
      if ((d.init == InitKind::identity || d.init == InitKind::spd || d.init == InitKind::dominant) &&
          (d.shape.size() != 2 || d.shape[0] != d.shape[1]))
        diags_.error(init->loc, "init=\"" + init->value + "\" needs a square 2-D shape, not " + shape_str(d.shape));
      if (d.init == InitKind::value && !e.find("value"))
        diags_.error(init->loc, "init=\"value\" requires attribute 'value'");
    }
    if (const Attr* a = e.find("seed")) {
      if (auto v = eval_int(*a)) d.seed = std::uint64_t(*v);
    }
    if (const Attr* a = e.find("value")) {
      if (auto v = eval(*a)) {
        if (auto num = convert(*v, "float"); num) d.value = num->f;  // "1e30" is plain text until converted
        else diags_.error(a->loc, "value=\"" + a->value + "\" is not a number");
        if (!init) d.init = InitKind::value;
      }
    }
    if (src) {
      auto path = render(*src);
      if (!path) return;
      // relative to the workflow's folder, else to the current directory
      // (where a path given with --set usually is)
      fs::path p(*path);
      if (p.is_relative() && (path_exists(fr.dir / p) || !path_exists(p))) p = fr.dir / p;
      d.src = p.string();
      d.init = InitKind::file;
      if (const Attr* k = e.find("key")) {
        if (auto kv = render(*k)) d.key = *kv;
      }
      if (const Attr* r = e.find("reshape")) {
        if (r->value != "true" && r->value != "false")
          diags_.error(r->loc, "reshape=\"" + r->value + "\" must be true or false");
        d.reshape = r->value == "true";
      }
      if (!opts_.check_files) {
        // dry run: the declaration alone sizes the tensor
      } else if (!path_exists(p)) {
        if (missing_files_.insert(d.src).second)
          diags_.error(src->loc, "cannot open '" + d.src + "' (nor '" + *path + "' from the current directory)");
      } else if (broken_files_.count(d.src)) {
        // its header error was reported where the file was first used
      } else if (!compressed_source(d, *src)) {
        check_source(d, *src);
      }
    } else {
      for (const char* only : {"key", "reshape"})
        if (const Attr* a = e.find(only)) diags_.error(a->loc, std::string(only) + "= is only meaningful with src=");
    }
    if (fr.data.count(name)) {
      const DataDecl& prev = dag_.data[size_t(fr.data[name])];
      if (prev.loc.line != e.loc.line || prev.loc.file != e.loc.file) {
        diags_.error(na->loc, "data '" + name + "' declared twice (first at line " + std::to_string(prev.loc.line) + ")");
        return;
      }
    }
    if (bound_.count(&e)) {  // a sub-workflow's data bound by the caller
      const std::int32_t idx = bound_[&e];
      const DataDecl& outer = dag_.data[size_t(idx)];
      if (outer.dtype != d.dtype || outer.shape != d.shape)
        diags_.error(e.loc, "data '" + name + "' is declared " + dtype_name(d.dtype) + shape_str(d.shape) +
                                " but the caller binds '" + outer.name + "' which is " + dtype_name(outer.dtype) +
                                shape_str(outer.shape));
      if (init || src) diags_.error(e.loc, "data '" + name + "' is bound by the caller and cannot have init= or src=");
      fr.data[name] = idx;
      fr.failed_data.erase(name);
      return;
    }
    if (diags_.has_errors() && d.shape.empty()) return;
    // files are used in place (their rows are dense); allocated tensors may be padded
    d.ld = d.init == InitKind::file ? d.cols : padded_ld(d.rows, d.cols, d.dtype);
    fr.failed_data.erase(name);
    fr.data[name] = std::int32_t(dag_.data.size());
    const std::int32_t index = std::int32_t(dag_.data.size());
    push_decl(std::move(d));
    // the companions of a compressed weight (hidden: tasks name the weight)
    for (auto& [role, cd] : pending_companions_) {
      dag_.data[size_t(index)].companions.emplace_back(role, std::int32_t(dag_.data.size()));
      push_decl(std::move(cd));
    }
    pending_companions_.clear();
  }

  void push_decl(DataDecl d) {
    dag_.data.push_back(std::move(d));
    DataState st;
    const DataDecl& dd = dag_.data.back();
    st.init = dd.init != InitKind::none;
    if (dd.tiled()) {
      st.tiles.resize(size_t(dd.ntiles()));
      if (!st.init) st.tile_init.assign(size_t(dd.ntiles()), 0), st.uninit_tiles = dd.ntiles();
    } else if (!st.init) {
      st.uninit_tiles = 1;
    }
    states_.push_back(std::move(st));
  }

  // A weight stored compressed by `ymlopt optimize` (see DataDecl::format): the
  // file has metadata "ymlopt.format.<key>" = "FORMAT group=G block=B layout=nk|kn
  // n=N k=K [act=f32]" and companion tensors "<key>.w", "<key>.w_scale", ... Returns false
  // when the file holds no such record (the key is then checked as usual).
  bool compressed_source(DataDecl& d, const Attr& src) {
    if (d.key.empty()) return false;
    std::map<std::string, std::string> meta;
    std::vector<io::TensorInfo> infos;
    try {
      meta = io::read_metadata(d.src);
      auto it = meta.find("ymlopt.format." + d.key);
      if (it == meta.end()) return false;
      infos = io::list_tensors(d.src);
      std::istringstream words(it->second);
      std::string w;
      words >> d.format;
      std::map<std::string, std::string> kv;
      while (words >> w)
        if (auto eq = w.find('='); eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
      d.format_group = kv.count("group") ? std::stoll(kv["group"]) : 0;
      d.format_block = kv.count("block") ? std::stoll(kv["block"]) : 0;
      d.format_act = kv.count("act") ? kv["act"] : "";
      const bool nk = kv["layout"] == "nk";
      d.format_nk = nk;
      const std::int64_t n = std::stoll(kv.at("n")), k = std::stoll(kv.at("k"));
      const std::vector<std::int64_t> want = nk ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n};
      const std::string what = "'" + d.key + "' in " + d.src + " (stored " + d.format + ")";
      if (d.shape != want) {
        diags_.error(src.loc, what + " is a " + shape_str(want) + " weight but data '" + d.name + "' is declared " +
                                  shape_str(d.shape));
        d.format.clear();
        return true;
      }
      std::int64_t tile_n = 0;
      if (d.tiled()) {
        if ((nk ? d.ntile_c : d.ntile_r) > 1) {
          diags_.error(src.loc, what + ": tiles of a compressed weight may split its output features only");
          d.format.clear();
          return true;
        }
        tile_n = nk ? d.tile_rows : d.tile_cols;
      }
      for (const char* role : {"w", "w_scale", "w_zero", "w_index", "w_ptr", "w_hot", "w_hot_scale"}) {
        const std::string ck = d.key + "." + role;
        const io::TensorInfo* hit = nullptr;
        for (const auto& t : infos)
          if (t.name == ck) hit = &t;
        if (!hit) {
          if (std::string(role) == "w") {
            diags_.error(src.loc, what + ": the file has no companion tensor '" + ck + "'");
            d.format.clear();
            return true;
          }
          continue;
        }
        if (!hit->dtype || hit->shape.empty() || hit->shape.size() > 2) {
          diags_.error(src.loc, what + ": companion '" + ck + "' has an unsupported dtype or shape");
          d.format.clear();
          return true;
        }
        DataDecl c;
        c.name = d.name + "." + role;
        c.dtype = *hit->dtype;
        c.shape = hit->shape;
        c.rows = c.shape.size() == 1 ? 1 : c.shape[0];
        c.cols = c.shape.back();
        c.ld = c.cols;
        c.init = InitKind::file;
        c.src = d.src;
        c.key = ck;
        c.loc = d.loc;
        if (tile_n > 0) {
          // row tiles (output features), like the weight's
          const std::int64_t lead = c.shape.size() == 1 ? c.cols : c.rows;
          if (lead != n) {
            diags_.error(src.loc, what + ": format " + d.format + " cannot be split into tiles (used by tiles here)");
            d.format.clear();
            return true;
          }
          if (c.shape.size() == 1) c.tile_rows = 1, c.tile_cols = tile_n;
          else c.tile_rows = tile_n, c.tile_cols = c.cols;
          c.ntile_r = ceil_div(c.rows, c.tile_rows);
          c.ntile_c = ceil_div(c.cols, c.tile_cols);
        }
        pending_companions_.emplace_back(role, std::move(c));
      }
    } catch (const io::IoError& e) {  // the file itself (its message names it): reported at its first use
      broken_files_.insert(d.src);
      diags_.error(src.loc, e.what());
      pending_companions_.clear();
      d.format.clear();
      return true;
    } catch (const std::exception& e) {
      diags_.error(src.loc, d.src + ": " + e.what());
      pending_companions_.clear();
      d.format.clear();
      return true;
    }
    return true;
  }

  // Binds nn.linear's companion ports for a compressed weight, and nn.embedding's
  // (table, table_scale, table_zero) for a compressed table; any other reader
  // of one is an error. Returns false after reporting.
  bool bind_compressed(const Element& e, const ComponentSpec* c, std::vector<Binding>& binds,
                       std::vector<ArgValue>& args, const std::vector<bool>& arg_set,
                       const std::function<std::string()>& who) {
    for (size_t k = 0; k < binds.size(); ++k) {
      if (binds[k].ref.data < 0) continue;
      const DataDecl& d = dag_.data[size_t(binds[k].ref.data)];
      if (d.format.empty()) continue;
      if (c->name == "nn.embedding" && c->ports[k].name == "table") {
        if (!bind_compressed_table(e, c, k, binds, args, arg_set, who)) return false;
        continue;
      }
      if (c->name != "nn.linear" || c->ports[k].name != "w") {
        diags_.error(e.loc, who() + ": '" + d.name + "' is stored compressed (" + d.format + ") in " + d.src +
                                ": only nn.linear's port 'w' can read it (and nn.embedding's port 'table' when it is an "
                                "int8/int4 table)");
        return false;
      }
      for (const auto& [role, idx] : d.companions)
        if (role == "w_hot") {
          diags_.error(e.loc, who() + ": '" + d.name + "' is stored " + d.format + " with int8 hot rows in " + d.src +
                                  ": only nn.embedding's port 'table' can read it");
          return false;
        }
      auto param = [&](const char* n) {
        size_t i = 0;
        while (i < c->params.size() && c->params[i].name != n) ++i;
        return i;
      };
      if (arg_set[param("format")] && args[param("format")].text != "dense") {
        diags_.error(e.loc, who() + ": format=\"" + args[param("format")].text + "\" but '" + d.name +
                                "' is stored " + d.format + " (leave format out)");
        return false;
      }
      const std::size_t tw = param("transpose_w");
      if (arg_set[tw] && (args[tw].number != 0) != d.format_nk) {
        diags_.error(e.loc, who() + ": transpose_w=" + args[tw].text + " but '" + d.name + "' is declared " +
                                (d.format_nk ? "[n, k]" : "[k, n]"));
        return false;
      }
      // a tile's index along the output features
      const DataRef w = binds[k].ref;
      const std::int32_t tile = w.tile < 0 ? -1 : std::int32_t(d.format_nk ? w.tile / d.ntile_c : w.tile % d.ntile_c);
      for (const auto& [role, idx] : d.companions) {
        size_t p = 0;
        while (p < c->ports.size() && c->ports[p].name != role) ++p;
        if (p == c->ports.size()) continue;
        binds[p] = Binding{DataRef{idx, tile}, Access::read};
      }
      auto set = [&](const char* n, const std::string& text, double number) {
        const size_t i = param(n);
        if (i < args.size()) args[i].text = text, args[i].number = number;
      };
      if (d.format == "dense") {
        set("transpose_w", "true", 1);  // the companion is [n, k]
      } else {
        set("format", d.format, 0);
        set("group", std::to_string(d.format_group), double(d.format_group));
        set("block", std::to_string(d.format_block), double(d.format_block));
        if (!d.format_act.empty()) set("activations", d.format_act, 0);
      }
    }
    return true;
  }

  // nn.embedding reading a compressed table (port k): the file's record describes
  // W = table [n = vocab, k = d] (layout nk), so the companions "w", "w_scale",
  // "w_zero" are the int8/int4 codes and scales the embedding gathers from (the same
  // ones a tied lm_head nn.linear with transpose_w=true reads), or "w" a dense table.
  bool bind_compressed_table(const Element& e, const ComponentSpec* c, size_t k, std::vector<Binding>& binds,
                             std::vector<ArgValue>& args, const std::vector<bool>& arg_set,
                             const std::function<std::string()>& who) {
    const DataDecl& d = dag_.data[size_t(binds[k].ref.data)];
    const std::string what = "'" + d.name + "' is stored " + d.format + " in " + d.src;
    auto param = [&](const char* n) {
      size_t i = 0;
      while (i < c->params.size() && c->params[i].name != n) ++i;
      return i;
    };
    const size_t fi = param("format");
    if (fi < args.size() && arg_set[fi] && args[fi].text != "dense") {
      diags_.error(e.loc, who() + ": format=\"" + args[fi].text + "\" but " + what + " (leave format out)");
      return false;
    }
    if (d.format != "int8" && d.format != "int4" && d.format != "dense") {
      diags_.error(e.loc, who() + ": " + what + ": nn.embedding reads dense, int8 or int4 tables only");
      return false;
    }
    if (!d.format_nk) {
      diags_.error(e.loc, who() + ": " + what + " in layout kn ([d, vocab]): nn.embedding needs the table as [vocab, d]");
      return false;
    }
    if (binds[k].ref.tile >= 0) {
      diags_.error(e.loc, who() + ": " + what + ": nn.embedding reads the whole compressed table, not a tile");
      return false;
    }
    const auto& kPort = table_companion_ports();
    for (const auto& [role, idx] : d.companions) {
      auto it = kPort.begin();
      while (it != kPort.end() && it->first != role) ++it;
      if (it == kPort.end()) {
        diags_.error(e.loc, who() + ": " + what + " with a '" + role + "' tensor nn.embedding cannot read");
        return false;
      }
      size_t p = 0;
      while (p < c->ports.size() && c->ports[p].name != it->second) ++p;
      if (p < binds.size()) binds[p] = Binding{DataRef{idx, -1}, Access::read};
    }
    if (d.format != "dense") {
      if (fi < args.size()) args[fi].text = d.format, args[fi].number = 0;
      if (const size_t gi = param("group"); gi < args.size())
        args[gi].text = std::to_string(d.format_group), args[gi].number = double(d.format_group);
    }
    return true;
  }

  // The file behind src= must hold the declared dtype and shape (read from its header only).
  void check_source(const DataDecl& d, const Attr& src) {
    std::vector<io::TensorInfo> infos;
    try {
      infos = io::list_tensors(d.src);
    } catch (const std::exception& e) {
      broken_files_.insert(d.src);
      diags_.error(src.loc, e.what());
      return;
    }
    const io::TensorInfo* hit = nullptr;
    std::vector<std::string> names;
    for (const auto& t : infos) {
      names.push_back(t.name);
      if (t.name == d.key) hit = &t;
    }
    if (!hit && (d.key.empty() || io::format_of(d.src) == io::FileFormat::npy) && infos.size() == 1) hit = &infos[0];
    if (!hit) {
      if (d.key.empty())
        diags_.error(src.loc, d.src + " holds " + std::to_string(infos.size()) + " tensors: name one with key=");
      else
        diags_.error(src.loc, d.src + " has no tensor '" + d.key + "'" + did_you_mean(d.key, names));
      return;
    }
    const std::string what = "'" + (hit->name.empty() ? d.src : hit->name) + "' in " + d.src;
    if (!hit->dtype) {
      diags_.error(src.loc, what + " has dtype " + hit->stored_dtype + ", which ymlopt does not support");
      return;
    }
    auto numel = [](const std::vector<std::int64_t>& s) {
      std::int64_t n = 1;
      for (auto x : s) n *= x;
      return n;
    };
    const bool shape_ok = d.reshape ? numel(hit->shape) == numel(d.shape) : hit->shape == d.shape;
    if (*hit->dtype != d.dtype || !shape_ok)
      diags_.error(src.loc, what + " is " + dtype_name(*hit->dtype) + shape_str(hit->shape) + " but data '" + d.name +
                                "' is declared " + dtype_name(d.dtype) + shape_str(d.shape) +
                                (d.reshape ? " (reshape=\"true\" needs as many elements)" : ""));
  }

  // Parses "A" or "A[i,j]" (already rendered) into a reference.
  std::optional<DataRef> resolve(const std::string& text, const Attr& a) {
    const auto br = text.find('[');
    std::string name = text.substr(0, br);
    name.erase(name.find_last_not_of(" ") + 1);
    Frame& fr = frames_.back();
    auto it = fr.data.find(name);
    if (it == fr.data.end()) {
      if (fr.failed_data.count(name)) return std::nullopt;  // already reported
      std::vector<std::string> names;
      for (auto& [k, v] : fr.data) names.push_back(k);
      diags_.error(a.loc, "undefined data '" + name + "'" + did_you_mean(name, names));
      return std::nullopt;
    }
    DataRef r{it->second, -1};
    if (br == std::string::npos) return r;
    const DataDecl& d = dag_.data[size_t(r.data)];
    if (text.back() != ']') {
      diags_.error(a.loc, "bad data reference '" + text + "' (expected NAME or NAME[i,j])");
      return std::nullopt;
    }
    std::vector<std::int64_t> idx;
    std::string inner = text.substr(br + 1, text.size() - br - 2);
    size_t p = 0;
    while (p <= inner.size()) {
      size_t q = inner.find(',', p);
      if (q == std::string::npos) q = inner.size();
      const std::string tok = inner.substr(p, q - p);
      char* end = nullptr;
      const long long x = std::strtoll(tok.c_str(), &end, 10);
      if (tok.empty() || *end) {
        diags_.error(a.loc, "bad tile index '" + tok + "' in '" + text + "'");
        return std::nullopt;
      }
      idx.push_back(x);
      p = q + 1;
    }
    if (!d.tiled()) {
      diags_.error(a.loc, "data '" + name + "' is not tiled; it cannot be indexed as '" + text + "'");
      return std::nullopt;
    }
    if (idx.size() != d.shape.size()) {
      diags_.error(a.loc, "'" + text + "' has " + std::to_string(idx.size()) + " indices but '" + name +
                              "' has " + std::to_string(d.shape.size()) + " tiled dimensions");
      return std::nullopt;
    }
    const std::int64_t tr = idx.size() == 1 ? 0 : idx[0];
    const std::int64_t tc = idx.back();
    if (tr < 0 || tr >= d.ntile_r || tc < 0 || tc >= d.ntile_c) {
      const std::string grid = d.shape.size() == 1 ? "[" + std::to_string(d.ntile_c) + "]"
                                                   : "[" + std::to_string(d.ntile_r) + "," + std::to_string(d.ntile_c) + "]";
      diags_.error(a.loc, "tile index out of range: '" + text + "' but '" + name + "' has " + grid + " tiles");
      return std::nullopt;
    }
    r.tile = std::int32_t(tr * d.ntile_c + tc);
    return r;
  }

  // ---------- tasks ----------
  const std::vector<ArgValue>& defaults(const ComponentSpec* c) {
    auto it = defaults_.find(c);
    if (it != defaults_.end()) return it->second;
    std::vector<ArgValue> v;
    for (const auto& p : c->params) v.push_back(parse_arg(p, p.default_value).value_or(ArgValue{}));
    return defaults_[c] = std::move(v);
  }

  static std::optional<ArgValue> parse_arg(const ParamSpec& p, const std::string& s) {
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

  std::string task_desc(const Element& e, const std::string& comp) {
    const Attr* n = e.find("name");
    if (n) {
      auto r = render(*n);
      return "task '" + r.value_or(n->value) + "'";
    }
    return "task '" + comp + "'";
  }

  struct PortUse {
    DataRef ref;
    Access mode;
  };

  void task(const Element& e) {
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
    auto port_names = [c] {
      std::vector<std::string> v;
      for (const auto& p : c->ports) v.push_back(p.name);
      return v;
    };
    auto param_names = [c] {
      std::vector<std::string> v;
      for (const auto& p : c->params) v.push_back(p.name);
      return v;
    };
    for (const auto& ch : e.children) {
      if (ch.name == "in" || ch.name == "out" || ch.name == "inout") {
        check_attrs(ch);
        const Attr* pa = ch.find("port");
        const Attr* da = ch.find("data");
        if (!pa || !da) { bad = true; continue; }
        size_t k = 0;
        while (k < c->ports.size() && c->ports[k].name != pa->value) ++k;
        if (k == c->ports.size()) {
          diags_.error(pa->loc, who() + ": unknown port '" + pa->value + "' of " + c->name + did_you_mean(pa->value, port_names()));
          bad = unknown_port = true;
          continue;
        }
        const PortSpec& ps = c->ports[k];
        if (bound[k]) {
          diags_.error(ch.loc, who() + ": port '" + ps.name + "' is bound twice");
          bad = true;
          continue;
        }
        bound[k] = true;  // attempted: a failed binding is not also reported missing
        const Access mode = ch.name == "in" ? Access::read : ch.name == "out" ? Access::write : Access::read_write;
        if (mode != ps.access) {
          diags_.error(ch.loc, who() + ": port '" + ps.name + "' of " + c->name + " is <" + access_name(ps.access) +
                                   ">, bound with <" + ch.name + ">");
          bad = true;
          continue;
        }
        auto text = render(*da);
        if (!text) { bad = true; continue; }
        auto ref = resolve(*text, *da);
        if (!ref) { bad = true; continue; }
        const DataDecl& d = dag_.data[size_t(ref->data)];
        if (!ps.dtypes.empty() && std::find(ps.dtypes.begin(), ps.dtypes.end(), d.dtype) == ps.dtypes.end()) {
          std::string list;
          for (size_t q = 0; q < ps.dtypes.size(); ++q) {
            if (q) list += q + 1 == ps.dtypes.size() ? " or " : ", ";
            list += dtype_name(ps.dtypes[q]);
          }
          diags_.error(da->loc, who() + ": port '" + ps.name + "' of " + c->name + " accepts " + list + ", but '" +
                                    *text + "' is " + dtype_name(d.dtype));
          bad = true;
          continue;
        }
        const std::vector<std::int64_t> shp = dag_.ref_shape(*ref);
        if (int(shp.size()) > ps.max_rank) {
          diags_.error(da->loc, who() + ": port '" + ps.name + "' of " + c->name + " takes rank <= " +
                                    std::to_string(ps.max_rank) + ", but '" + *text + "' has shape " + shape_str(shp));
          bad = true;
          continue;
        }
        binds[k] = Binding{*ref, mode};
      } else if (ch.name == "arg") {
        check_attrs(ch);
        const Attr* na = ch.find("name");
        const Attr* va = ch.find("value");
        if (!na || !va) { bad = true; continue; }
        size_t k = 0;
        while (k < c->params.size() && c->params[k].name != na->value) ++k;
        if (k == c->params.size()) {
          diags_.error(na->loc, who() + ": unknown argument '" + na->value + "' of " + c->name + did_you_mean(na->value, param_names()));
          bad = true;
          continue;
        }
        auto v = eval(*va);
        if (!v) { bad = true; continue; }
        auto parsed = parse_arg(c->params[k], v->kind == Value::Kind::bool_ ? (v->i ? "true" : "false") : v->str());
        if (!parsed) {
          diags_.error(va->loc, who() + ": argument '" + na->value + "' of " + c->name + " must be " +
                                    param_type_name(c->params[k].type) + ", got '" + v->str() + "'");
          bad = true;
          continue;
        }
        args[k] = std::move(*parsed);
        arg_set[k] = true;
      } else {
        diags_.error(ch.loc, "unknown element <" + ch.name + "> in <task> (expected <in>, <out>, <inout> or <arg>)");
        bad = true;
      }
    }
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
    if (!bind_compressed(e, c, binds, args, arg_set, [&] { return who(); })) return;
    add_task(e.loc, c, std::move(binds), std::move(args), e.find("name"), [&] { return who(); });
  }

  using Describe = std::function<std::string()>;  // the task as messages name it, built only on error

  void add_task(const SrcLoc& loc, const ComponentSpec* c, std::vector<Binding> binds, std::vector<ArgValue> args,
                const Attr* name_attr, const Describe& who) {
    TaskNode t;
    t.id = std::int32_t(dag_.tasks.size());
    t.comp = c;
    t.loc = loc;
    t.args = Args(&c->params, std::move(args));
    if (name_attr) t.label = render(*name_attr).value_or(name_attr->value);
    // a task sees a tensor either whole or as tiles, never both
    for (size_t a = 0; a < binds.size(); ++a)
      for (size_t b = a + 1; b < binds.size(); ++b) {
        const DataRef &x = binds[a].ref, &y = binds[b].ref;
        if (x.data >= 0 && x.data == y.data && x.tile != y.tile && (x.tile < 0 || y.tile < 0)) {
          diags_.error(loc, who() + ": ports '" + c->ports[a].name + "' and '" + c->ports[b].name + "' use '" +
                                dag_.ref_name(x) + "' and '" + dag_.ref_name(y) +
                                "': a task cannot access a tensor both whole and by tiles");
          return;
        }
      }
    // shape check and cost
    const std::vector<TensorView> views = dag_.shape_views(binds);
    const TaskShape ts{views, t.args};
    if (c->check) {
      std::string err;
      try {
        err = c->check(ts);
      } catch (const std::exception& ex) {
        err = ex.what();
      }
      if (!err.empty()) {
        diags_.error(loc, who() + " (" + c->name + "): " + err);
        return;
      }
    }
    // dependencies, in program order
    std::vector<std::int32_t> preds;
    bool ok = true;
    for (size_t k = 0; k < binds.size(); ++k) {
      if (binds[k].ref.data < 0) continue;
      ok &= access(t.id, binds[k], preds, loc, who, c->ports[k].name);
    }
    if (!ok) return;
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    t.preds = std::move(preds);
    t.bindings = std::move(binds);
    t.cost = dag_.task_cost(t, views);
    t.comethod = comethod_;
    task_waits_.push_back(contexts_.back().last_wait);
    dag_.tasks.push_back(std::move(t));
  }

  bool access(std::int32_t t, const Binding& b, std::vector<std::int32_t>& preds, const SrcLoc& loc,
              const Describe& who, const std::string& port) {
    DataState& s = states_[size_t(b.ref.data)];
    const bool reads = b.mode != Access::write;
    const bool writes = b.mode != Access::read;
    auto add = [&](std::int32_t p) {
      if (p >= 0 && p != t) preds.push_back(p);
    };
    if (reads && !s.init) {
      bool ready;
      if (b.ref.tile >= 0) ready = s.tile_init[size_t(b.ref.tile)] != 0;
      else ready = s.uninit_tiles == 0;
      if (!ready) {
        diags_.error(loc, who() + ": port '" + port + "' reads '" + dag_.ref_name(b.ref) +
                              "' before anything writes it (give the data init= or src=, or write it first)");
        return false;
      }
    }
    if (b.ref.tile >= 0) {
      AccessState& ts = s.tiles[size_t(b.ref.tile)];
      add(ts.writer);
      add(s.whole.writer);
      if (writes) {
        for (auto r : ts.readers) add(r);
        for (size_t i = ts.whole_readers_done; i < s.whole.readers.size(); ++i) add(s.whole.readers[i]);
        ts.whole_readers_done = s.whole.readers.size();
        ts.readers.clear();
        ts.writer = t;
        if (!s.init && !s.tile_init[size_t(b.ref.tile)]) {
          s.tile_init[size_t(b.ref.tile)] = 1;
          --s.uninit_tiles;
        }
      } else {
        ts.readers.push_back(t);
      }
    } else {
      add(s.whole.writer);
      for (const auto& ts : s.tiles) add(ts.writer);
      if (writes) {
        for (auto r : s.whole.readers) add(r);
        for (const auto& ts : s.tiles) for (auto r : ts.readers) add(r);
        for (auto& ts : s.tiles) ts = AccessState{};
        s.whole.readers.clear();
        s.whole.writer = t;
        if (!s.init) {
          std::fill(s.tile_init.begin(), s.tile_init.end(), 1);
          s.uninit_tiles = 0;
        }
      } else {
        s.whole.readers.push_back(t);
      }
    }
    return true;
  }

  void save(const Element& e) {
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

  // ---------- runtime control flow: unite, comethod, until/while, publish/gather ----------
  std::int32_t open_region(Region::Kind kind, const Element& e, std::string name) {
    Region r;
    r.kind = kind;
    r.loc = e.loc;
    r.name = std::move(name);
    r.first_task = std::int32_t(dag_.tasks.size());
    const auto idx = std::int32_t(dag_.regions.size());
    dag_.regions.push_back(std::move(r));
    region_children_.emplace_back();
    (region_stack_.empty() ? top_regions_ : region_children_[size_t(region_stack_.back())]).push_back(idx);
    region_stack_.push_back(idx);
    return idx;
  }

  // The items of tasks [first, end) around the sub-regions `children`.
  std::vector<Region::Item> items_of(std::int32_t first, std::int32_t end, const std::vector<std::int32_t>& children) const {
    std::vector<Region::Item> items;
    std::int32_t pos = first;
    for (auto c : children) {
      const Region& r = dag_.regions[size_t(c)];
      if (r.first_task > pos) items.push_back(Region::Item{-1, pos, r.first_task});
      items.push_back(Region::Item{c, 0, 0});
      pos = r.end_task;
    }
    if (end > pos) items.push_back(Region::Item{-1, pos, end});
    return items;
  }

  void close_region(std::int32_t idx) {
    Region& r = dag_.regions[size_t(idx)];
    r.end_task = std::int32_t(dag_.tasks.size());
    r.items = items_of(r.first_task, r.end_task, region_children_[size_t(idx)]);
    region_stack_.pop_back();
  }

  // The workflow body as the root region, once any runtime construct appeared.
  void finish_regions() {
    Region root;
    root.kind = Region::Kind::body;
    root.loc = dag_.docs[0]->root.loc;
    root.name = dag_.name;
    root.end_task = std::int32_t(dag_.tasks.size());
    root.items = items_of(0, root.end_task, top_regions_);
    dag_.root_region = std::int32_t(dag_.regions.size());
    dag_.regions.push_back(std::move(root));
    for (const auto& [name, ch] : channels_)
      if (!ch.published)
        for (const auto& at : ch.gathers)
          diags_.error(at, "gather from channel '" + name + "' that no <publish name=\"" + name + "\"> writes");
  }

  bool data_ready(std::int32_t d) const {
    const DataState& s = states_[size_t(d)];
    return s.init || s.uninit_tiles == 0;
  }

  // "a, b" -> whole tensors (tiles are not exchanged); nullopt after an error.
  std::optional<std::vector<std::int32_t>> data_list(const Attr& a) {
    auto text = render(a);
    if (!text) return std::nullopt;
    std::vector<std::int32_t> out;
    bool ok = true;
    size_t p = 0;
    while (p <= text->size()) {
      size_t q = text->find(',', p);
      if (q == std::string::npos) q = text->size();
      std::string tok = text->substr(p, q - p);
      tok.erase(0, tok.find_first_not_of(" \t"));
      tok.erase(tok.find_last_not_of(" \t") + 1);
      p = q + 1;
      if (tok.empty()) {
        diags_.error(a.loc, a.name + "=\"" + a.value + "\" has an empty item");
        ok = false;
        continue;
      }
      auto ref = resolve(tok, a);
      if (!ref) {
        ok = false;
        continue;
      }
      if (ref->tile >= 0) {
        diags_.error(a.loc, a.name + "=\"" + a.value + "\": '" + tok + "' is a tile; only whole tensors can be named here");
        ok = false;
        continue;
      }
      out.push_back(ref->data);
    }
    if (!ok) return std::nullopt;
    return out;
  }

  // One 1-element tensor (a score or a loop condition's operand).
  std::optional<std::int32_t> scalar_data(const Attr& a, const std::string& text) {
    auto ref = resolve(text, a);
    if (!ref) return std::nullopt;
    const DataDecl& d = dag_.data[size_t(ref->data)];
    if (ref->tile >= 0 || d.rows * d.cols != 1) {
      diags_.error(a.loc, a.name + "=\"" + a.value + "\": '" + text + "' must be a 1-element tensor, but it is " +
                              dtype_name(d.dtype) + shape_str(d.shape));
      return std::nullopt;
    }
    if (d.dtype != DType::f32 && d.dtype != DType::f64 && d.dtype != DType::i32) {
      diags_.error(a.loc, a.name + "=\"" + a.value + "\": '" + text + "' is " + dtype_name(d.dtype) +
                              "; a score or condition operand must be f32, f64 or i32");
      return std::nullopt;
    }
    return ref->data;
  }

  std::optional<bool> better_attr(const Element& e, bool pareto_ok = false) {
    const Attr* b = e.find("better");
    if (!b) return false;
    auto v = render(*b);
    if (!v) return std::nullopt;
    if (*v == "min" || *v == "max") return *v == "max";
    diags_.error(b->loc, "better=\"" + *v + "\" must be min" + (pareto_ok ? ", max or pareto" : " or max"));
    return std::nullopt;
  }

  void unite(const Element& e) {
    std::string name = "unite";
    if (const Attr* n = e.find("name")) name = render(*n).value_or(name);
    const std::int32_t idx = open_region(Region::Kind::unite, e, name);
    bool ok = true;
    auto choice = [&](const char* attr, std::initializer_list<const char*> allowed) -> std::string {
      const Attr* a = e.find(attr);
      if (!a) return *allowed.begin();
      auto v = render(*a);
      if (!v) return ok = false, "";
      for (const char* x : allowed)
        if (*v == x) return *v;
      std::string list;
      for (const char* x : allowed) list += std::string(list.empty() ? "" : ", ") + x;
      diags_.error(a->loc, std::string(attr) + "=\"" + *v + "\" must be one of " + list);
      ok = false;
      return "";
    };
    const std::string exit = choice("exit", {"first", "all", "budget"});
    const std::string mapping = choice("mapping", {"shared", "contexts", "fair"});
    auto better = better_attr(e);
    std::optional<std::vector<std::int32_t>> save;
    if (const Attr* a = e.find("save_exit")) save = data_list(*a);
    {
      Region& r = dag_.regions[size_t(idx)];
      r.exit = exit == "all" ? Region::Exit::all : exit == "budget" ? Region::Exit::budget : Region::Exit::first;
      r.mapping = mapping == "contexts" ? Region::Mapping::contexts
                  : mapping == "fair"   ? Region::Mapping::fair
                                        : Region::Mapping::shared;
      r.maximize = better.value_or(false);
      if (save) r.save_exit = *save;
    }
    if (const Attr* a = e.find("budget_s")) {
      auto v = eval(*a);
      const double secs = v ? as_number(*v).value_or(0) : 0;
      if (v && !(secs > 0))
        diags_.error(a->loc, "budget_s=\"" + a->value + "\" must be a positive number of seconds");
      else if (v) dag_.regions[size_t(idx)].budget_s = secs;
    }
    if (const Attr* a = e.find("budget_iters")) {
      auto v = eval_int(*a);
      if (v && *v < 1) diags_.error(a->loc, "budget_iters=\"" + a->value + "\" must be at least 1");
      else if (v) dag_.regions[size_t(idx)].budget_iters = *v;
    }
    if (ok && exit == "budget" && !e.find("budget_s") && !e.find("budget_iters"))
      diags_.error(e.loc, "<unite exit=\"budget\"> needs budget_s= (wall-clock seconds) or budget_iters= (loop iterations)");
    body(e.children);
    close_region(idx);
    const Region& r = dag_.regions[size_t(idx)];
    // the co-methods, their names and what each gives to save_exit
    std::vector<std::int32_t> cms;
    for (const auto& it : r.items)
      if (it.region >= 0 && dag_.regions[size_t(it.region)].kind == Region::Kind::comethod) cms.push_back(it.region);
    if (cms.empty()) diags_.error(e.loc, "<unite> '" + r.name + "' has no <comethod>");
    std::map<std::string, SrcLoc> names;
    for (auto c : cms) {
      const Region& cm = dag_.regions[size_t(c)];
      if (auto [it, fresh] = names.emplace(cm.name, cm.loc); !fresh)
        diags_.error(cm.loc, "co-method '" + cm.name + "' defined twice in <unite> '" + r.name + "' (first at line " +
                                 std::to_string(it->second.line) + ")");
      if (cm.keep.size() != r.save_exit.size()) {
        diags_.error(cm.loc, "co-method '" + cm.name + "' keeps " + std::to_string(cm.keep.size()) +
                                 " tensors (keep=) but <unite> '" + r.name + "' saves " +
                                 std::to_string(r.save_exit.size()) + " (save_exit=): they are copied in order");
        continue;
      }
      for (size_t k = 0; k < cm.keep.size(); ++k) {
        const DataDecl &from = dag_.data[size_t(cm.keep[k])], &to = dag_.data[size_t(r.save_exit[k])];
        if (from.dtype != to.dtype || from.shape != to.shape)
          diags_.error(cm.loc, "co-method '" + cm.name + "' keeps '" + from.name + "' " + dtype_name(from.dtype) +
                                   shape_str(from.shape) + " for save_exit '" + to.name + "' " + dtype_name(to.dtype) +
                                   shape_str(to.shape));
      }
    }
    // co-methods run concurrently: none may depend on another's tasks (a task
    // of a nested unite belongs to the co-method of this unite that holds it)
    auto own = [&](std::int32_t c) {
      while (c >= 0 && std::find(cms.begin(), cms.end(), c) == cms.end()) c = dag_.regions[size_t(c)].parent_comethod;
      return c;
    };
    for (std::int32_t t = r.first_task; t < r.end_task; ++t) {
      const TaskNode& n = dag_.tasks[size_t(t)];
      const std::int32_t mine = own(n.comethod);
      for (auto p : n.preds) {
        const std::int32_t theirs = p < r.first_task ? mine : own(dag_.tasks[size_t(p)].comethod);
        if (theirs == mine) continue;
        const TaskNode& o = dag_.tasks[size_t(p)];
        const std::string other = theirs >= 0 ? dag_.regions[size_t(theirs)].name : "?";
        std::string shared;
        for (const auto& b : n.bindings)
          for (const auto& ob : o.bindings)
            if (b.ref.data >= 0 && b.ref.data == ob.ref.data && (b.mode != Access::read || ob.mode != Access::read) &&
                shared.empty())
              shared = dag_.data[size_t(b.ref.data)].name;
        diags_.error(n.loc, "co-method '" + dag_.regions[size_t(mine)].name + "' uses '" + shared +
                                "', which co-method '" + other + "' writes (line " + std::to_string(o.loc.line) +
                                "): co-methods run concurrently and may share only data they all read; exchange "
                                "results with <publish>/<gather>");
        break;
      }
    }
    // after the unite, the save_exit tensors hold the winner's
    for (auto d : r.save_exit) {
      DataState& s = states_[size_t(d)];
      if (!s.init && s.uninit_tiles) s.uninit_tiles = 0, std::fill(s.tile_init.begin(), s.tile_init.end(), 1);
    }
  }

  void comethod(const Element& e) {
    if (region_stack_.empty() || dag_.regions[size_t(region_stack_.back())].kind != Region::Kind::unite) {
      diags_.error(e.loc, "<comethod> must be inside a <unite>");
      return;
    }
    auto name = render(*e.find("name"));
    if (!name) return;
    const std::int32_t idx = open_region(Region::Kind::comethod, e, *name);
    dag_.regions[size_t(idx)].parent_comethod = comethod_;  // a co-method of a nested unite
    if (const Attr* a = e.find("priority")) {
      auto v = eval_int(*a);
      if (v) dag_.regions[size_t(idx)].priority = int(*v);
    }
    if (const Attr* a = e.find("workers")) {
      auto v = eval_int(*a);
      if (v && *v < 1) diags_.error(a->loc, "workers=\"" + a->value + "\" must be at least 1");
      else if (v) dag_.regions[size_t(idx)].workers = *v;
    }
    const std::int32_t saved = comethod_;
    comethod_ = idx;
    body(e.children);
    comethod_ = saved;
    close_region(idx);
    if (const Attr* a = e.find("keep")) {  // resolved after the body: it names the co-method's own data
      if (auto k = data_list(*a)) {
        for (auto d : *k)
          if (!data_ready(d))
            diags_.error(a->loc, "keep=\"" + a->value + "\": '" + dag_.data[size_t(d)].name +
                                     "' is never written or initialised");
        dag_.regions[size_t(idx)].keep = *k;
      }
    }
  }

  // YvetteML's word operators (le, gt, and, ...) as the expression language's.
  static std::string c_operators(const std::string& text) {
    static const std::map<std::string, std::string> words = {{"eq", "=="}, {"neq", "!="}, {"gt", ">"},  {"ge", ">="},
                                                              {"lt", "<"},  {"le", "<="},  {"and", "&&"}, {"or", "||"},
                                                              {"not", "!"}};
    std::string out;
    for (size_t i = 0; i < text.size();) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (std::isalpha(c) || c == '_') {
        size_t j = i;
        while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
        const std::string w = text.substr(i, j - i);
        const bool exponent = i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1])) && (w[0] == 'e' || w[0] == 'E');
        auto it = words.find(w);
        out += it != words.end() && !exponent ? " " + it->second + " " : w;
        i = j;
      } else {
        out += text[i++];
      }
    }
    return out;
  }

  void runtime_loop(const Element& e) {
    const bool until = e.name == "until";
    const Attr* ca = e.find("cond");
    std::int64_t max_iter = 1000;
    if (const Attr* m = e.find("max")) {
      auto v = eval_int(*m);
      if (!v) return;
      if (*v < 1) {
        diags_.error(m->loc, "max=\"" + m->value + "\" must be at least 1");
        return;
      }
      max_iter = *v;
    }
    auto text = render(*ca);
    if (!text) return;
    const std::string expr = c_operators(*text);
    std::shared_ptr<const Template> t;
    try {
      t = Template::compile("${" + expr + "}");
    } catch (const ExprError& x) {
      diags_.error(ca->loc, "bad condition '" + *text + "': " + x.message);
      return;
    }
    // its names are 1-element tensors, read when the loop runs
    std::vector<std::int32_t> operands;
    bool ok = true;
    const Value zero = Value::of_float(0);
    try {
      (void)t->value([&](std::string_view n) -> const Value* {
        auto d = scalar_data(*ca, std::string(n));
        if (!d) {
          ok = false;
          return &zero;
        }
        if (std::find(operands.begin(), operands.end(), *d) == operands.end()) operands.push_back(*d);
        return &zero;
      });
    } catch (const ExprError& x) {
      diags_.error(ca->loc, "bad condition '" + *text + "': " + x.message);
      return;
    }
    if (!ok) return;
    if (!until)
      for (auto d : operands)
        if (!data_ready(d))
          diags_.error(ca->loc, "<while> tests '" + dag_.data[size_t(d)].name +
                                    "' before anything writes it (give it init= or write it before the loop)");
    const std::int32_t idx = open_region(until ? Region::Kind::until : Region::Kind::while_, e, "");
    dag_.regions[size_t(idx)].cond = expr;
    dag_.regions[size_t(idx)].cond_data = operands;
    dag_.regions[size_t(idx)].max_iter = max_iter;
    body(e.children);
    close_region(idx);
    if (until)
      for (auto d : operands)
        if (!data_ready(d))
          diags_.error(ca->loc, "<until> tests '" + dag_.data[size_t(d)].name + "', which nothing writes");
  }

  void exchange(const Element& e) {
    const bool pub = e.name == "publish";
    auto channel = render(*e.find("name"));
    const Attr* da = e.find(pub ? "data" : "into");
    const Attr* sa = e.find("score");
    const Attr* ba = e.find("better");
    auto better = ba && !pub && ba->value == "pareto" ? std::optional<bool>(false) : better_attr(e, !pub);
    if (!channel || !better) return;
    const bool pareto = ba && !pub && ba->value == "pareto";
    auto list = data_list(*da);
    auto scores = data_list(*sa);
    if (!list || !scores) return;
    bool ok = true;
    for (auto d : *scores) {
      const DataDecl& sd = dag_.data[size_t(d)];
      if (sd.rows * sd.cols != 1 || (sd.dtype != DType::f32 && sd.dtype != DType::f64 && sd.dtype != DType::i32)) {
        diags_.error(sa->loc, "score=\"" + sa->value + "\": '" + sd.name + "' must be a 1-element f32, f64 or i32 tensor, but it is " +
                                  dtype_name(sd.dtype) + shape_str(sd.shape));
        ok = false;
      }
    }
    if (pareto && scores->size() < 2) {
      diags_.error(sa->loc, "better=\"pareto\" needs several scores (score=\"a,b\"), got " + std::to_string(scores->size()));
      ok = false;
    }
    for (auto d : *list)
      if (!data_ready(d)) {
        diags_.error(da->loc, std::string(pub ? "<publish>" : "<gather>") + " of '" + dag_.data[size_t(d)].name +
                                  "' before anything writes it (give it init= or write it first)");
        ok = false;
      }
    for (auto d : *scores)
      if (pub && !data_ready(d)) {
        diags_.error(sa->loc, "<publish> score '" + dag_.data[size_t(d)].name + "' is never written before");
        ok = false;
      }
    if (!ok) return;
    // every publish and gather of a channel exchanges the same tensors
    std::vector<std::pair<DType, std::vector<std::int64_t>>> sig;
    for (auto d : *list) sig.emplace_back(dag_.data[size_t(d)].dtype, dag_.data[size_t(d)].shape);
    auto [it, fresh] = channels_.try_emplace(*channel);
    if (!fresh && it->second.nscores != scores->size()) {
      diags_.error(sa->loc, "channel '" + *channel + "' is " + it->second.what + " with " +
                                std::to_string(it->second.nscores) + " score(s) at line " + std::to_string(it->second.loc.line) +
                                ", but " + std::to_string(scores->size()) + " here");
      return;
    }
    Channel& ch = it->second;
    if (fresh) {
      ch.tensors = sig;
      ch.nscores = scores->size();
      ch.loc = e.loc;
      ch.what = pub ? "published" : "gathered";
    } else if (ch.tensors != sig) {
      auto str = [](const std::vector<std::pair<DType, std::vector<std::int64_t>>>& v) {
        std::string o;
        for (const auto& [t, s] : v) o += (o.empty() ? "" : ", ") + std::string(dtype_name(t)) + shape_str(s);
        return o;
      };
      diags_.error(da->loc, "channel '" + *channel + "' is " + ch.what + " as (" + str(ch.tensors) + ") at line " +
                                std::to_string(ch.loc.line) + ", but " + (pub ? "published" : "gathered") + " here as (" +
                                str(sig) + ")");
      return;
    }
    if (pub) ch.published = true;
    else ch.gathers.push_back(e.loc);
    const std::int32_t idx = open_region(pub ? Region::Kind::publish : Region::Kind::gather, e, *channel);
    Region& r = dag_.regions[size_t(idx)];
    r.data = *list;
    r.scores = *scores;
    r.maximize = *better;
    r.pareto = pareto;
    close_region(idx);
  }

  // ---------- calls ----------
  void call(const Element& e) {
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

  std::string chain(const std::string& last) const {
    std::string s;
    for (const auto& c : call_stack_) s += fs::path(c).filename().string() + " -> ";
    return s + fs::path(last).filename().string();
  }

  // ---------- events ----------
  int event_id(const std::string& name) {
    auto it = event_ids_.find(name);
    if (it != event_ids_.end()) return it->second;
    events_.push_back(EventInfo{name, {}, {}, {}});
    return event_ids_[name] = int(events_.size() - 1);
  }

  void notify(const Element& e) {
    auto name = render(*e.find("event"));
    if (!name) return;
    const int ev = event_id(*name);
    EventInfo& info = events_[size_t(ev)];
    Context& ctx = contexts_.back();
    // sinks of the tasks emitted so far in this context
    const std::int32_t lo = ctx.start_task, hi = std::int32_t(dag_.tasks.size());
    std::vector<std::uint8_t> has_succ(size_t(hi - lo), 0);
    for (std::int32_t t = lo; t < hi; ++t)
      for (auto p : dag_.tasks[size_t(t)].preds)
        if (p >= lo) has_succ[size_t(p - lo)] = 1;
    for (std::int32_t t = lo; t < hi; ++t)
      if (!has_succ[size_t(t - lo)]) info.sources.push_back(t);
    info.notifies.push_back({ctx.last_wait, lo, hi, ctx.last_notify, ctx.last_notify_end});
    ctx.last_notify = ev;
    ctx.last_notify_end = hi;
  }

  void wait(const Element& e) {
    auto name = render(*e.find("event"));
    if (!name) return;
    const int ev = event_id(*name);
    if (events_[size_t(ev)].first_wait.line == 0) events_[size_t(ev)].first_wait = e.find("event")->loc;
    wait_locs_.push_back({ev, e.loc});
    Context& ctx = contexts_.back();
    ctx.ranges.push_back(int(wait_ranges_.size()));
    wait_ranges_.push_back({ev, std::int32_t(dag_.tasks.size()), -1, ctx.last_wait});
    ctx.last_wait = int(wait_ranges_.size() - 1);
  }

  void push_context() {
    contexts_.push_back(Context{std::int32_t(dag_.tasks.size()), {}, contexts_.empty() ? -1 : contexts_.back().last_wait});
  }

  void pop_context() {
    for (int r : contexts_.back().ranges) wait_ranges_[size_t(r)].end = std::int32_t(dag_.tasks.size());
    contexts_.pop_back();
  }

  void finish_events() {
    for (const auto& [ev, loc] : wait_locs_)
      if (events_[size_t(ev)].notifies.empty())
        diags_.error(loc, "wait for event '" + events_[size_t(ev)].name +
                              "' that no notify can satisfy (no <notify event=\"" + events_[size_t(ev)].name +
                              "\"/> in the workflow)");
    if (diags_.has_errors()) return;
    // close sources over notify-after-wait chains; each event's set is kept
    // reduced to its sinks (every task of the full set reaches one of them), so
    // sets stay small however long the chains are
    const std::size_t nt = dag_.tasks.size();
    std::vector<std::int32_t> stamp(nt, -1);  // event whose set is being built
    std::vector<int> state(events_.size(), 0);
    std::vector<int> covered(events_.size(), -1);  // by event: the event whose set it adds nothing to
    std::vector<int> stack;
    std::string cycle;
    int cycle_at = -1;
    closed_.assign(events_.size(), {});
    // events each event's waiters follow through its notifies (the waits open there, transitively),
    // as bitsets while they stay small: an event another one already implies is skipped
    const bool bits = events_.size() <= 16384;
    const std::size_t words = (events_.size() + 63) / 64;
    std::vector<std::vector<std::uint64_t>> implied(bits ? events_.size() : 0);
    auto implies = [&](int a, int b) {  // (an event not closed yet, inside a cycle, implies nothing)
      return bits && !implied[size_t(a)].empty() && (implied[size_t(a)][size_t(b) / 64] >> (size_t(b) % 64) & 1);
    };
    // of `evs` (waits in program order), those no other one implies: the latest first
    // (the union of what the kept ones imply, so that a head after thousands of waits
    // that imply nothing, a consumer of a producer's events, costs no more than their number)
    std::vector<std::uint8_t> implies_some(events_.size(), 0);
    std::vector<std::uint64_t> kept_imply(bits ? words : 0);
    std::vector<std::size_t> kept_words;  // the words of kept_imply set, cleared after each prune
    std::vector<int> kept_in(events_.size(), -1);
    int prunes = 0;
    auto prune = [&](const std::vector<int>& evs) {
      std::vector<int> keep;
      ++prunes;
      for (auto it = evs.rbegin(); it != evs.rend(); ++it) {
        const auto e = size_t(*it);
        if (kept_in[e] == prunes || (bits && (kept_imply[e / 64] >> (e % 64) & 1))) continue;
        keep.push_back(*it);
        kept_in[e] = prunes;
        if (bits && implies_some[e])
          for (std::size_t i = 0; i < words; ++i)
            if (implied[e][i]) {
              if (!kept_imply[i]) kept_words.push_back(i);
              kept_imply[i] |= implied[e][i];
            }
      }
      for (auto i : kept_words) kept_imply[i] = 0;
      kept_words.clear();
      return keep;
    };
    std::function<void(int)> close = [&](int ev) {
      if (state[size_t(ev)] == 2) return;
      if (state[size_t(ev)] == 1) {
        if (cycle.empty()) {
          auto it = std::find(stack.begin(), stack.end(), ev);
          for (; it != stack.end(); ++it) cycle += "'" + events_[size_t(*it)].name + "' -> ";
          cycle += "'" + events_[size_t(ev)].name + "'";
          cycle_at = ev;
        }
        return;
      }
      state[size_t(ev)] = 1;
      stack.push_back(ev);
      const EventInfo& info = events_[size_t(ev)];
      for (const NotifyAt& n : info.notifies)
        for (int r = n.waits; r >= 0; r = wait_ranges_[size_t(r)].parent) close(wait_ranges_[size_t(r)].event);
      stack.pop_back();
      state[size_t(ev)] = 2;
      // the waits open at its notifies, in program order; those a source already follows
      // (`covered`: the notify's last task, a source, was emitted after it) add nothing, as
      // a waiter follows them through that source (without it, two branches handing events
      // back and forth gave every task an edge from each earlier one)
      std::vector<int> waits;
      std::vector<std::pair<std::int32_t, std::int32_t>> followed;  // task ranges a waiter follows anyway
      for (const NotifyAt& n : info.notifies) {
        const std::size_t from = waits.size();
        // what its context emitted before its previous notify, when one of the waits between
        // the two, open before its last task, follows that notify: the last task follows
        // that task range (each one is a source of the previous notify or feeds one). (A
        // wait before the previous notify cannot follow it without a cycle.)
        bool follows_prev = false;
        for (int r = n.waits; r >= 0; r = wait_ranges_[size_t(r)].parent) {
          const WaitRange& w = wait_ranges_[size_t(r)];
          waits.push_back(w.event);
          if (n.hi > n.lo && n.hi - 1 >= w.first) {
            covered[size_t(w.event)] = ev;
            if (n.prev >= 0 && n.prev != ev && w.first >= n.since)
              follows_prev = follows_prev || w.event == n.prev || implies(w.event, n.prev);
          }
        }
        std::reverse(waits.begin() + std::ptrdiff_t(from), waits.end());
        if (follows_prev) followed.emplace_back(n.lo, n.since);
      }
      const std::vector<int> after = prune(waits);
      if (bits) {
        auto& mine = implied[size_t(ev)];
        mine.assign(words, 0);
        for (int a : after) {
          mine[size_t(a) / 64] |= std::uint64_t(1) << (size_t(a) % 64);
          for (std::size_t i = 0; i < implied[size_t(a)].size(); ++i) mine[i] |= implied[size_t(a)][i];
        }
        // and what its context notified before (closed already, and notified there only):
        // its waiters follow all that the earlier notify's did (the waits open then, the
        // tasks before it), so a consumer's waits for a producer's events all but the
        // last are skipped
        for (const NotifyAt& n : info.notifies)
          if (n.prev >= 0 && n.prev != ev && state[size_t(n.prev)] == 2 && events_[size_t(n.prev)].notifies.size() == 1) {
            mine[size_t(n.prev) / 64] |= std::uint64_t(1) << (size_t(n.prev) % 64);
            for (std::size_t i = 0; i < words; ++i) mine[i] |= implied[size_t(n.prev)][i];
          }
        for (std::size_t i = 0; i < words && !implies_some[size_t(ev)]; ++i) implies_some[size_t(ev)] = mine[i] != 0;
      }
      std::vector<std::int32_t> all = info.sources;
      for (int a : after)
        if (covered[size_t(a)] != ev)
          all.insert(all.end(), closed_[size_t(a)].begin(), closed_[size_t(a)].end());
      for (const auto& range : followed)
        all.erase(std::remove_if(all.begin(), all.end(),
                                 [&](std::int32_t t) { return t >= range.first && t < range.second; }),
                  all.end());
      std::sort(all.begin(), all.end());
      all.erase(std::unique(all.begin(), all.end()), all.end());
      for (auto t : all) stamp[size_t(t)] = ev;
      std::vector<std::uint8_t> inner(all.size(), 0);  // feeds another member by data
      for (std::size_t i = 0; i < all.size(); ++i)
        for (auto q : dag_.tasks[size_t(all[i])].preds)
          if (stamp[size_t(q)] == ev) inner[size_t(std::lower_bound(all.begin(), all.end(), q) - all.begin())] = 1;
      auto& out = closed_[size_t(ev)];
      for (std::size_t i = 0; i < all.size(); ++i)
        if (!inner[i]) out.push_back(all[i]);
    };
    for (size_t ev = 0; ev < events_.size(); ++ev) close(int(ev));
    if (!cycle.empty()) {
      diags_.error(events_[size_t(cycle_at)].first_wait,
                   "dependency cycle through events " + cycle +
                       " (each is notified only after a wait for the next); these waits can never be satisfied");
      return;
    }
    // a wait holds back a range of tasks; those with a data predecessor in the
    // range follow it through that one, so only the range's heads get the edges
    // (preds are data dependencies only until the edges are added below)
    std::vector<std::int32_t> last_pred(nt, -1);
    for (std::size_t t = 0; t < nt; ++t)
      for (auto q : dag_.tasks[t].preds) last_pred[t] = std::max(last_pred[t], q);
    // each head: the union of its ranges' sets, without duplicates (a task after
    // many waits of one branch heads each of their ranges). The ranges a task is in
    // are the waits open where it was emitted, latest (largest first) first; it
    // heads those that begin after its last data predecessor.
    for (WaitRange& w : wait_ranges_)
      if (w.end < 0) w.end = std::int32_t(nt);
    std::fill(stamp.begin(), stamp.end(), -1);
    std::vector<int> evs;
    for (std::size_t t = 0; t < nt; ++t) {
      evs.clear();
      for (int r = task_waits_[t]; r >= 0 && wait_ranges_[size_t(r)].first > last_pred[t]; r = wait_ranges_[size_t(r)].parent)
        evs.push_back(wait_ranges_[size_t(r)].event);
      if (evs.empty()) continue;
      std::reverse(evs.begin(), evs.end());
      TaskNode& task = dag_.tasks[t];
      std::vector<std::int32_t> add;
      for (int ev : prune(evs)) {
        for (auto s : closed_[size_t(ev)]) {
          if (s == std::int32_t(t)) {
            diags_.error(events_[size_t(ev)].first_wait,
                         "dependency cycle through event '" + events_[size_t(ev)].name + "': task '" +
                             (task.label.empty() ? task.comp->name : task.label) + "' (line " +
                             std::to_string(task.loc.line) +
                             ") waits for it but is itself before the notify; this wait can never be satisfied");
            return;
          }
          if (stamp[size_t(s)] != std::int32_t(t)) stamp[size_t(s)] = std::int32_t(t), add.push_back(s);
        }
      }
      std::sort(add.begin(), add.end());
      task.event_preds = add;
      task.preds.insert(task.preds.end(), add.begin(), add.end());
      std::sort(task.preds.begin(), task.preds.end());
      task.preds.erase(std::unique(task.preds.begin(), task.preds.end()), task.preds.end());
    }
  }

  void order() {
    const size_t n = dag_.tasks.size();
    dag_.topo_order.resize(n);
    if (wait_ranges_.empty()) {  // data dependencies always point backwards
      for (size_t i = 0; i < n; ++i) dag_.topo_order[i] = std::int32_t(i);
      return;
    }
    std::vector<std::int32_t> indeg(n, 0);
    std::vector<std::vector<std::int32_t>> succ(n);
    for (const auto& t : dag_.tasks)
      for (auto p : t.preds) succ[size_t(p)].push_back(t.id), ++indeg[size_t(t.id)];
    std::priority_queue<std::int32_t, std::vector<std::int32_t>, std::greater<>> ready;
    for (size_t i = 0; i < n; ++i)
      if (!indeg[i]) ready.push(std::int32_t(i));
    size_t k = 0;
    while (!ready.empty()) {
      const auto t = ready.top();
      ready.pop();
      dag_.topo_order[k++] = t;
      for (auto s : succ[size_t(t)])
        if (--indeg[size_t(s)] == 0) ready.push(s);
    }
    if (k == n) return;
    // find a cycle among the remaining tasks and report it at the wait involved
    std::vector<std::int32_t> next(n, -1);
    std::int32_t start = -1;
    for (size_t i = 0; i < n; ++i)
      if (indeg[i] > 0) {
        start = std::int32_t(i);
        break;
      }
    std::int32_t cur = start;
    std::vector<std::uint8_t> seen(n, 0);
    while (!seen[size_t(cur)]) {
      seen[size_t(cur)] = 1;
      for (auto p : dag_.tasks[size_t(cur)].preds)
        if (indeg[size_t(p)] > 0) {
          next[size_t(cur)] = p;
          cur = p;
          break;
        }
    }
    std::string path;
    const std::int32_t first = cur;
    SrcLoc where = dag_.tasks[size_t(first)].loc;
    std::string ev_name;
    do {
      const TaskNode& t = dag_.tasks[size_t(cur)];
      path += "'" + (t.label.empty() ? t.comp->name : t.label) + "' (line " + std::to_string(t.loc.line) + ") <- ";
      const std::int32_t nx = next[size_t(cur)];
      if (std::binary_search(t.event_preds.begin(), t.event_preds.end(), nx))
        for (const WaitRange& w : wait_ranges_)
          if (cur >= w.first && cur < w.end && std::binary_search(closed_[size_t(w.event)].begin(), closed_[size_t(w.event)].end(), nx))
            ev_name = events_[size_t(w.event)].name, where = events_[size_t(w.event)].first_wait;
      cur = nx;
    } while (cur != first);
    const TaskNode& t = dag_.tasks[size_t(first)];
    path += "'" + (t.label.empty() ? t.comp->name : t.label) + "' (line " + std::to_string(t.loc.line) + ")";
    diags_.error(where, "dependency cycle" + (ev_name.empty() ? std::string() : " through event '" + ev_name + "'") +
                            ": " + path + "; this wait can never be satisfied");
  }

  const CompileOptions& opts_;
  const ComponentRegistry& reg_;
  Diagnostics& diags_;
  Dag dag_;
  std::vector<DataState> states_;
  std::vector<std::pair<std::string, DataDecl>> pending_companions_;  // of the data being declared
  std::vector<Frame> frames_;
  std::vector<std::pair<std::string, Value>> vars_;
  std::vector<Context> contexts_;
  std::unordered_map<const Attr*, std::shared_ptr<const Template>> templates_;
  std::unordered_map<const ComponentSpec*, std::vector<ArgValue>> defaults_;
  std::unordered_map<const Element*, std::int32_t> bound_;
  std::unordered_set<const Element*> checked_;
  std::set<std::string> missing_files_;  // each reported once
  std::set<std::string> broken_files_;   // unreadable header: reported at the first data reading the file
  long double nested_trips_ = 1;         // iterations of the from/to loops being expanded, multiplied
  std::map<std::string, const xml::Document*> docs_by_path_;
  std::vector<std::string> call_stack_;
  std::vector<EventInfo> events_;
  std::unordered_map<std::string, int> event_ids_;
  std::vector<WaitRange> wait_ranges_;
  std::vector<int> task_waits_;  // by task: the waits open where it was emitted (their list's head)
  std::vector<std::vector<std::int32_t>> closed_;  // by event: the tasks its waiters follow (sinks)
  std::vector<std::pair<int, SrcLoc>> wait_locs_;
  // runtime control flow (Region): open regions, each region's sub-regions,
  // the top-level ones, the innermost open comethod, and exchange channels
  std::vector<std::int32_t> region_stack_;
  std::vector<std::vector<std::int32_t>> region_children_;
  std::vector<std::int32_t> top_regions_;
  std::unordered_set<const Element*> incomplete_;  // elements missing a required attribute (reported)
  std::int32_t comethod_ = -1;
  struct Channel {
    std::vector<std::pair<DType, std::vector<std::int64_t>>> tensors;
    SrcLoc loc;
    std::string what;  // "published" or "gathered"
    size_t nscores = 0;
    bool published = false;
    std::vector<SrcLoc> gathers;
  };
  std::map<std::string, Channel> channels_;
  int call_count_ = 0;
  bool usage_error_ = false;
  bool too_many_reported_ = false;
};

}  // namespace

CompileResult compile_workflow(const CompileOptions& opts, const ComponentRegistry& registry, Diagnostics& diags) {
  Compiler c(opts, registry, diags);
  return c.run(xml::parse_file(opts.file, diags));
}

CompileResult compile_workflow_text(const std::string& path, const std::string& text, const CompileOptions& opts,
                                    const ComponentRegistry& registry, Diagnostics& diags) {
  Compiler c(opts, registry, diags);
  return c.run(xml::parse_text(path, text, diags));
}

}  // namespace ymlopt
