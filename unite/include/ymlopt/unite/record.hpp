// What the co-methods of a unite did, as reports show it, and its wire format
// (co-methods on other ranks send their records at the unite's end).
//
//   unite::WireOut w;  unite::put_unite(w, rec);
//   auto bytes = w.take();  unite::WireIn in(bytes);  UniteRecord back = unite::get_unite(in);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ymlopt/unite/wire.hpp"

namespace ymlopt {

/// One publish or gather of a co-method, as the report shows it.
struct ExchangeRecord {
  double time_s = 0;       // since the run started
  bool publish = true;
  std::string channel;
  std::string source;      // gather: the co-method whose entry was taken ("" when the board was empty)
  double score = 0;
};

/// What one co-method of a <unite> did.
struct CoMethodRecord {
  std::string name;
  std::int32_t region = -1;
  std::int64_t iterations = 0;  // runtime-loop iterations (restarts)
  bool converged = false;       // its loops all ended by their condition
  bool failed = false, stopped = false, winner = false;
  std::string error;            // why it failed
  double start_s = 0, end_s = 0;
  std::int64_t publishes = 0, gathers = 0, adopted = 0;  // adopted: gathers that took another's entry
  double best_score = 0;                                // best score it published (NaN if none)
  std::vector<ExchangeRecord> exchanges;
  std::vector<std::pair<double, double>> score_history;  // (time_s, best score it has seen), at each exchange
  std::vector<int> context_workers;                      // mapping="contexts": the workers of its context
  double worker_s = 0;                                   // worker time its tasks took (summed)
};

/// What one <unite> did.
struct UniteRecord {
  std::string name;
  std::string exit;    // first, all or budget
  std::string winner;  // "" if every co-method failed
  std::string within;  // a nested unite: the co-method that ran it ("outer" or "a/b"), else ""
  double start_s = 0, end_s = 0;
  std::vector<CoMethodRecord> comethods;
};

namespace unite {

void put_record(WireOut& w, const CoMethodRecord& c);
CoMethodRecord get_record(WireIn& r);
void put_unite(WireOut& w, const UniteRecord& u);
UniteRecord get_unite(WireIn& r);

}  // namespace unite
}  // namespace ymlopt
