// --bind: the PU-list parser, plan_binding over a process's cpuset (checked on
// made-up machines: hyperthreads, a cgroup, StarPU's cap), the MPI overlap
// warnings, and the real thing: probe_topology against sched_getaffinity, and
// the StarPU backend's workers against their threads' own affinity masks.
#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <sched.h>

#include <filesystem>

#include "starpu_backend.hpp"
#include "starpu_bind.hpp"
#include "test_util.hpp"
#include "ymlopt/scheduler/topology.hpp"

using namespace ymlopt;

namespace {

// A machine of `cores` cores with `ht` PUs each, PU OS numbers as Linux gives
// them on x86 (core c's threads are c, c + cores, ...); `usable`: the cpuset.
Topology machine(int cores, int ht, std::vector<int> usable) {
  Topology t;
  t.ok = true;
  t.cores = cores;
  t.pus = cores * ht;
  t.hostname = "n1";
  int id = 0;
  for (int c = 0; c < cores; ++c)
    for (int h = 0; h < ht; ++h) {  // hwloc logical order: a core's threads together
      PuInfo p;
      p.os_index = c + h * cores;
      p.core = c;
      p.starpu_index = id++;
      p.usable = std::find(usable.begin(), usable.end(), p.os_index) != usable.end();
      t.pu_list.push_back(p);
    }
  std::sort(usable.begin(), usable.end());
  t.cpuset = usable;
  t.allowed_pus = int(usable.size());
  return t;
}

std::string bind_error(const Topology& t, const std::string& spec, int ncpu = 0) {
  try {
    plan_binding(t, spec, ncpu, 64);
  } catch (const BindError& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<int> my_affinity() {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(sched_getaffinity(0, sizeof s, &s), 0);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) out.push_back(c);
  return out;
}

}  // namespace

TEST(PuList, ParsesNumbersAndRanges) {
  EXPECT_EQ(parse_pu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_pu_list("0,2,4-7"), (std::vector<int>{0, 2, 4, 5, 6, 7}));
  EXPECT_EQ(parse_pu_list("5-5,1"), (std::vector<int>{1, 5}));
  EXPECT_EQ(format_pu_list({0, 2, 4, 5, 6, 7}), "0,2,4-7");
  EXPECT_EQ(format_pu_list({3, 1, 0}), "0,1,3");
  EXPECT_EQ(format_pu_list({}), "");
  for (const std::string s : {"0", "0,2,4-7", "1,3,5-9,12"}) EXPECT_EQ(format_pu_list(parse_pu_list(s)), s);
}

TEST(PuList, RejectsBadSyntaxWithAClearMessage) {
  const std::string expect = "--bind: expected auto, none, cores or a list of PU numbers like 0,2,4-7, got '";
  const Topology t = machine(2, 1, {0, 1});
  for (const std::string s : {"x", "1,", ",1", "1-", "1;2", "-1", "0,,1", "core", "all", "0 1"})
    EXPECT_EQ(bind_error(t, s), expect + s + "'") << s;
  try {
    parse_pu_list("");
    ADD_FAILURE() << "no error";
  } catch (const BindError& e) {
    EXPECT_EQ(std::string(e.what()), expect + "'");
  }
  EXPECT_EQ(bind_error(machine(8, 1, {0, 1, 2, 3, 4, 5, 6, 7}), "5-3"), "--bind: range 5-3 goes backwards");
  EXPECT_EQ(bind_error(machine(8, 1, {0, 1, 2, 3, 4, 5, 6, 7}), "1,0-2"), "--bind: PU 1 is listed twice");
}

TEST(PlanBinding, AutoPutsOneWorkerOnEachPuOfTheCpuset) {
  // a rank bound by mpirun to PUs 4-5 of an 8-PU node: workers there, never on 0
  const Topology t = machine(8, 1, {4, 5});
  const BindPlan p = plan_binding(t, "", 0, 64);
  EXPECT_EQ(p.mode, "auto");
  EXPECT_EQ(p.ncpu, 2);
  EXPECT_EQ(p.pus, (std::vector<int>{4, 5}));
  EXPECT_EQ(p.starpu_ids, (std::vector<int>{4, 5}));
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(plan_binding(t, "auto", 0, 64).pus, p.pus);
  EXPECT_EQ(format_bind_plan(p), "auto: 2 CPU workers on PUs 4,5");
}

TEST(PlanBinding, StarpuIdsCountOnlyTheCgroupAllowedPus) {
  // PU 0 outside the cgroup: StarPU's topology lacks it, so PU 3 is its id 2
  Topology t = machine(4, 1, {1, 2, 3});
  t.pu_list[0].starpu_index = -1;
  for (int i = 1; i < 4; ++i) t.pu_list[size_t(i)].starpu_index = i - 1;
  EXPECT_EQ(plan_binding(t, "3,1", 0, 64).starpu_ids, (std::vector<int>{0, 2}));
}

TEST(PlanBinding, CoresLeavesHyperthreadsAlone) {
  // 4 cores x 2 threads: PUs 0-3 are the cores' first threads, 4-7 their siblings
  const Topology t = machine(4, 2, {0, 1, 2, 3, 4, 5, 6, 7});
  const BindPlan cores = plan_binding(t, "cores", 0, 64);
  EXPECT_EQ(cores.pus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cores.starpu_ids, (std::vector<int>{0, 2, 4, 6}));  // logical order interleaves the siblings
  EXPECT_EQ(plan_binding(t, "auto", 0, 64).ncpu, 8);
  // a cpuset holding only core 1's second thread and core 2: one worker each
  EXPECT_EQ(plan_binding(machine(4, 2, {5, 2, 6}), "cores", 0, 64).pus, (std::vector<int>{5, 2}));
}

TEST(PlanBinding, AnExplicitListMustLieInTheCpuset) {
  const Topology t = machine(2, 1, {0, 1});
  EXPECT_EQ(plan_binding(t, "1", 0, 64).pus, (std::vector<int>{1}));
  EXPECT_EQ(plan_binding(t, "0,1", 0, 64).pus, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan_binding(t, "0-1", 1, 64).pus, (std::vector<int>{0}));  // --ncpu 1: the first
  EXPECT_EQ(bind_error(t, "5"), "--bind: PU 5 is not in this process's cpuset (usable PUs: 0,1)");
  EXPECT_EQ(bind_error(machine(8, 1, {4, 5, 6, 7}), "2-4"),
            "--bind: PU 2 is not in this process's cpuset (usable PUs: 4-7)");
}

TEST(PlanBinding, TheMpiProgressThreadTakesASparePuOfTheCpuset) {
  // a rank bound to PUs 4-6 with 2 workers: PU 6 is free; StarPU ids skip a PU the cgroup forbids
  Topology t = machine(8, 1, {4, 5, 6});
  t.pu_list[0].starpu_index = -1;
  for (int i = 1; i < 8; ++i) t.pu_list[size_t(i)].starpu_index = i - 1;
  EXPECT_EQ(progress_thread_bindid(plan_binding(t, "", 2, 64), t), 5);
  // workers on every PU of the cpuset (one rank per core), or not bound: none of its own
  EXPECT_EQ(progress_thread_bindid(plan_binding(t, "", 0, 64), t), -1);
  EXPECT_EQ(progress_thread_bindid(plan_binding(machine(2, 1, {1}), "", 0, 64), machine(2, 1, {1})), -1);
  EXPECT_EQ(progress_thread_bindid(plan_binding(t, "none", 1, 64), t), -1);
  // --bind 6: the first free PU is 4
  EXPECT_EQ(progress_thread_bindid(plan_binding(t, "6", 0, 64), t), 3);
}

TEST(PlanBinding, NoneBindsNothing) {
  const BindPlan p = plan_binding(machine(2, 1, {0, 1}), "none", 0, 64);
  EXPECT_EQ(p.mode, "none");
  EXPECT_EQ(p.ncpu, 2);
  EXPECT_TRUE(p.pus.empty());
  EXPECT_TRUE(p.starpu_ids.empty());
  EXPECT_EQ(format_bind_plan(p), "none: 2 CPU workers, not bound (they run anywhere in PUs 0,1)");
}

TEST(PlanBinding, MoreWorkersThanPusWrapAroundWithAWarning) {
  const BindPlan p = plan_binding(machine(8, 1, {3}), "", 3, 64);
  EXPECT_EQ(p.pus, (std::vector<int>{3, 3, 3}));
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "--ncpu 3 asks for more CPU workers than the 1 PUs --bind auto gives (usable PUs: 3): workers will share PUs");
  EXPECT_EQ(plan_binding(machine(4, 1, {0, 1, 2, 3}), "1,2", 3, 64).pus, (std::vector<int>{1, 2, 1}));
}

