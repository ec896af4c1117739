// MpiSession: one StarPU-MPI run on this rank (the backend's Session, and its
// unite::RankGroups). Private to the backend: session.cpp (start, parts, data
// access, close), unite.cpp (co-methods on rank groups).
#pragma once

#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "starpu_bind.hpp"
#include "starpu_mpi_backend.hpp"
#include "starpu_task.hpp"
#include "ymlopt/scheduler/task_order.hpp"
#include "ymlopt/unite/rank_groups.hpp"

namespace ymlopt::starpu_mpi {

// Set in the threads of co-methods (MpiSession::set_comethod): on a one-rank
// group t_local, on a group of several t_group (its index in UnitePlacement::groups).
extern thread_local bool t_local;
extern thread_local std::int32_t t_group;
extern thread_local std::vector<std::int32_t> t_written;  // (t_group) acquired for writing, not released yet

// One StarPU-MPI run on this rank, task part by task part (run_program's
// Session): the whole static DAG in one part (execute()), or the parts that a
// workflow's runtime loops ask for. Every rank runs the same control flow: it
// submits the same parts in the same order, reads loop conditions from the
// owner's value (starpu_mpi_get_data_on_all_nodes_detached), and after every
// part the ranks agree on its success, so a kernel that throws on one rank
// stops the loop on all of them instead of leaving the others waiting for data.
class MpiSession final : public Session, public unite::RankGroups {
 public:
  MpiSession(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress, MpiRankStats& stats)
      : dag_(dag), store_(store), opts_(opts), progress_(progress), stats_(stats), order_(dag) {}
  ~MpiSession() override;

  // starpu_mpi_init, codelets, handles, the running board; false with r.error set.
  bool start(ExecResult& r, bool control);

  bool run(std::int32_t first, std::int32_t end, int context, int priority) override;

  // (unite.cpp) A part of a co-method, waited for task by task (other co-methods of this
  // rank submit beside it), in the co-method's scheduling context
  // (mapping="contexts"/"fair") with its priority. On a one-rank group plain
  // StarPU tasks. On a group of several ranks, every rank of the group alike:
  // StarPU-MPI tasks on the owners of their data (all in the group, or brought
  // there by unite_begin); then the group agrees on the part: a task that
  // failed on one rank fails the co-method on all of them, with its message.
  bool run_comethod(std::int32_t first, std::int32_t end, int context, int priority);

  // The group's verdict on a part of co-method `cm`: the first failing rank's
  // message, on every rank of it (the co-method fails there too).
  void agree_part(std::int32_t cm, std::string& err);

  // unite::RankGroups (unite.cpp): co-methods of top-level unites on rank groups
  unite::RankGroups* rank_groups() override { return this; }
  int rank() const override { return world_.rank; }
  int ranks() const override { return world_.size; }
  void set_comethod(std::int32_t region) override;
  bool leads() const override { return t_group < 0 || place_.groups[size_t(t_group)][0] == world_.rank; }
  int group_size() const override { return t_group < 0 ? 1 : int(place_.groups[size_t(t_group)].size()); }
  std::vector<std::byte> share(std::vector<std::byte> bytes) override;
  double group_sum(double v) override;
  // The co-method's tiled data current in both views (tensor and tiles), on
  // their owners in the group, as unite_end expects of a one-rank group.
  void comethod_end() override;

  // Every rank alike, in task order: what a co-method's tasks read and another
  // rank owns is sent to the co-method's rank (joined or split first where the
  // view read is stale), so its tasks there need no communication.
  void unite_begin(std::int32_t region) override;

  void post(std::vector<std::byte> msg) override;

  std::vector<std::vector<std::byte>> poll() override;

  std::vector<std::vector<std::byte>> unite_end(std::int32_t /*region*/, std::vector<std::byte> mine) override;

  bool copy(std::int32_t from, std::int32_t to) override;

  // Contexts hold the co-methods of this rank (their tasks are local); the
  // SPMD tasks and StarPU-MPI's own stay in the global context.
  int create_context(const std::string& name, const std::vector<int>& workers, const char* policy) override;
  void delete_context(int context) override { delete_sched_ctx(context); }
  int num_workers() const override { return int(starpu_worker_get_count()); }

