// MpiSession (session.hpp): start, task parts, data access between parts, close.
#include "session.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "progress.hpp"

namespace ymlopt::starpu_mpi {

thread_local bool t_local = false;
thread_local std::int32_t t_group = -1;
thread_local std::vector<std::int32_t> t_written;

namespace {

void cpu_trampoline(void* buffers[], void* cl_arg) {
  auto* ex = static_cast<TaskExec*>(cl_arg);
  const std::span<const TensorView> views = bind_buffers(buffers, *ex);
  const int w = starpu_worker_get_id();
  running_board_mark(w, ex->node->id, true);
  ex->runner->run(*ex->node, views, w);
  record_prediction(*ex);
  running_board_mark(w, ex->node->id, false);
}

// join/split: the tiles and the tensor share memory, so moving the tiles (which
// StarPU-MPI does around the task) is the whole work
void sync_noop(void* /*buffers*/[], void* /*cl_arg*/) {}

// a unite's save_exit: the winning co-method's tensor into the kept one (row-major
// matrix handles of one shape: nx columns, ny rows, ld elements per row)
void copy_matrix(void* buffers[], void* /*cl_arg*/) {
  const size_t es = STARPU_MATRIX_GET_ELEMSIZE(buffers[0]);
  const size_t row = size_t(STARPU_MATRIX_GET_NX(buffers[0])) * es;
  const auto* from = reinterpret_cast<const std::byte*>(STARPU_MATRIX_GET_PTR(buffers[0]));
  auto* to = reinterpret_cast<std::byte*>(STARPU_MATRIX_GET_PTR(buffers[1]));
  const size_t lf = size_t(STARPU_MATRIX_GET_LD(buffers[0])) * es, lt = size_t(STARPU_MATRIX_GET_LD(buffers[1])) * es;
  for (size_t i = 0; i < STARPU_MATRIX_GET_NY(buffers[0]); ++i) std::memcpy(to + i * lt, from + i * lf, row);
}

}  // namespace

MpiSession::~MpiSession() {
  if (ctrl_ != MPI_COMM_NULL) MPI_Comm_free(&ctrl_);
  if (xchg_ != MPI_COMM_NULL) MPI_Comm_free(&xchg_);
  for (auto& c : group_comms_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

// starpu_mpi_init, codelets, handles, the running board; false with r.error set.
bool MpiSession::start(ExecResult& r, bool control) {
  world_ = mpi_world_init();
  stats_ = MpiRankStats{};
  stats_.rank = world_.rank;
  stats_.size = world_.size;
  r.scheduler = opts_.sched;
  r.runtime = "StarPU-MPI " + std::to_string(STARPU_MAJOR_VERSION) + "." + std::to_string(STARPU_MINOR_VERSION) + "." +
              std::to_string(STARPU_RELEASE_VERSION) + ", " + std::to_string(world_.size) + " rank" +
              (world_.size == 1 ? "" : "s");
  if (control && !open_groups(r)) return false;
  set_starpu_env();
  if (!init_starpu(r)) return false;
  make_codelets();
  register_data();
  const size_t nd = dag_.data.size();
  // aligned clocks: every rank's TaskRunner starts after this barrier
  if (world_.size > 1 && !opts_.run_dir.empty()) running_board_open(dag_, opts_.run_dir, world_.rank, r.workers.size());
  starpu_mpi_barrier(MPI_COMM_WORLD);
  if (world_.rank == 0) running_board_watch(opts_.run_dir, world_.size);
  runner_ = std::make_unique<TaskRunner>(dag_, opts_, progress_);
  const size_t nt = dag_.tasks.size();
  table_.build(dag_, *runner_);
  if (!place_tasks(dag_, table_, [&](const ComponentSpec* c) -> const starpu_codelet& { return by_comp_[c]->cl; }, opts_, r)) {
    error_ = "rank " + std::to_string(world_.rank) + ": " + r.error;  // close() reports it
    return false;
  }
  local_.assign(nt, nullptr);
  tiles_dirty_.assign(nd, 0);
  whole_dirty_.assign(nd, 0);
  return true;
}

// the ranks' agreement after each part goes through a communicator of its
// own, from this thread while StarPU-MPI's progress thread uses MPI too;
// co-methods on rank groups (unite_placement) get theirs
bool MpiSession::open_groups(ExecResult& r) {
  if (!world_.thread_multiple) {
    r.error = "rank " + std::to_string(world_.rank) +
              ": runtime loops under starpu-mpi need an MPI library with MPI_THREAD_MULTIPLE";
    return false;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &ctrl_);
  MPI_Comm_dup(MPI_COMM_WORLD, &xchg_);
  place_ = unite_placement(dag_, world_.size);
  // a communicator for each group of several ranks (its control flow's
  // agreements), null on the ranks outside it
  group_comms_.assign(place_.groups.size(), MPI_COMM_NULL);
  for (size_t g = 0; g < place_.groups.size(); ++g) {
    const auto& ranks = place_.groups[g];
    if (ranks.size() < 2) continue;
    const bool in = std::find(ranks.begin(), ranks.end(), world_.rank) != ranks.end();
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, world_.rank, &group_comms_[g]);
  }
  return true;
}

// one perf-model directory per rank (ranks must not share one); rank 0's in
// the run directory, the others' in a temporary directory removed afterwards
void MpiSession::set_starpu_env() {
  if (!std::getenv("STARPU_HOME")) {
    std::string home;
    if (!opts_.starpu_home.empty()) home = opts_.starpu_home + "/rank" + std::to_string(world_.rank);
    else if (world_.rank == 0) home = opts_.run_dir + "/starpu";
    else
      home = temp_home_ = (std::filesystem::temp_directory_path() /
                           ("ymlopt-starpu-rank" + std::to_string(world_.rank) + "-" + std::to_string(getpid())))
                              .string();
    std::filesystem::create_directories(home);
    setenv("STARPU_HOME", home.c_str(), 1);
  }
  if (!opts_.verbose && !std::getenv("STARPU_SILENT")) setenv("STARPU_SILENT", "1", 1);
  if (!std::getenv("STARPU_COMM_STATS")) setenv("STARPU_COMM_STATS", "1", 1);
}

namespace {

/// While alive, StarPU-MPI's progress thread is placed by ymlopt: on a PU of
/// the rank's cpuset that no worker has (STARPU_MPI_THREAD_CPUID), else not
/// bound (STARPU_MPI_NOBIND: it shares the rank's own PUs). StarPU 1.3 would
/// bind it to the next PU of the whole machine, another rank's worker's when
/// ranks are bound to cores (GPT-2 on 2 ranks of one core each: 5.3 s against
/// 1.3-1.9 s). Left alone when the user set any of the three variables.
class ProgressThreadPlace {
 public:
  explicit ProgressThreadPlace(const StarpuBinding& b) {
    for (const char* v : {"STARPU_MPI_NOBIND", "STARPU_MPI_THREAD_CPUID", "STARPU_MPI_THREAD_COREID"})
      if (std::getenv(v)) return;
    const int id = progress_thread_bindid(b.plan(), b.topology());
    name_ = id >= 0 ? "STARPU_MPI_THREAD_CPUID" : "STARPU_MPI_NOBIND";
    setenv(name_, id >= 0 ? std::to_string(id).c_str() : "1", 1);
  }
  ~ProgressThreadPlace() {
    if (name_) unsetenv(name_);
  }
  ProgressThreadPlace(const ProgressThreadPlace&) = delete;
  ProgressThreadPlace& operator=(const ProgressThreadPlace&) = delete;

 private:
  const char* name_ = nullptr;
};

}  // namespace

// starpu_mpi_init_conf on this rank's share of the node; its workers to r.workers.
bool MpiSession::init_starpu(ExecResult& r) {
  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.sched_policy_name = opts_.sched.c_str();
  // Ranks of one node whose cpusets overlap (mpirun --oversubscribe, no
  // --bind-to): pinning each rank's workers to the same PUs, next to every
  // rank's polling MPI thread, starves them; --bind auto leaves them to the OS.
  // the cpuset probe, the binding's topology and starpu_init without hwloc's
  // I/O discovery (ScopedCpuOnlyHwloc, as the StarPU backend)
  std::optional<ScopedCpuOnlyHwloc> cpu_only(std::in_place);
  ExecOptions bind_opts = opts_;
  if (opts_.bind.empty() || opts_.bind == "auto") {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_.rank, MPI_INFO_NULL, &node);
    int local = 1, me = 0;
    MPI_Comm_size(node, &local);
    MPI_Comm_rank(node, &me);
    constexpr int kWords = 64;  // PUs 0..4095
    std::vector<std::uint64_t> mine(kWords, 0), all(size_t(kWords) * size_t(local), 0);
    for (int pu : probe_topology().cpuset)
      if (pu >= 0 && pu < 64 * kWords) mine[size_t(pu / 64)] |= std::uint64_t(1) << (pu % 64);
    MPI_Allgather(mine.data(), kWords, MPI_UINT64_T, all.data(), kWords, MPI_UINT64_T, node);
    MPI_Comm_free(&node);
    bool shared = false;
    for (int k = 0; k < local && !shared; ++k)
      for (int w = 0; w < kWords && k != me; ++w) shared |= (all[size_t(k) * kWords + size_t(w)] & mine[size_t(w)]) != 0;
    if (shared) {
      bind_opts.bind = "none";
      r.warnings.push_back("rank " + std::to_string(world_.rank) +
                           " shares PUs with other ranks of its node: --bind auto leaves its workers unbound (bind "
                           "ranks to cores: mpirun --bind-to core, srun --cpu-bind=cores)");
    }
  }
  if (!binding_.configure(conf, bind_opts, r)) {  // --ncpu, --bind over this rank's cpuset, StarPU's CPU cap
    r.error = "rank " + std::to_string(world_.rank) + ": " + r.error;
    return false;
  }
  {
    const DeviceConf devices(conf, opts_);  // --opencl, --opencl-on-cpus
    const ProgressThreadPlace progress(binding_);
    if (int ret = starpu_mpi_init_conf(nullptr, nullptr, 0, MPI_COMM_WORLD, &conf); ret != 0) {
      r.error = "rank " + std::to_string(world_.rank) + ": starpu_mpi_init_conf failed: " + std::strerror(-ret);
      return false;
    }
  }
  started_ = true;
  cpu_only.reset();
  binding_.record();
  for (unsigned w = 0; w < starpu_worker_get_count(); ++w) {
    char buf[128];
    starpu_worker_get_name(int(w), buf, sizeof buf);
    r.workers.emplace_back(buf);
  }
  if (r.workers.empty()) r.warnings.push_back("rank " + std::to_string(world_.rank) + " has no StarPU worker");
  if (!record_worker_kinds(dag_, opts_, r)) {
    r.error = "rank " + std::to_string(world_.rank) + ": " + r.error;
    return false;
  }
  return true;
}

// codelets: one per component (variable buffer count: operands come as a
// descriptor array), the no-op join/split and the save_exit copy
void MpiSession::make_codelets() {
  for (const auto& t : dag_.tasks) {
    if (by_comp_.count(t.comp)) continue;
    Codelet& c = codelets_.emplace_back();
    c.init(*t.comp, cpu_trampoline, model_based_scheduler(opts_.sched), device_funcs(opts_));
    by_comp_[t.comp] = &c;
  }
  starpu_codelet_init(&sync_cl_);
  sync_cl_.where = STARPU_CPU;
  sync_cl_.cpu_funcs[0] = sync_noop;
  sync_cl_.nbuffers = STARPU_VARIABLE_NBUFFERS;
  sync_cl_.name = "ymlopt.mpi_sync";
  starpu_codelet_init(&copy_cl_);
  copy_cl_.where = STARPU_CPU;
  copy_cl_.cpu_funcs[0] = copy_matrix;
  copy_cl_.nbuffers = 2;
  copy_cl_.modes[0] = STARPU_R;
  copy_cl_.modes[1] = STARPU_W;
  copy_cl_.name = "ymlopt.save_exit";
}

// handles: every tensor and every tile its own handle, with an owner and a tag
void MpiSession::register_data() {
  owners_ = data_owners(dag_, world_.size);
  const size_t nd = dag_.data.size();
  whole_.assign(nd, nullptr);
  tiles_.assign(nd, {});
  starpu_mpi_tag_t tag = 1;
  // data this rank does not hold (DataStore base null: neither owned nor
  // replicated) have no home buffer: StarPU allocates a copy on first receive;
  // a tile held on its own (Holding::tiles) is registered on its block
  auto register_one = [&](starpu_data_handle_t& h, char* ptr, std::int64_t ld, const DataDecl& d, std::int64_t rows,
                          std::int64_t cols, std::int32_t owner) {
    if (ptr)
      starpu_matrix_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(ptr), std::uint32_t(ld),
                                  std::uint32_t(cols), std::uint32_t(rows), dtype_size(d.dtype));
    else
      starpu_matrix_data_register(&h, -1, 0, std::uint32_t(cols), std::uint32_t(cols), std::uint32_t(rows),
                                  dtype_size(d.dtype));
    starpu_mpi_data_register(h, tag++, owner);
    if (d.distribute == "replicate") {
      // every rank holds the same initial value (DataStore): mark it as already
      // exchanged, so reads move nothing until a task writes it
      if (world_.rank != owner) starpu_mpi_cached_receive_set(h);
      else
        for (int dst = 0; dst < world_.size; ++dst)
          if (dst != owner) starpu_mpi_cached_send_set(h, dst);
    }
  };
  stats_.owners.assign(nd, 0);
  stats_.allocated_bytes = store_.total_bytes();
  stats_.mapped_bytes = store_.mapped_bytes();
  for (size_t i = 0; i < nd; ++i) {
    const DataDecl& d = dag_.data[i];
    stats_.owners[i] = owners_[i][0];
    if (!d.format.empty()) continue;  // stored compressed: tasks read its companions
    char* base = static_cast<char*>(store_.base(std::int32_t(i)));
    register_one(whole_[i], base, d.ld, d, d.rows, d.cols, owners_[i][0]);
    starpu_data_set_name(whole_[i], d.name.c_str());
    if (!d.tiled()) continue;
    tiles_[i].resize(size_t(d.ntiles()));
    for (std::int64_t t = 0; t < d.ntiles(); ++t) {
      const std::int64_t tr = t / d.ntile_c, tc = t % d.ntile_c;
      char* own = static_cast<char*>(store_.tile_base(std::int32_t(i), t));  // a held tile's own block
      char* p = own    ? own
                : base ? base + (size_t(d.tile_row0(tr)) * size_t(d.ld) + size_t(d.tile_col0(tc))) * dtype_size(d.dtype)
                       : nullptr;
      register_one(tiles_[i][size_t(t)], p, own ? d.tile_ncols(tc) : d.ld, d, d.tile_nrows(tr), d.tile_ncols(tc),
                   owners_[i][size_t(1 + t)]);
    }
  }
}

