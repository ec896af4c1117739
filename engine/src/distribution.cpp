#include "ymlopt/engine/distribution.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>

#include "ymlopt/engine/analysis.hpp"
#include "ymlopt/unite/placement.hpp"

namespace ymlopt {

// ---------------------------------------------------------------- placement

namespace {
// Bytes of a tensor (tile < 0) or of one of its tiles.
std::int64_t ref_bytes(const DataDecl& d, std::int64_t tile) {
  if (tile < 0) return d.bytes();
  return d.tile_nrows(tile / d.ntile_c) * d.tile_ncols(tile % d.ntile_c) * std::int64_t(dtype_size(d.dtype));
}
}  // namespace

Residency Residency::all(const Dag& dag) {
  Residency r;
  r.data.assign(dag.data.size(), Holding::whole);
  r.tiles.assign(dag.data.size(), {});
  for (size_t d = 0; d < dag.data.size(); ++d)
    if (!dag.data[d].format.empty()) r.data[d] = Holding::none;  // stored compressed: no memory of its own
  return r;
}

std::vector<char> used_whole(const Dag& dag) {
  std::vector<char> w(dag.data.size(), 0);
  for (const TaskNode& t : dag.tasks)
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0 && b.ref.tile < 0) w[size_t(b.ref.data)] = 1;
  for (const Region& g : dag.regions)
    for (const auto* list : {&g.cond_data, &g.data, &g.scores, &g.save_exit, &g.keep})
      for (auto d : *list) w[size_t(d)] = 1;
  return w;
}

HeldBytes held_bytes(const Dag& dag, const Residency& held) {
  HeldBytes b;
  auto aligned = [](std::int64_t n) { return (n + 63) / 64 * 64; };
  for (size_t i = 0; i < dag.data.size(); ++i) {
    const DataDecl& d = dag.data[i];
    const auto& mine = held.tiles[i];
    const bool all = std::find(mine.begin(), mine.end(), 0) == mine.end();
    if (held.data[i] == Holding::whole && d.init != InitKind::file) b.allocated += aligned(d.storage_bytes());
    if (held.data[i] == Holding::whole && d.init == InitKind::file) {
      if (all) b.mapped += d.bytes();
      else
        for (std::int64_t t = 0; t < d.ntiles(); ++t) b.mapped += mine[size_t(t)] ? ref_bytes(d, t) : 0;
    }
    if (held.data[i] == Holding::tiles)
      for (std::int64_t t = 0; t < d.ntiles(); ++t) b.allocated += mine[size_t(t)] ? aligned(ref_bytes(d, t)) : 0;
  }
  return b;
}

Residency residency(const Dag& dag, const DataOwners& own, int rank, int size) {
  Residency r;
  r.data.assign(dag.data.size(), Holding::none);
  r.tiles.assign(dag.data.size(), {});
  const std::vector<char> whole = used_whole(dag);
  for (size_t d = 0; d < dag.data.size(); ++d) {
    const DataDecl& dd = dag.data[d];
    if (!dd.format.empty()) continue;  // stored compressed: no memory of its own
    if (dd.distribute == "replicate" || (own[d][0] == rank && !dd.tiled())) {
      r.data[d] = Holding::whole;
      continue;
    }
    if (!dd.tiled()) continue;
    std::vector<char> mine(size_t(dd.ntiles()), 0);
    bool any = false;
    for (size_t t = 0; t < mine.size(); ++t) {
      mine[t] = own[d][1 + t] == rank;
      any |= bool(mine[t]);
    }
    const bool all = std::find(mine.begin(), mine.end(), 0) == mine.end();
    if (own[d][0] == rank && (whole[d] || all)) r.data[d] = Holding::whole, r.tiles[d] = std::move(mine);
    else if (any) r.data[d] = Holding::tiles, r.tiles[d] = std::move(mine);
  }
  // every rank evaluates the runtime loops' conditions: it holds their scalars;
  // every rank runs the publishes and gathers outside co-methods, and every
  // rank of a co-method's group those of the co-method
  auto hold = [&](std::int32_t d) { r.data[size_t(d)] = Holding::whole, r.tiles[size_t(d)].clear(); };
  const UnitePlacement up = unite_placement(dag, size);
  for (size_t i = 0; i < dag.regions.size(); ++i) {
    const Region& g = dag.regions[i];
    for (auto d : g.cond_data) hold(d);
    if (g.kind != Region::Kind::publish && g.kind != Region::Kind::gather) continue;
    const std::int32_t grp = up.region_group[i];
    const auto& ranks = grp < 0 ? std::vector<std::int32_t>{} : up.groups[size_t(grp)];
    if (grp >= 0 && (ranks.size() < 2 || std::find(ranks.begin(), ranks.end(), rank) == ranks.end())) continue;
    for (auto d : g.data) hold(d);
    for (auto d : g.scores) hold(d);
  }
  return r;
}

