// MERAM: the multiple explicitly restarted Arnoldi method (Emad, Petiton &
// Edjlali, SIAM J. Sci. Comput. 27(1), 2005), a "unite and conquer" method;
// with MeramOptions::restart = implicit, MIRAM (Emad, Petiton & Shahzadeh-Fazeli):
// the co-methods are IRAMs (arnoldi() with Restart::implicit), named "iram<m>",
// that restart implicitly from their own pairs and explicitly from an adopted set.
//
// N ERAM co-methods with different subspace sizes m_i run concurrently on the
// unite runtime (ymlopt/unite: one thread each, single-threaded BLAS, exit policy
// "first", the same board as a workflow <unite>). At each of its restarts a co-method
//   1. publishes its k wanted Ritz pairs on a UniteBoard (name "ritz", one entry
//      per co-method, score = its largest relative residual |r_j| / |θ_j|, r_j
//      the Ritz estimate ||A x_j - θ_j x_j|| for unit x_j);
//   2. reads every co-method's latest set, without waiting for anyone, and
//      takes the best one (policy best_set, the default): the set with the
//      smallest largest relative residual, if it is pair by pair at least as
//      wanted as its own (key_j >= own key_j - own residual_j, key = |θ| or
//      Re θ: a set converged to less wanted values never displaces one still
//      approaching the wanted ones). Policy per_eigenvalue instead improves its
//      own pairs one by one: a pair standing for the same eigenvalue
//      (same_eigenvalue below) at a 100x lower residual
//      replaces it, a pair more wanted than the least wanted own one even at
//      its pessimistic end (key - residual) replaces that one;
//   3. stops everyone when these k pairs have all converged (|r_j| <= tol |θ_j|,
//      with ARPACK's eps^(2/3) floor), every co-method has published once, the
//      set holds k distinct eigenvalues, and check_wanted() finds no more wanted
//      eigenvalue outside it (one it finds replaces the least wanted pair and the
//      co-method restarts from the set); a published pair clearly more wanted
//      than the set's least wanted one makes it take such pairs (best_set);
//      else, if a pair came from another co-method (and, with stall_window > 0,
//      it is stalled), restarts from their residual-weighted sum (arnoldi()'s
//      weighting), otherwise from its own pairs as ERAM does.
// Stop policy "first": the first restart set to converge stops all. A
// co-method that throws is reported (CoMethodReport::error) and the others go
// on; meram() throws only if every co-method fails. With one subspace size (or
// exchange = false) each co-method is arnoldi() with that subspace (the same
// cycles; convergence tested on the k wanted Ritz values, whose largest modulus
// replaces ||H|| in ARPACK's floor).
//
//   using namespace ymlopt::eigen;
//   CsrMatrix a = read_matrix_market("m.mtx");
//   MeramOptions o;  o.k = 4;  o.subspaces = {5, 7, 10};  o.tol = 1e-8;
//   MeramResult r = meram(csr_operator(a), o);
//   // r.result: values/vectors/residuals as arnoldi(); r.comethods[i].matvecs, .restarts, .history
//
// Measured (docs/BENCHMARKS.md, MERAM): on a hard convection-diffusion case the
// busiest co-method needs ~0.6x the matvecs of the best single ERAM, the summed
// work ~1.7x; where the underlying ERAM converges to unwanted eigenvalues for
// every subspace size, so does MERAM. MIRAM (deterministic, n = 1000, k = 2, tol 1e-8):
// right in 5/5 on clustered (no single IRAM is; busiest co-method 0.33x ARPACK's
// matvecs) and markov; on cd the busiest co-method needs 0.48x the best single
// IRAM; on box and origin adopting the small co-methods' sets (converging to
// unwanted values) hurts: 3.6x / 11x the matvecs of IRAM(10), origin right 2/5
// (asynchronous: cd 0.39x, box 1.27x, origin 5.5x and right 5/5).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eigen/eigen.hpp"