bool MpiSession::run(std::int32_t first, std::int32_t end, int context, int priority) {
  if (t_local || t_group >= 0) return run_comethod(first, end, context, priority);
  const bool all = order_.whole(first, end);
  std::vector<std::int32_t> ids;
  const auto& order = order_.range(first, end, ids);
  for (auto id : order) {
    if (!error_.empty()) break;
    submit(id, descr_, error_);
  }
  // the part's tasks on this rank (not starpu_mpi_wait_for_all: see close())
  starpu_task_wait_for_all();
  for (auto id : order)
    if (local_[size_t(id)]) starpu_task_destroy(local_[size_t(id)]), local_[size_t(id)] = nullptr;
  const bool ok = error_.empty() && !runner_->cancelled();
  if (all && ctrl_ == MPI_COMM_NULL) return ok;  // a static DAG: the merged records tell who failed
  int mine = ok ? 1 : 0, every = 0;
  MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, ctrl_);
  if (!every && ok && error_.empty()) agreed_failure_ = true;  // another rank's task failed: stop here too
  return every != 0;
}

int MpiSession::create_context(const std::string& name, const std::vector<int>& workers, const char* policy) {
  return create_sched_ctx(name, workers, policy);
}

void MpiSession::acquire(std::int32_t data, bool write) {
  const size_t d = size_t(data);
  if (!store_.base(data) || !whole_[d])
    throw std::runtime_error("rank " + std::to_string(world_.rank) + " holds no copy of '" + dag_.data[d].name +
                             "' to read between task parts");
  if (t_local) {  // a co-method's own data, on this rank
    if (tiles_dirty_[d]) submit_sync(d, true, true), tiles_dirty_[d] = 0;
    starpu_data_acquire(whole_[d], write ? STARPU_RW : STARPU_R);
    if (write && dag_.data[d].tiled()) whole_dirty_[d] = 1;
    return;
  }
  if (t_group >= 0) {  // every rank of the group alike: the owner's value on each of them
    if (tiles_dirty_[d]) submit_sync(d, true), tiles_dirty_[d] = 0;
    for (int k : place_.groups[size_t(t_group)])  // (data of others came with unite_begin)
      starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, whole_[d], k, nullptr, nullptr);
    starpu_data_acquire(whole_[d], write ? STARPU_RW : STARPU_R);
    if (write) t_written.push_back(data);
    return;
  }
  if (tiles_dirty_[d]) submit_sync(d, true), tiles_dirty_[d] = 0;
  starpu_mpi_get_data_on_all_nodes_detached(MPI_COMM_WORLD, whole_[d]);
  starpu_data_acquire(whole_[d], write ? STARPU_RW : STARPU_R);
  if (write) written_.push_back(data);
}

