// How a unite ends and which co-method's answer it keeps (its exit policy):
// exit="first" stops every co-method when one converges; "all" lets each run
// to its end; "budget" stops them at a time or iteration budget. The winner is
// the first to converge; else the best score seen; else the first to end.
//
//   std::vector<Ending> e = ...;          // how each co-method ended
//   Verdict v = choose_winner(e, Exit::first, false, outer_stopped);
//   if (v.winner < 0) ...                 // every co-method failed
#pragma once

#include <cstdint>
#include <limits>
#include <span>

namespace ymlopt::unite {

enum class Exit { first, all, budget };
/// "first", "all" or "budget" (the report's UniteRecord::exit).
const char* exit_name(Exit e);

/// How a co-method's run ended.
enum class Outcome { done, failed, stopped };

/// How one co-method ended.
struct Ending {
  Outcome outcome = Outcome::failed;
  bool converged = false;  // (done) ended by its own criterion, not by running out of iterations
  double best = std::numeric_limits<double>::quiet_NaN();  // best score it saw (NaN: none)
  double time_s = 0;       // when it ended
  /// Done and converged: what exit="first" stops the others for.
  bool converged_done() const { return outcome == Outcome::done && converged; }
};

struct Verdict {
  std::int32_t winner = -1;  // -1: every co-method failed
  /// exit first/all, nothing stopped them, and none converged (each ran out
  /// of iterations): the winner is only the closest, its answer not an answer.
  bool unconverged = false;
};

/// The winner of a unite whose co-methods ended as `endings` (maximize: higher
/// scores are better; outer_stopped: what encloses the unite was stopped).
Verdict choose_winner(std::span<const Ending> endings, Exit exit, bool maximize, bool outer_stopped);

}  // namespace ymlopt::unite