TEST(PlanBinding, StarpusBuildCapIsAppliedAndExplained) {
  // Debian's StarPU: STARPU_MAXCPUS 4, on a 16-PU node
  std::vector<int> all(16);
  for (int i = 0; i < 16; ++i) all[size_t(i)] = i;
  const BindPlan p = plan_binding(machine(16, 1, all), "", 0, 4);
  EXPECT_EQ(p.ncpu, 4);
  EXPECT_EQ(p.pus, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "this StarPU build caps CPU workers at 4 but 16 PUs are usable (rebuild StarPU with --enable-maxcpus=16 to "
            "use them all)");
  const BindPlan q = plan_binding(machine(16, 1, all), "", 6, 4);
  EXPECT_EQ(q.ncpu, 4);
  ASSERT_EQ(q.warnings.size(), 1u);
  EXPECT_EQ(q.warnings[0], "--ncpu 6 exceeds this StarPU build's limit of 4 CPU workers; using 4");
  // within the cap: no warning
  EXPECT_TRUE(plan_binding(machine(4, 1, {0, 1, 2, 3}), "", 0, 4).warnings.empty());
}

TEST(RankOverlap, RanksOfOneNodeSharingPusAreReported) {
  Placement a, b, c;
  a.host = b.host = "n1";
  c.host = "n2";
  a.cpuset = {0, 1};
  b.cpuset = {1, 2};
  c.cpuset = {0, 1};  // another node: no conflict
  const auto w = rank_overlap_warnings({a, b, c});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "MPI ranks 0 and 1 on node n1 share PU 1 (cpusets 0,1 and 1,2): their workers compete for the same cores; "
            "bind each rank to its own cores (mpirun --bind-to core, srun --cpu-bind=cores)");
  b.cpuset = {2, 3};
  EXPECT_TRUE(rank_overlap_warnings({a, b, c}).empty());
}

