// MERAM on top of arnoldi()'s restart hook and the unite runtime: its board,
// its co-methods' threads, exit policy "first" and turns (see meram.hpp).
#include "eigen/meram.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <map>
#include <mutex>

#include "ymlopt/unite/board.hpp"
#include "ymlopt/unite/comethods.hpp"
#include "ymlopt/unite/turns.hpp"

namespace ymlopt::eigen {
namespace {

using std::int64_t;
using std::size_t;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

/// Relative residual with ARPACK's floor: r / max(|θ|, eps^(2/3) anorm).
double relative(double res, double lam_abs, double anorm) {
  const double floor = std::pow(std::numeric_limits<double>::epsilon(), 2.0 / 3.0) * anorm;
  const double d = std::max(lam_abs, floor);
  return d > 0 ? res / d : (res == 0 ? 0 : std::numeric_limits<double>::infinity());
}

/// The largest relative residual of k pairs given by accessors.
template <class Get> double worst_relative(int64_t k, Get get) {
  double anorm = 0;
  for (int64_t j = 0; j < k; ++j) anorm = std::max(anorm, std::hypot(get(j).re, get(j).im));
  double w = 0;
  for (int64_t j = 0; j < k; ++j) w = std::max(w, relative(get(j).residual, std::hypot(get(j).re, get(j).im), anorm));
  return w;
}

/// A co-method's published set: its k wanted pairs (the payload of "ritz").
using RitzSet = std::vector<RitzPair>;

/// Everything the co-methods share: the unite runtime's board, run (stop
/// flag, exit policy "first", endings) and, in deterministic mode, turns.
struct Shared {
  const LinearOperator& op;
  const MeramOptions& opt;
  unite::UniteBoard board{false};
  unite::CoMethods run;
  // Deterministic mode: the exchanges take turns in the order they would have
  // on dedicated, equally fast cores with time counted in matvecs (co-method
  // i's c-th restart comes at c m_i; ties: lower i).
  unite::Turns turns;
  std::map<std::string, std::size_t, std::less<>> index;  // co-method name -> index
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::atomic<std::size_t> heard{0};  // co-methods that published at least once, or ended
  EigenResult final;                  // the winner's (written by it alone, read after the run)
  std::string winner;
  bool mixed = false;

  Shared(const LinearOperator& o, const MeramOptions& op_, const std::vector<int64_t>& m)
      : op(o), opt(op_), run(m.size(), unite::Exit::first), turns(m) {}

  /// Whether the named co-method has ended (failed, out of restarts, m = n).
  bool has_ended(const std::string& who) const {
    auto it = index.find(who);
    return it != index.end() && run.ended(it->second);
  }
  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }

  // The sets being checked (check_wanted) and those found missing a more wanted
  // value, by their values: the co-methods gather the same best set, and one
  // check of it is enough.
  std::mutex checks_mu;
  std::vector<std::vector<double>> checking, missing;

  /// The same eigenvalues (to 1e-6 of the largest; a set that converged further
  /// differs in its last digits).
  static bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    double scale = 0;
    for (double x : a) scale = std::max(scale, std::abs(x));
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(std::abs(a[i] - b[i]) <= 1e-6 * scale)) return false;
    return true;
  }

  /// True when no co-method checks these values now or found them missing a
  /// value: the caller checks them (and calls end_check).
  bool begin_check(const std::vector<double>& key) {
    std::lock_guard lock(checks_mu);
    for (const auto* list : {&checking, &missing})
      for (const auto& other : *list)
        if (same_values(other, key)) return false;
    checking.push_back(key);
    return true;
  }
  void end_check(const std::vector<double>& key, bool missed) {
    std::lock_guard lock(checks_mu);
    std::erase(checking, key);
    if (missed) missing.push_back(key);
  }

  /// Co-method i converged: the first claim stops everyone and keeps `r` as the result.
  void win(std::size_t i, const std::string& who, EigenResult r, bool with_foreign) {
    if (!run.claim(i)) return;
    winner = who;
    mixed = with_foreign;
    final = std::move(r);
  }
};

