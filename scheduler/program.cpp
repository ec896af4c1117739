// run_program: the interpreter of a workflow's runtime control flow (Region
// tree, see ir.hpp) on top of an executor Session. Task runs go to the
// backend part by part; loop conditions, publish and gather read and write
// the tensors between parts (Session::acquire); the co-methods of a <unite>
// run in threads of their own and exchange results through a UniteBoard.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/engine/expr.hpp"
#include "ymlopt/scheduler/executor.hpp"
#include "ymlopt/unite/board.hpp"

namespace ymlopt {
namespace {

using Clock = std::chrono::steady_clock;
// A published entry: the packed rows of each tensor, and every score.
struct Entry {
  std::vector<std::vector<std::byte>> tensors;
  std::vector<double> scores;
};

enum class Outcome { done, failed, stopped };

// Bytes between ranks (co-methods of a unite on rank groups): exchange
// messages and the co-methods' records. Both ends are the same binary.
class WireOut {
 public:
  template <class T> void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b_.insert(b_.end(), p, p + sizeof v);
  }
  void put_bytes(const void* p, size_t n) {
    put(std::uint64_t(n));
    const auto* q = static_cast<const std::byte*>(p);
    b_.insert(b_.end(), q, q + n);
  }
  void put_string(const std::string& s) { put_bytes(s.data(), s.size()); }
  std::vector<std::byte> take() { return std::move(b_); }

 private:
  std::vector<std::byte> b_;
};

class WireIn {
 public:
  explicit WireIn(const std::vector<std::byte>& b) : b_(b) {}
  template <class T> T get() {
    T v;
    need(sizeof v);
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::vector<std::byte> get_bytes() {
    const auto n = size_t(get<std::uint64_t>());
    need(n);
    std::vector<std::byte> v(b_.begin() + std::ptrdiff_t(at_), b_.begin() + std::ptrdiff_t(at_ + n));
    at_ += n;
    return v;
  }
  std::string get_string() {
    const auto v = get_bytes();
    return std::string(reinterpret_cast<const char*>(v.data()), v.size());
  }
  bool done() const { return at_ == b_.size(); }

 private:
  void need(size_t n) const {
    if (b_.size() - at_ < n) throw std::runtime_error("co-method exchange: truncated message from another rank");
  }
  const std::vector<std::byte>& b_;
  size_t at_ = 0;
};

void put_record(WireOut& w, const CoMethodRecord& c) {
  w.put_string(c.name);
  w.put(c.region);
  w.put(c.iterations);
  w.put(std::uint8_t(c.converged | c.failed << 1 | c.stopped << 2 | c.winner << 3));
  w.put_string(c.error);
  w.put(c.start_s), w.put(c.end_s);
  w.put(c.publishes), w.put(c.gathers), w.put(c.adopted);
  w.put(c.best_score);
  w.put(std::uint64_t(c.exchanges.size()));
  for (const auto& e : c.exchanges) {
    w.put(e.time_s), w.put(std::uint8_t(e.publish)), w.put(e.score);
    w.put_string(e.channel), w.put_string(e.source);
  }
  w.put(std::uint64_t(c.score_history.size()));
  for (const auto& [t, v] : c.score_history) w.put(t), w.put(v);
  w.put(std::uint64_t(c.context_workers.size()));
  for (int x : c.context_workers) w.put(std::int32_t(x));
  w.put(c.worker_s);
}

CoMethodRecord get_record(WireIn& r) {
  CoMethodRecord c;
  c.name = r.get_string();
  c.region = r.get<std::int32_t>();
  c.iterations = r.get<std::int64_t>();
  const auto f = r.get<std::uint8_t>();
  c.converged = f & 1, c.failed = f & 2, c.stopped = f & 4, c.winner = f & 8;
  c.error = r.get_string();
  c.start_s = r.get<double>(), c.end_s = r.get<double>();
  c.publishes = r.get<std::int64_t>(), c.gathers = r.get<std::int64_t>(), c.adopted = r.get<std::int64_t>();
  c.best_score = r.get<double>();
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    ExchangeRecord e;
    e.time_s = r.get<double>(), e.publish = r.get<std::uint8_t>() != 0, e.score = r.get<double>();
    e.channel = r.get_string(), e.source = r.get_string();
    c.exchanges.push_back(std::move(e));
  }
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    const double t = r.get<double>();
    c.score_history.emplace_back(t, r.get<double>());
  }
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) c.context_workers.push_back(r.get<std::int32_t>());
  c.worker_s = r.get<double>();
  return c;
}