TEST(RankOverlap, MergeCopiesEachRanksPlacementAndWarnsOnce) {
  Placement a;
  a.host = "n1";
  a.bind = "auto";
  a.cpuset = {0, 1};
  a.workers = {{"CPU 0", 0, 0, {0}}, {"CPU 1", 1, 1, {1}}};
  const nlohmann::json rank = {{"placement", placement_json(a)}};
  nlohmann::json per_rank = nlohmann::json::array({nlohmann::json::object(), nlohmann::json::object()});
  std::vector<std::string> warnings;
  merge_rank_placements({rank, rank}, per_rank, warnings);
  merge_rank_placements({rank, rank}, per_rank, warnings);
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_EQ(per_rank[1]["placement"]["cpuset"], nlohmann::json({0, 1}));
  EXPECT_EQ(per_rank[0]["placement"]["workers"][1]["pu"], 1);
  const Placement back = placement_from_json(per_rank[1]["placement"]);
  EXPECT_EQ(back.workers.size(), 2u);
  EXPECT_EQ(back.workers[1].affinity, (std::vector<int>{1}));
}

TEST(ProbeTopology, TheCpusetIsTheProcessAffinity) {
  const std::vector<int> mine = my_affinity();
  const Topology t = probe_topology();
  ASSERT_TRUE(t.ok) << t.error;
  EXPECT_EQ(t.cpuset, mine);  // no cgroup narrower than the affinity mask here
  EXPECT_EQ(int(t.pu_list.size()), t.pus);
  // narrowed to one PU (what taskset or mpirun --bind-to core do, for every
  // thread: OpenBLAS's too): the cpuset follows
  cpu_set_t one, saved;
  sched_getaffinity(0, sizeof saved, &saved);
  CPU_ZERO(&one);
  CPU_SET(mine.back(), &one);
  // every thread of the process, until a pass finds none left to narrow (a
  // runtime may start or end threads meanwhile: an ended one is skipped)
  std::set<pid_t> threads;
  for (int pass = 0; pass < 20; ++pass) {
    bool more = false;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
      const pid_t tid = pid_t(std::stoi(e.path().filename().string()));
      if (!threads.insert(tid).second) continue;
      more = true;
      if (sched_setaffinity(tid, sizeof one, &one) != 0) {
        ASSERT_EQ(errno, ESRCH) << "thread " << tid;  // only a thread that ended meanwhile
      }
    }
    if (!more) break;
  }
  const Topology narrow = probe_topology();
  for (pid_t tid : threads) sched_setaffinity(tid, sizeof saved, &saved);
  EXPECT_EQ(narrow.cpuset, std::vector<int>{mine.back()});
  EXPECT_EQ(narrow.allowed_pus, 1);
  EXPECT_NE(format_topology(narrow).find("Usable PUs (cgroup and affinity of this process): " +
                                         std::to_string(mine.back())),
            std::string::npos);
}

