#include "ymlopt/engine/analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace ymlopt {

namespace {

// The caches are what nn.kv_append writes (its ports 'cache' and, for an int8
// cache, 'scale'): each distinct tile is one layer's block of one tensor.
DagFootprint::KvCache kv_cache_of(const Dag& dag) {
  DagFootprint::KvCache kv;
  std::set<std::pair<std::int32_t, std::int32_t>> blocks;  // (data, tile)
  std::map<std::int32_t, std::set<std::int64_t>> row_blocks;
  for (const TaskNode& t : dag.tasks) {
    if (t.comp->name != "nn.kv_append") continue;
    for (std::size_t p = 0; p < t.bindings.size(); ++p)
      if (t.comp->ports[p].name == "table" && t.bindings[p].ref.data >= 0) kv.block = t.args.get_int("block");
    for (std::size_t p = 0; p < t.bindings.size(); ++p)
      if ((t.comp->ports[p].name == "cache" || t.comp->ports[p].name == "scale") && t.bindings[p].ref.data >= 0) {
        const DataRef& r = t.bindings[p].ref;
        if (!blocks.insert({r.data, r.tile}).second) continue;
        const DataDecl& d = dag.data[size_t(r.data)];
        const TensorView v = dag.ref_view(r);
        kv.bytes_per_token += v.cols * std::int64_t(dtype_size(d.dtype));
        kv.context = std::max(kv.context, v.rows);
        row_blocks[r.data].insert(r.tile < 0 ? 0 : r.tile / d.ntile_c);
      }
  }
  for (const auto& [d, rows] : row_blocks) {
    kv.tensors.push_back(dag.data[size_t(d)].name);
    kv.bytes += dag.data[size_t(d)].bytes();
    kv.layers = std::max(kv.layers, std::int64_t(rows.size()));
  }
  return kv;
}

}  // namespace

DagFootprint analyze(const Dag& dag) {
  DagFootprint f;
  const size_t nd = dag.data.size();
  // lifetime of each tensor in topological positions: [first use, last use]
  std::vector<std::int64_t> first(nd, -1), last(nd, -1);
  for (size_t pos = 0; pos < dag.topo_order.size(); ++pos) {
    const TaskNode& t = dag.tasks[size_t(dag.topo_order[pos])];
    f.flops += t.cost.flops;
    f.flops_by_component[t.comp->name] += t.cost.flops;
    for (const auto& b : t.bindings) {
      if (b.ref.data < 0) continue;
      const size_t d = size_t(b.ref.data);
      if (first[d] < 0) first[d] = std::int64_t(pos);
      last[d] = std::int64_t(pos);
    }
  }
  // a sweep over +size at first use and -size after last use
  std::vector<std::int64_t> delta(dag.topo_order.size() + 1, 0);
  for (size_t d = 0; d < nd; ++d) {
    const DataDecl& decl = dag.data[d];
    if (!decl.format.empty()) continue;  // no storage: its companions are counted
    if (decl.init == InitKind::file) {
      f.parameter_bytes[dtype_name(decl.dtype)] += decl.bytes();
      f.parameter_total += decl.bytes();
      continue;
    }
    f.activation_total += decl.bytes();
    if (first[d] < 0) continue;  // declared, never used
    delta[size_t(first[d])] += decl.bytes();
    delta[size_t(last[d]) + 1] -= decl.bytes();
  }
  std::int64_t live = 0;
  for (auto x : delta) {
    live += x;
    f.activation_peak = std::max(f.activation_peak, live);
  }
  f.kv_cache = kv_cache_of(dag);
  return f;
}

std::vector<char> written_data(const Dag& dag) {
  std::vector<char> written(dag.data.size(), 0);
  for (const auto& t : dag.tasks)
    for (const auto& b : t.bindings)
      if (b.ref.data >= 0 && b.mode != Access::read) written[size_t(b.ref.data)] = 1;  // -1: an unbound optional port
  return written;
}

