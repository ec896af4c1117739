// Placement (data_owners, task_rank) and the simulated StarPU-MPI run of
// `ymlopt estimate` on DAGs small enough to work out by hand: which tile moves
// where, how many bytes, and when the last task ends.
#include <gtest/gtest.h>

#include <vector>

#include "test_util.hpp"
#include "ymlopt/engine/distribution.hpp"
#include "ymlopt/engine/perf_model.hpp"

using namespace ymlopt;
using test::compile_ok;

namespace {

std::int32_t data_index(const Dag& dag, const std::string& name) {
  for (size_t i = 0; i < dag.data.size(); ++i)
    if (dag.data[i].name == name) return std::int32_t(i);
  ADD_FAILURE() << "no data " << name;
  return -1;
}

// A, B, C of 64 x 256 f32 in 64 x 64 tiles (one row of tiles: 1-D cyclic, tile t on rank t % ranks).
// Task 0: C[0,0] += A[0,1] B, task 1: C[0,2] += A[0,3] B (on 2 ranks: both on rank 0, reading rank 1's tiles).
const char* kTwoReads = R"(<workflow name="two-reads">
  <data name="A" shape="64,256" tile="64,64" init="random" seed="1"/>
  <data name="B" shape="64,64" init="random" seed="2" owner="0"/>
  <data name="C" shape="64,256" tile="64,64" init="zeros"/>
  <task component="blas.gemm"><in port="a" data="A[0,1]"/><in port="b" data="B"/><inout port="c" data="C[0,0]"/></task>
  <task component="blas.gemm"><in port="a" data="A[0,3]"/><in port="b" data="B"/><inout port="c" data="C[0,2]"/></task>
</workflow>)";

constexpr double kTileBytes = 64 * 64 * 4;

}  // namespace

TEST(Distribution, OwnersFollowTheBackendRules) {
  const Dag dag = compile_ok(R"(<workflow name="own">
    <data name="G" shape="8,8" tile="2,2" init="zeros"/>
    <data name="R" shape="8,8" tile="2,2" init="zeros" distribute="rows"/>
    <data name="P" shape="8,8" tile="2,2" init="zeros" owner="6"/>
    <data name="big" shape="100,100" init="zeros"/>
    <data name="small" shape="10,10" init="zeros"/>
    <data name="mid" shape="50,50" init="zeros"/>
  </workflow>)");
  const DataOwners own = data_owners(dag, 4);  // 2 x 2 grid
  const auto g = own[size_t(data_index(dag, "G"))];
  ASSERT_EQ(g.size(), 17u);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(g[size_t(1 + t)], (t / 4 % 2) * 2 + t % 4 % 2) << "tile " << t;
  EXPECT_EQ(g[0], g[1]);
  const auto r = own[size_t(data_index(dag, "R"))];
  for (int t = 0; t < 16; ++t) EXPECT_EQ(r[size_t(1 + t)], t / 4 % 4);
  for (auto o : own[size_t(data_index(dag, "P"))]) EXPECT_EQ(o, 2);  // 6 mod 4
  // untiled: largest first to the least loaded rank
  EXPECT_EQ(own[size_t(data_index(dag, "big"))][0], 0);
  EXPECT_EQ(own[size_t(data_index(dag, "mid"))][0], 1);
  EXPECT_EQ(own[size_t(data_index(dag, "small"))][0], 2);
}