namespace {

// Whether region r holds a <unite> (at any depth).
bool holds_unite(const Dag& dag, std::int32_t r) {
  for (const auto& it : dag.regions[size_t(r)].items)
    if (it.region >= 0 && (dag.regions[size_t(it.region)].kind == Region::Kind::unite || holds_unite(dag, it.region)))
      return true;
  return false;
}

// Tile t's owner among `size` ranks (the rules of data_owners), p x q the grid.
std::int64_t tile_slot(const DataDecl& d, std::int64_t t, int size, int p, int q) {
  const std::int64_t tr = t / d.ntile_c, tc = t % d.ntile_c;
  if (d.distribute == "rows") return tr % size;
  if (d.distribute == "cols") return tc % size;
  if (d.ntile_r == 1) return tc % size;  // one row of tiles (split=): 1-D cyclic
  if (d.ntile_c == 1) return tr % size;
  return (tr % p) * q + tc % q;          // 2-D block-cyclic
}

// p x q, p <= q, as square as `size` allows.
std::pair<int, int> grid(int size) {
  int p = int(std::sqrt(double(size)));
  while (p > 1 && size % p) --p;
  return {p, size / p};
}

}  // namespace

UnitePlacement unite_placement(const Dag& dag, int size) {
  size = std::max(size, 1);
  UnitePlacement p;
  p.task_rank.assign(dag.tasks.size(), -1);
  p.region_rank.assign(dag.regions.size(), -1);
  p.data_rank.assign(dag.data.size(), -1);
  p.task_group.assign(dag.tasks.size(), -1);
  p.region_group.assign(dag.regions.size(), -1);
  p.data_group.assign(dag.data.size(), -1);
  auto group_of = [&](std::vector<std::int32_t> ranks) {
    auto it = std::find(p.groups.begin(), p.groups.end(), ranks);
    if (it != p.groups.end()) return std::int32_t(it - p.groups.begin());
    p.groups.push_back(std::move(ranks));
    return std::int32_t(p.groups.size() - 1);
  };
  // the unite and co-method that wrote each data first (for the conflict message)
  std::vector<std::int32_t> data_unite(dag.data.size(), -1), data_cm(dag.data.size(), -1);
  auto claim = [&](std::int32_t d, std::int32_t group, std::int32_t unite, std::int32_t cm) {
    if (d < 0) return;
    const size_t i = size_t(d);
    if (p.data_group[i] < 0) {
      p.data_group[i] = group, p.data_rank[i] = p.groups[size_t(group)][0], data_unite[i] = unite, data_cm[i] = cm;
    } else if (p.data_group[i] != group && p.conflict.empty()) {
      auto who = [&](std::int32_t u, std::int32_t c) {
        return "unite '" + dag.regions[size_t(u)].name + "' co-method '" + dag.regions[size_t(c)].name + "'";
      };
      p.conflict = "'" + dag.data[i].name + "': " + who(data_unite[i], data_cm[i]) + " and " + who(unite, cm);
      p.conflict_region = cm;
    }
  };
  // group, top-level unite and co-method of the region being visited (-1 outside)
  std::function<void(std::int32_t, std::int32_t, std::int32_t, std::int32_t)> visit =
      [&](std::int32_t r, std::int32_t group, std::int32_t unite, std::int32_t cm) {
        const Region& g = dag.regions[size_t(r)];
        p.region_group[size_t(r)] = group;
        p.region_rank[size_t(r)] = group < 0 ? -1 : p.groups[size_t(group)][0];
        if (group >= 0) {
          if (g.kind == Region::Kind::gather) {
            for (auto d : g.data) claim(d, group, unite, cm);
            for (auto d : g.scores) claim(d, group, unite, cm);
          }
          if (g.kind == Region::Kind::unite)
            for (auto d : g.save_exit) claim(d, group, unite, cm);
        }
        // a top-level unite's co-methods: with at least as many co-methods as
        // ranks, co-method i on rank i % size; with more ranks, each a block of
        // consecutive ranks (unless one holds a nested unite: one rank each)
        std::vector<std::int32_t> cms;
        if (group < 0 && g.kind == Region::Kind::unite)
          for (const auto& it : g.items)
            if (it.region >= 0) cms.push_back(it.region);
        const auto n = std::int32_t(cms.size());
        bool spread = size > n;
        for (auto c : cms) spread = spread && !holds_unite(dag, c);
        std::int32_t k = 0;
        for (const auto& it : g.items) {
          if (it.region >= 0) {
            if (group < 0 && g.kind == Region::Kind::unite) {  // a top-level co-method
              visit(it.region, group_of(ymlopt::unite::rank_group(k++, n, size, spread)), r, it.region);
            } else {
              visit(it.region, group, unite, cm);
            }
            continue;
          }
          if (group < 0) continue;
          for (std::int32_t t = it.first; t < it.end; ++t) {
            p.task_group[size_t(t)] = group;
            p.task_rank[size_t(t)] = p.groups[size_t(group)][0];
            for (const Binding& b : dag.tasks[size_t(t)].bindings)
              if (b.mode != Access::read) claim(b.ref.data, group, unite, cm);
          }
        }
      };
  if (dag.root_region >= 0) visit(dag.root_region, -1, -1, -1);
  return p;
}