/// A pair chosen for the restart set, with where it came from.
struct Chosen {
  const RitzPair* pair;
  bool foreign;
};

/// Two Ritz values stand for the same eigenvalue when they are closer than this
/// fraction of the larger residual. A Ritz value's error is usually far below its
/// residual (quadratic in it for a normal matrix), while a whole residual is
/// too generous: a rough pair for λ1 would then be replaced by a well converged
/// pair of a different, less wanted eigenvalue nearby, and the restart would lose λ1.
/// same_eigenvalue() adds a test on the vectors for non-normal operators.
constexpr double kSameFraction = 0.1;

/// A foreign pair replaces an own pair of the same eigenvalue only when its
/// residual is this many times smaller. Small subspaces of a non-normal operator
/// produce pairs whose small residual does not make them good restart
/// directions; adopting every marginally better one makes a large co-method
/// thrash (seen on the Markov walk: ERAM(10) converging in 27 restarts alone and
/// not in 3000 when it adopted any lower residual).
constexpr double kAdoptFactor = 0.01;

/// The restart set of a co-method (policy per_eigenvalue): its own k pairs,
/// improved by the pairs of the other sets, lowest residual first:
///   - a pair standing for the same eigenvalue as an own slot (same_eigenvalue)
///     with a lower residual replaces it;
///   - a pair more wanted than the least wanted slot even at its pessimistic end
///     (|θ| - residual, or Re θ - residual) and distinct from every slot replaces
///     that slot (a small co-method stuck on less wanted values takes the larger
///     ones found by others).
/// A converged but less wanted pair never displaces a wanted one, nor does a
/// rough Ritz value overshooting a converged one. Returned in wanted order.
std::vector<Chosen> improve_slots(const RitzSet& own, const std::vector<unite::BoardEntry>& sets,
                                  const std::string& self, Which which) {
  auto key = [&](const RitzPair& p) { return which == Which::largest_real ? p.re : std::hypot(p.re, p.im); };
  std::vector<Chosen> slots;
  for (const RitzPair& p : own) slots.push_back({&p, false});
  std::vector<const RitzPair*> foreign;
  for (const auto& e : sets)
    if (e.publisher != self)
      for (const RitzPair& p : unite::payload_as<RitzSet>(e)) foreign.push_back(&p);
  std::stable_sort(foreign.begin(), foreign.end(),
                   [](const RitzPair* a, const RitzPair* b) { return a->residual < b->residual; });
  for (const RitzPair* f : foreign) {
    size_t match = slots.size();
    for (size_t q = 0; q < slots.size() && match == slots.size(); ++q)
      if (same_eigenvalue(*f, *slots[q].pair)) match = q;
    if (match < slots.size()) {
      if (f->residual < kAdoptFactor * slots[match].pair->residual) slots[match] = {f, true};
      continue;
    }
    size_t least = 0;
    for (size_t q = 1; q < slots.size(); ++q)
      if (key(*slots[q].pair) < key(*slots[least].pair)) least = q;
    const RitzPair& l = *slots[least].pair;
    if (key(*f) - f->residual > key(l) + kSameFraction * std::max(f->residual, l.residual)) slots[least] = {f, true};
  }
  std::stable_sort(slots.begin(), slots.end(), [&](const Chosen& a, const Chosen& b) {
    const double ka = key(*a.pair), kb = key(*b.pair);
    if (ka != kb) return ka > kb;
    return a.pair->im > b.pair->im;
  });
  return slots;
}