// ranks="A-B": a rank group (a pipeline stage's tensor-parallel shards): tiles
// by the same rules over the group, the tensor with its first rank.
TEST(Distribution, RankGroupsPlaceTilesOverTheirRanksOnly) {
  const Dag dag = compile_ok(R"(<workflow name="groups">
    <data name="C" shape="8,8" tile="8,2" init="zeros" ranks="2-3"/>
    <data name="R" shape="8,8" tile="2,8" init="zeros" ranks="4-5" distribute="rows"/>
    <data name="W" shape="8,8" init="zeros" ranks="3-3"/>
    <data name="G" shape="8,8" tile="2,2" init="zeros" ranks="0-3"/>
  </workflow>)");
  const DataOwners own = data_owners(dag, 6);
  const auto c = own[size_t(data_index(dag, "C"))];
  EXPECT_EQ(c, (std::vector<std::int32_t>{2, 2, 3, 2, 3}));
  const auto r = own[size_t(data_index(dag, "R"))];
  EXPECT_EQ(r, (std::vector<std::int32_t>{4, 4, 5, 4, 5}));
  for (auto o : own[size_t(data_index(dag, "W"))]) EXPECT_EQ(o, 3);
  const auto g = own[size_t(data_index(dag, "G"))];  // a 2 x 2 grid over ranks 0-3, as without ranks= on 4
  for (int t = 0; t < 16; ++t) EXPECT_EQ(g[size_t(1 + t)], (t / 4 % 2) * 2 + t % 4 % 2) << "tile " << t;
  // on fewer ranks than the group names: modulo the rank count, as owner=
  EXPECT_EQ(data_owners(dag, 4)[size_t(data_index(dag, "R"))], (std::vector<std::int32_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(data_owners(dag, 1)[size_t(data_index(dag, "C"))], (std::vector<std::int32_t>{0, 0, 0, 0, 0}));
}

TEST(Distribution, BadRankGroupsAndUnmetRequirementsAreCompileErrors) {
  Diagnostics diags;
  EXPECT_FALSE(test::compile(R"(<workflow name="bad">
    <data name="A" shape="8,8" tile="8,2" init="zeros" ranks="3-1"/>
    <data name="B" shape="8,8" init="zeros" ranks="x"/>
    <data name="C" shape="8,8" init="zeros" ranks="0-1" owner="1"/>
    <param name="tp" type="int" default="5"/>
    <require cond="${12 % tp == 0}" message="12 heads do not split into ${tp} shards"/>
  </workflow>)", diags).ok);
  const std::string bad = diags.str();
  EXPECT_NE(bad.find("ranks=\"3-1\" is not a rank range"), std::string::npos) << bad;
  EXPECT_NE(bad.find("ranks=\"x\" is not a rank range"), std::string::npos) << bad;
  EXPECT_NE(bad.find("both owner= and ranks="), std::string::npos) << bad;
  EXPECT_NE(bad.find("12 heads do not split into 5 shards"), std::string::npos) << bad;
}

TEST(Distribution, TaskRunsOnTheOwnerOfItsFirstWrittenOperand) {
  const Dag dag = compile_ok(R"(<workflow name="rank">
    <data name="A" shape="64,256" tile="64,64" init="random" seed="1"/>
    <data name="C" shape="64,256" tile="64,64" init="zeros"/>
    <task component="blas.gemm"><in port="a" data="A[0,0]"/><in port="b" data="A[0,0]"/><inout port="c" data="C[0,3]"/></task>
    <save data="C" to="C.safetensors"/>
  </workflow>)");
  const DataOwners own = data_owners(dag, 2);
  EXPECT_EQ(task_rank(dag, dag.tasks[0], own), 1);  // C tile 3 -> rank 1, although A[0,0] is on rank 0
  ASSERT_EQ(dag.tasks.back().comp->name, "io.save");
  const DataOwners own4 = data_owners(dag, 4);
  EXPECT_EQ(task_rank(dag, dag.tasks[0], own4), 3);
  EXPECT_EQ(task_rank(dag, dag.tasks.back(), own4), 0);  // saving happens on rank 0
}

// The f32 panel cache packs a weight on its second use: a rank whose tasks read
// the same weight twice keeps a copy (the pipeline's micro-batches), one that
// reads each weight once keeps nothing; the budget caps it.
TEST(Distribution, KeptPanelsCountWhereTwoTasksOfARankReadAWeight) {
  const Dag dag = compile_ok(R"(<workflow name="kept">
    <data name="x" shape="32,64" tile="16,64" init="random" seed="1" distribute="rows"/>
    <data name="W" shape="64,48" init="random" seed="2" owner="0"/>
    <data name="V" shape="64,48" init="random" seed="3" owner="1"/>
    <data name="y" shape="32,48" tile="16,48" init="zeros" distribute="rows"/>
    <data name="z" shape="32,48" tile="16,48" init="zeros" distribute="rows"/>
    <par var="b" from="0" to="2">
      <task component="nn.linear"><in port="x" data="x[${b},0]"/><in port="w" data="W"/><out port="y" data="y[${b},0]"/></task>
    </par>
    <task component="nn.linear"><in port="x" data="x[1,0]"/><in port="w" data="V"/><out port="y" data="z[1,0]"/></task>
  </workflow>)");
  ASSERT_NE(dag.tasks[0].cost.kept_ports, 0u) << "nn.linear keeps f32 panels of a named weight";
  ClusterSpec spec;
  spec.ranks_per_node = 2;
  DistributedEstimate e = estimate_distributed(dag, std::vector<double>(dag.tasks.size(), 1e-3), spec);
  EXPECT_EQ(e.task_ranks, (std::vector<std::int32_t>{0, 1, 1}));  // y tiles on ranks 0 and 1
  EXPECT_EQ(e.per_rank[0].kept_bytes, 0);  // W read once on rank 0, V never
  EXPECT_EQ(e.per_rank[1].kept_bytes, 0);  // W once and V once on rank 1
  spec.ranks_per_node = 1;
  e = estimate_distributed(dag, std::vector<double>(dag.tasks.size(), 1e-3), spec);
  EXPECT_EQ(e.per_rank[0].kept_bytes, 64 * 48 * 4);  // W twice; V once
  EXPECT_EQ(e.per_rank[0].peak_bytes(),
            e.per_rank[0].owned_bytes + e.per_rank[0].remote_peak_bytes + e.per_rank[0].workspace_peak_bytes + 64 * 48 * 4);
  spec.kept_budget_bytes = 1000;
  e = estimate_distributed(dag, std::vector<double>(dag.tasks.size(), 1e-3), spec);
  EXPECT_EQ(e.per_rank[0].kept_bytes, 1000);
}

TEST(Distribution, OneTransferBetweenNodesHasExactBytesAndTime) {
  const Dag dag = compile_ok(kTwoReads);
  ClusterSpec spec;
  spec.nodes = 2;
  spec.bandwidth_gbs = 10;
  spec.latency_us = 5;
  // only task 0 matters: drop task 1 by giving it no time (it still moves its tile)
  const DistributedEstimate e = estimate_distributed(dag, {1e-3, 0.0}, spec);
  EXPECT_EQ(e.ranks, 2);
  EXPECT_EQ(e.task_ranks, (std::vector<std::int32_t>{0, 0}));  // C tiles 0 and 2 are rank 0's
  EXPECT_EQ(e.bytes_moved, std::uint64_t(2 * kTileBytes));    // A tiles 1 and 3, rank 1 -> rank 0
  EXPECT_EQ(e.messages, 2);
  EXPECT_EQ(e.per_rank[1].bytes_sent, std::uint64_t(2 * kTileBytes));
  EXPECT_EQ(e.per_rank[0].bytes_received, std::uint64_t(2 * kTileBytes));
  EXPECT_EQ(e.per_rank[0].bytes_sent, 0u);
  const double x = 5e-6 + kTileBytes / 10e9;
  // the two sends share node 1's NIC: the first tile lands at x, the second at 2x; task 0 (1 ms)
  // starts at x on rank 0's only worker, task 1 (0 s) waits for it
  EXPECT_NEAR(e.makespan_s, x + 1e-3, 1e-12);
  EXPECT_NEAR(e.transfer_s, 2 * x, 1e-15);
  EXPECT_EQ(e.per_rank[0].tasks, 2);
  EXPECT_EQ(e.per_rank[1].tasks, 0);
  // memory: rank 0 owns B (16 KiB) and tiles 0, 2 of A and C; holds both received tiles at the end
  EXPECT_EQ(e.per_rank[0].owned_bytes, std::int64_t(5 * kTileBytes));
  EXPECT_EQ(e.per_rank[1].owned_bytes, std::int64_t(4 * kTileBytes));
  EXPECT_EQ(e.per_rank[0].remote_peak_bytes, std::int64_t(2 * kTileBytes));
  EXPECT_EQ(e.per_rank[1].remote_peak_bytes, 0);
}

TEST(Distribution, NicSerialisesSendsBetweenNodesNotWithinANode) {
  const Dag dag = compile_ok(kTwoReads);
  ClusterSpec spec;
  spec.nodes = 2;
  spec.workers_per_rank = 2;
  spec.bandwidth_gbs = 10;
  spec.latency_us = 5;
  const double x = 5e-6 + kTileBytes / 10e9;
  DistributedEstimate e = estimate_distributed(dag, {1e-3, 1e-3}, spec);
  EXPECT_NEAR(e.makespan_s, 2 * x + 1e-3, 1e-12);  // the second tile waits for the first on the NIC
  spec.nodes = 1;
  spec.ranks_per_node = 2;
  spec.intra_gbs = 4;
  spec.intra_latency_us = 0.5;
  e = estimate_distributed(dag, {1e-3, 1e-3}, spec);
  EXPECT_EQ(e.bytes_moved, std::uint64_t(2 * kTileBytes));
  EXPECT_NEAR(e.makespan_s, 0.5e-6 + kTileBytes / 4e9 + 1e-3, 1e-12);  // both copies at once
}

TEST(Distribution, CacheSendsATileOncePerReaderRankUntilItIsWritten) {
  // rank 0 reads A[0,1] (rank 1's) twice; then rank 1 rewrites it and rank 0 reads it again
  const Dag dag = compile_ok(R"(<workflow name="cache">
    <data name="A" shape="64,128" tile="64,64" init="random" seed="1"/>
    <data name="C" shape="64,128" tile="64,64" init="zeros"/>
    <task component="blas.gemm"><in port="a" data="A[0,1]"/><in port="b" data="A[0,1]"/><inout port="c" data="C[0,0]"/></task>
    <task component="blas.gemm"><in port="a" data="A[0,1]"/><in port="b" data="A[0,0]"/><inout port="c" data="C[0,0]"/></task>
    <task component="blas.gemm"><in port="a" data="C[0,1]"/><in port="b" data="C[0,1]"/><inout port="c" data="A[0,1]"/></task>
    <task component="blas.gemm"><in port="a" data="A[0,1]"/><in port="b" data="A[0,0]"/><inout port="c" data="C[0,0]"/></task>
  </workflow>)");
  ClusterSpec spec;
  spec.nodes = 2;
  spec.bandwidth_gbs = 1;
  spec.latency_us = 0;
  const double x = kTileBytes / 1e9;
  const DistributedEstimate e = estimate_distributed(dag, {1e-3, 1e-3, 1e-3, 1e-3}, spec);
  EXPECT_EQ(e.task_ranks, (std::vector<std::int32_t>{0, 0, 1, 0}));
  EXPECT_EQ(e.bytes_moved, std::uint64_t(2 * kTileBytes));  // once before the write, once after
  // t0 waits x; t1 after t0; t2 (rank 1) waits for t1 (the compiler's WAR on A[0,1]) then runs;
  // t3 waits for the new A[0,1]: x after t2
  EXPECT_NEAR(e.makespan_s, x + 2e-3 + 1e-3 + x + 1e-3, 1e-12);
}

TEST(Distribution, JoinMovesTilesToTheTensorsOwnerOnce) {
  // tiles of A written on ranks 0 and 1, then A read whole: the backend's join no-op on A's
  // owner (tile 0's rank) receives tile 1
  const Dag dag = compile_ok(R"(<workflow name="join">
    <data name="A" shape="64,128" tile="64,64" init="zeros"/>
    <data name="X" shape="64,64" init="random" seed="1" distribute="replicate"/>
    <data name="S" shape="64,128" init="zeros" owner="0"/>
    <task component="blas.gemm"><in port="a" data="X"/><in port="b" data="X"/><inout port="c" data="A[0,0]"/></task>
    <task component="blas.gemm"><in port="a" data="X"/><in port="b" data="X"/><inout port="c" data="A[0,1]"/></task>
    <task component="blas.gemm"><in port="a" data="X"/><in port="b" data="A"/><inout port="c" data="S"/></task>
  </workflow>)");
  ClusterSpec spec;
  spec.nodes = 2;
  spec.bandwidth_gbs = 1;
  spec.latency_us = 0;
  spec.sync_seconds = 0.5e-3;
  const DistributedEstimate e = estimate_distributed(dag, {1e-3, 1e-3, 1e-3}, spec);
  EXPECT_EQ(e.task_ranks, (std::vector<std::int32_t>{0, 1, 0}));
  EXPECT_EQ(e.sync_tasks, 1);
  // X is replicated: nothing moves for it; only tile 1 of A goes to rank 0
  EXPECT_EQ(e.bytes_moved, std::uint64_t(kTileBytes));
  EXPECT_EQ(e.per_rank[0].bytes_received, std::uint64_t(kTileBytes));
  // both tiles written at 1 ms (one per rank), tile 1 lands at 1 ms + x, join 0.5 ms, then S
  EXPECT_NEAR(e.makespan_s, 1e-3 + kTileBytes / 1e9 + 0.5e-3 + 1e-3, 1e-12);
}

TEST(Distribution, OneRankEqualsTheSingleProcessSchedule) {
  const Dag dag = compile_ok(R"(<workflow name="gemm">
    <data name="A" shape="128,128" tile="32,32" init="random" seed="1"/>
    <data name="B" shape="128,128" tile="32,32" init="random" seed="2"/>
    <data name="C" shape="128,128" tile="32,32" init="zeros"/>
    <par var="i" from="0" to="4"><par var="j" from="0" to="4"><seq var="k" from="0" to="4">
      <task component="blas.gemm"><in port="a" data="A[${i},${k}]"/><in port="b" data="B[${k},${j}]"/>
        <inout port="c" data="C[${i},${j}]"/><arg name="beta" value="1"/></task>
    </seq></par></par>
  </workflow>)");
  std::vector<double> sec(dag.tasks.size());
  for (size_t i = 0; i < sec.size(); ++i) sec[i] = 1e-4 * double(1 + i % 3);
  ClusterSpec spec;
  spec.workers_per_rank = 3;
  const DistributedEstimate e = estimate_distributed(dag, sec, spec);
  EXPECT_DOUBLE_EQ(e.makespan_s, simulate_schedule(dag, sec, 3).makespan);
  EXPECT_EQ(e.bytes_moved, 0u);
  // 2 x 2 grid on 4 ranks: rank (i%2)*2 + j%2 computes the 4 C[i,j] of its 2 rows and 2 columns
  // (16 tasks); of the 8 A[i,k] of its rows it owns the 4 with k%2 == j%2, of the 8 B[k,j] of its
  // columns the 4 with k%2 == i%2: it receives 4 + 4 tiles, once each (the cache)
  spec.nodes = 4;
  spec.workers_per_rank = 1;
  const DistributedEstimate e4 = estimate_distributed(dag, sec, spec);
  for (const RankEstimate& r : e4.per_rank) {
    EXPECT_EQ(r.tasks, 16);
    EXPECT_EQ(r.bytes_received, std::uint64_t(8 * 32 * 32 * 4)) << "rank " << r.rank;
  }
}

TEST(Distribution, SharedCoresStretchTasks) {
  const Dag dag = compile_ok(kTwoReads);
  ClusterSpec spec;
  spec.nodes = 1;
  spec.ranks_per_node = 4;
  spec.cores_per_node = 2;
  spec.intra_gbs = 1e6;
  spec.intra_latency_us = 0;
  const DistributedEstimate e = estimate_distributed(dag, {1e-3, 1e-3}, spec);
  EXPECT_DOUBLE_EQ(e.time_scale, 2.0);
  // 4 ranks: C tiles 0 and 2 on ranks 0 and 2, one 1 ms task each, 2 ms on shared cores
  EXPECT_EQ(e.task_ranks, (std::vector<std::int32_t>{0, 2}));
  EXPECT_NEAR(e.per_rank[0].busy_s, 2e-3, 1e-15);
  EXPECT_NEAR(e.per_rank[2].busy_s, 2e-3, 1e-15);
  EXPECT_NEAR(e.makespan_s, 2e-3 + kTileBytes / 1e15, 1e-12);
}

TEST(Distribution, BadSpecsAreRejected) {
  const Dag dag = compile_ok(kTwoReads);
  ClusterSpec spec;
  EXPECT_THROW(estimate_distributed(dag, {1e-3}, spec), std::invalid_argument);
  spec.nodes = 0;
  EXPECT_THROW(estimate_distributed(dag, {1e-3, 1e-3}, spec), std::invalid_argument);
  spec.nodes = 1;
  spec.bandwidth_gbs = 0;
  EXPECT_THROW(estimate_distributed(dag, {1e-3, 1e-3}, spec), std::invalid_argument);
}

TEST(Distribution, DataWrittenOnAnotherRankGoBackToTheOwner) {
  // eigen.power runs on rank 0 (M and val are there) and also writes vec, rank 1's: vec goes
  // back to rank 1, and the write leaves rank 0 without a valid copy, so the next reader on
  // rank 0 receives it again
  const Dag dag = compile_ok(R"(<workflow name="back">
    <data name="M" shape="64,64" init="spd" seed="1" owner="0"/>
    <data name="val" shape="1" owner="0"/>
    <data name="vec" shape="64" owner="1"/>
    <data name="S" shape="64" owner="0"/>
    <task component="eigen.power"><in port="a" data="M"/><out port="value" data="val"/><out port="vector" data="vec"/></task>
    <task component="tensor.add"><in port="a" data="vec"/><in port="b" data="vec"/><out port="c" data="S"/></task>
  </workflow>)");
  ClusterSpec spec;
  spec.nodes = 2;
  spec.bandwidth_gbs = 1;
  spec.latency_us = 0;
  const DistributedEstimate e = estimate_distributed(dag, {1e-3, 1e-3}, spec);
  EXPECT_EQ(e.task_ranks, (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(e.per_rank[0].bytes_sent, 256u);  // vec back to its owner
  EXPECT_EQ(e.per_rank[1].bytes_sent, 256u);  // then vec again
  EXPECT_EQ(e.bytes_moved, 512u);
  EXPECT_NEAR(e.makespan_s, 1e-3 + 512 / 1e9 + 1e-3, 1e-12);
}

TEST(Distribution, ATaskRunsWhereItMovesFewestBytes) {
  // an embedding lookup writes a small h on rank 1 from a large table on rank 0: it runs on
  // rank 0 and sends h (T x width) back, instead of receiving the table; replicated data
  // cost nothing to read, so a LayerNorm runs with its output
  const Dag dag = compile_ok(R"(<workflow name="embed">
    <data name="ids" dtype="i32" shape="16" init="zeros" owner="1"/>
    <data name="table" shape="1000,64" init="random" seed="1" owner="0"/>
    <data name="h" shape="16,64" owner="1"/>
    <data name="g" shape="64" init="ones" distribute="replicate"/>
    <data name="b" shape="64" init="zeros" distribute="replicate"/>
    <data name="x" shape="16,64" owner="1"/>
    <task component="nn.embedding"><in port="ids" data="ids"/><in port="table" data="table"/><out port="y" data="h"/></task>
    <task component="nn.layernorm"><in port="x" data="h"/><in port="gamma" data="g"/><in port="beta" data="b"/><out port="y" data="x"/></task>
  </workflow>)");
  const DataOwners own = data_owners(dag, 2);
  EXPECT_EQ(task_rank(dag, dag.tasks[0], own), 0);  // 64 bytes of ids + 4 KiB of h back, not 250 KiB of table
  EXPECT_EQ(task_rank(dag, dag.tasks[1], own), 1);
  ClusterSpec spec;
  spec.nodes = 2;
  const DistributedEstimate e = estimate_distributed(dag, {1e-3, 1e-3}, spec);
  EXPECT_EQ(e.bytes_moved, 16u * 4 + 16 * 64 * 4);  // ids there, h back
  // an update in place stays with its operand, however large the others: y += x A[0,1]
  // on y's rank, not on A's tile's (a chain over A's tiles would send y back and forth)
  const Dag upd = compile_ok(R"(<workflow name="update">
    <data name="A" shape="64,128" tile="64,64" init="random" seed="1"/>
    <data name="x" shape="1,64" init="ones" owner="0"/>
    <data name="y" shape="1,64" init="zeros" owner="0"/>
    <task component="blas.gemm"><in port="a" data="x"/><in port="b" data="A[0,1]"/><inout port="c" data="y"/><arg name="beta" value="1"/></task>
  </workflow>)");
  const DataOwners uown = data_owners(upd, 2);
  ASSERT_EQ(uown[0][2], 1);  // A[0,1] on rank 1
  EXPECT_EQ(task_rank(upd, upd.tasks[0], uown), 0);
}

TEST(Distribution, EveryRankHoldsWhatItOwnsAndTheLoopConditions) {
  // a runtime loop's condition is evaluated by every rank (StarPU-MPI session):
  // its scalars are resident everywhere, other data only on their owners
  const Dag dag = compile_ok(R"(<workflow name="loop">
    <data name="A" shape="8,8" tile="4,4" init="random" seed="1"/>
    <data name="r" dtype="f64" shape="1" init="value" value="1"/>
    <data name="other" dtype="f64" shape="1" init="zeros"/>
    <data name="big" shape="64,64" init="zeros"/>
    <until cond="r le 0.5" max="4">
      <task component="tensor.scale"><inout port="x" data="r"/><arg name="alpha" value="0.5"/></task>
      <task component="tensor.scale"><inout port="x" data="A"/><arg name="alpha" value="0.5"/></task>
    </until>
  </workflow>)");
  const DataOwners own = data_owners(dag, 2);
  const std::int32_t a = data_index(dag, "A"), r = data_index(dag, "r"), other = data_index(dag, "other"),
                     big = data_index(dag, "big");
  std::vector<int> holders_of_other;
  for (int rank = 0; rank < 2; ++rank) {
    const Residency res = residency(dag, own, rank, 2);
    EXPECT_EQ(res.data[size_t(r)], Holding::whole) << "rank " << rank;  // the condition's scalar: everywhere
    // A is scaled whole: its owner holds it whole; the other rank holds its
    // tiles (1 x 2 grid: tile column modulo 2), each in a block of its own
    EXPECT_EQ(res.data[size_t(a)], own[size_t(a)][0] == rank ? Holding::whole : Holding::tiles);
    if (res.data[size_t(a)] == Holding::tiles) {
      EXPECT_EQ(res.tiles[size_t(a)], (std::vector<char>{0, 1, 0, 1}));
    }
    EXPECT_EQ(res.data[size_t(big)] == Holding::whole, own[size_t(big)][0] == rank);
    if (res.data[size_t(other)] != Holding::none) holders_of_other.push_back(rank);
  }
  EXPECT_EQ(holders_of_other, std::vector<int>{own[size_t(other)][0]});  // not a condition: its owner only
}

TEST(Distribution, CoMethodsRunOnTheirRankAndOwnWhatTheyWrite) {
  // three co-methods on two ranks: co-method i on rank i % 2; what each writes
  // (task outputs, its gather target, every tile) is its rank's, what it only
  // reads keeps the usual owner; the publish/gather after the unite runs on
  // every rank, so its data are resident everywhere
  const Dag dag = compile_ok(R"(<workflow name="race">
    <data name="A" shape="8,8" tile="4,4" init="random" seed="1"/>
    <data name="best" dtype="f64" shape="1" init="zeros"/>
    <data name="score" dtype="f64" shape="1" init="zeros"/>
    <unite name="u" exit="all">
      <par var="m" values="1,2,3">
        <comethod name="c${m}">
          <data name="v${m}" shape="8,8" tile="4,4" init="zeros"/>
          <data name="s${m}" dtype="f64" shape="1" init="value" value="${m}"/>
          <data name="g${m}" dtype="f64" shape="1" init="zeros"/>
          <task component="tensor.copy"><in port="x" data="A"/><out port="y" data="v${m}"/></task>
          <publish name="ch" data="s${m}" score="s${m}"/>
          <gather name="ch" into="g${m}" score="g${m}"/>
        </comethod>
      </par>
    </unite>
    <gather name="ch" into="best" score="score"/>
  </workflow>)");
  const UnitePlacement p = unite_placement(dag, 2);
  EXPECT_TRUE(p.conflict.empty()) << p.conflict;
  ASSERT_EQ(dag.tasks.size(), 3u);
  for (int m = 1; m <= 3; ++m) {
    EXPECT_EQ(p.task_rank[size_t(m - 1)], (m - 1) % 2) << "c" << m;
    EXPECT_EQ(p.data_rank[size_t(data_index(dag, "v" + std::to_string(m)))], (m - 1) % 2);
    EXPECT_EQ(p.data_rank[size_t(data_index(dag, "g" + std::to_string(m)))], (m - 1) % 2);  // gathered into
    EXPECT_EQ(p.data_rank[size_t(data_index(dag, "s" + std::to_string(m)))], -1);          // published only
  }
  EXPECT_EQ(p.data_rank[size_t(data_index(dag, "A"))], -1);
  const DataOwners own = data_owners(dag, 2);
  for (auto o : own[size_t(data_index(dag, "v2"))]) EXPECT_EQ(o, 1);  // the tensor and all 4 tiles, though 2-D cyclic otherwise
  for (auto o : own[size_t(data_index(dag, "v3"))]) EXPECT_EQ(o, 0);
  const auto a = own[size_t(data_index(dag, "A"))];
  EXPECT_NE(a[1], a[2]);  // A keeps its block-cyclic tiles
  for (int rank = 0; rank < 2; ++rank) {
    const Residency res = residency(dag, own, rank, 2);
    EXPECT_EQ(res.data[size_t(data_index(dag, "best"))], Holding::whole) << "rank " << rank;
    EXPECT_EQ(res.data[size_t(data_index(dag, "score"))], Holding::whole);
    EXPECT_EQ(res.data[size_t(data_index(dag, "v2"))], rank == 1 ? Holding::whole : Holding::none);
  }
}

TEST(Distribution, CoMethodsOnTwoRanksWritingOneDataAreAConflict) {
  // u1's a (rank 0) and u2's c (rank 1) both write x: on 2 ranks x cannot be
  // both co-methods' (the backend refuses the run); on 1 rank it can
  const Dag dag = compile_ok(R"(<workflow name="clash">
    <data name="x" dtype="f64" shape="1" init="zeros"/>
    <data name="y" dtype="f64" shape="1" init="zeros"/>
    <unite name="u1" exit="all">
      <comethod name="a"><task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="2"/></task></comethod>
    </unite>
    <unite name="u2" exit="all">
      <comethod name="b"><task component="tensor.scale"><inout port="x" data="y"/><arg name="alpha" value="2"/></task></comethod>
      <comethod name="c"><task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="2"/></task></comethod>
    </unite>
  </workflow>)");
  const UnitePlacement p = unite_placement(dag, 2);
  EXPECT_EQ(p.conflict, "'x': unite 'u1' co-method 'a' and unite 'u2' co-method 'c'");
  ASSERT_GE(p.conflict_region, 0);
  EXPECT_EQ(dag.regions[size_t(p.conflict_region)].name, "c");
  EXPECT_TRUE(unite_placement(dag, 1).conflict.empty());
}

TEST(Distribution, CoMethodsOnMoreRanksGetRankGroups) {
  // two co-methods on 4 ranks: ranks {0, 1} and {2, 3}; a co-method's tiles
  // spread over its group (1 x 2 grid: tile column modulo 2), its tensor and
  // untiled data with the group's first rank; what its publishes and gathers
  // touch is resident on every rank of its group and nowhere else
  const char* xml = R"(<workflow name="groups">
    <data name="A" shape="8,8" tile="4,4" init="random" seed="1"/>
    <unite name="u" exit="all">
      <par var="m" values="1,2">
        <comethod name="c${m}">
          <data name="C${m}" shape="8,8" tile="4,4" init="zeros"/>
          <data name="n${m}" dtype="f64" shape="1" init="zeros"/>
          <data name="g${m}" dtype="f64" shape="1" init="zeros"/>
          <data name="gs${m}" dtype="f64" shape="1" init="zeros"/>
          <par var="i" from="0" to="2"><par var="j" from="0" to="2">
            <task component="tensor.copy"><in port="x" data="A[${i},${j}]"/><out port="y" data="C${m}[${i},${j}]"/></task>
          </par></par>
          <task component="tensor.norm"><in port="x" data="C${m}"/><out port="out" data="n${m}"/></task>
          <publish name="ch" data="n${m}" score="n${m}"/>
          <gather name="ch" into="g${m}" score="gs${m}"/>
        </comethod>
      </par>
    </unite>
  </workflow>)";
  const Dag dag = compile_ok(xml);
  const UnitePlacement p = unite_placement(dag, 4);
  EXPECT_TRUE(p.conflict.empty()) << p.conflict;
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0], (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(p.groups[1], (std::vector<std::int32_t>{2, 3}));
  const DataOwners own = data_owners(dag, 4);
  for (int m = 1; m <= 2; ++m) {
    const std::int32_t first = 2 * (m - 1);
    const auto c = size_t(data_index(dag, "C" + std::to_string(m)));
    EXPECT_EQ(p.data_group[c], m - 1);
    EXPECT_EQ(own[c], (std::vector<std::int32_t>{first, first, first + 1, first, first + 1})) << "C" << m;
    EXPECT_EQ(own[size_t(data_index(dag, "g" + std::to_string(m)))][0], first);  // gathered into: the leader's
    for (std::int32_t t = 0; t < 5; ++t) {  // the copies run where their tile lives, the norm on the leader
      const TaskNode& task = dag.tasks[size_t(5 * (m - 1) + t)];
      EXPECT_EQ(p.task_group[size_t(task.id)], m - 1);
      EXPECT_EQ(task_rank(dag, task, own), t < 4 ? own[c][size_t(1 + t)] : first);
    }
    for (int rank = 0; rank < 4; ++rank) {
      const bool in = rank / 2 == m - 1;
      const Residency res = residency(dag, own, rank, 4);
      EXPECT_EQ(res.data[size_t(data_index(dag, "n" + std::to_string(m)))] == Holding::whole, in)
          << "rank " << rank << " c" << m;
      EXPECT_EQ(res.data[size_t(data_index(dag, "g" + std::to_string(m)))] == Holding::whole, in);
      // C is read whole by the norm on the group's leader; the other rank of
      // the group holds its 2 tiles only
      const Holding c = res.data[size_t(data_index(dag, "C" + std::to_string(m)))];
      EXPECT_EQ(c, !in ? Holding::none : rank == first ? Holding::whole : Holding::tiles);
    }
  }
  // three co-methods on 4 ranks: {0}, {1}, {2, 3}; on 2 ranks one rank each
  const Dag three = compile_ok(std::string(xml).replace(std::string(xml).find("1,2"), 3, "1,2,3"));
  EXPECT_EQ(unite_placement(three, 4).groups,
            (std::vector<std::vector<std::int32_t>>{{0}, {1}, {2, 3}}));
  EXPECT_EQ(unite_placement(three, 2).groups, (std::vector<std::vector<std::int32_t>>{{0}, {1}}));
}

TEST(Distribution, ACoMethodHoldingANestedUniteKeepsOneRank) {
  // nested unites run on one rank: with one, every co-method of the top-level
  // unite keeps one rank (co-method i on rank i % size) and the others wait
  const Dag dag = compile_ok(R"(<workflow name="nested">
    <unite name="outer" exit="all">
      <comethod name="a">
        <data name="x" dtype="f64" shape="1" init="zeros"/>
        <unite name="inner" exit="all">
          <comethod name="a1"><task component="tensor.scale"><inout port="x" data="x"/><arg name="alpha" value="2"/></task></comethod>
        </unite>
      </comethod>
      <comethod name="b">
        <data name="y" dtype="f64" shape="1" init="zeros"/>
        <task component="tensor.scale"><inout port="x" data="y"/><arg name="alpha" value="2"/></task>
      </comethod>
    </unite>
  </workflow>)");
  const UnitePlacement p = unite_placement(dag, 4);
  EXPECT_EQ(p.groups, (std::vector<std::vector<std::int32_t>>{{0}, {1}}));
  EXPECT_EQ(p.data_rank[size_t(data_index(dag, "x"))], 0);
  EXPECT_EQ(p.data_rank[size_t(data_index(dag, "y"))], 1);
}
