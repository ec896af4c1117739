// run_program: the interpreter of a workflow's runtime control flow (Region
// tree, see ir.hpp) on top of an executor Session. Task runs go to the
// backend part by part; loop conditions, publish and gather read and write
// the tensors between parts (Session::acquire); the co-methods of a <unite>
// run on the co-method runtime (ymlopt/unite): threads of their own, a
// UniteBoard, fair shares, exit policies and, under MPI, rank groups.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/engine/expr.hpp"
#include "ymlopt/scheduler/executor.hpp"
#include "ymlopt/unite/board.hpp"
#include "ymlopt/unite/comethods.hpp"
#include "ymlopt/unite/exchange.hpp"
#include "ymlopt/unite/fair_share.hpp"
#include "ymlopt/unite/pareto.hpp"
#include "ymlopt/unite/peers.hpp"
#include "ymlopt/unite/placement.hpp"

namespace ymlopt {
namespace {

using Clock = std::chrono::steady_clock;
using unite::Entry;
using unite::Outcome;
using unite::PeerState;

// What a co-method running on this rank leaves for the other ranks' records:
// the loops it ran and the nested unites it held (they ran here only).
struct Shipped {
  std::mutex mu;
  std::vector<std::pair<std::int32_t, std::int64_t>> loops;
  std::vector<UniteRecord> nested;
};

// Where a region runs: the co-method (if any), its scheduling context and
// priority, and what may stop it. A co-method of a nested unite has the
// enclosing co-method's scope as parent: whatever stops that stops it too.
struct Scope {
  std::int32_t comethod = -1;
  std::string who = "main";  // "outer/inner" for a co-method of a nested unite
  const Scope* parent = nullptr;
  int context = 0, priority = 0;
  std::vector<int> workers;                 // its context's workers (empty: all)
  unite::FairShare* fair = nullptr;         // mapping="fair": its priority comes from here
  size_t fair_slot = 0;
  const std::atomic<bool>* stop = nullptr;  // set by the unite (exit="first", budget)
  Clock::time_point deadline = Clock::time_point::max();
  std::int64_t iteration_budget = 0;        // 0: none
  CoMethodRecord* rec = nullptr;
  bool converged = true;                    // every loop so far ended by its condition
  double best = std::numeric_limits<double>::quiet_NaN();
  bool maximize = false;
  bool distributed = false;  // a co-method on a rank group: publishes go to every rank
  std::int32_t top = -1;     // (distributed) the top-level co-method: its group runs this scope
  std::int32_t unite = -1;   // (top-level co-method) its unite, for the state it posts
  std::int32_t unite_run = 0;  // (top-level co-method) which run of that unite (a loop may run it again)
  PeerState posted = PeerState::busy;  // (top-level co-method's leader) the state the other ranks know
  Shipped* ship = nullptr;   // (distributed) where its loops and nested unites are noted
};

// One run of a <unite>: its co-methods' regions, where they run, their
// scopes and records, and the runtime that runs them.
struct UniteRun {
  std::int32_t uid = -1;
  bool distributed = false;        // a top-level unite on rank groups
  std::vector<std::int32_t> cms;   // the co-methods' regions
  std::vector<char> mine, lead;    // run here (with their group's other ranks); their group led from here
  std::vector<Scope> scopes;
  std::vector<Shipped> ships;      // (distributed) by co-method
  std::vector<int> contexts;       // scheduling context by co-method
  std::vector<std::vector<int>> workers;
  std::unique_ptr<unite::FairShare> fair;  // mapping="fair"
  std::unique_ptr<unite::CoMethods> run;
  UniteRecord ur;
};

class ProgramRunner {
 public:
  ProgramRunner(const Dag& dag, DataStore& store, Session& s, ExecResult& r, const ExecOptions& opts)
      : dag_(dag), store_(store), s_(s), groups_(s.rank_groups()), r_(r), t0_(Clock::now()), conds_(dag.regions.size()),
        on_iteration_(opts.on_iteration) {
    for (size_t i = 0; i < dag.regions.size(); ++i)
      if (!dag.regions[i].cond.empty()) conds_[i] = Template::compile("${" + dag.regions[i].cond + "}");
    if (ranks() > 1) {
      place_ = unite_placement(dag, ranks());
      // kernels of co-methods ask how many co-methods of their unite are at work on other ranks
      for (size_t u = 0; u < dag.regions.size(); ++u) {
        if (dag.regions[u].kind != Region::Kind::unite || place_.region_group[u] >= 0) continue;  // top-level only
        std::int32_t k = 0;
        for (const auto& it : dag.regions[u].items)
          if (it.region >= 0) top_[it.region] = {std::int32_t(u), k++};
      }
      s.runner().set_remote_peers([this](std::int32_t c) { return remote_at_work(c); });
    }
  }