void put_unite(WireOut& w, const UniteRecord& u) {
  w.put_string(u.name), w.put_string(u.exit), w.put_string(u.winner), w.put_string(u.within);
  w.put(u.start_s), w.put(u.end_s);
  w.put(std::uint64_t(u.comethods.size()));
  for (const auto& c : u.comethods) put_record(w, c);
}

UniteRecord get_unite(WireIn& r) {
  UniteRecord u;
  u.name = r.get_string(), u.exit = r.get_string(), u.winner = r.get_string(), u.within = r.get_string();
  u.start_s = r.get<double>(), u.end_s = r.get<double>();
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) u.comethods.push_back(get_record(r));
  return u;
}

enum class Message : std::uint8_t { publish = 1, stop = 2, state = 3 };
// A co-method's state as the other ranks see it (Message::state).
enum class PeerState : std::int8_t { busy = 0, idle = 1, finished = 2 };

// A published entry on the wire: its publisher, scores and tensors.
void put_entry(WireOut& w, const std::string& who, const Entry& e) {
  w.put_string(who);
  w.put(std::uint64_t(e.scores.size()));
  for (double v : e.scores) w.put(v);
  w.put(std::uint64_t(e.tensors.size()));
  for (const auto& t : e.tensors) w.put_bytes(t.data(), t.size());
}
std::pair<std::string, Entry> get_entry(WireIn& in) {
  std::pair<std::string, Entry> out;
  out.first = in.get_string();
  for (auto n = in.get<std::uint64_t>(); n > 0; --n) out.second.scores.push_back(in.get<double>());
  for (auto n = in.get<std::uint64_t>(); n > 0; --n) out.second.tensors.push_back(in.get_bytes());
  return out;
}

// What a co-method running on this rank leaves for the other ranks' records:
// the loops it ran and the nested unites it held (they ran here only).
struct Shipped {
  std::mutex mu;
  std::vector<std::pair<std::int32_t, std::int64_t>> loops;
  std::vector<UniteRecord> nested;
};