DataOwners data_owners(const Dag& dag, int size) {
  size = std::max(size, 1);
  const auto [p, q] = grid(size);
  DataOwners own(dag.data.size());
  // whole tensors without tiles: the largest first, each to the least loaded rank
  std::vector<size_t> untiled;
  for (size_t i = 0; i < dag.data.size(); ++i) {
    const DataDecl& d = dag.data[i];
    own[i].assign(size_t(1 + (d.tiled() ? d.ntiles() : 0)), 0);
    if (d.owner >= 0) {
      std::fill(own[i].begin(), own[i].end(), std::int32_t(d.owner % size));
      continue;
    }
    if (d.rank_count > 0) {  // ranks=: the tiles over the group by the same rules, the tensor on its first rank
      const int n = std::min(int(d.rank_count), size);
      const auto [gp, gq] = grid(n);
      std::fill(own[i].begin(), own[i].end(), std::int32_t(d.rank_first % size));
      for (std::int64_t t = 0; d.tiled() && t < d.ntiles(); ++t)
        own[i][size_t(1 + t)] = std::int32_t((d.rank_first + tile_slot(d, t, n, gp, gq)) % size);
      continue;
    }
    if (!d.tiled()) {
      untiled.push_back(i);
      continue;
    }
    for (std::int64_t t = 0; t < d.ntiles(); ++t) own[i][size_t(1 + t)] = std::int32_t(tile_slot(d, t, size, p, q));
    own[i][0] = own[i][1];  // the tensor itself lives with its first tile
  }
  std::stable_sort(untiled.begin(), untiled.end(),
                   [&](size_t a, size_t b) { return dag.data[a].bytes() > dag.data[b].bytes(); });
  std::vector<std::int64_t> load(size_t(size), 0);
  for (size_t i : untiled) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += dag.data[i].bytes();
    own[i][0] = std::int32_t(r);
  }
  if (dag.root_region >= 0) {
    // a co-method's data: on its rank group, tiles by the same rules over the
    // group's ranks, the tensor (and an untiled one) with the group's first rank
    const UnitePlacement up = unite_placement(dag, size);
    for (size_t i = 0; i < own.size(); ++i) {
      if (up.data_group[i] < 0) continue;
      const auto& ranks = up.groups[size_t(up.data_group[i])];
      const DataDecl& d = dag.data[i];
      std::fill(own[i].begin(), own[i].end(), ranks[0]);
      if (ranks.size() < 2 || !d.tiled()) continue;
      const auto [gp, gq] = grid(int(ranks.size()));
      for (std::int64_t t = 0; t < d.ntiles(); ++t)
        own[i][size_t(1 + t)] = ranks[size_t(tile_slot(d, t, int(ranks.size()), gp, gq))];
    }
  }
  return own;
}