void MpiSession::release(std::int32_t data) {
  const size_t d = size_t(data);
  starpu_data_release(whole_[d]);
  if (t_local) return;
  if (t_group >= 0) {
    if (auto it = std::find(t_written.begin(), t_written.end(), data); it != t_written.end()) {
      t_written.erase(it);  // as below, in the group
      starpu_mpi_cache_flush(MPI_COMM_WORLD, whole_[d]);
      if (dag_.data[d].tiled()) whole_dirty_[d] = 1;
    }
    return;
  }
  if (auto it = std::find(written_.begin(), written_.end(), data); it != written_.end()) {
    // every rank wrote the same value (same control flow): the owner's copy is
    // current, the others' cached copies are dropped
    written_.erase(it);
    starpu_mpi_cache_flush(MPI_COMM_WORLD, whole_[d]);
    if (dag_.data[d].tiled()) whole_dirty_[d] = 1;
  }
}

void MpiSession::close(ExecResult& r) {
  if (!started_) return;
  started_ = false;
  // End of run. Not starpu_mpi_wait_for_all() first: it checks this rank's
  // posted requests once, then blocks its progress thread in MPI_Barrier. A
  // detached receive whose data acquire had not been granted yet at that check
  // (a rank with no task of its own reaches it at once) is then never posted,
  // and the sender waits forever for it: the 3- and 4-rank hangs after a
  // tensor written whole was read as tiles (the split's sends). Unregistering
  // a handle waits for every transfer on it while the progress threads are
  // free, so the barrier that follows has nothing left in flight.
  starpu_task_wait_for_all();
  for (size_t i = 0; i < whole_.size(); ++i) {
    for (auto h : tiles_[i]) starpu_data_unregister(h);
    if (whole_[i]) starpu_data_unregister(whole_[i]);
  }
  record_transfers(r);
  starpu_mpi_wait_for_all(MPI_COMM_WORLD);
  r.makespan_us = runner_->now_us();
  {
    std::vector<size_t> amounts(size_t(world_.size), 0);
    starpu_mpi_comm_amounts_retrieve(amounts.data());
    stats_.sent_to.assign(amounts.begin(), amounts.end());
  }
  for (auto*& task : local_)
    if (task) starpu_task_destroy(task), task = nullptr;
  {
    // StarPU-MPI prints its communication statistics at shutdown; they are in
    // the report already: keep them off stderr unless --verbose
    const int saved = opts_.verbose ? -1 : dup(2);
    if (saved >= 0) {
      std::fflush(stderr);
      if (FILE* null = std::fopen("/dev/null", "w")) {
        dup2(fileno(null), 2);
        std::fclose(null);
      }
    }
    starpu_mpi_shutdown();
    if (starpu_is_initialized()) starpu_shutdown();
    if (saved >= 0) {
      std::fflush(stderr);
      dup2(saved, 2);
      ::close(saved);
    }
  }
  running_board_close(opts_.run_dir, world_.rank);
  if (!temp_home_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_home_, ec);
  }
  runner_->finish(r);
  if (!error_.empty()) {
    r.ok = false;
    r.error = error_;
  } else if (agreed_failure_ && r.ok) {
    r.ok = false;  // the failing rank's record carries the error; this one only stopped with it
    r.error = "rank " + std::to_string(world_.rank) + ": stopped: a task failed on another rank";
  }
}

