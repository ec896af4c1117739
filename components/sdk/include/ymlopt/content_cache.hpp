// Keeping what a component derives from its inputs across tasks.
//
// A task that turns an input into another layout before computing (packed GEMM
// panels, a sparse GEMV plan) can keep the result for the next task that reads
// the same contents: the engine names each read-only input's contents with
// TensorView::content_id (0: unnamed, do not keep), whose high 32 bits are the
// run's epoch. ContentCache holds such values, least recently used first out,
// within a byte budget; a key from a newer epoch drops everything older (the
// ids of earlier runs never come back). Header-only, for plugins as well.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace ymlopt {

struct ContentCacheStats {
  std::int64_t hits = 0, misses = 0, evictions = 0, bytes = 0, peak = 0, budget = 0;
  std::int64_t refused = 0;   // entries larger than the budget, or (Eviction::keep) than what was left
  std::int64_t deferred = 0;  // Admission::second: first requests, answered without a value
};

/// A budget in bytes from the environment variable `name` (MiB, a whole number
/// >= 0); unset or empty gives `default_mib`, anything else warns on stderr and
/// gives `default_mib` too.
inline std::int64_t cache_budget_from_env(const char* name, std::int64_t default_mib) {
  std::int64_t mib = default_mib;
  if (const char* e = std::getenv(name); e && *e) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end && *end == 0 && v >= 0)
      mib = std::min<long long>(v, 1LL << 40);
    else
      std::fprintf(stderr, "ymlopt: warning: %s='%s' is not a size in MiB; using %lld\n", name, e,
                   static_cast<long long>(default_mib));
  }
  return mib << 20;
}

/// A hash of a key's fields (content ids, dimensions, flags) for ContentCache:
///   struct KeyHash { std::size_t operator()(const Key& k) const { return hash_fields(k.id, k.n, k.k); } };
template <class... T> std::size_t hash_fields(const T&... v) {
  std::size_t h = 0;
  ((h ^= std::hash<std::uint64_t>()(static_cast<std::uint64_t>(v)) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)), ...);
  return h;
}

/// What a full cache does with a new entry: drop the least recently used ones
/// (lru), or refuse it (keep: for values read in a cycle larger than the
/// budget, such as a model's weights every forward, where LRU would drop each
/// one just before it is read again).
enum class Eviction { lru, keep };

/// When a key gets its value: on the first request, or on the second one of
/// the same epoch (the first answers null: a value that costs as much to
/// build as one use saves is only worth building for contents read again).
enum class Admission { first, second };

/// Values of type V under keys K (K carries the content id; the caller passes
/// its epoch, the id's high 32 bits), built once each, shared while in use.
///
///   ContentCache<Key, Plan, KeyHash> cache(256 << 20);
///   auto plan = cache.get(key, key.id >> 32,
///                         [&] { return plan_bytes(w); },          // only on a miss
///                         [&](Plan& p) { p = build_plan(w); });   // once; others wait
///   if (!plan) { /* larger than the budget: compute without keeping */ }
template <class K, class V, class Hash = std::hash<K>>
class ContentCache {
 public:
  explicit ContentCache(std::int64_t budget_bytes, Eviction eviction = Eviction::lru,
                        Admission admission = Admission::first)
      : budget_(budget_bytes), eviction_(eviction), admission_(admission) {}
  std::int64_t budget() const { return budget_.load(std::memory_order_relaxed); }
  /// Lowers the budget to `bytes` (never raises it); entries already kept stay.
  void lower_budget(std::int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes < budget_.load(std::memory_order_relaxed)) budget_.store(std::max<std::int64_t>(bytes, 0));
  }

  /// The value under `key`, built by make(V&) on the first request (concurrent
  /// requests for the same key wait for that build; one that throws is tried
  /// again by the next request); null when size() bytes, asked on a miss only,
  /// do not fit the budget (Eviction::keep: do not fit what is left of it),
  /// and on the first request under Admission::second (size() is not asked). size() and make() run outside the cache's lock (a
  /// plan's size costs a pass over the weight); an exception from size()
  /// leaves nothing behind.
  template <class Size, class Make>
  std::shared_ptr<const V> get(const K& key, std::uint64_t epoch, Size&& size, Make&& make) {
    std::shared_ptr<Entry> e = find(key, epoch);
    if (!e) {
      if (budget() == 0) return nullptr;  // off: nothing to count either
      if (admission_ == Admission::second && first_sight(key, epoch)) return nullptr;
      const std::int64_t need = size();
      e = insert(key, epoch, need);
      if (!e) return nullptr;
    }
    std::call_once(e->once, [&] { make(e->value); });
    return std::shared_ptr<const V>(e, &e->value);
  }

  ContentCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return ContentCacheStats{hits_, misses_, evictions_, bytes_, peak_, budget(), refused_, deferred_};
  }

 private:
  struct Entry {
    std::once_flag once;
    V value{};
  };
  struct Slot {
    std::shared_ptr<Entry> entry;
    typename std::list<K>::iterator pos;
    std::int64_t bytes;
  };

  // Under the lock: a newer epoch drops everything older.
  void advance(std::uint64_t epoch) {
    if (epoch <= epoch_) return;
    epoch_ = epoch;
    evictions_ += static_cast<std::int64_t>(map_.size());
    map_.clear(), lru_.clear(), seen_.clear(), bytes_ = 0;
  }
  // Whether this is the first request for key in its epoch (Admission::second).
  bool first_sight(const K& key, std::uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    advance(epoch);
    if (map_.count(key)) return false;
    if (!seen_.insert(key).second) return false;
    ++deferred_;
    return true;
  }
  // Under the lock: the entry under key, most recently used now; null if none.
  std::shared_ptr<Entry> hit(const K& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    ++hits_;
    return it->second.entry;
  }
  std::shared_ptr<Entry> find(const K& key, std::uint64_t epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    advance(epoch);
    return hit(key);
  }
  // A new entry of `need` bytes (least recently used ones out first), or the one
  // another request put there while this one sized it; null when it does not
  // fit the budget (keep: what is left of it).
  std::shared_ptr<Entry> insert(const K& key, std::uint64_t epoch, std::int64_t need) {
    std::lock_guard<std::mutex> lock(mu_);
    advance(epoch);
    if (auto e = hit(key)) return e;
    const std::int64_t budget = budget_.load(std::memory_order_relaxed);
    if (need > budget || (eviction_ == Eviction::keep && bytes_ + need > budget)) {
      ++refused_;
      return nullptr;
    }
    while (bytes_ + need > budget && !lru_.empty()) {
      auto victim = map_.find(lru_.back());
      bytes_ -= victim->second.bytes;
      map_.erase(victim);
      lru_.pop_back();
      ++evictions_;
    }
    lru_.push_front(key);
    auto e = std::make_shared<Entry>();
    map_.emplace(key, Slot{e, lru_.begin(), need});
    bytes_ += need;
    peak_ = std::max(peak_, bytes_);
    ++misses_;
    return e;
  }

  std::mutex mu_;
  std::unordered_map<K, Slot, Hash> map_;
  std::unordered_set<K, Hash> seen_;  // Admission::second: keys requested once
  std::list<K> lru_;  // most recent first
  std::atomic<std::int64_t> budget_;
  const Eviction eviction_;
  const Admission admission_;
  std::int64_t bytes_ = 0, peak_ = 0, hits_ = 0, misses_ = 0, evictions_ = 0, refused_ = 0, deferred_ = 0;
  std::uint64_t epoch_ = 0;
};

}  // namespace ymlopt