std::int32_t ref_owner(const DataOwners& own, const DataRef& ref) {
  if (ref.data < 0 || size_t(ref.data) >= own.size()) return -1;
  return own[size_t(ref.data)][ref.tile >= 0 ? size_t(1 + ref.tile) : 0];
}

std::int32_t task_rank(const Dag& dag, const TaskNode& t, const DataOwners& own) {
  if (t.comp && t.comp->name == "io.save") return 0;
  // each operand once: whether the task reads it, writes it
  struct Operand {
    DataRef ref;
    std::int32_t owner;
    bool read = false, written = false;
  };
  std::vector<Operand> ops;
  std::int32_t owner_computes = -1, first = -1;
  for (const Binding& b : t.bindings) {
    const std::int32_t o = ref_owner(own, b.ref);
    if (o < 0) continue;
    if (b.mode != Access::read && owner_computes < 0) owner_computes = o;
    if (first < 0) first = o;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Operand& x) { return x.ref == b.ref; });
    if (it == ops.end()) it = ops.insert(ops.end(), {b.ref, o});
    it->read |= b.mode != Access::write;
    it->written |= b.mode != Access::read;
  }
  // bytes that running on rank r moves: operands it reads and does not own,
  // and those it writes and does not own (they go back to their owners);
  // replicated data are everywhere until written
  auto moved = [&](std::int32_t r) {
    std::int64_t n = 0;
    for (const Operand& x : ops) {
      if (x.owner == r) continue;
      const DataDecl& d = dag.data[size_t(x.ref.data)];
      n += ref_bytes(d, x.ref.tile) * ((x.read && d.distribute != "replicate") + x.written);
    }
    return n;
  };
  // owner computes, unless another operand's owner moves at least kFewer
  // times fewer bytes (a lookup in a large table, a reduction of a large
  // input): moving a small weight to save a somewhat larger activation would
  // pile the work of other ranks onto one. A task that updates an operand in
  // place stays with it: a chain of updates (y += x A[i, j] over i) would send
  // it back and forth between the ranks of the A tiles
  constexpr std::int64_t kFewer = 8;
  const std::int32_t home = owner_computes >= 0 ? owner_computes : std::max(first, 0);
  for (const Operand& x : ops)
    if (x.read && x.written) return home;
  std::int32_t best = home;
  std::int64_t least = moved(home);
  const std::int64_t bound = least;
  for (const Operand& x : ops)
    if (const std::int64_t m = moved(x.owner); m < least && m * kFewer <= bound) best = x.owner, least = m;
  return best;
}

// ---------------------------------------------------------------- simulation