void MpiSession::submit_sync(size_t di, bool join, bool local) {
  std::vector<starpu_data_descr> descr;
  for (auto h : tiles_[di]) descr.push_back({h, join ? STARPU_R : STARPU_W});
  descr.push_back({whole_[di], join ? STARPU_W : STARPU_R});
  if (local) {
    starpu_task* task = starpu_task_build(&sync_cl_, STARPU_DATA_MODE_ARRAY, descr.data(), int(descr.size()), 0);
    if (task && starpu_task_submit(task) != 0) {
      std::lock_guard<std::mutex> lock(err_mu_);
      error_ = "rank " + std::to_string(world_.rank) + ": cannot submit a join/split task";
    }
    return;
  }
  const int on = owners_[di][0];
  starpu_task* task = starpu_mpi_task_build(MPI_COMM_WORLD, &sync_cl_, STARPU_EXECUTE_ON_NODE, on,
                                            STARPU_DATA_MODE_ARRAY, descr.data(), int(descr.size()), 0);
  if (task && starpu_task_submit(task) != 0) {
    std::lock_guard<std::mutex> lock(err_mu_);
    error_ = "rank " + std::to_string(world_.rank) + ": cannot submit a join/split task";
  }
  starpu_mpi_task_post_build(MPI_COMM_WORLD, &sync_cl_, STARPU_EXECUTE_ON_NODE, on, STARPU_DATA_MODE_ARRAY,
                             descr.data(), int(descr.size()), 0);
}

