// Co-methods on rank groups: what a backend of several processes (one per
// MPI rank) provides so that the co-methods of a top-level unite run on groups
// of ranks, everything else on every rank alike. Only the StarPU-MPI backend
// has one (Session::rank_groups() is null elsewhere). Regions and data are the
// DAG's indices.
//
//   if (RankGroups* g = session.rank_groups(); g && g->ranks() > 1) {
//     g->unite_begin(u);           // every rank
//     // in co-method i's thread: g->set_comethod(region_i); ... g->comethod_end();
//     auto all = g->unite_end(u, my_records);
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ymlopt::unite {

class RankGroups {
 public:
  virtual ~RankGroups() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  /// Every rank, before the co-methods of top-level unite `region` start: each
  /// co-method's inputs are brought to the ranks of its group that read them.
  virtual void unite_begin(std::int32_t region) = 0;
  /// Called by a co-method's thread with the region of the top-level
  /// co-method it runs in: its later task runs and data accesses stay on that
  /// co-method's rank group (the co-method's data are the group's). On a
  /// group of several ranks every rank of it calls them alike (SPMD).
  virtual void set_comethod(std::int32_t region) = 0;
  /// Whether this thread's rank leads its co-method's group (its first rank;
  /// true outside co-methods): the rank whose publishes, stops and records count.
  virtual bool leads() const = 0;
  /// The number of ranks of this thread's co-method group (1 outside co-methods).
  virtual int group_size() const = 0;
  /// On a group of several ranks: the leader's `bytes` on every rank of this
  /// thread's group (what the others pass is dropped); elsewhere `bytes`.
  virtual std::vector<std::byte> share(std::vector<std::byte> bytes) = 0;
  /// `v` summed over the ranks of this thread's co-method group; elsewhere `v`.
  virtual double group_sum(double v) = 0;
  /// Every rank of a co-method's group, once its control flow has ended: what
  /// it wrote is made current where the unite's end expects it.
  virtual void comethod_end() = 0;
  /// Sends `msg` to every other rank, without waiting (thread-safe).
  virtual void post(std::vector<std::byte> msg) = 0;
  /// What other ranks posted that has arrived, oldest first (thread-safe).
  virtual std::vector<std::vector<std::byte>> poll() = 0;
  /// Every rank, once its co-methods of the unite ended: receives the unite's
  /// messages still in flight (the next poll() returns them), makes what the
  /// co-methods wrote readable from every rank, and returns every rank's
  /// `mine`, by rank.
  virtual std::vector<std::vector<std::byte>> unite_end(std::int32_t region, std::vector<std::byte> mine) = 0;
  /// Copies whole tensor `from` into `to` (same dtype and shape) on every rank
  /// alike; false: the caller copies through the session's acquire().
  virtual bool copy(std::int32_t from, std::int32_t to) = 0;
};

}  // namespace ymlopt::unite