// mapping="fair": the worker time each co-method of a unite has had. Before
// each part a co-method's tasks get a StarPU priority from its rank (the least
// served the highest: 0, -1, ... down to -5, StarPU's default lowest), and one
// "prio" context over the pool runs them, so that N co-methods on fewer workers
// get equal shares of worker time, as if each had a core, whatever the size of
// their tasks (shared: the workers serve the co-methods' parts in turn, so a
// co-method of short parts gets as many parts done as one of long parts).
// Priorities only order tasks that are ready together; with more live
// co-methods than workers (two on one worker: each has one part in flight, so
// they would alternate), a co-method also waits before a part while it has had
// more worker time than a live one behind it (wait_turn). The least served
// never waits, and time is added as parts end (a nested unite's parts to every
// enclosing co-method), so the waits always end. A co-method whose last part
// reported `idle` = 1 (it waits for the others' results: compress.search_step
// with nothing left to try) holds no one back and gets the lowest priority
// until a part of it reports otherwise.
//
//   FairShare f(3, 1);      // 3 co-methods on 1 worker
//   f.wait_turn(i);         // before co-method i's part
//   f.add(i, busy_us);      // after it
//   f.leave(i);             // when co-method i ends (or runs on another rank)
class FairShare {
 public:
  FairShare(size_t n, size_t workers) : served_us_(n, 0.0), live_(n, 1), idle_(n, 0), workers_(workers) {}
  int priority(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_[i]) return -5;
    int rank = 0;
    for (size_t j = 0; j < served_us_.size(); ++j)
      if (j != i && competes(j) && (served_us_[j] < served_us_[i] || (served_us_[j] == served_us_[i] && j < i))) ++rank;
    return -std::min(rank, 5);
  }
  void set_idle(size_t i, bool idle) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_[i] == char(idle)) return;
      idle_[i] = idle;
    }
    cv_.notify_all();
  }
  void wait_turn(size_t i) {
    std::unique_lock<std::mutex> lock(mu_);
    // a cap on each wait, should a co-method stay behind outside its parts
    cv_.wait_for(lock, std::chrono::seconds(2), [&] { return may_go(i); });
  }
  void add(size_t i, double us) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      served_us_[i] += us;
    }
    cv_.notify_all();
  }
  void leave(size_t i) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[i] = 0;
    }
    cv_.notify_all();
  }

 private:
  bool competes(size_t j) const { return live_[j] && !idle_[j]; }
  bool may_go(size_t i) const {
    size_t live = 0;
    bool behind = false;  // a live co-method at work has had less time
    for (size_t j = 0; j < served_us_.size(); ++j) {
      live += competes(j);
      if (j != i && competes(j) && served_us_[j] < served_us_[i]) behind = true;
    }
    return live <= workers_ || !behind;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<double> served_us_;
  std::vector<char> live_, idle_;
  size_t workers_;
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
  FairShare* fair = nullptr;                // mapping="fair": its priority comes from here
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

class ProgramRunner {
 public:
  ProgramRunner(const Dag& dag, DataStore& store, Session& s, ExecResult& r)
      : dag_(dag), store_(store), s_(s), r_(r), t0_(Clock::now()), conds_(dag.regions.size()) {
    for (size_t i = 0; i < dag.regions.size(); ++i)
      if (!dag.regions[i].cond.empty()) conds_[i] = Template::compile("${" + dag.regions[i].cond + "}");
    if (s.ranks() > 1) {
      place_ = unite_placement(dag, s.ranks());
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
      const bool post = sc.unite >= 0 && s_.leads();  // a top-level co-method on ranks: its state for the others
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

  Outcome loop(std::int32_t region, Scope& sc) {
    const Region& g = dag_.regions[size_t(region)];
    const bool until = g.kind == Region::Kind::until;
    std::int64_t it = 0;
    bool ended_by_condition = false;
    Outcome out = Outcome::done;
    try {
      for (; it < g.max_iter; ++it) {
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
    if (out == Outcome::done && !ended_by_condition) sc.converged = false;  // ran out of iterations
    if (sc.ship) {
      std::lock_guard<std::mutex> lock(sc.ship->mu);
      sc.ship->loops.emplace_back(region, it);
    }
    if (!s_.leads()) return out;  // another rank of the group leads: its record comes with the unite's end
    std::lock_guard<std::mutex> lock(mu_);
    r_.loop_iterations.emplace_back(region, it);
    return out;
  }

  // Whether a co-method stops here: on a group of several ranks, as its leader
  // sees it (stop messages, the clock), so that every rank of it stops alike.
  bool agreed_stop(const Scope& sc) {
    const bool mine = stopped(sc);
    if (!sc.distributed || s_.group_size() < 2) return mine;
    const auto b = s_.share({std::byte(mine)});
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
    if (sc.distributed && s_.leads()) {  // (the other ranks of a group get it from their leader too)
      WireOut w;
      w.put(Message::publish);
      w.put_string(g.name);
      put_entry(w, sc.who, payload);
      s_.post(w.take());
    }
    if (s_.leads()) board_.publish(g.name, sc.who, score, std::move(payload));
    note_score(sc, score);
    if (sc.rec) {
      ++sc.rec->publishes;
      sc.rec->exchanges.push_back({now_s(), true, g.name, "", score});
      if (std::isnan(sc.rec->best_score) || (sc.maximize ? score > sc.rec->best_score : score < sc.rec->best_score))
        sc.rec->best_score = score;
    }
    return Outcome::done;
  }

  // The entry of lowest Pareto rank (rank 0: dominated by no other; an entry
  // dominated only by rank-0 ones has rank 1, ...), every score minimised;
  // ties go to the smallest sum of scores scaled to their range over the entries.
  std::optional<unite::BoardEntry> pareto_best(const std::string& channel) {
    const auto all = board_.entries(channel);
    if (all.empty()) return std::nullopt;
    std::vector<const std::vector<double>*> sv;
    for (const auto& e : all) sv.push_back(&unite::payload_as<Entry>(e).scores);
    const size_t n = all.size(), m = sv[0]->size();
    auto dominates = [&](size_t a, size_t b) {
      bool strictly = false;
      for (size_t j = 0; j < m; ++j) {
        if ((*sv[a])[j] > (*sv[b])[j]) return false;
        strictly = strictly || (*sv[a])[j] < (*sv[b])[j];
      }
      return strictly;
    };
    std::vector<int> rank(n, -1);
    for (int r = 0, left = int(n); left > 0; ++r) {
      std::vector<size_t> front;
      for (size_t a = 0; a < n; ++a) {
        if (rank[a] >= 0) continue;
        bool dominated = false;
        for (size_t b = 0; b < n && !dominated; ++b) dominated = b != a && rank[b] < 0 && dominates(b, a);
        if (!dominated) front.push_back(a);
      }
      for (size_t a : front) rank[a] = r;
      left -= int(front.size());
    }
    std::vector<double> lo(m, INFINITY), hi(m, -INFINITY);
    for (size_t a = 0; a < n; ++a)
      for (size_t j = 0; j < m; ++j) lo[j] = std::min(lo[j], (*sv[a])[j]), hi[j] = std::max(hi[j], (*sv[a])[j]);
    size_t best = 0;
    double best_sum = INFINITY;
    for (size_t a = 0; a < n; ++a) {
      double sum = 0;
      for (size_t j = 0; j < m; ++j) sum += hi[j] > lo[j] ? ((*sv[a])[j] - lo[j]) / (hi[j] - lo[j]) : 0.0;
      if (rank[a] < rank[best] || (rank[a] == rank[best] && sum < best_sum)) best = a, best_sum = sum;
    }
    return all[best];
  }

  Outcome gather(const Region& g, Scope& sc) {
    if (sc.distributed) pump();
    auto e = g.pareto ? pareto_best(g.name)
                      : board_.gather_best(g.name, g.maximize ? unite::Better::max : unite::Better::min, sc.who);
    std::string publisher = e ? e->publisher : "";
    const Entry* payload = e ? &unite::payload_as<Entry>(*e) : nullptr;
    std::pair<std::string, Entry> shared;
    if (sc.distributed && s_.group_size() > 1) {  // every rank of the group takes its leader's pick
      WireOut w;
      w.put(std::uint8_t(payload != nullptr));
      if (payload) put_entry(w, publisher, *payload);
      const auto b = s_.share(w.take());
      WireIn in(b);
      if (in.get<std::uint8_t>() != 0) {
        shared = get_entry(in);
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
  // their unites' stops.
  void pump() {
    for (const auto& m : s_.poll()) {
      WireIn in(m);
      const auto kind = in.get<Message>();
      if (kind == Message::publish) {
        const std::string channel = in.get_string();
        auto [who, e] = get_entry(in);
        const double score = e.scores.at(0);
        board_.publish(channel, who, score, std::move(e));
      } else if (kind == Message::state) {
        // (a rank ahead may post for the unite's next run before this one starts it)
        const auto u = in.get<std::int32_t>(), run = in.get<std::int32_t>();
        const auto i = size_t(in.get<std::int32_t>());
        const auto st = in.get<PeerState>();
        std::lock_guard<std::mutex> lock(mu_);
        auto& v = states_[{u, run}];
        if (v.size() <= i) v.resize(i + 1, PeerState::busy);
        v[i] = st;
      } else if (kind == Message::stop) {
        const auto u = in.get<std::int32_t>();
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = stops_.find(u); it != stops_.end()) *it->second = true;
      }
    }
  }

  // The other ranks learn when a top-level co-method's state changes (its
  // leader posts it): what remote_peers_at_work answers there.
  void post_state(Scope& sc, PeerState st) {
    if (st == sc.posted) return;
    sc.posted = st;
    WireOut w;
    w.put(Message::state);
    w.put(sc.unite), w.put(sc.unite_run), w.put(std::int32_t(sc.fair_slot)), w.put(st);
    s_.post(w.take());
  }

  // KernelContext::remote_peers_at_work for a task of co-method region `c`:
  // the co-methods of its top-level unite at work on ranks outside its group.
  int remote_at_work(std::int32_t c) {
    while (c >= 0 && !top_.count(c)) c = dag_.regions[size_t(c)].parent_comethod;
    if (c < 0) return -1;
    const auto [u, me] = top_.at(c);
    const Region& g = dag_.regions[size_t(u)];
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find({u, runs_[u]});
    if (it == states_.end()) return -1;
    int n = 0, remote = 0;
    std::int32_t k = 0;
    for (const auto& item : g.items) {
      if (item.region < 0) continue;
      const auto& ranks = place_.groups[size_t(place_.region_group[size_t(item.region)])];
      const bool here = std::find(ranks.begin(), ranks.end(), s_.rank()) != ranks.end();
      if (k != me && !here) {
        ++remote;
        n += size_t(k) >= it->second.size() || it->second[size_t(k)] == PeerState::busy;
      }
      ++k;
    }
    return remote > 0 ? n : -1;
  }

  // A unite on rank groups, once this rank's co-methods ended: every rank
  // learns how the others' co-methods ended, the loops they ran and the unites
  // nested in them (into `r_`), so that all choose the same winner.
  void share_outcomes(std::int32_t uid, const std::vector<char>& lead, std::vector<Outcome>& outcomes,
                      std::vector<double>& finished_at, std::vector<Scope>& scopes, const std::vector<Shipped>& ships,
                      UniteRecord& ur) {
    WireOut w;
    for (size_t i = 0; i < lead.size(); ++i) {
      if (!lead[i]) continue;  // (its group's leader ships it)
      w.put(std::int32_t(i)), w.put(std::int32_t(outcomes[i])), w.put(finished_at[i]);
      w.put(std::uint8_t(scopes[i].converged)), w.put(scopes[i].best);
      put_record(w, ur.comethods[i]);
      w.put(std::uint64_t(ships[i].loops.size()));
      for (const auto& [region, it] : ships[i].loops) w.put(region), w.put(it);
      w.put(std::uint64_t(ships[i].nested.size()));
      for (const auto& u : ships[i].nested) put_unite(w, u);
    }
    const auto all = s_.unite_end(uid, w.take());
    pump();  // the last publishes: every rank's board holds every co-method's
    for (size_t k = 0; k < all.size(); ++k) {
      if (int(k) == s_.rank()) continue;
      WireIn in(all[k]);
      while (!in.done()) {
        const auto i = size_t(in.get<std::int32_t>());
        outcomes.at(i) = Outcome(in.get<std::int32_t>());
        finished_at[i] = in.get<double>();
        scopes[i].converged = in.get<std::uint8_t>() != 0;
        scopes[i].best = in.get<double>();
        ur.comethods[i] = get_record(in);
        std::lock_guard<std::mutex> lock(mu_);
        for (auto n = in.get<std::uint64_t>(); n > 0; --n) {
          const auto region = in.get<std::int32_t>();
          r_.loop_iterations.emplace_back(region, in.get<std::int64_t>());
        }
        for (auto n = in.get<std::uint64_t>(); n > 0; --n) r_.unites.push_back(get_unite(in));
      }
    }
  }

  Outcome unite(const Region& g, Scope& outer) {
    const auto uid = std::int32_t(&g - dag_.regions.data());
    // a top-level unite on several ranks: each co-method on its rank group
    const bool distributed = s_.ranks() > 1 && outer.comethod < 0;
    UniteRecord ur;
    ur.name = g.name;
    if (outer.comethod >= 0) ur.within = outer.who;
    ur.exit = g.exit == Region::Exit::first ? "first" : g.exit == Region::Exit::all ? "all" : "budget";
    ur.start_s = now_s();
    std::vector<std::int32_t> cms;
    for (const auto& it : g.items)
      if (it.region >= 0) cms.push_back(it.region);
    ur.comethods.resize(cms.size());
    // the co-methods this process runs (with the other ranks of their group),
    // and those whose group it leads (its records count)
    std::vector<char> mine(cms.size()), lead(cms.size());
    for (size_t i = 0; i < cms.size(); ++i) {
      if (!distributed) {
        mine[i] = lead[i] = 1;
        continue;
      }
      const auto& ranks = place_.groups[size_t(place_.region_group[size_t(cms[i])])];
      mine[i] = std::find(ranks.begin(), ranks.end(), s_.rank()) != ranks.end();
      lead[i] = ranks[0] == s_.rank();
    }
    std::vector<Shipped> ships(distributed ? cms.size() : 0);
    std::atomic<bool> stop{false};
    std::vector<Scope> scopes(cms.size());
    std::vector<Outcome> outcomes(cms.size(), Outcome::failed);
    std::vector<double> finished_at(cms.size(), 0);
    // mapping="contexts": each co-method gets a scheduling context over its
    // share of the workers (of the enclosing co-method's, in a nested unite)
    std::vector<int> contexts(cms.size(), outer.context);
    std::vector<std::vector<int>> workers(cms.size(), outer.workers);
    std::vector<int> pool = outer.workers;
    if (pool.empty())
      for (int w = 0; w < s_.num_workers(); ++w) pool.push_back(w);
    std::unique_ptr<FairShare> fair;
    if (g.mapping == Region::Mapping::fair) {
      fair = std::make_unique<FairShare>(cms.size(), pool.size());
      for (size_t i = 0; i < cms.size(); ++i)
        if (!mine[i]) fair->leave(i);  // runs on another rank
      const int ctx = s_.create_context(g.name.empty() ? "unite" : g.name, pool, "prio");
      if (ctx != 0) std::fill(contexts.begin(), contexts.end(), ctx);
    } else if (g.mapping == Region::Mapping::contexts) {
      const int nw = int(pool.size());
      int next = 0;
      for (size_t i = 0; i < cms.size(); ++i) {
        if (!mine[i]) continue;
        const Region& cm = dag_.regions[size_t(cms[i])];
        const int want = cm.workers > 0 ? int(std::min<std::int64_t>(cm.workers, nw))
                                        : std::max(1, nw / int(cms.size()));
        std::vector<int> ws;
        for (int k = 0; k < want; ++k) ws.push_back(pool[size_t((next + k) % nw)]);  // wraps around: co-methods share workers
        next = (next + want) % nw;
        contexts[i] = s_.create_context(dag_.comethod_path(cms[i]), ws, "eager");
        ur.comethods[i].context_workers = ws;
        workers[i] = std::move(ws);
      }
    }
    const auto deadline =
        g.exit == Region::Exit::budget && g.budget_s > 0
            ? std::min(outer.deadline,
                       Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(g.budget_s)))
            : outer.deadline;
    if (distributed) {
      s_.unite_begin(uid);
      std::lock_guard<std::mutex> lock(mu_);
      stops_[uid] = &stop;
      auto& v = states_[{uid, ++runs_[uid]}];
      v.resize(std::max(v.size(), cms.size()), PeerState::busy);
    }
    std::mutex done_mu;
    std::vector<std::thread> threads;
    for (size_t i = 0; i < cms.size(); ++i) {
      const Region& cm = dag_.regions[size_t(cms[i])];
      CoMethodRecord& rec = ur.comethods[i];
      rec.name = cm.name;
      rec.region = cms[i];
      rec.best_score = std::numeric_limits<double>::quiet_NaN();
      if (!mine[i]) continue;  // another rank runs it
      Scope& sc = scopes[i];
      sc.comethod = cms[i];
      sc.who = dag_.comethod_path(cms[i]);
      sc.parent = outer.comethod >= 0 ? &outer : nullptr;
      sc.context = contexts[i];
      sc.workers = workers[i];
      sc.priority = cm.priority;
      sc.fair = fair.get();
      sc.fair_slot = i;
      sc.stop = &stop;
      sc.deadline = deadline;
      sc.iteration_budget = g.exit == Region::Exit::budget ? g.budget_iters : 0;
      sc.rec = &rec;
      sc.maximize = g.maximize;
      sc.distributed = distributed || outer.distributed;
      sc.top = distributed ? cms[i] : outer.top;
      sc.unite = distributed ? uid : -1;
      if (distributed) {
        std::lock_guard<std::mutex> lock(mu_);
        sc.unite_run = runs_[uid];
      }
      sc.ship = distributed ? &ships[i] : outer.ship;
      threads.emplace_back([&, i] {
        if (scopes[i].distributed) s_.set_comethod(scopes[i].top);  // (nested: the enclosing co-method's group)
        scopes[i].rec->start_s = now_s();
        Outcome o;
        try {
          o = exec(scopes[i].comethod, scopes[i]);
        } catch (const std::exception& e) {
          fail(scopes[i], e.what());
          o = Outcome::failed;
        }
        if (distributed) {
          s_.comethod_end();
          scopes[i].rec->worker_s = s_.group_sum(scopes[i].rec->worker_s);  // (the ranks of its group)
          if (lead[i]) post_state(scopes[i], PeerState::finished);
        }
        if (scopes[i].fair) scopes[i].fair->leave(i);
        std::lock_guard<std::mutex> lock(done_mu);
        outcomes[i] = o;
        scopes[i].rec->end_s = finished_at[i] = now_s();
        if (o == Outcome::done && scopes[i].converged && g.exit == Region::Exit::first) {
          stop = true;
          if (distributed && lead[i]) {
            WireOut w;
            w.put(Message::stop);
            w.put(uid);
            s_.post(w.take());
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    if (outer.rec) {  // a nested unite: its co-methods' worker time is the enclosing co-method's too
      double s = 0;
      for (size_t i = 0; i < cms.size(); ++i) s += mine[i] ? ur.comethods[i].worker_s : 0.0;
      outer.rec->worker_s += s;  // (the fair shares had it part by part)
    }
    if (distributed) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stops_.erase(uid);
      }
      share_outcomes(uid, lead, outcomes, finished_at, scopes, ships, ur);
      std::lock_guard<std::mutex> lock(mu_);
      states_.erase({uid, runs_[uid]});  // (nothing of this run arrives after unite_end)
    }
    std::sort(contexts.begin(), contexts.end());
    contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
    for (int c : contexts)
      if (c != outer.context) s_.delete_context(c);
    // the winner: the first to converge; else the best score published; else the first to finish
    std::int32_t win = -1;
    for (size_t i = 0; i < cms.size(); ++i) {
      CoMethodRecord& rec = ur.comethods[i];
      rec.failed = outcomes[i] == Outcome::failed;
      rec.stopped = outcomes[i] == Outcome::stopped;
      rec.converged = outcomes[i] == Outcome::done && scopes[i].converged;
      if (rec.converged && (win < 0 || finished_at[i] < finished_at[size_t(win)])) win = std::int32_t(i);
    }
    auto better = [&](double a, double b) { return std::isnan(b) || (g.maximize ? a > b : a < b); };
    // exit first/all: a co-method that converged is the answer; when none did
    // (each ran out of loop iterations) the run cannot tell and fails below
    bool unconverged = win < 0 && g.exit != Region::Exit::budget && !stopped(outer);
    for (size_t i = 0; i < cms.size() && unconverged; ++i) unconverged = !ur.comethods[i].stopped;
    if (win < 0)
      for (size_t i = 0; i < cms.size(); ++i)
        if (!ur.comethods[i].failed && !std::isnan(scopes[i].best) &&
            (win < 0 || better(scopes[i].best, scopes[size_t(win)].best)))
          win = std::int32_t(i);
    if (win < 0)
      for (size_t i = 0; i < cms.size(); ++i)
        if (!ur.comethods[i].failed && (win < 0 || finished_at[i] < finished_at[size_t(win)])) win = std::int32_t(i);
    ur.end_s = now_s();
    Outcome out = Outcome::done;
    if (win < 0) {
      std::string why;
      for (const auto& c : ur.comethods) why += "\n  co-method '" + c.name + "': " + c.error;
      fail(outer, where(g) + "every co-method of unite '" + g.name + "' failed:" + why);
      out = Outcome::failed;
    } else if (unconverged && !outer.rec) {
      const CoMethodRecord& best = ur.comethods[size_t(win)];
      std::string score;
      if (!std::isnan(scopes[size_t(win)].best)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", scopes[size_t(win)].best);
        score = ", best score " + std::string(buf);
      }
      fail(outer, where(g) + "unite '" + g.name + "': no co-method converged (each ran out of loop iterations; closest: '" +
                      best.name + "'" + score + "): its answer is not saved");
      out = Outcome::failed;
    } else {
      CoMethodRecord& w = ur.comethods[size_t(win)];
      w.winner = true;
      ur.winner = w.name;
      const Region& cm = dag_.regions[size_t(cms[size_t(win)])];
      for (size_t k = 0; k < g.save_exit.size(); ++k) copy(cm.keep[k], g.save_exit[k]);
      // a nested unite: the enclosing co-method converged only if its winner did,
      // and a stop of the enclosing co-method (its unite's exit) ends it here too
      if (!w.converged) outer.converged = false;
      if (stopped(outer)) out = Outcome::stopped;
    }
    if (outer.ship) {  // nested in a co-method on a rank group: the other ranks get its record too
      std::lock_guard<std::mutex> lock(outer.ship->mu);
      outer.ship->nested.push_back(ur);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      r_.unites.push_back(std::move(ur));
    }
    return out;
  }

  void copy(std::int32_t from, std::int32_t to) {
    if (s_.copy(from, to)) return;
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
  ExecResult& r_;
  Clock::time_point t0_;
  std::vector<std::shared_ptr<const Template>> conds_;
  unite::UniteBoard board_{false};
  UnitePlacement place_;                          // several ranks: where co-methods run
  std::map<std::int32_t, std::atomic<bool>*> stops_;  // running distributed unites' stop flags (mu_)
  // distributed unites, by (unite, run): their co-methods' states, as posted (mu_)
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<PeerState>> states_;
  std::map<std::int32_t, std::int32_t> runs_;  // distributed unites: how many times each has started (mu_)
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

ExecResult run_program(Executor& ex, const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) {
  if (!dag.dynamic()) return ex.execute(dag, store, opts, progress);
  ExecResult r;
  auto s = ex.open(dag, store, opts, progress, r);
  if (!s) return r;
  ProgramRunner p(dag, store, *s, r);
  const Outcome o = p.run();
  s->close(r);
  if (o == Outcome::failed && r.ok) {  // a co-method, loop or exchange failure the runner did not see
    r.ok = false;
    r.error = p.error();
  }
  return r;
}

}  // namespace ymlopt