  Outcome run() {
    Scope top;
    return exec(dag_.root_region, top);
  }
  const std::string& error() const { return error_; }

 private:
  // The rank-group operations (RankGroups), as one process sees them without it.
  int ranks() const { return groups_ ? groups_->ranks() : 1; }
  int rank() const { return groups_ ? groups_->rank() : 0; }
  bool leads() const { return !groups_ || groups_->leads(); }
  int group_size() const { return groups_ ? groups_->group_size() : 1; }
  void post(std::vector<std::byte> msg) {
    if (groups_) groups_->post(std::move(msg));
  }

  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  void fail(const Scope& sc, std::string message) {
    if (sc.rec) {
      if (sc.rec->error.empty()) sc.rec->error = std::move(message);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = std::move(message);
  }

  static std::string where(const Region& g) {
    return (g.loc.file ? *g.loc.file : std::string()) + ":" + std::to_string(g.loc.line) + ":" +
           std::to_string(g.loc.col) + ": error: ";
  }

  bool stopped(const Scope& sc) const {
    return (sc.stop && sc.stop->load(std::memory_order_relaxed)) || Clock::now() >= sc.deadline ||
           (sc.iteration_budget > 0 && sc.rec && sc.rec->iterations >= sc.iteration_budget) ||
           (sc.parent && stopped(*sc.parent));
  }

  Outcome exec(std::int32_t region, Scope& sc) {
    const Region& g = dag_.regions[size_t(region)];
    switch (g.kind) {
      case Region::Kind::body:
      case Region::Kind::comethod: return items(g, sc);
      case Region::Kind::until:
      case Region::Kind::while_: return loop(region, sc);
      case Region::Kind::unite: return unite(g, sc);
      case Region::Kind::publish: return publish(g, sc);
      case Region::Kind::gather: return gather(g, sc);
    }
    return Outcome::failed;
  }

  Outcome items(const Region& g, Scope& sc) {
    for (const auto& it : g.items) {
      if (it.region >= 0) {
        if (Outcome o = exec(it.region, sc); o != Outcome::done) return o;
        continue;
      }
      if (sc.fair) sc.fair->wait_turn(sc.fair_slot);
      const bool ok = s_.run(it.first, it.end, sc.context, sc.fair ? sc.fair->priority(sc.fair_slot) : sc.priority);
      if (sc.rec) {
        double us = 0;
        for (std::int32_t t = it.first; t < it.end; ++t) us += s_.runner().busy_us(t);
        sc.rec->worker_s += us * 1e-6;
        // a nested co-method's time is its enclosing co-methods' too, as it accrues
        for (const Scope* p = &sc; p; p = p->parent)
          if (p->fair) p->fair->add(p->fair_slot, us);
      }
      const bool post = sc.unite >= 0 && leads();  // a top-level co-method on ranks: its state for the others
      if (sc.fair || post) {
        bool idle = it.end > it.first;
        for (std::int32_t t = it.first; t < it.end && idle; ++t) idle = s_.runner().result(t, "idle") == 1;
        if (sc.fair) sc.fair->set_idle(sc.fair_slot, idle);
        if (post) post_state(sc, idle ? PeerState::idle : PeerState::busy);
      }
      if (sc.comethod >= 0 && s_.runner().comethod_failed(sc.comethod)) {
        fail(sc, s_.runner().comethod_error(sc.comethod));
        return Outcome::failed;
      }
      if (!ok) return Outcome::failed;  // a task outside co-methods failed: the run stops (error in the runner)
    }
    return Outcome::done;
  }

  // Reads a 1-element tensor as a number.
  double scalar(std::int32_t d) {
    s_.acquire(d, false);
    const void* p = store_.base(d);
    double v = 0;
    switch (dag_.data[size_t(d)].dtype) {
      case DType::f64: v = *static_cast<const double*>(p); break;
      case DType::i32: v = *static_cast<const std::int32_t*>(p); break;
      default: v = *static_cast<const float*>(p); break;
    }
    s_.release(d);
    return v;
  }
  void set_scalar(std::int32_t d, double v) {
    s_.acquire(d, true);
    void* p = store_.base(d);
    switch (dag_.data[size_t(d)].dtype) {
      case DType::f64: *static_cast<double*>(p) = v; break;
      case DType::i32: *static_cast<std::int32_t*>(p) = std::int32_t(v); break;
      default: *static_cast<float*>(p) = float(v); break;
    }
    s_.release(d);
  }

  bool condition(std::int32_t region) {
    const Region& g = dag_.regions[size_t(region)];
    std::map<std::string, Value, std::less<>> vals;
    for (auto d : g.cond_data) vals[dag_.data[size_t(d)].name] = Value::of_float(scalar(d));
    const Value v = conds_[size_t(region)]->value([&](std::string_view n) -> const Value* {
      auto it = vals.find(n);
      return it == vals.end() ? nullptr : &it->second;
    });
    return v.number() != 0 && !std::isnan(v.number());
  }

  void observe(std::int32_t region, std::int64_t iteration, const Scope& sc, std::int64_t& seen) {
    if (iteration == seen) return;
    seen = iteration;
    if (on_iteration_ && !sc.rec && leads()) on_iteration_(region, iteration, s_);
  }

  Outcome loop(std::int32_t region, Scope& sc) {
    const Region& g = dag_.regions[size_t(region)];
    const bool until = g.kind == Region::Kind::until;
    std::int64_t it = 0, seen = -1;
    bool ended_by_condition = false;
    Outcome out = Outcome::done;
    try {
      for (; it < g.max_iter; ++it) {
        observe(region, it, sc, seen);
        if (!until && !condition(region)) {
          ended_by_condition = true;
          break;
        }
        if (sc.distributed) pump();
        if (agreed_stop(sc)) {
          out = Outcome::stopped;
          break;
        }
        if (Outcome o = items(g, sc); o != Outcome::done) {
          out = o;
          break;
        }
        if (sc.rec) ++sc.rec->iterations;
        if (until && condition(region)) {
          ended_by_condition = true;
          ++it;
          break;
        }
      }
    } catch (const ExprError& e) {
      fail(sc, where(g) + "loop condition '" + g.cond + "': " + e.message);
      out = Outcome::failed;
    }
    if (out == Outcome::done) observe(region, it, sc, seen);
    if (out == Outcome::done && !ended_by_condition) sc.converged = false;  // ran out of iterations
    if (sc.ship) {
      std::lock_guard<std::mutex> lock(sc.ship->mu);
      sc.ship->loops.emplace_back(region, it);
    }
    if (!leads()) return out;  // another rank of the group leads: its record comes with the unite's end
    std::lock_guard<std::mutex> lock(mu_);
    r_.loop_iterations.emplace_back(region, it);
    return out;
  }

  // Whether a co-method stops here: on a group of several ranks, as its leader
  // sees it (stop messages, the clock), so that every rank of it stops alike.
  bool agreed_stop(const Scope& sc) {
    const bool mine = stopped(sc);
    if (!sc.distributed || group_size() < 2) return mine;
    const auto b = groups_->share({std::byte(mine)});
    return b.at(0) != std::byte{0};
  }

  void note_score(Scope& sc, double score) {
    if (std::isnan(sc.best) || (sc.maximize ? score > sc.best : score < sc.best)) sc.best = score;
    if (sc.rec) sc.rec->score_history.emplace_back(now_s(), sc.best);
  }

  Outcome publish(const Region& g, Scope& sc) {
    Entry payload;
    for (auto d : g.data) {
      s_.acquire(d, false);
      const TensorView v = store_.view(DataRef{d, -1});
      const size_t row = size_t(v.cols) * dtype_size(v.dtype);
      std::vector<std::byte>& b = payload.tensors.emplace_back(size_t(v.rows) * row);
      for (std::int64_t i = 0; i < v.rows; ++i)
        std::memcpy(b.data() + size_t(i) * row, static_cast<const std::byte*>(v.data) + size_t(i * v.ld) * dtype_size(v.dtype), row);
      s_.release(d);
    }
    for (auto d : g.scores) {
      payload.scores.push_back(scalar(d));
      if (std::isnan(payload.scores.back())) {
        fail(sc, where(g) + "publish to '" + g.name + "': score '" + dag_.data[size_t(d)].name + "' is NaN");
        return Outcome::failed;
      }
    }
    const double score = payload.scores[0];
    if (sc.distributed && leads())  // (the other ranks of a group get it from their leader too)
      post(unite::Peers::publish_message(g.name, sc.who, payload));
    if (leads()) board_.publish(g.name, sc.who, score, std::move(payload));
    note_score(sc, score);
    if (sc.rec) {
      ++sc.rec->publishes;
      sc.rec->exchanges.push_back({now_s(), true, g.name, "", score});
      if (std::isnan(sc.rec->best_score) || (sc.maximize ? score > sc.rec->best_score : score < sc.rec->best_score))
        sc.rec->best_score = score;
    }
    return Outcome::done;
  }

  Outcome gather(const Region& g, Scope& sc) {
    if (sc.distributed) pump();
    auto e = g.pareto ? unite::pareto_best(board_, g.name)
                      : board_.gather_best(g.name, g.maximize ? unite::Better::max : unite::Better::min, sc.who);
    std::string publisher = e ? e->publisher : "";
    const Entry* payload = e ? &unite::payload_as<Entry>(*e) : nullptr;
    std::pair<std::string, Entry> shared;
    if (sc.distributed && group_size() > 1) {  // every rank of the group takes its leader's pick
      unite::WireOut w;
      w.put(std::uint8_t(payload != nullptr));
      if (payload) unite::put_entry(w, publisher, *payload);
      const auto b = groups_->share(w.take());
      unite::WireIn in(b);
      if (in.get<std::uint8_t>() != 0) {
        shared = unite::get_entry(in);
        publisher = shared.first, payload = &shared.second;
      } else {
        publisher.clear(), payload = nullptr;
      }
    }
    const double score = payload ? payload->scores.at(0) : 0.0;
    if (sc.rec) {
      ++sc.rec->gathers;
      sc.rec->exchanges.push_back({now_s(), false, g.name, publisher, score});
    }
    if (!payload) return Outcome::done;  // nothing published yet: `into` keeps what it holds
    for (size_t k = 0; k < g.data.size(); ++k) {
      const std::int32_t d = g.data[k];
      s_.acquire(d, true);
      const TensorView v = store_.view(DataRef{d, -1});
      const size_t row = size_t(v.cols) * dtype_size(v.dtype);
      for (std::int64_t i = 0; i < v.rows; ++i)
        std::memcpy(static_cast<std::byte*>(v.data) + size_t(i * v.ld) * dtype_size(v.dtype),
                    payload->tensors[k].data() + size_t(i) * row, row);
      s_.release(d);
    }
    for (size_t k = 0; k < g.scores.size(); ++k) set_scalar(g.scores[k], payload->scores[k]);
    note_score(sc, score);
    if (sc.rec && publisher != sc.who) ++sc.rec->adopted;
    return Outcome::done;
  }

  // Applies what other ranks' co-methods posted: their publishes to the board,
  // their states and their unites' stops.
  void pump() {
    if (!groups_) return;
    for (const auto& m : groups_->poll()) peers_.apply(m, board_);
  }

  // The other ranks learn when a top-level co-method's state changes (its
  // leader posts it): what remote_peers_at_work answers there.
  void post_state(Scope& sc, PeerState st) {
    if (st == sc.posted) return;
    sc.posted = st;
    post(unite::Peers::state_message(sc.unite, sc.unite_run, std::int32_t(sc.fair_slot), st));
  }

  // KernelContext::remote_peers_at_work for a task of co-method region `c`:
  // the co-methods of its top-level unite at work on ranks outside its group.
  int remote_at_work(std::int32_t c) {
    while (c >= 0 && !top_.count(c)) c = dag_.regions[size_t(c)].parent_comethod;
    if (c < 0) return -1;
    const auto [u, me] = top_.at(c);
    const Region& g = dag_.regions[size_t(u)];
    std::vector<PeerState> states;
    if (!peers_.states(u, states)) return -1;
    int n = 0, remote = 0;
    std::int32_t k = 0;
    for (const auto& item : g.items) {
      if (item.region < 0) continue;
      const auto& ranks = place_.groups[size_t(place_.region_group[size_t(item.region)])];
      const bool here = std::find(ranks.begin(), ranks.end(), rank()) != ranks.end();
      if (k != me && !here) {
        ++remote;
        n += size_t(k) >= states.size() || states[size_t(k)] == PeerState::busy;
      }
      ++k;
    }
    return remote > 0 ? n : -1;
  }

  // A unite on rank groups, once this rank's co-methods ended: every rank
  // learns how the others' co-methods ended, the loops they ran and the unites
  // nested in them (into `r_`), so that all choose the same winner.
  void share_endings(UniteRun& u) {
    unite::WireOut w;
    for (size_t i = 0; i < u.lead.size(); ++i) {
      if (!u.lead[i]) continue;  // (its group's leader ships it)
      const unite::Ending e = u.run->ending(i);
      w.put(std::int32_t(i)), w.put(std::int32_t(e.outcome)), w.put(e.time_s);
      w.put(std::uint8_t(u.scopes[i].converged)), w.put(u.scopes[i].best);
      unite::put_record(w, u.ur.comethods[i]);
      w.put(std::uint64_t(u.ships[i].loops.size()));
      for (const auto& [region, it] : u.ships[i].loops) w.put(region), w.put(it);
      w.put(std::uint64_t(u.ships[i].nested.size()));
      for (const auto& n : u.ships[i].nested) unite::put_unite(w, n);
    }
    const auto all = groups_->unite_end(u.uid, w.take());
    pump();  // the last publishes: every rank's board holds every co-method's
    for (size_t k = 0; k < all.size(); ++k) {
      if (int(k) == rank()) continue;
      unite::WireIn in(all[k]);
      while (!in.done()) {
        const auto i = size_t(in.get<std::int32_t>());
        unite::Ending e;
        e.outcome = Outcome(in.get<std::int32_t>());
        e.time_s = in.get<double>();
        u.scopes.at(i).converged = e.converged = in.get<std::uint8_t>() != 0;
        u.scopes[i].best = e.best = in.get<double>();
        u.run->finish(i, e);
        u.ur.comethods[i] = unite::get_record(in);
        std::lock_guard<std::mutex> lock(mu_);
        for (auto n = in.get<std::uint64_t>(); n > 0; --n) {
          const auto region = in.get<std::int32_t>();
          r_.loop_iterations.emplace_back(region, in.get<std::int64_t>());
        }
        for (auto n = in.get<std::uint64_t>(); n > 0; --n) r_.unites.push_back(unite::get_unite(in));
      }
    }
  }

  static unite::Exit exit_of(const Region& g) {
    return g.exit == Region::Exit::first ? unite::Exit::first
           : g.exit == Region::Exit::all ? unite::Exit::all
                                         : unite::Exit::budget;
  }

  // The co-methods of unite `g`, the ranks that run them and their records.
  void unite_prepare(const Region& g, const Scope& outer, UniteRun& u) {
    u.uid = std::int32_t(&g - dag_.regions.data());
    // a top-level unite on several ranks: each co-method on its rank group
    u.distributed = ranks() > 1 && outer.comethod < 0;
    u.ur.name = g.name;
    if (outer.comethod >= 0) u.ur.within = outer.who;
    u.ur.exit = unite::exit_name(exit_of(g));
    u.ur.start_s = now_s();
    for (const auto& it : g.items)
      if (it.region >= 0) u.cms.push_back(it.region);
    const size_t n = u.cms.size();
    u.ur.comethods.resize(n);
    for (size_t i = 0; i < n; ++i) {
      CoMethodRecord& rec = u.ur.comethods[i];
      rec.name = dag_.regions[size_t(u.cms[i])].name;
      rec.region = u.cms[i];
      rec.best_score = std::numeric_limits<double>::quiet_NaN();
    }
    // the co-methods this process runs (with the other ranks of their group),
    // and those whose group it leads (its records count)
    u.mine.assign(n, 1), u.lead.assign(n, 1);
    for (size_t i = 0; i < n && u.distributed; ++i) {
      const auto& ranks = place_.groups[size_t(place_.region_group[size_t(u.cms[i])])];
      u.mine[i] = std::find(ranks.begin(), ranks.end(), rank()) != ranks.end();
      u.lead[i] = ranks[0] == rank();
    }
    u.ships = std::vector<Shipped>(u.distributed ? n : 0);
    u.scopes.resize(n);
    u.run = std::make_unique<unite::CoMethods>(n, exit_of(g));
  }

  // mapping="fair": one "prio" context over the pool, priorities from a
  // FairShare; mapping="contexts": each co-method gets a scheduling context
  // over its share of the workers (of the enclosing co-method's, in a nested unite).
  void unite_map(const Region& g, const Scope& outer, UniteRun& u) {
    const size_t n = u.cms.size();
    u.contexts.assign(n, outer.context);
    u.workers.assign(n, outer.workers);
    std::vector<int> pool = outer.workers;
    if (pool.empty())
      for (int w = 0; w < s_.num_workers(); ++w) pool.push_back(w);
    if (g.mapping == Region::Mapping::fair) {
      u.fair = std::make_unique<unite::FairShare>(n, pool.size());
      for (size_t i = 0; i < n; ++i)
        if (!u.mine[i]) u.fair->leave(i);  // runs on another rank
      const int ctx = s_.create_context(g.name.empty() ? "unite" : g.name, pool, "prio");
      if (ctx != 0) std::fill(u.contexts.begin(), u.contexts.end(), ctx);
    } else if (g.mapping == Region::Mapping::contexts) {
      std::vector<std::int64_t> want(n, 0);
      for (size_t i = 0; i < n; ++i) {
        const Region& cm = dag_.regions[size_t(u.cms[i])];
        if (u.mine[i]) want[i] = cm.workers > 0 ? std::int64_t(cm.workers) : -1;
      }
      auto shares = unite::share_workers(pool, want);
      for (size_t i = 0; i < n; ++i) {
        if (!u.mine[i]) continue;
        u.contexts[i] = s_.create_context(dag_.comethod_path(u.cms[i]), shares[i], "eager");
        u.ur.comethods[i].context_workers = shares[i];
        u.workers[i] = std::move(shares[i]);
      }
    }
  }

  // The scopes of the co-methods this process runs (and, on rank groups, the
  // unite's run announced to the peers).
  void unite_scopes(const Region& g, Scope& outer, UniteRun& u) {
    const auto deadline =
        g.exit == Region::Exit::budget && g.budget_s > 0
            ? std::min(outer.deadline,
                       Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(g.budget_s)))
            : outer.deadline;
    std::int32_t run = 0;
    if (u.distributed) {
      groups_->unite_begin(u.uid);
      run = peers_.begin(u.uid, u.cms.size(), &u.run->stop_flag());
    }
    for (size_t i = 0; i < u.cms.size(); ++i) {
      if (!u.mine[i]) continue;  // another rank runs it
      Scope& sc = u.scopes[i];
      sc.comethod = u.cms[i];
      sc.who = dag_.comethod_path(u.cms[i]);
      sc.parent = outer.comethod >= 0 ? &outer : nullptr;
      sc.context = u.contexts[i];
      sc.workers = u.workers[i];
      sc.priority = dag_.regions[size_t(u.cms[i])].priority;
      sc.fair = u.fair.get();
      sc.fair_slot = i;
      sc.stop = &u.run->stop_flag();
      sc.deadline = deadline;
      sc.iteration_budget = g.exit == Region::Exit::budget ? g.budget_iters : 0;
      sc.rec = &u.ur.comethods[i];
      sc.maximize = g.maximize;
      sc.distributed = u.distributed || outer.distributed;
      sc.top = u.distributed ? u.cms[i] : outer.top;
      sc.unite = u.distributed ? u.uid : -1;
      sc.unite_run = run;
      sc.ship = u.distributed ? &u.ships[i] : outer.ship;
    }
  }