bool MpiSession::operands(std::int32_t id, std::vector<starpu_data_descr>& descr, bool local, std::string& err) {
  const TaskNode& t = dag_.tasks[size_t(id)];
  TaskExec& ex = table_.execs[size_t(id)];
  descr.clear();
  std::vector<std::pair<starpu_data_handle_t, int>> seen;
  for (size_t k = 0; k < t.bindings.size(); ++k) {
    const Binding& b = t.bindings[k];
    if (b.ref.data < 0) continue;
    const size_t di = size_t(b.ref.data);
    if (!whole_[di]) {
      err = "rank " + std::to_string(world_.rank) + ": task " + std::to_string(t.id) + " uses '" +
            dag_.data[di].name + "', which has no storage";
      return false;
    }
    starpu_data_handle_t h;
    if (b.ref.tile >= 0) {
      if (whole_dirty_[di]) submit_sync(di, false, local), whole_dirty_[di] = 0;
      h = tiles_[di][size_t(b.ref.tile)];
    } else {
      if (tiles_dirty_[di]) submit_sync(di, true, local), tiles_dirty_[di] = 0;
      h = whole_[di];
    }
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == h; });
    if (it != seen.end()) {
      descr[size_t(it->second)].mode = starpu_data_access_mode(descr[size_t(it->second)].mode | starpu_mode(b.mode));
      ex.slot[k] = std::int8_t(it->second);
      continue;
    }
    if (descr.size() >= 127) {
      err = "task " + std::to_string(t.id) + " has more than 127 operands";
      return false;
    }
    seen.emplace_back(h, int(descr.size()));
    ex.slot[k] = std::int8_t(descr.size());
    descr.push_back({h, starpu_mode(b.mode)});
  }
  return true;
}

