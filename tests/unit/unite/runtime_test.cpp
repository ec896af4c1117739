// The co-method runtime on its own (ymlopt/unite): no DAG, no backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "ymlopt/unite/comethods.hpp"
#include "ymlopt/unite/exchange.hpp"
#include "ymlopt/unite/exit.hpp"
#include "ymlopt/unite/fair_share.hpp"
#include "ymlopt/unite/pareto.hpp"
#include "ymlopt/unite/peers.hpp"
#include "ymlopt/unite/placement.hpp"
#include "ymlopt/unite/record.hpp"
#include "ymlopt/unite/turns.hpp"

namespace ymlopt::unite {
namespace {

const double kNaN = std::nan("");

TEST(UniteExit, TheFirstToConvergeWinsElseTheBestScoreElseTheFirstToEnd) {
  std::vector<Ending> e = {{Outcome::done, true, 0.5, 3.0}, {Outcome::done, true, 0.1, 2.0}, {Outcome::stopped, false, 0.01, 1.0}};
  EXPECT_EQ(choose_winner(e, Exit::first, false, false).winner, 1);
  e[1].converged = e[0].converged = false;
  Verdict v = choose_winner(e, Exit::all, false, false);
  EXPECT_EQ(v.winner, 2);  // the best score
  EXPECT_FALSE(v.unconverged);  // one was stopped: the run could not tell
  e = {{Outcome::done, false, kNaN, 3.0}, {Outcome::done, false, kNaN, 2.0}};
  v = choose_winner(e, Exit::first, false, false);
  EXPECT_EQ(v.winner, 1);  // the first to end
  EXPECT_TRUE(v.unconverged);
  EXPECT_FALSE(choose_winner(e, Exit::budget, false, false).unconverged);
  e = {{Outcome::failed, false, 0.0, 1.0}};
  EXPECT_EQ(choose_winner(e, Exit::first, false, false).winner, -1);
  EXPECT_STREQ(exit_name(Exit::budget), "budget");
}

TEST(UniteCoMethods, ExitFirstStopsTheOthersAndTheFirstClaimWins) {
  CoMethods run(3, Exit::first);
  std::atomic<int> ran{0};
  run.start({1, 0, 1}, [&](size_t i) {
    ++ran;
    if (i == 0) run.finish(i, {Outcome::done, true, 1.0, 1.0});
    else {
      while (!run.stopping()) {}
      run.finish(i, {Outcome::stopped, false, kNaN, 2.0});
    }
  });
  EXPECT_EQ(ran.load(), 2);  // co-method 1 runs elsewhere
  EXPECT_EQ(run.claimed(), 0);
  EXPECT_FALSE(run.claim(2));
  EXPECT_TRUE(run.ended(2));
  EXPECT_FALSE(run.ended(1));
  EXPECT_EQ(run.verdict(false, false).winner, 0);
}

TEST(UniteFairShare, TheLeastServedGetsTheHighestPriority) {
  FairShare f(3, 1);
  f.add(0, 100), f.add(1, 50);
  EXPECT_EQ(f.priority(2), 0);
  EXPECT_EQ(f.priority(1), -1);
  EXPECT_EQ(f.priority(0), -2);
  f.set_idle(2, true);
  EXPECT_EQ(f.priority(2), -5);
  EXPECT_EQ(f.priority(1), 0);
  f.leave(1);
  EXPECT_EQ(f.priority(0), 0);
  f.wait_turn(0);  // no live co-method at work behind it: no wait
}

TEST(UniteFairShare, TheWLeastServedGoOnWWorkers) {
  FairShare f(3, 2);  // 3 co-methods on 2 workers
  f.add(0, 100), f.add(1, 50);
  auto waited_ms = [&](std::size_t i) {
    const auto t0 = std::chrono::steady_clock::now();
    f.wait_turn(i);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  EXPECT_LT(waited_ms(2), 100.0);  // the least served
  EXPECT_LT(waited_ms(1), 100.0);  // one co-method behind it, two workers: it goes too
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    f.add(1, 100);  // 1 has now had more than 0: 0 is among the two least served
  });
  const double w = waited_ms(0);  // two behind it: it waits for its turn
  later.join();
  EXPECT_GE(w, 100.0);
  EXPECT_LT(w, 1500.0);  // woken by add(), not by wait_turn's 2 s cap
}

TEST(UnitePlacement, CoMethodsShareWorkersInTurn) {
  const auto ws = share_workers({0, 1, 2, 3}, {2, 0, 3});
  EXPECT_EQ(ws[0], (std::vector<int>{0, 1}));
  EXPECT_TRUE(ws[1].empty());
  EXPECT_EQ(ws[2], (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(share_workers({0, 1, 2, 3}, {-1, -1})[1], (std::vector<int>{2, 3}));  // equal shares
}

TEST(UnitePlacement, CoMethodsGetRankGroups) {
  EXPECT_EQ(rank_group(3, 4, 2, false), (std::vector<std::int32_t>{1}));     // rank k % size
  EXPECT_EQ(rank_group(1, 2, 5, true), (std::vector<std::int32_t>{2, 3, 4}));  // blocks, shared out evenly
  EXPECT_EQ(rank_group(0, 2, 5, true), (std::vector<std::int32_t>{0, 1}));
}

TEST(UniteTurns, ExchangesComeInVirtualTimeOrder) {
  Turns t({5, 7});
  std::atomic<bool> stop{false};
  std::vector<int> order;
  CoMethods run(2, Exit::all);
  run.start({}, [&](size_t i) {
    for (int c = 0; c < 3; ++c) {
      t.wait(i, stop);
      order.push_back(int(i));
      t.pass(i, i == 0 ? 5 : 7, false);
    }
    t.pass(i, 0, true);
  });
  // exchanges at 5, 7, 10, 14, 15, 21
  EXPECT_EQ(order, (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

TEST(UniteWire, RecordsAndEntriesRoundTrip) {
  UniteRecord u;
  u.name = "u", u.exit = "first", u.winner = "b";
  CoMethodRecord& c = u.comethods.emplace_back();
  c.name = "b", c.iterations = 7, c.converged = c.winner = true, c.best_score = 0.25;
  c.exchanges.push_back({1.5, false, "x", "a", 0.5});
  c.score_history.emplace_back(1.0, 0.25);
  c.context_workers = {1, 2};
  WireOut w;
  put_unite(w, u);
  const auto b = w.take();
  WireIn in(b);
  const UniteRecord back = get_unite(in);
  EXPECT_TRUE(in.done());
  ASSERT_EQ(back.comethods.size(), 1u);
  EXPECT_EQ(back.comethods[0].iterations, 7);
  EXPECT_TRUE(back.comethods[0].winner && back.comethods[0].converged && !back.comethods[0].failed);
  EXPECT_EQ(back.comethods[0].exchanges[0].source, "a");
  EXPECT_EQ(back.comethods[0].context_workers, (std::vector<int>{1, 2}));

  UniteBoard board(false);
  Peers peers;
  Entry e;
  e.scores = {0.3, 2};
  e.tensors.push_back({std::byte{1}, std::byte{2}});
  peers.apply(Peers::publish_message("ch", "a", e), board);
  const auto got = board.gather_best("ch", Better::min);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->publisher, "a");
  EXPECT_EQ(payload_as<Entry>(*got).tensors[0].size(), 2u);
  std::atomic<bool> stop{false};
  const auto run = peers.begin(4, 2, &stop);
  peers.apply(Peers::state_message(4, run, 1, PeerState::idle), board);
  std::vector<PeerState> st;
  ASSERT_TRUE(peers.states(4, st));
  EXPECT_EQ(st[1], PeerState::idle);
  peers.apply(Peers::stop_message(4), board);
  EXPECT_TRUE(stop.load());
  const std::vector<std::byte> cut(b.begin(), b.begin() + 3);
  WireIn short_in(cut);
  EXPECT_THROW(get_unite(short_in), std::runtime_error);
}

TEST(UnitePareto, TheNonDominatedEntryWins) {
  UniteBoard board(false);
  board.publish("p", "a", 1, Entry{{}, {1, 5}});
  board.publish("p", "b", 2, Entry{{}, {2, 6}});  // dominated by a
  board.publish("p", "c", 3, Entry{{}, {3, 1}});
  const auto e = pareto_best(board, "p");
  ASSERT_TRUE(e);
  EXPECT_NE(e->publisher, "b");
  EXPECT_FALSE(pareto_best(board, "none"));
}

}  // namespace
}  // namespace ymlopt::unite