/// True when some published pair is more wanted than the least wanted pair of
/// `set` even at its pessimistic end (key - residual > least key + kSameFraction
/// of the larger residual) and stands for none of the set's values: the set
/// then misses a wanted eigenvalue another co-method has found.
bool vetoed(const std::vector<Chosen>& set, const std::vector<unite::BoardEntry>& sets, Which which) {
  auto key = [&](const RitzPair& p) { return which == Which::largest_real ? p.re : std::hypot(p.re, p.im); };
  const RitzPair* least = nullptr;
  for (const Chosen& c : set)
    if (!least || key(*c.pair) < key(*least)) least = c.pair;
  if (!least) return false;
  for (const auto& e : sets)
    for (const RitzPair& f : unite::payload_as<RitzSet>(e)) {
      if (key(f) - f.residual <= key(*least) + kSameFraction * std::max(f.residual, least->residual)) continue;
      bool represented = false;
      for (const Chosen& c : set) represented = represented || same_eigenvalue(f, *c.pair);
      if (!represented) return true;
    }
  return false;
}

/// Policy best_set: the whole set of the co-method with the lowest score (largest
/// relative residual) below the own one, among the sets that are, pair by pair,
/// at least as wanted as the own (key_j >= own key_j - own residual_j): a set
/// converged to less wanted values never displaces one still approaching the
/// wanted ones. The own set when none qualifies.
std::vector<Chosen> best_set(const RitzSet& own, double own_score, const std::vector<unite::BoardEntry>& sets,
                             const std::string& self, Which which, double factor) {
  auto key = [&](const RitzPair& p) { return which == Which::largest_real ? p.re : std::hypot(p.re, p.im); };
  const unite::BoardEntry* pick = nullptr;
  for (const auto& e : sets) {
    if (e.publisher == self || e.score >= own_score * factor || (pick && e.score >= pick->score)) continue;
    const RitzSet& other = unite::payload_as<RitzSet>(e);
    bool wanted = other.size() == own.size();
    for (size_t j = 0; j < own.size() && wanted; ++j) wanted = key(other[j]) >= key(own[j]) - own[j].residual;
    if (wanted) pick = &e;
  }
  std::vector<Chosen> out;
  if (pick)
    for (const RitzPair& p : unite::payload_as<RitzSet>(*pick)) out.push_back({&p, true});
  else
    for (const RitzPair& p : own) out.push_back({&p, false});
  return out;
}

/// The chosen pairs as an EigenResult.
EigenResult from_pairs(const std::vector<Chosen>& pairs, int64_t n) {
  EigenResult r;
  const int64_t k = static_cast<int64_t>(pairs.size());
  r.vectors_re.assign(sz(n * k), 0.0);
  r.vectors_im.assign(sz(n * k), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    const RitzPair& p = *pairs[sz(j)].pair;
    r.values_re.push_back(p.re);
    r.values_im.push_back(p.im);
    r.residuals.push_back(p.residual);
    std::copy(p.x_re.begin(), p.x_re.end(), r.vectors_re.begin() + static_cast<std::ptrdiff_t>(j * n));
    std::copy(p.x_im.begin(), p.x_im.end(), r.vectors_im.begin() + static_cast<std::ptrdiff_t>(j * n));
  }
  return r;
}

/// The k pairs of a cycle as a RitzSet.
RitzSet to_set(int64_t n, int64_t k, std::span<const double> re, std::span<const double> im,
               std::span<const double> res, std::span<const double> xr, std::span<const double> xi) {
  RitzSet set;
  for (int64_t j = 0; j < k; ++j)
    set.push_back({re[sz(j)], im[sz(j)], res[sz(j)],
                   std::vector<double>(xr.begin() + static_cast<std::ptrdiff_t>(j * n),
                                       xr.begin() + static_cast<std::ptrdiff_t>((j + 1) * n)),
                   std::vector<double>(xi.begin() + static_cast<std::ptrdiff_t>(j * n),
                                       xi.begin() + static_cast<std::ptrdiff_t>((j + 1) * n))});
  return set;
}

double worst_of_set(const RitzSet& set) {
  return worst_relative(static_cast<int64_t>(set.size()), [&](int64_t j) { return set[sz(j)]; });
}