  // Every rank reads the owner's latest value (a loop condition is evaluated
  // identically everywhere): joins dirty tiles, fetches the tensor on all ranks.
  void acquire(std::int32_t data, bool write) override;
  void release(std::int32_t data) override;
  TaskRunner& runner() override { return *runner_; }

  void close(ExecResult& r) override;

 private:
  bool open_groups(ExecResult& r);
  void set_starpu_env();
  bool init_starpu(ExecResult& r);
  void make_codelets();
  void register_data();

  // the exchange messages (xmu_ held)
  std::vector<std::byte> receive(const MPI_Status& st);
  void reap_sent();

  // join (tiles -> tensor) or split (tensor -> tiles): a no-op task on the
  // tensor's owner that moves the tiles
  // (local: a co-method's data, all on this rank: a plain task that only orders
  // the accesses)
  void submit_sync(size_t di, bool join, bool local = false);

  // A task's operands: the tensor or tile handle of each bound port (one
  // descriptor per handle; a handle bound to two ports gets the union of their
  // modes), after the join/split its views need; false with `err` set.
  bool operands(std::int32_t id, std::vector<starpu_data_descr>& descr, bool local, std::string& err);

  // A task of a co-method running on this rank: its data are this rank's, its
  // inputs were brought here (unite_begin), so it is a plain StarPU task.
  starpu_task* submit_local(std::int32_t id, int context, int priority, std::string& err);

  // Submits a co-method's task, waited for by its part, in the co-method's
  // `context` with its `priority`; on failure destroys it and says why ("": submitted).
  std::string submit_waited(starpu_task* task, std::int32_t id, int context, int priority);

  // Submits a task built for task `id` (kept after it ends: successors in the
  // same part declare dependencies on it) with the compiler's dependencies on
  // this rank's tasks of the part (tiles alias their tensor, and wait/notify
  // events carry no data; earlier parts have finished); the error, or "".
  std::string submit_built(starpu_task* task, std::int32_t id);

  // A tiled tensor written whole (or by tiles) has stale tiles (or a stale whole).
  void mark_written(const TaskNode& t);

  // The StarPU-MPI task of task `id`, submitted by every rank that runs the
  // part: the task where it runs on this rank, else null (or with `err` set).
  // `waited`: a co-method's task on a group of several ranks (submit_waited).
  starpu_task* submit(std::int32_t id, std::vector<starpu_data_descr>& descr, std::string& err, bool waited = false,
                      int context = 0, int priority = 0);

  const Dag& dag_;
  DataStore& store_;
  const ExecOptions& opts_;
  Progress& progress_;
  MpiRankStats& stats_;
  MpiWorld world_;
  MPI_Comm ctrl_ = MPI_COMM_NULL;
  bool started_ = false;
  bool agreed_failure_ = false;
  std::string temp_home_;
  std::string error_;  // a submission failure on this rank
  StarpuBinding binding_;
  std::deque<Codelet> codelets_;
  std::map<const ComponentSpec*, Codelet*> by_comp_;
  starpu_codelet sync_cl_;
  DataOwners owners_;
  std::vector<starpu_data_handle_t> whole_;
  std::vector<std::vector<starpu_data_handle_t>> tiles_;
  std::unique_ptr<TaskRunner> runner_;
  TaskTable table_;
  std::vector<starpu_task*> local_;  // this part's submitted tasks, by task id
  TaskOrder order_;
  // tiled tensors: tiles written since the tensor was last joined / tensor
  // written since its tiles were last split
  std::vector<std::uint8_t> tiles_dirty_, whole_dirty_;
  std::vector<std::int32_t> written_;  // acquired for writing, not released yet
  std::vector<starpu_data_descr> descr_;
  // co-methods on rank groups (unite_placement)
  UnitePlacement place_;
  std::vector<MPI_Comm> group_comms_;  // by group: this rank's communicator with the others of a group of several
  MPI_Comm xchg_ = MPI_COMM_NULL;  // their exchange messages
  std::mutex xmu_;                 // posts and polls
  struct Sent {
    std::shared_ptr<std::vector<std::byte>> bytes;
    MPI_Request request;
  };
  std::vector<Sent> sent_;
  std::vector<std::vector<std::byte>> late_;  // posts received while waiting for the others at a unite's end
  std::mutex err_mu_;  // error_ from co-method threads
  starpu_codelet copy_cl_;
};

}  // namespace ymlopt::starpu_mpi
