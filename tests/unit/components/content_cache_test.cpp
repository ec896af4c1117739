// ymlopt::ContentCache (sdk/content_cache.hpp): built once per key, LRU within
// the budget, a newer epoch drops older entries, a failed build is retried,
// and the budget variable's parsing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>
#include <ymlopt/content_cache.hpp>

namespace ymlopt {
namespace {

using Cache = ContentCache<std::uint64_t, std::vector<int>>;

std::shared_ptr<const std::vector<int>> get(Cache& c, std::uint64_t key, std::int64_t bytes, int* builds) {
  return c.get(
      key, key >> 32, [&] { return bytes; },
      [&](std::vector<int>& v) {
        ++*builds;
        v.assign(3, int(key & 0xFF));
      });
}

TEST(ContentCache, BuildsOnceEvictsLeastRecentlyUsed) {
  Cache c(100);
  int builds = 0;
  const std::uint64_t e = 1ull << 32;
  EXPECT_EQ((*get(c, e | 1, 40, &builds))[0], 1);
  EXPECT_EQ((*get(c, e | 2, 40, &builds))[0], 2);
  EXPECT_EQ((*get(c, e | 1, 40, &builds))[0], 1);  // hit; 2 is now the least recent
  EXPECT_EQ(builds, 2);
  auto three = get(c, e | 3, 40, &builds);  // 120 > 100: evicts 2
  ContentCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(s.bytes, 80);
  EXPECT_EQ(s.peak, 80);
  get(c, e | 1, 40, &builds);
  EXPECT_EQ(builds, 3);  // 1 was kept
  get(c, e | 2, 40, &builds);
  EXPECT_EQ(builds, 4);                             // 2 was not
  EXPECT_EQ((*three)[0], 3);                        // an evicted value lives while in use
  EXPECT_EQ(get(c, e | 4, 101, &builds), nullptr);  // larger than the budget: not kept, not built
  EXPECT_EQ(builds, 4);
  get(c, (2ull << 32) | 1, 10, &builds);  // a newer epoch drops the rest
  s = c.stats();
  EXPECT_EQ(s.bytes, 10);
}

// Eviction::keep refuses what does not fit what is left (the entries held stay)
// and, as LRU does, what is larger than the budget;
// Admission::second answers the first request of each key in an epoch with null.
TEST(ContentCache, KeepRefusesWhenFullAndSecondAdmitsOnTheSecondRequest) {
  Cache keep(100, Eviction::keep);
  int builds = 0;
  const std::uint64_t e = 1ull << 32;
  EXPECT_TRUE(get(keep, e | 1, 60, &builds));
  EXPECT_FALSE(get(keep, e | 2, 60, &builds)) << "60 + 60 > 100: refused, 1 not evicted";
  EXPECT_TRUE(get(keep, e | 1, 60, &builds));
  EXPECT_TRUE(get(keep, e | 3, 40, &builds)) << "40 fits what is left";
  ContentCacheStats s = keep.stats();
  EXPECT_EQ(s.refused, 1);
  EXPECT_EQ(s.evictions, 0);
  EXPECT_EQ(s.bytes, 100);
  EXPECT_EQ(builds, 2);
  EXPECT_FALSE(get(keep, e | 4, 101, &builds)) << "larger than the whole budget";
  EXPECT_EQ(keep.stats().refused, 2);

  Cache second(100, Eviction::lru, Admission::second);
  builds = 0;
  EXPECT_FALSE(get(second, e | 1, 10, &builds));
  EXPECT_EQ(builds, 0);
  EXPECT_TRUE(get(second, e | 1, 10, &builds));
  EXPECT_TRUE(get(second, e | 1, 10, &builds));
  EXPECT_EQ(builds, 1);
  s = second.stats();
  EXPECT_EQ(s.deferred, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 1);
  const std::uint64_t e2 = 2ull << 32;  // a newer epoch forgets what was seen as well
  EXPECT_FALSE(get(second, e2 | 1, 10, &builds));
  EXPECT_TRUE(get(second, e2 | 1, 10, &builds));
  EXPECT_EQ(builds, 2);
}

TEST(ContentCache, ConcurrentRequestsShareOneBuildAndAFailureIsRetried) {
  Cache c(1 << 20);
  std::atomic<int> builds{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      auto v = c.get(
          7, 0, [] { return std::int64_t(8); },
          [&](std::vector<int>& out) {
            ++builds;
            out.assign(1000, 5);
          });
      EXPECT_EQ(v->size(), 1000u);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(builds.load(), 1);
  int tries = 0;
  auto make = [&](std::vector<int>& out) {
    if (++tries == 1) throw std::runtime_error("first build fails");
    out.assign(1, 9);
  };
  EXPECT_THROW(c.get(
                   8, 0, [] { return std::int64_t(8); }, make),
               std::runtime_error);
  EXPECT_EQ((*c.get(
                8, 0, [] { return std::int64_t(8); }, make))[0],
            9);
  EXPECT_EQ(tries, 2);
}

// size() runs outside the cache's lock: it may use the cache (here: ask its
// counters, and get another key), which would deadlock under the lock.
TEST(ContentCache, SizeRunsOutsideTheLock) {
  Cache c(1 << 20);
  int builds = 0;
  auto v = c.get(
      1, 0,
      [&] {
        EXPECT_EQ(c.stats().misses, 0);
        get(c, 2, 8, &builds);  // another key, sized and built meanwhile
        return std::int64_t(16);
      },
      [&](std::vector<int>& out) { out.assign(2, 1); });
  EXPECT_EQ((*v)[0], 1);
  EXPECT_EQ(builds, 1);
  const ContentCacheStats s = c.stats();
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.bytes, 24);
}

TEST(ContentCache, ALoweredBudgetKeepsWhatItHasAndRefusesWhatNoLongerFits) {
  Cache c(100, Eviction::keep);
  int builds = 0;
  EXPECT_NE(get(c, 1, 40, &builds), nullptr);
  c.lower_budget(50);
  EXPECT_EQ(c.budget(), 50);
  EXPECT_EQ(get(c, 2, 20, &builds), nullptr);  // 40 + 20 > 50
  EXPECT_NE(get(c, 1, 40, &builds), nullptr);  // still kept
  EXPECT_NE(get(c, 3, 10, &builds), nullptr);
  c.lower_budget(200);  // never raised
  EXPECT_EQ(c.budget(), 50);
  c.lower_budget(-5);
  EXPECT_EQ(c.budget(), 0);
  EXPECT_EQ(get(c, 4, 1, &builds), nullptr);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(c.stats().budget, 0);
}

TEST(ContentCache, BudgetFromEnvironment) {
  ::unsetenv("YMLOPT_TEST_CACHE_MB");
  EXPECT_EQ(cache_budget_from_env("YMLOPT_TEST_CACHE_MB", 256), std::int64_t(256) << 20);
  ::setenv("YMLOPT_TEST_CACHE_MB", "0", 1);
  EXPECT_EQ(cache_budget_from_env("YMLOPT_TEST_CACHE_MB", 256), 0);
  ::setenv("YMLOPT_TEST_CACHE_MB", "12", 1);
  EXPECT_EQ(cache_budget_from_env("YMLOPT_TEST_CACHE_MB", 256), std::int64_t(12) << 20);
  testing::internal::CaptureStderr();
  ::setenv("YMLOPT_TEST_CACHE_MB", "12x", 1);
  EXPECT_EQ(cache_budget_from_env("YMLOPT_TEST_CACHE_MB", 256), std::int64_t(256) << 20);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "ymlopt: warning: YMLOPT_TEST_CACHE_MB='12x' is not a size in MiB; using 256\n");
  ::unsetenv("YMLOPT_TEST_CACHE_MB");
}

}  // namespace
}  // namespace ymlopt