  // Co-method i of the unite, in its own thread: its region, then its ending.
  void run_comethod(UniteRun& u, size_t i) {
    Scope& sc = u.scopes[i];
    if (sc.distributed) groups_->set_comethod(sc.top);  // (nested: the enclosing co-method's group)
    sc.rec->start_s = now_s();
    Outcome o;
    try {
      o = exec(sc.comethod, sc);
    } catch (const std::exception& e) {
      fail(sc, e.what());
      o = Outcome::failed;
    }
    if (u.distributed) {
      groups_->comethod_end();
      sc.rec->worker_s = groups_->group_sum(sc.rec->worker_s);  // (the ranks of its group)
      if (u.lead[i]) post_state(sc, PeerState::finished);
    }
    if (sc.fair) sc.fair->leave(i);
    const double t = now_s();
    sc.rec->end_s = t;
    if (u.run->finish(i, {o, sc.converged, sc.best, t}) && u.distributed && u.lead[i])
      post(unite::Peers::stop_message(u.uid));  // exit="first": the other ranks stop theirs
  }

  // The winner (exit policy, unite/exit.hpp), its kept data, and the failures.
  Outcome unite_conclude(const Region& g, Scope& outer, UniteRun& u) {
    UniteRecord& ur = u.ur;
    for (size_t i = 0; i < u.cms.size(); ++i) {
      CoMethodRecord& rec = ur.comethods[i];
      const unite::Ending e = u.run->ending(i);
      rec.failed = e.outcome == Outcome::failed;
      rec.stopped = e.outcome == Outcome::stopped;
      rec.converged = e.converged_done();
    }
    const unite::Verdict v = u.run->verdict(g.maximize, stopped(outer));
    const std::int32_t win = v.winner;
    ur.end_s = now_s();
    if (win < 0) {
      std::string why;
      for (const auto& c : ur.comethods) why += "\n  co-method '" + c.name + "': " + c.error;
      fail(outer, where(g) + "every co-method of unite '" + g.name + "' failed:" + why);
      return Outcome::failed;
    }
    if (v.unconverged && !outer.rec) {
      const CoMethodRecord& best = ur.comethods[size_t(win)];
      std::string score;
      if (!std::isnan(u.scopes[size_t(win)].best)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", u.scopes[size_t(win)].best);
        score = ", best score " + std::string(buf);
      }
      fail(outer, where(g) + "unite '" + g.name + "': no co-method converged (each ran out of loop iterations; closest: '" +
                      best.name + "'" + score + "): its answer is not saved");
      return Outcome::failed;
    }
    CoMethodRecord& w = ur.comethods[size_t(win)];
    w.winner = true;
    ur.winner = w.name;
    const Region& cm = dag_.regions[size_t(u.cms[size_t(win)])];
    for (size_t k = 0; k < g.save_exit.size(); ++k) copy(cm.keep[k], g.save_exit[k]);
    // a nested unite: the enclosing co-method converged only if its winner did,
    // and a stop of the enclosing co-method (its unite's exit) ends it here too
    if (!w.converged) outer.converged = false;
    return stopped(outer) ? Outcome::stopped : Outcome::done;
  }