/// The restart vector of a set (n values): arnoldi()'s residual-weighted sum of its pairs.
void combine(const std::vector<Chosen>& set, int64_t n_, std::vector<double>& v) {
  double rmax = 0;
  for (const Chosen& c : set) rmax = std::max(rmax, c.pair->residual);
  v.assign(sz(n_), 0.0);
  const auto n = static_cast<blasint>(v.size());
  for (const Chosen& c : set) {
    const RitzPair& p = *c.pair;
    const double w = rmax > 0 ? std::sqrt(std::max(p.residual / rmax, 1e-6)) : 1.0;
    cblas_daxpy(n, w, p.x_re.data(), 1, v.data(), 1);
    if (p.im > 0) cblas_daxpy(n, w, p.x_im.data(), 1, v.data(), 1);
  }
}

/// Stalled: the best own residual of the last W restarts (this one included)
/// is not below half the best of the W before (always, with W = 0).
bool stalled(const CoMethodReport& rep, int64_t window, double now) {
  const auto w = static_cast<size_t>(window);
  if (w == 0) return true;
  const auto& h = rep.history;
  if (h.size() + 1 < 2 * w) return false;
  double recent = now, older = std::numeric_limits<double>::infinity();
  for (size_t i = h.size() + 1 - w; i < h.size(); ++i) recent = std::min(recent, h[i].own_residual);
  for (size_t i = h.size() + 1 - 2 * w; i < h.size() + 1 - w; ++i) older = std::min(older, h[i].own_residual);
  return recent > 0.5 * older;
}

/// Co-method i's exchange at a restart: publishes its set, improves it from
/// the board, and stops everyone when it converged (true).
struct Exchange {
  Shared& s;
  size_t i;
  CoMethodReport& rep;
  std::map<std::string, int64_t> adopted_version = {};  // per other co-method: the last set version restarted from

  bool operator()(RitzSet set, MeramPoint& pt, std::vector<double>* restart_vector);
};