namespace {

constexpr int kRead = 1, kWrite = 2;

// One activity of the simulated run: a task (or join/split no-op) on a rank's
// workers, or a transfer on a sending node's NIC (res < 0: no shared resource).
struct SimNode {
  int res = -1;
  double dur = 0;
  std::vector<int> deps;
};

// A copy of another rank's data held by `rank`: from the start or the end of
// node `from` until the end of node `until` (-1: the end of the run).
struct Copy {
  int rank = 0;
  std::int64_t bytes = 0;
  int from = -1;
  bool from_start = false;
  int until = -1;
};

class Replay {
 public:
  Replay(const Dag& dag, const ClusterSpec& spec, const DataOwners& own, int ranks)
      : dag_(dag), spec_(spec), own_(own), R_(ranks) {
    base_.resize(dag.data.size());
    for (size_t d = 0; d < dag.data.size(); ++d) {
      const DataDecl& decl = dag.data[d];
      base_[d] = int(owner_.size());
      const auto& o = own[d];
      for (size_t k = 0; k < o.size(); ++k) {
        const std::int64_t bytes = ref_bytes(decl, std::int64_t(k) - 1);
        owner_.push_back(o[k]);
        bytes_.push_back(decl.format.empty() ? bytes : -1);  // stored compressed: no handle
      }
    }
    const size_t nh = owner_.size();
    valid_.assign(nh * size_t(R_), 0);
    avail_.assign(nh * size_t(R_), -1);
    copy_.assign(nh * size_t(R_), -1);
    for (size_t d = 0; d < dag.data.size(); ++d) {
      const bool repl = dag.data[d].distribute == "replicate";
      for (size_t k = 0; k < own[d].size(); ++k) {
        const size_t h = size_t(base_[d]) + k;
        for (int r = 0; r < R_; ++r) valid_[h * size_t(R_) + size_t(r)] = repl || r == owner_[h];
      }
    }
    sent.assign(size_t(R_), 0);
    received.assign(size_t(R_), 0);
    messages.assign(size_t(R_), 0);
  }

  int node_of(int rank) const { return rank / spec_.ranks_per_node; }

  int add_node(int res, double dur) {
    nodes.push_back({res, dur, {}});
    return int(nodes.size()) - 1;
  }

  // A send of handle h from rank s to rank t, after node `after` (-1: at once).
  int transfer(size_t h, int s, int t, int after) {
    const double b = double(bytes_[h]);
    int x;
    if (node_of(s) == node_of(t)) x = add_node(-1, spec_.intra_latency_us * 1e-6 + b / (spec_.intra_gbs * 1e9));
    else x = add_node(R_ + node_of(s), spec_.latency_us * 1e-6 + b / (spec_.bandwidth_gbs * 1e9));
    if (after >= 0) nodes[size_t(x)].deps.push_back(after);
    sent[size_t(s)] += std::uint64_t(bytes_[h]);
    received[size_t(t)] += std::uint64_t(bytes_[h]);
    ++messages[size_t(s)];
    transfer_nodes.push_back(x);
    return x;
  }

  // Operands of one task or no-op on rank x: reads fetch a copy first, then the
  // node runs, then writes go back to their owners and invalidate other copies.
  // `alias`: the no-op's tiles live in the tensor's memory on x (no extra copy).
  void access(int node, int x, const std::vector<std::pair<size_t, int>>& ops, bool alias = false) {
    for (const auto& [h, mode] : ops) {
      const size_t hx = h * size_t(R_) + size_t(x);
      if ((mode & kRead) && !valid_[hx]) {
        const int o = owner_[h];
        const int tr = transfer(h, o, x, avail_[h * size_t(R_) + size_t(o)]);
        valid_[hx] = 1;
        avail_[hx] = tr;
        if (!alias) {
          copy_[hx] = int(copies.size());
          copies.push_back({x, bytes_[h], tr, false, -1});
        }
      } else if (!alias && !(mode & kRead) && x != owner_[h] && copy_[hx] < 0) {
        copy_[hx] = int(copies.size());  // an output buffer for data owned elsewhere
        copies.push_back({x, bytes_[h], node, true, -1});
      }
      if (valid_[hx] && avail_[hx] >= 0) nodes[size_t(node)].deps.push_back(avail_[hx]);
    }
    for (const auto& [h, mode] : ops) {
      if (!(mode & kWrite)) continue;
      const int o = owner_[h];
      const int back = x != o ? transfer(h, x, o, node) : -1;
      for (int r = 0; r < R_; ++r) {
        const size_t hr = h * size_t(R_) + size_t(r);
        if (int c = copy_[hr]; c >= 0) copies[size_t(c)].until = r == x && back >= 0 ? back : node;
        copy_[hr] = -1;
        valid_[hr] = r == o;
        avail_[hr] = -1;
      }
      avail_[h * size_t(R_) + size_t(o)] = back >= 0 ? back : node;
    }
  }