starpu_task* MpiSession::submit_local(std::int32_t id, int context, int priority, std::string& err) {
  std::vector<starpu_data_descr> descr;
  if (!operands(id, descr, true, err)) return nullptr;
  const TaskNode& t = dag_.tasks[size_t(id)];
  starpu_task* task = starpu_task_build(&by_comp_[t.comp]->cl, STARPU_DATA_MODE_ARRAY, descr.data(), int(descr.size()), 0);
  if (!task) {
    err = "rank " + std::to_string(world_.rank) + ": cannot build the task of component " + t.comp->name;
    return nullptr;
  }
  if (err = submit_waited(task, id, context, priority); !err.empty()) return nullptr;
  mark_written(t);
  return task;
}

std::string MpiSession::submit_waited(starpu_task* task, std::int32_t id, int context, int priority) {
  task->detach = 0;
  if (context > 0) task->sched_ctx = unsigned(context);
  task->priority = priority;
  std::string e = submit_built(task, id);
  if (!e.empty()) {
    local_[size_t(id)] = nullptr;
    starpu_task_destroy(task);
  }
  return e;
}

std::string MpiSession::submit_built(starpu_task* task, std::int32_t id) {
  const TaskNode& t = dag_.tasks[size_t(id)];
  task->cl_arg = &table_.execs[size_t(id)];
  task->cl_arg_free = 0;
  task->where = std::int32_t(table_.execs[size_t(id)].where);
  task->destroy = 0;
  std::vector<starpu_task*> deps;
  for (auto p : t.preds)
    if (local_[size_t(p)]) deps.push_back(local_[size_t(p)]);
  if (!deps.empty()) starpu_task_declare_deps_array(task, unsigned(deps.size()), deps.data());
  local_[size_t(id)] = task;
  if (int ret = starpu_task_submit(task); ret != 0)
    return "rank " + std::to_string(world_.rank) + ": starpu_task_submit failed for component " + t.comp->name +
           (ret == -ENODEV ? ": no worker can run it" : ": " + std::string(std::strerror(-ret)));
  return "";
}

