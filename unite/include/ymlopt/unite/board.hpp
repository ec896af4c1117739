// UniteBoard: the exchange channel of "unite and conquer" co-methods (Emad &
// Petiton). Co-methods running concurrently publish named intermediate results
// with a score; any of them gathers the best result under a name at any time,
// without waiting for anyone (one mutex held for a few pointer copies; payloads
// are shared, immutable and never copied by the board).
//
// The board keeps, per name, the latest entry of each publisher (a co-method's
// newer result replaces its older one), and optionally a log of every publish
// and gather with its time, for reports. MERAM (components/eigen/meram.hpp)
// publishes each co-method's set of Ritz pairs under "ritz" (score: its largest
// relative residual) and reads every set at each restart; the workflow
// language's publish/gather map onto publish and gather_best.
//
//   using namespace ymlopt::unite;
//   UniteBoard board;
//   board.publish("ritz/0", "eram7", 3.2e-5, std::vector<double>(x));    // in co-method eram7
//   if (auto e = board.gather_best("ritz/0", Better::min, "eram5")) {   // in co-method eram5
//     const auto& v = payload_as<std::vector<double>>(*e);                // e->publisher == "eram7"
//   }
#pragma once

#include <any>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ymlopt::unite {

/// Which score is best.
enum class Better { min, max };

/// One published result.
struct BoardEntry {
  std::string publisher;
  double score = 0;
  std::int64_t version = 0;  // 1 for the publisher's first entry under this name, then 2, ...
  double time_s = 0;         // seconds since the board was created
  std::shared_ptr<const std::any> payload;
};

/// One publish or gather, as logged.
struct BoardEvent {
  enum class Kind { publish, gather };
  Kind kind = Kind::publish;
  double time_s = 0;
  std::string name;
  std::string who;     // the publisher, or the reader of a gather
  std::string source;  // gather: the publisher of the entry returned ("" when there was none)
  double score = 0;    // the score published or gathered
};

/// The payload of an entry as T (throws std::bad_any_cast on a type mismatch).
template <class T> const T& payload_as(const BoardEntry& e) { return std::any_cast<const T&>(*e.payload); }

/// A lock-protected board of scored results; every member is thread-safe and
/// none blocks beyond the board's own short critical section.
class UniteBoard {
 public:
  /// keep_log: record every publish and gather (log()); off for long runs.
  explicit UniteBoard(bool keep_log = true);

  /// Publishes `payload` under `name` for `publisher`, replacing that
  /// publisher's previous entry under the name. A NaN score throws std::invalid_argument.
  void publish(std::string_view name, std::string_view publisher, double score, std::any payload);

  /// The best latest entry under `name` over all publishers (lowest or highest
  /// score; ties go to the earlier publication), or nothing if none was
  /// published. `reader` (if not empty) names the caller in the log.
  std::optional<BoardEntry> gather_best(std::string_view name, Better better, std::string_view reader = "");

  /// The latest entry of every publisher under `name`, by publisher name.
  std::vector<BoardEntry> entries(std::string_view name) const;

  /// The log so far (empty when keep_log is false).
  std::vector<BoardEvent> log() const;

  /// Seconds since the board was created (the time base of entries and log).
  double elapsed() const;

 private:
  mutable std::mutex mu_;
  bool keep_log_;
  std::chrono::steady_clock::time_point t0_;
  std::map<std::string, std::map<std::string, BoardEntry, std::less<>>, std::less<>> entries_;
  std::vector<BoardEvent> log_;
};

}  // namespace ymlopt::unite