bool Exchange::operator()(RitzSet set, MeramPoint& pt, std::vector<double>* restart_vector) {
  const MeramOptions& opt = s.opt;
  const int64_t n = s.op.n, k = opt.k;
  pt.own_residual = worst_of_set(set);
  auto own = std::make_shared<const RitzSet>(set);  // the slots point into it (the board holds a copy)
  s.board.publish("ritz", rep.name, pt.own_residual, std::move(set));
  if (rep.publishes++ == 0) ++s.heard;
  std::vector<unite::BoardEntry> all, sets;
  if (opt.exchange) {
    all = s.board.entries("ritz");  // every co-method's latest set: never waits
    ++rep.gathers;
    // The last set of a co-method that ended (failed, or ran out of restarts) is
    // taken once at most: an explicit restart from the same vector repeats the same
    // cycle, so a set that never changes again would be taken at every stalled
    // restart and the co-method would never move on (seen: MIRAM on cd with a
    // failed co-method, 5000 restarts). A live co-method's set is taken again when
    // it is still the best: its publisher improves it. The veto sees every set.
    sets = all;
    std::erase_if(sets, [&](const unite::BoardEntry& e) {
      auto it = adopted_version.find(e.publisher);
      return e.publisher != rep.name && it != adopted_version.end() && it->second >= e.version &&
             s.has_ended(e.publisher);
    });
  }
  std::vector<Chosen> slots = opt.policy == MeramPolicy::best_set
                                  ? best_set(*own, pt.own_residual, sets, rep.name, opt.which, opt.adopt_factor)
                                  : improve_slots(*own, sets, rep.name, opt.which);
  bool force = false;
  if (opt.policy == MeramPolicy::best_set && vetoed(slots, all, opt.which)) {
    // Another co-method holds a clearly more wanted value than this set's least
    // wanted one (this set converged to unwanted values): take it, pair by pair.
    slots = improve_slots(*own, sets, rep.name, opt.which);
    force = true;
  }
  for (const Chosen& c : slots) pt.foreign += c.foreign ? 1 : 0;
  pt.best_residual = worst_relative(k, [&](int64_t j) { return *slots[sz(j)].pair; });
  // A converged set wins only once every co-method has been heard from (a
  // small co-method converged to less wanted values in its first cycles must
  // first see the others' sets; until then it keeps restarting, never
  // waiting) and once check_wanted() finds nothing more wanted outside it.
  // (Another co-method's Ritz value does not block it: small subspaces of a
  // non-normal operator publish values beyond the spectrum with small
  // residuals, and such a veto kept MIRAM from ever converging on clustered
  // spectra.)
  // Nor a set holding one eigenpair twice (a ghost copy): k distinct eigenvalues are asked for.
  auto distinct = [&] {
    for (size_t a = 0; a < slots.size(); ++a)
      for (size_t b = a + 1; b < slots.size(); ++b)
        if (same_eigenvalue(*slots[a].pair, *slots[b].pair)) return false;
    return true;
  };
  if (pt.best_residual <= opt.tol && s.heard.load() == opt.subspaces.size() &&
      distinct()) {
    EigenResult r = from_pairs(slots, n);
    // Every co-method may have converged to the same less wanted value: the
    // set wins only if nothing outside it is more wanted (check_wanted). One
    // co-method checks a set; the others go on restarting meanwhile. (A check
    // still running when another co-method wins is abandoned.)
    std::vector<double> key = r.values_re;
    key.insert(key.end(), r.values_im.begin(), r.values_im.end());
    if (!s.begin_check(key)) return false;
    const WantedCheck c = check_wanted(s.op, r, opt.which, check_seed(opt.seed + i), [&] { return s.run.stopping(); });
    s.end_check(key, c.verdict == WantedCheck::Verdict::missed);
    rep.verify_matvecs += c.matvecs;
    if (c.verdict == WantedCheck::Verdict::inconclusive) ++rep.unverified;  // no evidence either way: taken
    if (c.verdict != WantedCheck::Verdict::missed) {
      r.converged = true;
      rep.converged = true;
      s.win(i, rep.name, std::move(r), pt.foreign > 0);
      return true;
    }
    ++rep.missed;
    if (restart_vector) {  // restart from the set with the missed pair in it
      const EigenResult fixed = with_missed(s.op, r, c, opt.which);
      *restart_vector = ritz_restart_vector(fixed, n, false);  // every pair at full weight
      rep.verify_matvecs += fixed.matvecs - r.matvecs;
    }
    return false;
  }
  if (pt.foreign > 0 && restart_vector && (force || stalled(rep, opt.stall_window, pt.own_residual))) {
    for (const auto& e : sets)
      if (e.publisher != rep.name) adopted_version[e.publisher] = std::max(adopted_version[e.publisher], e.version);
    combine(slots, n, *restart_vector);
    ++rep.adopted;
    pt.adopted = true;
  }
  return false;
}