  size_t handle(const DataRef& ref) const { return size_t(base_[size_t(ref.data)]) + (ref.tile >= 0 ? size_t(1 + ref.tile) : 0); }
  bool stored(size_t d) const { return dag_.data[d].format.empty(); }

  // the backend's join (tiles -> tensor) or split (tensor -> tiles) no-op on the tensor's owner
  void sync(size_t d, bool join) {
    const int o = own_[d][0];
    const int n = add_node(o, spec_.sync_seconds);
    std::vector<std::pair<size_t, int>> ops;
    for (size_t k = 1; k < own_[d].size(); ++k) ops.emplace_back(size_t(base_[d]) + k, join ? kRead : kWrite);
    ops.emplace_back(size_t(base_[d]), join ? kWrite : kRead);
    access(n, o, ops, true);
    sync_nodes.push_back(n);
  }

  const Dag& dag_;
  const ClusterSpec& spec_;
  const DataOwners& own_;
  int R_;
  std::vector<int> base_;                // first handle of each data
  std::vector<std::int32_t> owner_;      // by handle
  std::vector<std::int64_t> bytes_;      // by handle (-1: no storage)
  std::vector<std::uint8_t> valid_;      // [handle][rank]: holds the current version
  std::vector<int> avail_;               // [handle][rank]: node after which it does (-1: from the start)
  std::vector<int> copy_;                // [handle][rank]: live Copy index
  std::vector<SimNode> nodes;
  std::vector<Copy> copies;
  std::vector<int> transfer_nodes, sync_nodes;
  std::vector<std::uint64_t> sent, received;
  std::vector<std::int64_t> messages;
};

// Event simulation: resource r has cap[r] servers, each takes the node that
// became ready first (ties: lowest id); res < 0 starts when ready.
void simulate(const std::vector<SimNode>& nodes, const std::vector<int>& cap, std::vector<double>& start,
              std::vector<double>& finish) {
  const size_t n = nodes.size();
  start.assign(n, 0);
  finish.assign(n, 0);
  std::vector<std::vector<int>> succ(n);
  std::vector<int> missing(n, 0);
  for (size_t i = 0; i < n; ++i) {
    missing[i] = int(nodes[i].deps.size());
    for (int p : nodes[i].deps) succ[size_t(p)].push_back(int(i));
  }
  using Item = std::pair<double, int>;
  using MinQueue = std::priority_queue<Item, std::vector<Item>, std::greater<>>;
  std::vector<MinQueue> ready(cap.size());
  std::vector<int> free = cap;
  MinQueue running;
  auto begin = [&](int i, double t) {
    start[size_t(i)] = t;
    finish[size_t(i)] = t + nodes[size_t(i)].dur;
    running.push({finish[size_t(i)], i});
  };
  auto make_ready = [&](int i, double t) {
    if (nodes[size_t(i)].res < 0) begin(i, t);
    else ready[size_t(nodes[size_t(i)].res)].push({t, i});
  };
  for (size_t i = 0; i < n; ++i)
    if (missing[i] == 0) make_ready(int(i), 0.0);
  double now = 0;
  size_t done = 0;
  while (done < n) {
    for (size_t r = 0; r < ready.size(); ++r)
      while (free[r] > 0 && !ready[r].empty()) {
        begin(ready[r].top().second, now);
        ready[r].pop();
        --free[r];
      }
    if (running.empty()) throw std::runtime_error("estimate_distributed: the DAG has a cycle");
    now = running.top().first;
    while (!running.empty() && running.top().first <= now) {
      const int i = running.top().second;
      running.pop();
      ++done;
      if (nodes[size_t(i)].res >= 0) ++free[size_t(nodes[size_t(i)].res)];
      for (int s : succ[size_t(i)])
        if (--missing[size_t(s)] == 0) make_ready(s, now);
    }
  }
}

// Largest sum of live amounts from (time, +/- bytes) events; frees sort before allocations at one time.
std::int64_t peak_of(std::vector<std::pair<double, double>>& ev) {
  std::sort(ev.begin(), ev.end());
  double live = 0, peak = 0;
  for (const auto& e : ev) peak = std::max(peak, live += e.second);
  return std::int64_t(std::llround(peak));
}

}  // namespace