void for_each_kept_read(const Dag& dag,
                        const std::function<void(std::size_t task, std::uint32_t id, std::int64_t bytes)>& fn) {
  const ContentIds ids = content_ids(dag);
  for (size_t i = 0; i < dag.tasks.size(); ++i)
    for (size_t b = 0; b < dag.tasks[i].bindings.size() && b < 32; ++b) {
      const std::uint32_t id = ids.ids[ids.first[i] + b];
      if (!(dag.tasks[i].cost.kept_ports >> b & 1u) || id == 0) continue;
      const TensorView v = dag.ref_view(dag.tasks[i].bindings[b].ref);
      fn(i, id, v.rows * v.cols * std::int64_t(dtype_size(v.dtype)));
    }
}

ContentIds content_ids(const Dag& dag) {
  ContentIds c;
  c.first.assign(dag.tasks.size() + 1, 0);
  for (size_t i = 0; i < dag.tasks.size(); ++i) c.first[i + 1] = c.first[i] + dag.tasks[i].bindings.size();
  c.ids.assign(c.first.back(), 0);
  if (dag.dynamic()) {
    // tasks run again: only data no task writes (weights) keep one content per
    // tensor and tile for the whole run
    const std::vector<char> w = written_data(dag);
    std::map<std::pair<std::int32_t, std::int32_t>, std::uint32_t> ids;
    for (size_t i = 0; i < dag.tasks.size(); ++i)
      for (size_t p = 0; p < dag.tasks[i].bindings.size(); ++p) {
        const DataRef& r = dag.tasks[i].bindings[p].ref;
        if (r.data < 0 || w[size_t(r.data)]) continue;
        auto it = ids.emplace(std::make_pair(r.data, r.tile), std::uint32_t(ids.size() + 1)).first;
        c.ids[c.first[i] + p] = it->second;
      }
    return c;
  }
  // The id of the current version of each whole tensor and each tile (0: none
  // given yet), in one pass over the tasks in program order. A tile's id is
  // valid while no whole-tensor write came after it (whole_writes then).
  struct Tile {
    std::uint32_t id = 0;
    std::int64_t whole_writes = 0;
  };
  std::vector<std::uint32_t> whole_id(dag.data.size(), 0);
  std::vector<std::int64_t> whole_writes(dag.data.size(), 0);
  std::vector<std::vector<Tile>> tiles(dag.data.size());
  std::uint32_t next = 0;
  std::vector<std::int32_t> written;
  for (size_t i = 0; i < dag.tasks.size(); ++i) {
    const auto& bs = dag.tasks[i].bindings;
    written.clear();
    for (const Binding& b : bs)
      if (b.ref.data >= 0 && b.mode != Access::read) written.push_back(b.ref.data);
    for (size_t p = 0; p < bs.size(); ++p) {
      const DataRef& r = bs[p].ref;
      if (r.data < 0 || bs[p].mode != Access::read) continue;
      if (std::find(written.begin(), written.end(), r.data) != written.end()) continue;  // changes under it
      if (next == 0xffffffffu) return ContentIds{c.first, std::vector<std::uint32_t>(c.ids.size(), 0)};
      const size_t d = size_t(r.data);
      std::uint32_t* id = &whole_id[d];
      if (r.tile >= 0) {
        if (tiles[d].empty()) tiles[d].resize(size_t(dag.data[d].ntiles()));
        Tile& t = tiles[d][size_t(r.tile)];
        if (t.whole_writes != whole_writes[d]) t = Tile{0, whole_writes[d]};
        id = &t.id;
      }
      if (*id == 0) *id = ++next;
      c.ids[c.first[i] + p] = *id;
    }
    for (const Binding& b : bs) {
      if (b.ref.data < 0 || b.mode == Access::read) continue;
      const size_t d = size_t(b.ref.data);
      whole_id[d] = 0;
      if (b.ref.tile < 0) ++whole_writes[d];
      else if (!tiles[d].empty()) tiles[d][size_t(b.ref.tile)].id = 0;
    }
  }
  return c;
}

}  // namespace ymlopt
