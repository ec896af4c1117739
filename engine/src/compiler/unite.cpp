// <unite> and <comethod>: co-methods as regions, checked to share only data they all read.
#include "compiler.hpp"

#include <algorithm>
#include <map>

namespace ymlopt::compiler {

void Compiler::unite(const Element& e) {
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

void Compiler::comethod(const Element& e) {
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

}  // namespace ymlopt::compiler