namespace {

// RankEstimate::kept_bytes: per rank, the contents of kept ports that two or
// more of its tasks read, once each, capped at the caches' budget. (The weight
// caches that dominate a rank's memory, the f32 and quantized panels, pack on
// the second use; predict() counts every kept read once, as the first-use
// caches of f64 panels and CSR plans keep them.)
void kept_by_rank(const Dag& dag, DistributedEstimate& e, std::int64_t budget) {
  std::map<std::pair<std::int32_t, std::uint32_t>, std::pair<int, std::int64_t>> uses;  // (rank, id) -> uses, bytes
  for_each_kept_read(dag, [&](std::size_t task, std::uint32_t id, std::int64_t bytes) {
    auto& u = uses[{e.task_ranks[task], id}];
    ++u.first;
    u.second = bytes;
  });
  for (const auto& [key, u] : uses)
    if (u.first >= 2) {
      std::int64_t& k = e.per_rank[size_t(key.first)].kept_bytes;
      k = std::min(budget, k + u.second);
    }
}

}  // namespace

DistributedEstimate estimate_distributed(const Dag& dag, const std::vector<double>& seconds, const ClusterSpec& spec) {
  if (seconds.size() != dag.tasks.size()) throw std::invalid_argument("estimate_distributed: one time per task expected");
  if (spec.nodes < 1 || spec.ranks_per_node < 1 || spec.workers_per_rank < 1 || spec.cores_per_node < 0)
    throw std::invalid_argument("estimate_distributed: nodes, ranks per node and workers must be >= 1");
  if (!(spec.bandwidth_gbs > 0) || !(spec.intra_gbs > 0) || !(spec.latency_us >= 0) || !(spec.intra_latency_us >= 0) || !(spec.sync_seconds >= 0))
    throw std::invalid_argument("estimate_distributed: bandwidths must be > 0 and latency >= 0");
  DistributedEstimate e;
  e.ranks = spec.nodes * spec.ranks_per_node;
  const int R = e.ranks;
  const int threads = spec.ranks_per_node * spec.workers_per_rank;
  if (spec.cores_per_node > 0 && threads > spec.cores_per_node) e.time_scale = double(threads) / spec.cores_per_node;
  const DataOwners own = data_owners(dag, R);
  Replay rp(dag, spec, own, R);

  // replay the backend's submission: topological order, join/split before operands
  std::vector<int> task_node(dag.tasks.size(), -1);
  std::vector<std::uint8_t> tiles_dirty(dag.data.size(), 0), whole_dirty(dag.data.size(), 0);
  e.task_ranks.assign(dag.tasks.size(), 0);
  std::vector<std::pair<size_t, int>> ops;
  for (std::int32_t id : dag.topo_order) {
    const TaskNode& t = dag.tasks[size_t(id)];
    ops.clear();
    for (const Binding& b : t.bindings) {
      if (b.ref.data < 0 || !rp.stored(size_t(b.ref.data))) continue;
      const size_t d = size_t(b.ref.data);
      if (b.ref.tile >= 0 && whole_dirty[d]) rp.sync(d, false), whole_dirty[d] = 0;
      if (b.ref.tile < 0 && tiles_dirty[d]) rp.sync(d, true), tiles_dirty[d] = 0;
      const size_t h = rp.handle(b.ref);
      const int mode = (b.mode != Access::write ? kRead : 0) | (b.mode != Access::read ? kWrite : 0);
      auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == h; });
      if (it != ops.end()) it->second |= mode;
      else ops.emplace_back(h, mode);
    }
    const std::int32_t x = task_rank(dag, t, own);
    e.task_ranks[size_t(id)] = x;
    const int n = rp.add_node(x, seconds[size_t(id)] * e.time_scale);
    task_node[size_t(id)] = n;
    for (std::int32_t p : t.preds)
      if (task_node[size_t(p)] >= 0) rp.nodes[size_t(n)].deps.push_back(task_node[size_t(p)]);
    rp.access(n, x, ops);
    for (const Binding& b : t.bindings) {
      if (b.ref.data < 0 || b.mode == Access::read || !dag.data[size_t(b.ref.data)].tiled()) continue;
      (b.ref.tile >= 0 ? tiles_dirty : whole_dirty)[size_t(b.ref.data)] = 1;
    }
  }
  for (auto& nd : rp.nodes) {  // one dependency per pair is enough
    std::sort(nd.deps.begin(), nd.deps.end());
    nd.deps.erase(std::unique(nd.deps.begin(), nd.deps.end()), nd.deps.end());
  }

  std::vector<int> cap(size_t(R) + size_t(spec.nodes), 1);
  for (int r = 0; r < R; ++r) cap[size_t(r)] = spec.workers_per_rank;
  std::vector<double> start, finish;
  simulate(rp.nodes, cap, start, finish);
  for (double f : finish) e.makespan_s = std::max(e.makespan_s, f);

  e.per_rank.resize(size_t(R));
  for (int r = 0; r < R; ++r) {
    RankEstimate& k = e.per_rank[size_t(r)];
    k.rank = r;
    k.node = rp.node_of(r);
    k.bytes_sent = rp.sent[size_t(r)];
    k.bytes_received = rp.received[size_t(r)];
    k.messages_sent = rp.messages[size_t(r)];
    e.bytes_moved += k.bytes_sent;
    e.messages += k.messages_sent;
  }
  std::vector<std::vector<std::pair<double, double>>> work_ev(static_cast<size_t>(R)), copy_ev(static_cast<size_t>(R));
  for (size_t i = 0; i < dag.tasks.size(); ++i) {
    const int n = task_node[i];
    if (n < 0) continue;
    RankEstimate& k = e.per_rank[size_t(e.task_ranks[i])];
    ++k.tasks;
    k.busy_s += rp.nodes[size_t(n)].dur;
    e.compute_s += rp.nodes[size_t(n)].dur;
    if (const double x = dag.tasks[i].cost.extra_bytes; x > 0) {
      work_ev[size_t(e.task_ranks[i])].push_back({start[size_t(n)], x});
      work_ev[size_t(e.task_ranks[i])].push_back({finish[size_t(n)], -x});
    }
  }
  for (int n : rp.transfer_nodes) e.transfer_s += rp.nodes[size_t(n)].dur;
  e.sync_tasks = std::int64_t(rp.sync_nodes.size());
  for (const Copy& c : rp.copies) {
    const double from = c.from_start ? start[size_t(c.from)] : finish[size_t(c.from)];
    const double until = std::max(from, c.until >= 0 ? finish[size_t(c.until)] : e.makespan_s);
    copy_ev[size_t(c.rank)].push_back({from, double(c.bytes)});
    copy_ev[size_t(c.rank)].push_back({until, -double(c.bytes)});
  }
  for (size_t d = 0; d < dag.data.size(); ++d) {
    if (!rp.stored(d)) continue;
    const DataDecl& decl = dag.data[d];
    const size_t first = decl.tiled() ? 1 : 0, last = decl.tiled() ? own[d].size() : 1;
    for (size_t k = first; k < last; ++k)
      e.per_rank[size_t(own[d][k])].owned_bytes += rp.bytes_[size_t(rp.base_[d]) + k];
  }
  for (int r = 0; r < R; ++r) {
    e.per_rank[size_t(r)].remote_peak_bytes = peak_of(copy_ev[size_t(r)]);
    e.per_rank[size_t(r)].workspace_peak_bytes = peak_of(work_ev[size_t(r)]);
  }
  kept_by_rank(dag, e, spec.kept_budget_bytes);
  return e;
}

}  // namespace ymlopt