void run_comethod(Shared& s, size_t i, CoMethodReport& rep) {
  const MeramOptions& opt = s.opt;
  const int64_t n = s.op.n, k = opt.k;
  const auto t_start = s.now();
  ArnoldiOptions o;
  o.k = k;
  o.subspace = rep.subspace;
  // Convergence is decided here, on the (improved) set, at each restart; tol
  // still drives IRAM's k' adjustment.
  o.tol = opt.tol;
  o.stop_when_converged = false;
  o.restart = opt.restart;
  o.max_restarts = opt.max_restarts;
  o.which = opt.which;
  o.seed = opt.seed;
  o.start = opt.start;
  o.weight_by_residual = true;
  bool stopped = false;
  Exchange exchange{s, i, rep};
  // Deterministic mode: holds the turn for the duration of an exchange (released on unwind too).
  struct Turn {
    Shared* s;
    std::size_t i;
    int64_t m;
    Turn(Shared* s_, std::size_t i_, int64_t m_) : s(s_), i(i_), m(m_) {
      if (s) s->turns.wait(i, s->run.stop_flag());
    }
    ~Turn() {
      if (s) s->turns.pass(i, m, false);
    }
    // m: the matvecs until this co-method's next exchange (set before the turn ends).
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
  };
  Shared* const lockstep = opt.deterministic ? &s : nullptr;
  o.on_restart = [&](RestartState& st) {
    Turn turn(lockstep, i, rep.subspace);
    rep.restarts = st.restart;
    rep.matvecs = st.matvecs;
    if (opt.observe) opt.observe(i, st);
    if (s.run.stopping()) {
      st.stop = stopped = true;
      return;
    }
    MeramPoint pt;
    pt.restart = st.restart;
    pt.matvecs = st.matvecs;
    st.stop = exchange(to_set(n, k, st.values_re, st.values_im, st.residuals, st.vectors_re, st.vectors_im), pt,
                       &st.restart_vector);
    // Implicit: the next exchange comes after p' matvecs, or m after an explicit restart (an adopted or corrected set).
    if (opt.restart == Restart::implicit && st.restart_vector.empty()) turn.m = st.next_cost;
    stopped = st.stop;
    pt.time_s = s.now();
    rep.history.push_back(pt);
  };
  try {
    EigenResult r = arnoldi(s.op, o);
    rep.restarts = stopped ? r.restarts - 1 : r.restarts;  // a stopping callback cancels its restart
    rep.matvecs = r.matvecs;
    if (!s.run.stopping()) {  // its budget ran out (or m = n): a last exchange, no restart
      const Turn turn(lockstep, i, rep.subspace);
      MeramPoint pt;
      pt.restart = r.restarts;
      pt.matvecs = r.matvecs;
      exchange(to_set(n, k, r.values_re, r.values_im, r.residuals, r.vectors_re, r.vectors_im), pt, nullptr);
      pt.time_s = s.now();
      rep.history.push_back(pt);
    }
  } catch (const std::exception& e) {
    rep.failed = true;
    rep.error = e.what();
  } catch (...) {
    rep.failed = true;
    rep.error = "unknown exception";
  }
  if (rep.publishes == 0) ++s.heard;  // ended (failed, or m = n) before publishing
  const auto outcome = rep.failed ? unite::Outcome::failed : stopped ? unite::Outcome::stopped : unite::Outcome::done;
  s.run.finish(i, {outcome, rep.converged, std::numeric_limits<double>::quiet_NaN(), s.now()});
  if (lockstep) s.turns.pass(i, 0, true);
  rep.seconds = s.now() - t_start;
}

}  // namespace

bool same_eigenvalue(const RitzPair& a, const RitzPair& b) {
  const double gap = std::hypot(a.re - b.re, a.im - b.im), scale = std::max(std::hypot(a.re, a.im), std::hypot(b.re, b.im));
  const double res = std::max(a.residual, b.residual);
  if (gap <= kSameFraction * res + 1e-14 * scale) return true;
  // a conjugate pair's members are two eigenvalues: compare vectors only on one side of the axis
  if ((a.im > 0) != (b.im > 0) || (a.im < 0) != (b.im < 0)) return false;
  if (gap > 1e3 * res + 1e-12 * scale) return false;
  const size_t n = a.x_re.size();
  if (n == 0 || b.x_re.size() != n) return false;
  auto at = [](const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : 0.0; };
  double dot_re = 0, dot_im = 0, na = 0, nb = 0;  // x_a^H x_b
  for (size_t i = 0; i < n; ++i) {
    const double ar = a.x_re[i], ai = at(a.x_im, i), br = b.x_re[i], bi = at(b.x_im, i);
    dot_re += ar * br + ai * bi;
    dot_im += ar * bi - ai * br;
    na += ar * ar + ai * ai;
    nb += br * br + bi * bi;
  }
  return na > 0 && nb > 0 && std::hypot(dot_re, dot_im) >= 0.999 * std::sqrt(na * nb);
}

std::vector<int64_t> parse_subspaces(const std::string& text) {
  std::vector<int64_t> out;
  size_t b = 0;
  while (b <= text.size()) {
    size_t e = text.find(',', b);
    if (e == std::string::npos) e = text.size();
    std::string item = text.substr(b, e - b);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1)
      throw KernelError("subspaces '" + text + "': item '" + item + "' is not a positive integer (expected e.g. \"5,7,10\")");
    out.push_back(v);
    b = e + 1;
  }
  return out;
}