  // <unite>: the co-methods run side by side on the co-method runtime
  // (ymlopt/unite), then the exit policy picks the winner.
  Outcome unite(const Region& g, Scope& outer) {
    UniteRun u;
    unite_prepare(g, outer, u);
    unite_map(g, outer, u);
    unite_scopes(g, outer, u);
    u.run->start(u.mine, [&](size_t i) { run_comethod(u, i); });
    if (outer.rec) {  // a nested unite: its co-methods' worker time is the enclosing co-method's too
      double s = 0;
      for (size_t i = 0; i < u.cms.size(); ++i) s += u.mine[i] ? u.ur.comethods[i].worker_s : 0.0;
      outer.rec->worker_s += s;  // (the fair shares had it part by part)
    }
    if (u.distributed) {
      peers_.unhook(u.uid);
      share_endings(u);
      peers_.end(u.uid);
    }
    std::sort(u.contexts.begin(), u.contexts.end());
    u.contexts.erase(std::unique(u.contexts.begin(), u.contexts.end()), u.contexts.end());
    for (int c : u.contexts)
      if (c != outer.context) s_.delete_context(c);
    const Outcome out = unite_conclude(g, outer, u);
    if (outer.ship) {  // nested in a co-method on a rank group: the other ranks get its record too
      std::lock_guard<std::mutex> lock(outer.ship->mu);
      outer.ship->nested.push_back(u.ur);
    }
    std::lock_guard<std::mutex> lock(mu_);
    r_.unites.push_back(std::move(u.ur));
    return out;
  }

