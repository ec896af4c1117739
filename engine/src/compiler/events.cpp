// wait/notify: event edges on the heads of each wait's tasks, the topological order, cycles.
#include "compiler.hpp"

#include <algorithm>
#include <queue>

namespace ymlopt::compiler {

int Compiler::event_id(const std::string& name) {
  auto it = event_ids_.find(name);
  if (it != event_ids_.end()) return it->second;
  events_.push_back(EventInfo{name, {}, {}, {}});
  return event_ids_[name] = int(events_.size() - 1);
}

void Compiler::notify(const Element& e) {
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

void Compiler::wait(const Element& e) {
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

void Compiler::push_context() {
  contexts_.push_back(Context{std::int32_t(dag_.tasks.size()), {}, contexts_.empty() ? -1 : contexts_.back().last_wait});
}

void Compiler::pop_context() {
  for (int r : contexts_.back().ranges) wait_ranges_[size_t(r)].end = std::int32_t(dag_.tasks.size());
  contexts_.pop_back();
}

// The closure of each event's sources over notify-after-wait chains (close), and
// the pruning of wait lists (prune) that it shares with the edges on the heads of
// each wait (Compiler::add_wait_edges): that step uses `implied` as this one left it.
struct Compiler::EventClosure {
  explicit EventClosure(Compiler& compiler);
  /// Whether event a's waiters follow event b (an event not closed yet, inside a cycle, implies nothing).
  bool implies(int a, int b) const {
    return bits && !implied[size_t(a)].empty() && (implied[size_t(a)][size_t(b) / 64] >> (size_t(b) % 64) & 1);
  }
  std::vector<int> prune(const std::vector<int>& evs);
  void close(int ev);
  std::vector<int> open_waits(int ev, std::vector<std::pair<std::int32_t, std::int32_t>>& followed);
  void record_implied(int ev, const std::vector<int>& after);
  void keep_sinks(int ev, const std::vector<int>& after,
                  const std::vector<std::pair<std::int32_t, std::int32_t>>& followed);

  Compiler& c;
  std::vector<std::int32_t> stamp;  // by task: the event whose set is being built
  std::vector<int> state;           // by event: 0 not visited, 1 being closed, 2 closed
  std::vector<int> covered;         // by event: the event whose set it adds nothing to
  std::vector<int> stack;
  std::string cycle;
  int cycle_at = -1;
  // events each event's waiters follow through its notifies (the waits open there,
  // transitively), as bitsets while they stay small: an event another one already
  // implies is skipped
  bool bits;
  std::size_t words;
  std::vector<std::vector<std::uint64_t>> implied;
  std::vector<std::uint8_t> implies_some;
  std::vector<std::uint64_t> kept_imply;
  std::vector<std::size_t> kept_words;  // the words of kept_imply set, cleared after each prune
  std::vector<int> kept_in;
  int prunes = 0;
};

Compiler::EventClosure::EventClosure(Compiler& compiler)
    : c(compiler),
      stamp(compiler.dag_.tasks.size(), -1),
      state(compiler.events_.size(), 0),
      covered(compiler.events_.size(), -1),
      bits(compiler.events_.size() <= 16384),
      words((compiler.events_.size() + 63) / 64),
      implied(bits ? compiler.events_.size() : 0),
      implies_some(compiler.events_.size(), 0),
      kept_imply(bits ? words : 0),
      kept_in(compiler.events_.size(), -1) {}

// Of `evs` (waits in program order), those no other one implies: the latest first
// (the union of what the kept ones imply, so that a head after thousands of waits
// that imply nothing, a consumer of a producer's events, costs no more than their number).
std::vector<int> Compiler::EventClosure::prune(const std::vector<int>& evs) {
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
}

// Closes the events that notifies of `ev` wait for first, then `ev`'s own set: its
// sources and the sets of the waits open at its notifies, reduced to sinks.
void Compiler::EventClosure::close(int ev) {
  if (state[size_t(ev)] == 2) return;
  if (state[size_t(ev)] == 1) {
    if (cycle.empty()) {
      auto it = std::find(stack.begin(), stack.end(), ev);
      for (; it != stack.end(); ++it) cycle += "'" + c.events_[size_t(*it)].name + "' -> ";
      cycle += "'" + c.events_[size_t(ev)].name + "'";
      cycle_at = ev;
    }
    return;
  }
  state[size_t(ev)] = 1;
  stack.push_back(ev);
  for (const NotifyAt& n : c.events_[size_t(ev)].notifies)
    for (int r = n.waits; r >= 0; r = c.wait_ranges_[size_t(r)].parent) close(c.wait_ranges_[size_t(r)].event);
  stack.pop_back();
  state[size_t(ev)] = 2;
  std::vector<std::pair<std::int32_t, std::int32_t>> followed;  // task ranges a waiter follows anyway
  const std::vector<int> after = prune(open_waits(ev, followed));
  if (bits) record_implied(ev, after);
  keep_sinks(ev, after, followed);
}

// The waits open at the notifies of `ev`, in program order; those a source already
// follows (`covered`: the notify's last task, a source, was emitted after it) add
// nothing, as a waiter follows them through that source (without it, two branches
// handing events back and forth gave every task an edge from each earlier one).
std::vector<int> Compiler::EventClosure::open_waits(int ev,
                                                    std::vector<std::pair<std::int32_t, std::int32_t>>& followed) {
  std::vector<int> waits;
  for (const NotifyAt& n : c.events_[size_t(ev)].notifies) {
    const std::size_t from = waits.size();
    // what its context emitted before its previous notify, when one of the waits between
    // the two, open before its last task, follows that notify: the last task follows
    // that task range (each one is a source of the previous notify or feeds one). (A
    // wait before the previous notify cannot follow it without a cycle.)
    bool follows_prev = false;
    for (int r = n.waits; r >= 0; r = c.wait_ranges_[size_t(r)].parent) {
      const WaitRange& w = c.wait_ranges_[size_t(r)];
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
  return waits;
}

// What the waiters of `ev` follow: the kept waits and what they imply, and what its
// context notified before (closed already, and notified there only): its waiters
// follow all that the earlier notify's did (the waits open then, the tasks before
// it), so a consumer's waits for a producer's events all but the last are skipped.
void Compiler::EventClosure::record_implied(int ev, const std::vector<int>& after) {
  auto& mine = implied[size_t(ev)];
  mine.assign(words, 0);
  for (int a : after) {
    mine[size_t(a) / 64] |= std::uint64_t(1) << (size_t(a) % 64);
    for (std::size_t i = 0; i < implied[size_t(a)].size(); ++i) mine[i] |= implied[size_t(a)][i];
  }
  for (const NotifyAt& n : c.events_[size_t(ev)].notifies)
    if (n.prev >= 0 && n.prev != ev && state[size_t(n.prev)] == 2 && c.events_[size_t(n.prev)].notifies.size() == 1) {
      mine[size_t(n.prev) / 64] |= std::uint64_t(1) << (size_t(n.prev) % 64);
      for (std::size_t i = 0; i < words; ++i) mine[i] |= implied[size_t(n.prev)][i];
    }
  for (std::size_t i = 0; i < words && !implies_some[size_t(ev)]; ++i) implies_some[size_t(ev)] = mine[i] != 0;
}

// closed_[ev]: its sources and the sets of the kept waits it does not cover, less the
// ranges followed anyway, kept reduced to its sinks (every task of the full set
// reaches one of them), so that sets stay small however long the chains are.
void Compiler::EventClosure::keep_sinks(int ev, const std::vector<int>& after,
                                        const std::vector<std::pair<std::int32_t, std::int32_t>>& followed) {
  std::vector<std::int32_t> all = c.events_[size_t(ev)].sources;
  for (int a : after)
    if (covered[size_t(a)] != ev) all.insert(all.end(), c.closed_[size_t(a)].begin(), c.closed_[size_t(a)].end());
  for (const auto& range : followed)
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](std::int32_t t) { return t >= range.first && t < range.second; }),
              all.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (auto t : all) stamp[size_t(t)] = ev;
  std::vector<std::uint8_t> inner(all.size(), 0);  // feeds another member by data
  for (std::size_t i = 0; i < all.size(); ++i)
    for (auto q : c.dag_.tasks[size_t(all[i])].preds)
      if (stamp[size_t(q)] == ev) inner[size_t(std::lower_bound(all.begin(), all.end(), q) - all.begin())] = 1;
  auto& out = c.closed_[size_t(ev)];
  for (std::size_t i = 0; i < all.size(); ++i)
    if (!inner[i]) out.push_back(all[i]);
}

// Every wait must have a notify; then each event's set is closed over the chains
// (a cycle is an error), and the heads of each wait's range get the edges.
void Compiler::finish_events() {
  for (const auto& [ev, loc] : wait_locs_)
    if (events_[size_t(ev)].notifies.empty())
      diags_.error(loc, "wait for event '" + events_[size_t(ev)].name +
                            "' that no notify can satisfy (no <notify event=\"" + events_[size_t(ev)].name +
                            "\"/> in the workflow)");
  if (diags_.has_errors()) return;
  EventClosure g(*this);
  closed_.assign(events_.size(), {});
  for (size_t ev = 0; ev < events_.size(); ++ev) g.close(int(ev));
  if (!g.cycle.empty()) {
    diags_.error(events_[size_t(g.cycle_at)].first_wait,
                 "dependency cycle through events " + g.cycle +
                     " (each is notified only after a wait for the next); these waits can never be satisfied");
    return;
  }
  add_wait_edges(g);
}

// A wait holds back a range of tasks; those with a data predecessor in the range
// follow it through that one, so only the range's heads get the edges (preds are
// data dependencies only until the edges are added here). Each head gets the union
// of its ranges' sets, without duplicates (a task after many waits of one branch
// heads each of their ranges). The ranges a task is in are the waits open where it
// was emitted, latest (largest first) first; it heads those that begin after its
// last data predecessor.
void Compiler::add_wait_edges(EventClosure& g) {
  const std::size_t nt = dag_.tasks.size();
  std::vector<std::int32_t> last_pred(nt, -1);
  for (std::size_t t = 0; t < nt; ++t)
    for (auto q : dag_.tasks[t].preds) last_pred[t] = std::max(last_pred[t], q);
  for (WaitRange& w : wait_ranges_)
    if (w.end < 0) w.end = std::int32_t(nt);
  std::vector<std::int32_t>& stamp = g.stamp;  // by task: the head whose edges are being gathered
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
    for (int ev : g.prune(evs)) {
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

void Compiler::order() {
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

}  // namespace ymlopt::compiler