MeramResult meram(const LinearOperator& op, const MeramOptions& opt) {
  const int64_t n = op.n, k = opt.k;
  if (n < 1 || !op.apply) throw KernelError("meram: empty operator");
  if (k < 1 || k > n)
    throw KernelError("meram: k = " + std::to_string(k) + " must be in [1, n = " + std::to_string(n) + "]");
  if (opt.subspaces.empty()) throw KernelError("meram: no co-method (subspaces is empty)");
  if (opt.which != Which::largest_magnitude && opt.which != Which::largest_real)
    throw KernelError("meram: which must be largest_magnitude or largest_real");
  for (int64_t m : opt.subspaces) {
    const int64_t me = std::min(m, n);
    if (m < 1 || (me <= k && me < n))
      throw KernelError("meram: subspace " + std::to_string(m) + " must exceed k = " + std::to_string(k) +
                        " (or be >= n = " + std::to_string(n) + ")");
    if (opt.restart == Restart::implicit && me < n && k >= me - 1)
      throw KernelError("meram: restart=implicit needs every subspace > k + 1 (at least 2 shifts); subspace " +
                        std::to_string(m) + " with k = " + std::to_string(k));
  }
  std::vector<int64_t> sizes;
  for (int64_t m : opt.subspaces) sizes.push_back(std::min(m, n));
  Shared s(op, opt, sizes);
  MeramResult out;
  out.comethods.resize(opt.subspaces.size());
  for (size_t i = 0; i < opt.subspaces.size(); ++i) {
    auto& c = out.comethods[i];
    c.subspace = std::min(opt.subspaces[i], n);
    c.name = (opt.restart == Restart::implicit ? "iram" : "eram") + std::to_string(opt.subspaces[i]);
    if (std::count(opt.subspaces.begin(), opt.subspaces.end(), opt.subspaces[i]) > 1)
      c.name += "#" + std::to_string(i);
  }
  // Single-threaded BLAS inside each co-method (restored afterwards).
  const int blas_threads = openblas_get_num_threads();
  if (blas_threads > 1) openblas_set_num_threads(1);
  for (size_t i = 0; i < out.comethods.size(); ++i) s.index[out.comethods[i].name] = i;
  s.run.start({}, [&s, &out](size_t i) { run_comethod(s, i, out.comethods[i]); });
  if (blas_threads > 1) openblas_set_num_threads(blas_threads);
  out.seconds = s.now();

  std::string failures;
  size_t failed = 0;
  for (const auto& c : out.comethods) {
    out.total_matvecs += c.matvecs + c.verify_matvecs;
    out.critical_matvecs = std::max(out.critical_matvecs, c.matvecs + c.verify_matvecs);
    if (c.failed) {
      ++failed;
      failures += (failures.empty() ? "" : "; ") + c.name + ": " + c.error;
    }
  }
  if (failed == out.comethods.size())
    throw KernelError("meram: all " + std::to_string(failed) + " co-methods failed: " + failures);
  out.winner = s.winner;
  out.winner_mixed = s.mixed;
  if (!s.winner.empty()) {
    out.result = std::move(s.final);
  } else {  // nobody converged: the best pairs gathered over everyone's last sets
    const auto e = s.board.gather_best("ritz", unite::Better::min);
    if (!e) throw KernelError("meram: no co-method produced Ritz pairs (" + failures + ")");
    out.result = from_pairs(improve_slots(unite::payload_as<RitzSet>(*e), s.board.entries("ritz"), e->publisher,
                                          opt.which),
                            n);
    out.result.converged = false;
  }
  out.result.matvecs = out.total_matvecs;
  out.result.check_matvecs = 0;
  for (const auto& c : out.comethods) out.result.check_matvecs += c.verify_matvecs;
  int64_t restarts = 0;
  for (const auto& c : out.comethods) restarts += c.restarts;
  out.result.restarts = restarts;
  return out;
}

}  // namespace ymlopt::eigen