namespace ymlopt::eigen {

/// How a co-method builds its restart set from the board (step 2 above).
enum class MeramPolicy {
  best_set,        // the whole set of the co-method with the smallest largest residual
                   // (Emad et al.'s basic MERAM), if pair by pair at least as wanted (default)
  per_eigenvalue,  // own pairs improved pair by pair from all sets (use with stall_window > 0)
};

/// Options of meram().
struct MeramOptions {
  std::int64_t k = 4;
  std::vector<std::int64_t> subspaces = {5, 7, 10};  // one co-method per size (each > k, or >= n)
  Which which = Which::largest_magnitude;            // or largest_real
  /// explicit_: ERAM co-methods (MERAM); implicit: IRAM co-methods (MIRAM, Emad,
  /// Petiton & Shahzadeh-Fazeli): each restarts implicitly from its own pairs and
  /// explicitly (a new m-step factorisation from the combined vector) when it
  /// adopts a gathered set. Needs every subspace > k + 1 (or >= n).
  Restart restart = Restart::explicit_;
  double tol = 1e-8;
  std::int64_t max_restarts = 1000;  // per co-method
  std::uint64_t seed = 1;            // all co-methods start from the same vector
  std::vector<double> start;         // optional start vectors (n x p), as ArnoldiOptions::start
  bool exchange = true;              // false: independent ERAMs side by side (first converged still stops all)
  MeramPolicy policy = MeramPolicy::best_set;
  /// W > 0: a co-method restarts from the gathered set only while it is
  /// stalled: the best own residual of its last W restarts is not below half
  /// the best of the W before. 0: at every restart (the default; right for
  /// best_set). per_eigenvalue needs W > 0: mixing single pairs of small
  /// subspaces of a non-normal operator at every restart made ERAM(10) thrash on
  /// the Markov walk (27 restarts alone, no convergence in 3000 within MERAM).
  /// A converged gathered set wins in any case.
  std::int64_t stall_window = 0;
  /// best_set: a gathered set is taken only when its score is below the own
  /// one times this factor (1: any lower score). An adoption restarts from one
  /// vector and drops the own Krylov progress: with 1, MIRAM(9,12,16) thrashed on
  /// four clustered eigenvalues (3000 restarts each) where IRAM(10) alone converged.
  /// 0.5 is meram.xml's adopt_factor 2.
  double adopt_factor = 0.5;
  /// true: the exchanges take turns in the order they would have on dedicated,
  /// equally fast cores with time counted in matvecs (co-method i's c-th restart
  /// at c m_i; a co-method waits for its turn, the Arnoldi cycles still overlap):
  /// results and matvec counts are reproducible, independent of the OS
  /// scheduler and of the machine's load. false (default): fully asynchronous,
  /// no co-method ever waits; the exchange order follows the actual speeds.
  /// (MIRAM: co-method i's exchanges come at its actual matvec counts: m_i, then
  /// + p' per implicit restart, + m_i per explicit one.)
  bool deterministic = false;
  /// Called in co-method i's thread at each of its restarts, before it
  /// publishes; may throw (the co-method then fails and is reported).
  std::function<void(std::size_t comethod, const RestartState&)> observe;
};

/// One point of a co-method's progress, taken at each of its restarts.
struct MeramPoint {
  double time_s = 0;          // since meram() started
  std::int64_t restart = 0;   // the co-method's restarts so far
  std::int64_t matvecs = 0;   // the co-method's matvecs so far
  double own_residual = 0;    // largest relative residual |r_j|/|θ_j| of its own k pairs
  double best_residual = 0;   // largest relative residual of the k pairs gathered (the restart set)
  std::int64_t foreign = 0;   // how many of the k pairs of the improved set came from other co-methods
  bool adopted = false;       // it restarted from the improved set (foreign > 0 and stalled)
};

/// What one co-method did.
struct CoMethodReport {
  std::string name;  // "eram<m>" / "iram<m>" (with a "#i" suffix when two sizes repeat)
  std::int64_t subspace = 0;
  std::int64_t restarts = 0, matvecs = 0;
  std::int64_t publishes = 0, gathers = 0;  // restarts at which it published / gathered
  std::int64_t adopted = 0;                 // restarts from an improved set holding foreign pairs
  std::int64_t missed = 0;                  // converged sets check_wanted() found a more wanted value outside of
  std::int64_t unverified = 0;              // converged sets check_wanted() could not decide (no evidence: taken)
  std::int64_t verify_matvecs = 0;          // matvecs of those checks (not in matvecs)
  bool converged = false;                   // its restart set converged (it is the winner)
  bool failed = false;
  std::string error;  // the exception's message when failed
  double seconds = 0;
  std::vector<MeramPoint> history;
};

/// What meram() returns.
struct MeramResult {
  EigenResult result;  // the winner's k pairs (else the best set at the end); matvecs/restarts summed over co-methods
  std::vector<CoMethodReport> comethods;
  std::string winner;         // the co-method whose restart set converged first ("" if none did)
  bool winner_mixed = false;  // that set held pairs gathered from other co-methods
  std::int64_t total_matvecs = 0;     // summed over co-methods (the work)
  std::int64_t critical_matvecs = 0;  // the largest co-method count (the parallel critical path)
  double seconds = 0;
};

/// Runs MERAM on `op` (which must allow concurrent apply calls, as the built-in
/// operators do). Throws KernelError on bad options or when every co-method fails.
MeramResult meram(const LinearOperator& op, const MeramOptions& opt);

/// One Ritz pair as the co-methods publish it (the payload of "ritz/j").
struct RitzPair {
  double re = 0, im = 0, residual = 0;
  std::vector<double> x_re, x_im;  // unit vector x_re + i x_im
};

/// Whether two Ritz pairs stand for the same eigenvalue: their values are
/// closer than a tenth of the larger residual, or (same sign of the imaginary
/// part) their unit vectors are parallel (|x_a^H x_b| >= 0.999) and the values
/// within 1000 residuals. The vector test matters on non-normal operators,
/// where a converged value's error can exceed its residual: two copies of
/// one eigenpair at residuals 1e-13 and 1e-12 may differ by 1.2e-13 and,
/// taken by the value test alone for two eigenvalues, end up both in a set.
///
///   RitzPair a{1.0, 0, 1e-13, x, zero}, b{1.0 - 1.2e-13, 0, 1e-12, x, zero};
///   same_eigenvalue(a, b);  // true
bool same_eigenvalue(const RitzPair& a, const RitzPair& b);

/// Parses a subspace list such as "5,7,10" (throws KernelError naming the bad item).
std::vector<std::int64_t> parse_subspaces(const std::string& text);

}  // namespace ymlopt::eigen
