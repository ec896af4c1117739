// The wire format of co-method records (see record.hpp).
#include "ymlopt/unite/record.hpp"

namespace ymlopt::unite {

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

}  // namespace ymlopt::unite