namespace {
// Runs a 2x2-tiled GEMM on the StarPU backend with --bind `bind`, --ncpu `ncpu`.
ExecResult run_bound(const std::string& bind, int ncpu) {
  Diagnostics d;
  CompileOptions o;
  o.file = std::string(YMLOPT_SOURCE_DIR) + "/workflows/linalg/tiled_gemm.xml";
  o.sets = {{"n", "64"}, {"bs", "32"}};
  auto cr = compile_workflow(o, test::builtins(), d);
  EXPECT_TRUE(cr.ok) << d.str();
  DataStore store(cr.dag);
  ExecOptions eo;
  eo.run_dir = testing::TempDir() + "/ymlopt-topology";
  std::filesystem::create_directories(eo.run_dir);
  eo.bind = bind;
  eo.ncpu = ncpu;
  Progress p;
  return make_starpu_executor()->execute(cr.dag, store, eo, p);
}
}  // namespace

TEST(StarpuBinding, WorkersRunOnThePusOfTheirPlan) {
  const std::vector<int> mine = my_affinity();
  const int last = mine.back();
  ExecResult r = run_bound(std::to_string(last), 2);  // two workers, both on the last PU
  ASSERT_TRUE(r.ok) << r.error;
  Placement p = last_starpu_placement();
  EXPECT_EQ(p.bind, "list");
  EXPECT_EQ(p.cpuset, mine);
  ASSERT_EQ(p.workers.size(), 2u);
  for (const auto& w : p.workers) {
    EXPECT_EQ(w.pu, last) << w.name;
    EXPECT_EQ(w.affinity, std::vector<int>{last}) << w.name;  // the thread's own mask
  }
  // auto: one worker per PU, each thread pinned to its PU
  r = run_bound("", 0);
  ASSERT_TRUE(r.ok) << r.error;
  p = last_starpu_placement();
  EXPECT_EQ(p.bind, "auto");
  ASSERT_EQ(p.workers.size(), std::min<size_t>(mine.size(), 4));
  for (size_t i = 0; i < p.workers.size(); ++i) {
    EXPECT_EQ(p.workers[i].pu, mine[i]);
    EXPECT_EQ(p.workers[i].affinity, std::vector<int>{mine[i]});
  }
  // none: unbound workers keep the process's mask
  r = run_bound("none", 0);
  ASSERT_TRUE(r.ok) << r.error;
  p = last_starpu_placement();
  EXPECT_EQ(p.bind, "none");
  for (const auto& w : p.workers) {
    EXPECT_EQ(w.pu, -1);
    EXPECT_EQ(w.affinity, mine);
  }
  EXPECT_EQ(std::getenv("STARPU_WORKERS_NOBIND"), nullptr);  // restored after the run
}

TEST(StarpuBinding, APuOutsideTheCpusetFailsTheRun) {
  const ExecResult r = run_bound("1000", 0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("--bind: PU 1000 is not in this process's cpuset (usable PUs: ", 0), 0u) << r.error;
}
