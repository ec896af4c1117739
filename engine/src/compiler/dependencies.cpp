// A task added to the DAG: shape check, cost, and its data dependencies in program order.
#include "compiler.hpp"

#include <algorithm>

namespace ymlopt::compiler {

void Compiler::add_task(const SrcLoc& loc, const ComponentSpec* c, std::vector<Binding> binds, std::vector<ArgValue> args,
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

bool Compiler::access(std::int32_t t, const Binding& b, std::vector<std::int32_t>& preds, const SrcLoc& loc,
            const Describe& who, const std::string& port) {
  DataState& s = states_[size_t(b.ref.data)];
  const bool reads = b.mode != Access::write;
  const bool writes = b.mode != Access::read;
  if (writes && shared_file_data_.count(b.ref.data)) {
    const DataDecl& d = dag_.data[size_t(b.ref.data)];
    diags_.error(loc, who() + ": port '" + port + "' writes '" + dag_.ref_name(b.ref) + "', which '" +
                          shared_file_data_.at(b.ref.data) + "' also reads ('" + (d.key.empty() ? d.src : d.key) +
                          "' of " + d.src + ", loaded once for both): write a tensor.copy of it instead");
    return false;
  }
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

}  // namespace ymlopt::compiler