  void copy(std::int32_t from, std::int32_t to) {
    if (groups_ && groups_->copy(from, to)) return;
    s_.acquire(from, false);
    s_.acquire(to, true);
    const TensorView a = store_.view(DataRef{from, -1}), b = store_.view(DataRef{to, -1});
    const size_t es = dtype_size(a.dtype), row = size_t(a.cols) * es;
    for (std::int64_t i = 0; i < a.rows; ++i)
      std::memcpy(static_cast<std::byte*>(b.data) + size_t(i * b.ld) * es,
                  static_cast<const std::byte*>(a.data) + size_t(i * a.ld) * es, row);
    s_.release(to);
    s_.release(from);
  }

  const Dag& dag_;
  DataStore& store_;
  Session& s_;
  unite::RankGroups* groups_;  // null: one process
  ExecResult& r_;
  Clock::time_point t0_;
  std::vector<std::shared_ptr<const Template>> conds_;
  std::function<void(std::int32_t, std::int64_t, Session&)> on_iteration_;
  unite::UniteBoard board_{false};
  UnitePlacement place_;  // several ranks: where co-methods run
  unite::Peers peers_;    // several ranks: the other ranks' co-methods
  std::map<std::int32_t, std::pair<std::int32_t, std::int32_t>> top_;  // top-level co-method -> (unite, index)
  std::mutex mu_;
  std::string error_;
};

}  // namespace

std::unique_ptr<Session> Executor::open(const Dag&, DataStore&, const ExecOptions&, Progress&, ExecResult& r) {
  r.error = "the " + name() + " backend runs static DAGs only: runtime loops (<until>, <while>) and <unite> need the "
            "starpu or sequential backend";
  return nullptr;
}

std::string warmup_refusal(const Dag& dag) {
  if (dag.dynamic())
    return "workflow '" + dag.name + "' has runtime loops or <unite> blocks, whose runs depend on the data";
  for (const auto& t : dag.tasks)
    for (const auto& b : t.bindings) {
      if (b.ref.data < 0) continue;  // an optional port left unbound
      const DataDecl& d = dag.data[size_t(b.ref.data)];
      if (b.mode != Access::read && d.init == InitKind::file)
        return "task '" + (t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : t.label) + "' (" +
               (t.loc.file ? *t.loc.file : dag.file) + ":" + std::to_string(t.loc.line) + ") writes '" + d.name +
               "', which the run maps from " + d.src + ": a second run would start from the first one's result";
    }
  return "";
}

namespace {
// The store-initialised tensors that tasks write: a warm-up run writes their
// init= values again before the next run.
std::vector<std::int32_t> written_initialised(const Dag& dag) {
  const std::vector<char> written = written_data(dag);
  std::vector<std::int32_t> out;
  for (size_t d = 0; d < written.size(); ++d)
    if (written[d] && dag.data[d].init != InitKind::none) out.push_back(std::int32_t(d));
  return out;
}

// run --warmup: opts.warmup runs of a static DAG, then the measured one, on one session.
ExecResult run_warm(Executor& ex, const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) {
  if (std::string why = warmup_refusal(dag); !why.empty()) throw std::invalid_argument("cannot warm up: " + why);
  ExecResult r;
  auto s = ex.open(dag, store, opts, progress, r);
  if (!s) return r;
  const auto n = std::int32_t(dag.tasks.size());
  const std::vector<std::int32_t> reset = written_initialised(dag);
  bool ok = true;
  for (int i = 0; i < opts.warmup && ok; ++i) {
    if (!(ok = s->run(0, n, 0, 0))) break;
    s->runner().next_repeat();
    for (std::int32_t d : reset) {  // the next run starts from the same values
      s->acquire(d, true);
      store.reinitialise(d);
      s->release(d);
    }
  }
  if (ok) s->run(0, n, 0, 0);
  s->close(r);
  return r;
}
}  // namespace

ExecResult run_program(Executor& ex, const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) {
  if (opts.warmup > 0) return run_warm(ex, dag, store, opts, progress);
  if (!dag.dynamic()) return ex.execute(dag, store, opts, progress);
  ExecResult r;
  auto s = ex.open(dag, store, opts, progress, r);
  if (!s) return r;
  ProgramRunner p(dag, store, *s, r, opts);
  const Outcome o = p.run();
  s->close(r);
  if (o == Outcome::failed && r.ok) {  // a co-method, loop or exchange failure the runner did not see
    r.ok = false;
    r.error = p.error();
  }
  return r;
}

}  // namespace ymlopt