void MpiSession::mark_written(const TaskNode& t) {
  for (const Binding& b : t.bindings) {
    if (b.ref.data < 0 || b.mode == Access::read || !dag_.data[size_t(b.ref.data)].tiled()) continue;
    (b.ref.tile >= 0 ? tiles_dirty_ : whole_dirty_)[size_t(b.ref.data)] = 1;
  }
}

starpu_task* MpiSession::submit(std::int32_t id, std::vector<starpu_data_descr>& descr, std::string& err, bool waited,
                    int context, int priority) {
  const TaskNode& t = dag_.tasks[size_t(id)];
  if (!operands(id, descr, false, err)) return nullptr;
  // where it moves least (owner computes on ties); saving happens once, on
  // rank 0 (outputs gathered there); the join/split no-ops above are what
  // ymlopt estimate replays
  const int xrank = task_rank(dag_, t, owners_);
  starpu_codelet* cl = &by_comp_[t.comp]->cl;
  starpu_task* task = starpu_mpi_task_build(MPI_COMM_WORLD, cl, STARPU_EXECUTE_ON_NODE, xrank, STARPU_DATA_MODE_ARRAY,
                                            descr.data(), int(descr.size()), 0);
  if (task) {
    if (std::string e = waited ? submit_waited(task, id, context, priority) : submit_built(task, id); !e.empty()) {
      err = std::move(e);
      if (!waited) local_[size_t(id)] = nullptr, starpu_task_destroy(task);
      task = nullptr;
    }
  }
  starpu_mpi_task_post_build(MPI_COMM_WORLD, cl, STARPU_EXECUTE_ON_NODE, xrank, STARPU_DATA_MODE_ARRAY, descr.data(),
                             int(descr.size()), 0);
  mark_written(t);
  return task;
}

}  // namespace ymlopt::starpu_mpi
