#include "starpu_mpi_backend.hpp"
#include "starpu_bind.hpp"
#include "starpu_task.hpp"

#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <numeric>
#include <stdexcept>
#include <chrono>
#include <thread>

namespace ymlopt {

// ---------------------------------------------------------------- MPI world

namespace {
bool g_we_initialised = false;
bool g_finalised = false;
}  // namespace

MpiWorld mpi_world_init() {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED)
      throw std::runtime_error("this MPI library does not provide MPI_THREAD_SERIALIZED (StarPU-MPI needs it)");
    g_we_initialised = true;
  } else {
    MPI_Query_thread(&provided);
  }
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  w.thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  return w;
}

void mpi_world_finalize() {
  if (!g_we_initialised || g_finalised) return;
  g_finalised = true;
  MPI_Finalize();
}

void mpi_world_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::vector<std::string> mpi_gather_strings(const std::string& mine) {
  const MpiWorld w = mpi_world_init();
  const int len = int(mine.size());
  std::vector<int> lens(size_t(w.rank == 0 ? w.size : 0));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> displs(lens.size(), 0);
  for (size_t i = 1; i < lens.size(); ++i) displs[i] = displs[i - 1] + lens[i - 1];
  std::string all(lens.empty() ? 0 : size_t(displs.back() + lens.back()), '\0');
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i) out.push_back(all.substr(size_t(displs[i]), size_t(lens[i])));
  return out;
}

std::string mpi_broadcast_string(const std::string& from_root) {
  mpi_world_init();
  int len = int(from_root.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string s = from_root;
  s.resize(size_t(len));
  MPI_Bcast(s.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return s;
}

bool mpi_all_ok(bool mine) {
  mpi_world_init();
  int v = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all != 0;
}

bool mpi_broadcast_flag(bool from_root) {
  mpi_world_init();
  int v = from_root ? 1 : 0;
  MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return v != 0;
}

// ---------------------------------------------------------------- executor

namespace {

// What each rank is running, for the message when a rank dies: every rank maps
// RUN_DIR/rank-N.running (one int64 per worker: task id + 1 while it runs, then
// -(task id + 1) until the next one starts, 0 before any) and
// its workers write it around each task; rank 0 maps all ranks' files and, when
// the launcher terminates the job (SIGTERM after a rank died), prints what each
// rank was running with write(2) (the handler formats nothing: the lines are
// made before the run). The files are removed after a run that ends normally.
// On one node the page cache makes a dead rank's last writes visible; across
// nodes it is best effort.
struct RunningBoard {
  std::int64_t* slots = nullptr;  // this rank's
  size_t nworkers = 0;
};
RunningBoard g_board;
std::vector<std::pair<const std::int64_t*, size_t>> g_all_boards;  // rank 0: every rank's
std::vector<std::string> g_task_lines;  // "task 'name' (component, file:line)\n"
struct sigaction g_old_term;

void write_all(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = write(2, p, n);
    if (k <= 0) return;
    p += k, n -= size_t(k);
  }
}

void on_terminate(int sig) {
  static const char head[] = "ymlopt: the job is being terminated; what each rank was running:\n";
  write_all(head, sizeof head - 1);
  for (size_t r = 0; r < g_all_boards.size(); ++r) {
    const auto [slots, n] = g_all_boards[r];
    if (!slots) continue;
    for (size_t w = 0; w < n; ++w) {
      const std::int64_t raw = __atomic_load_n(&slots[w], __ATOMIC_RELAXED);
      const std::int64_t v = raw < 0 ? -raw : raw;
      if (v == 0 || size_t(v - 1) >= g_task_lines.size()) continue;
      char buf[64];
      int len = 0;
      char digits[24];
      int nd = 0;
      size_t x = r;
      do digits[nd++] = char('0' + x % 10), x /= 10;
      while (x && nd < 20);
      for (const char* c = "  rank "; *c; ++c) buf[len++] = *c;
      while (nd) buf[len++] = digits[--nd];
      buf[len++] = ':';
      buf[len++] = ' ';
      for (const char* c = raw < 0 ? "idle, last ran " : "running "; *c; ++c) buf[len++] = *c;
      write_all(buf, size_t(len));
      const std::string& line = g_task_lines[size_t(v - 1)];
      write_all(line.data(), line.size());
    }
  }
  sigaction(sig, &g_old_term, nullptr);
  raise(sig);
}

std::int64_t* map_board(const std::string& path, size_t n, bool create) {
  const int fd = open(path.c_str(), create ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY, 0644);
  if (fd < 0) return nullptr;
  const size_t bytes = std::max<size_t>(n, 1) * sizeof(std::int64_t);
  if (create && ftruncate(fd, off_t(bytes)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<std::int64_t*>(p);
}

void cpu_trampoline(void* buffers[], void* cl_arg) {
  auto* ex = static_cast<TaskExec*>(cl_arg);
  const std::span<const TensorView> views = bind_buffers(buffers, *ex);
  const int w = starpu_worker_get_id();
  const bool mark = g_board.slots && w >= 0 && size_t(w) < g_board.nworkers;
  if (mark) __atomic_store_n(&g_board.slots[w], std::int64_t(ex->node->id) + 1, __ATOMIC_RELAXED);
  ex->runner->run(*ex->node, views, w);
  if (mark) __atomic_store_n(&g_board.slots[w], -(std::int64_t(ex->node->id) + 1), __ATOMIC_RELAXED);
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

// Set in the threads of co-methods (Session::set_comethod): on a one-rank
// group t_local, on a group of several t_group (its index in UnitePlacement::groups).
thread_local bool t_local = false;
thread_local std::int32_t t_group = -1;
thread_local std::vector<std::int32_t> t_written;  // (t_group) acquired for writing, not released yet
constexpr int kPostTag = 1, kDoneTag = 2;  // on the exchange communicator


// One StarPU-MPI run on this rank, task part by task part (run_program's
// Session): the whole static DAG in one part (execute()), or the parts that a
// workflow's runtime loops ask for. Every rank runs the same control flow: it
// submits the same parts in the same order, reads loop conditions from the
// owner's value (starpu_mpi_get_data_on_all_nodes_detached), and after every
// part the ranks agree on its success, so a kernel that throws on one rank
// stops the loop on all of them instead of leaving the others waiting for data.
class MpiSession final : public Session {
 public:
  MpiSession(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress, MpiRankStats& stats)
      : dag_(dag), store_(store), opts_(opts), progress_(progress), stats_(stats) {}
  ~MpiSession() override {
    if (ctrl_ != MPI_COMM_NULL) MPI_Comm_free(&ctrl_);
    if (xchg_ != MPI_COMM_NULL) MPI_Comm_free(&xchg_);
    for (auto& c : group_comms_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }

  // starpu_mpi_init, codelets, handles, the running board; false with r.error set.
  bool start(ExecResult& r, bool control) {
    world_ = mpi_world_init();
    stats_ = MpiRankStats{};
    stats_.rank = world_.rank;
    stats_.size = world_.size;
    r.scheduler = opts_.sched;
    r.runtime = "StarPU-MPI " + std::to_string(STARPU_MAJOR_VERSION) + "." + std::to_string(STARPU_MINOR_VERSION) + "." +
                std::to_string(STARPU_RELEASE_VERSION) + ", " + std::to_string(world_.size) + " rank" +
                (world_.size == 1 ? "" : "s");
    // the ranks' agreement after each part goes through a communicator of its
    // own, from this thread while StarPU-MPI's progress thread uses MPI too
    if (control) {
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
    }
    // one perf-model directory per rank (ranks must not share one); rank 0's in
    // the run directory, the others' in a temporary directory removed afterwards
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
    conf.nopencl = 0;
#ifndef STARPU_USE_CUDA
    conf.ncuda = 0;
#endif
    if (int ret = starpu_mpi_init_conf(nullptr, nullptr, 0, MPI_COMM_WORLD, &conf); ret != 0) {
      r.error = "rank " + std::to_string(world_.rank) + ": starpu_mpi_init_conf failed: " + std::strerror(-ret);
      return false;
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

    // codelets: one per component (variable buffer count: operands come as a
    // descriptor array), and the no-op join/split
    for (const auto& t : dag_.tasks) {
      if (by_comp_.count(t.comp)) continue;
      Codelet& c = codelets_.emplace_back();
      c.init(*t.comp, cpu_trampoline, model_based_scheduler(opts_.sched));
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

    // handles: every tensor and every tile its own handle, with an owner and a tag
    owners_ = data_owners(dag_, world_.size);
    const size_t nd = dag_.data.size();
    whole_.assign(nd, nullptr);
    tiles_.assign(nd, {});
    starpu_mpi_tag_t tag = 1;
    // data this rank does not hold (DataStore base null: neither owned nor
    // replicated) have no home buffer: StarPU allocates a copy on first receive
    auto register_one = [&](starpu_data_handle_t& h, char* ptr, const DataDecl& d, std::int64_t rows, std::int64_t cols,
                            std::int32_t owner) {
      if (ptr)
        starpu_matrix_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(ptr), std::uint32_t(d.ld),
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
    for (size_t i = 0; i < nd; ++i) {
      const DataDecl& d = dag_.data[i];
      stats_.owners[i] = owners_[i][0];
      if (!d.format.empty()) continue;  // stored compressed: tasks read its companions
      char* base = static_cast<char*>(store_.base(std::int32_t(i)));
      register_one(whole_[i], base, d, d.rows, d.cols, owners_[i][0]);
      starpu_data_set_name(whole_[i], d.name.c_str());
      if (!d.tiled()) continue;
      tiles_[i].resize(size_t(d.ntiles()));
      for (std::int64_t t = 0; t < d.ntiles(); ++t) {
        const std::int64_t tr = t / d.ntile_c, tc = t % d.ntile_c;
        char* p = base ? base + (size_t(d.tile_row0(tr)) * size_t(d.ld) + size_t(d.tile_col0(tc))) * dtype_size(d.dtype)
                       : nullptr;
        register_one(tiles_[i][size_t(t)], p, d, d.tile_nrows(tr), d.tile_ncols(tc), owners_[i][size_t(1 + t)]);
      }
    }

    // aligned clocks: every rank's TaskRunner starts after this barrier
    if (world_.size > 1 && !opts_.run_dir.empty()) {
      g_task_lines.clear();
      for (const auto& t : dag_.tasks)
        g_task_lines.push_back("task " + (t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : "'" + t.label + "'") +
                               " (component " + t.comp->name + ", " + (t.loc.file ? *t.loc.file : dag_.file) + ":" +
                               std::to_string(t.loc.line) + ")\n");
      g_board.nworkers = std::min(r.workers.size(), kBoardSlots);
      g_board.slots = map_board(board_path(world_.rank), kBoardSlots, true);
    }
    starpu_mpi_barrier(MPI_COMM_WORLD);
    if (world_.rank == 0 && g_board.slots) {
      g_all_boards.clear();
      for (int k = 0; k < world_.size; ++k)
        g_all_boards.emplace_back(map_board(board_path(k), kBoardSlots, false), kBoardSlots);
      struct sigaction sa {};
      sa.sa_handler = on_terminate;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGTERM, &sa, &g_old_term);
    }
    runner_ = std::make_unique<TaskRunner>(dag_, opts_, progress_);
    const size_t nt = dag_.tasks.size();
    table_.build(dag_, *runner_);
    local_.assign(nt, nullptr);
    pos_.resize(nt);
    for (size_t k = 0; k < dag_.topo_order.size(); ++k) pos_[size_t(dag_.topo_order[k])] = std::int32_t(k);
    tiles_dirty_.assign(nd, 0);
    whole_dirty_.assign(nd, 0);
    return true;
  }

  bool run(std::int32_t first, std::int32_t end, int context, int priority) override {
    if (t_local || t_group >= 0) return run_comethod(first, end, context, priority);
    const bool all = first == 0 && end == std::int32_t(dag_.tasks.size());
    std::vector<std::int32_t> ids;
    if (!all) {
      for (std::int32_t i = first; i < end; ++i) ids.push_back(i);
      std::sort(ids.begin(), ids.end(), [&](auto a, auto b) { return pos_[size_t(a)] < pos_[size_t(b)]; });
    }
    const auto& order = all ? dag_.topo_order : ids;
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

  // A part of a co-method, waited for task by task (other co-methods of this
  // rank submit beside it), in the co-method's scheduling context
  // (mapping="contexts"/"fair") with its priority. On a one-rank group plain
  // StarPU tasks. On a group of several ranks, every rank of the group alike:
  // StarPU-MPI tasks on the owners of their data (all in the group, or brought
  // there by unite_begin); then the group agrees on the part: a task that
  // failed on one rank fails the co-method on all of them, with its message.
  bool run_comethod(std::int32_t first, std::int32_t end, int context, int priority) {
    std::vector<std::int32_t> ids;
    for (std::int32_t i = first; i < end; ++i) ids.push_back(i);
    std::sort(ids.begin(), ids.end(), [&](auto a, auto b) { return pos_[size_t(a)] < pos_[size_t(b)]; });
    std::string err;
    std::vector<starpu_task*> mine;
    std::vector<starpu_data_descr> descr;
    for (auto id : ids) {
      starpu_task* task = t_group >= 0 ? submit(id, descr, err, true, context, priority) : submit_local(id, context, priority, err);
      if (!err.empty()) break;
      if (task) mine.push_back(task);  // (none where another rank of the group runs it)
    }
    for (auto* task : mine)
      if (starpu_task_wait(task) != 0 && err.empty()) err = "rank " + std::to_string(world_.rank) + ": a co-method's task could not be waited for";
    for (auto id : ids)
      if (local_[size_t(id)]) starpu_task_destroy(local_[size_t(id)]), local_[size_t(id)] = nullptr;
    if (t_group >= 0 && !ids.empty()) agree_part(dag_.tasks[size_t(ids[0])].comethod, err);
    if (!err.empty()) {
      std::lock_guard<std::mutex> lock(err_mu_);
      if (error_.empty()) error_ = err;
    }
    return err.empty() && !runner_->cancelled();
  }

  // The group's verdict on a part of co-method `cm`: the first failing rank's
  // message, on every rank of it (the co-method fails there too).
  void agree_part(std::int32_t cm, std::string& err) {
    std::string why = err;
    if (why.empty() && cm >= 0 && runner_->comethod_failed(cm)) why = runner_->comethod_error(cm);
    MPI_Comm comm = group_comms_[size_t(t_group)];
    int ok = why.empty() ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (all) return;
    int len = int(why.size()), n = 0;
    MPI_Comm_size(comm, &n);
    std::vector<int> lens(static_cast<size_t>(n)), displs(static_cast<size_t>(n), 0);
    MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
    for (size_t k = 1; k < lens.size(); ++k) displs[k] = displs[k - 1] + lens[k - 1];
    std::string flat(size_t(displs.back() + lens.back()), '\0');
    MPI_Allgatherv(why.data(), len, MPI_CHAR, flat.data(), lens.data(), displs.data(), MPI_CHAR, comm);
    const auto& ranks = place_.groups[size_t(t_group)];
    for (size_t k = 0; k < lens.size() && why.empty(); ++k)
      if (lens[k] > 0) why = "rank " + std::to_string(ranks[k]) + ": " + flat.substr(size_t(displs[k]), size_t(lens[k]));
    if (cm >= 0) runner_->fail_comethod(cm, why);
    else if (err.empty()) err = why;
  }

  int rank() const override { return world_.rank; }
  int ranks() const override { return world_.size; }
  void set_comethod(std::int32_t region) override {
    t_local = false, t_group = -1;
    if (region < 0) return;
    const std::int32_t g = place_.region_group[size_t(region)];
    if (place_.groups[size_t(g)].size() < 2) t_local = true;
    else t_group = g;
  }
  bool leads() const override { return t_group < 0 || place_.groups[size_t(t_group)][0] == world_.rank; }
  int group_size() const override { return t_group < 0 ? 1 : int(place_.groups[size_t(t_group)].size()); }
  std::vector<std::byte> share(std::vector<std::byte> bytes) override {
    if (t_group < 0) return bytes;
    MPI_Comm comm = group_comms_[size_t(t_group)];
    std::uint64_t n = bytes.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm);
    if (n > std::uint64_t(std::numeric_limits<int>::max()))
      throw std::runtime_error("a co-method's exchange of " + std::to_string(n) + " bytes is too large to share in its group");
    bytes.resize(size_t(n));
    MPI_Bcast(bytes.data(), int(n), MPI_BYTE, 0, comm);
    return bytes;
  }
  double group_sum(double v) override {
    if (t_group < 0) return v;
    double all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_DOUBLE, MPI_SUM, group_comms_[size_t(t_group)]);
    return all;
  }
  // The co-method's tiled data current in both views (tensor and tiles), on
  // their owners in the group, as unite_end expects of a one-rank group.
  void comethod_end() override {
    if (t_group < 0) return;
    for (size_t d = 0; d < whole_.size(); ++d) {
      if (place_.data_group[d] != t_group || !whole_[d]) continue;
      if (tiles_dirty_[d]) submit_sync(d, true), tiles_dirty_[d] = 0;
      if (whole_dirty_[d]) submit_sync(d, false), whole_dirty_[d] = 0;
    }
  }

  // Every rank alike, in task order: what a co-method's tasks read and another
  // rank owns is sent to the co-method's rank (joined or split first where the
  // view read is stale), so its tasks there need no communication.
  void unite_begin(std::int32_t region) override {
    const Region& g = dag_.regions[size_t(region)];
    std::vector<std::pair<starpu_data_handle_t, int>> moved;
    // data d (tile `tile`, -1 the tensor), owned outside `group`, to rank `to`
    auto bring = [&](size_t di, std::int64_t tile, std::int32_t group, int to) {
      if (!whole_[di] || place_.data_group[di] == group) return;  // the co-method's own data
      starpu_data_handle_t h;
      int owner;
      if (tile >= 0) {
        if (whole_dirty_[di]) submit_sync(di, false), whole_dirty_[di] = 0;
        h = tiles_[di][size_t(tile)], owner = owners_[di][size_t(1 + tile)];
      } else {
        if (tiles_dirty_[di]) submit_sync(di, true), tiles_dirty_[di] = 0;
        h = whole_[di], owner = owners_[di][0];
      }
      if (owner == to) return;
      const std::pair<starpu_data_handle_t, int> key{h, to};
      if (std::find(moved.begin(), moved.end(), key) != moved.end()) return;
      moved.push_back(key);
      starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, h, to, nullptr, nullptr);
    };
    for (std::int32_t t = g.first_task; t < g.end_task; ++t) {
      const std::int32_t group = place_.task_group[size_t(t)];
      if (group < 0) continue;
      // on a group of several ranks, where StarPU-MPI will run the task
      const int rank = place_.groups[size_t(group)].size() < 2 ? place_.task_rank[size_t(t)]
                                                                : task_rank(dag_.tasks[size_t(t)], owners_);
      for (const Binding& b : dag_.tasks[size_t(t)].bindings)
        if (b.ref.data >= 0) bring(size_t(b.ref.data), b.ref.tile, group, rank);
    }
    // what the control flow of a co-method on several ranks reads (loop
    // conditions, published data and scores): to every rank of its group
    std::vector<std::int32_t> under;
    std::function<void(std::int32_t)> walk = [&](std::int32_t r) {
      for (const auto& it : dag_.regions[size_t(r)].items)
        if (it.region >= 0) under.push_back(it.region), walk(it.region);
    };
    walk(region);
    for (std::int32_t r : under) {
      const std::int32_t group = place_.region_group[size_t(r)];
      if (group < 0 || place_.groups[size_t(group)].size() < 2) continue;
      const Region& c = dag_.regions[size_t(r)];
      std::vector<std::int32_t> read(c.cond_data.begin(), c.cond_data.end());
      if (c.kind == Region::Kind::publish) read.insert(read.end(), c.data.begin(), c.data.end()), read.insert(read.end(), c.scores.begin(), c.scores.end());
      for (auto d : read)
        for (int k : place_.groups[size_t(group)]) bring(size_t(d), -1, group, k);
    }
  }

  void post(std::vector<std::byte> msg) override {
    if (msg.size() > size_t(std::numeric_limits<int>::max()))
      throw std::runtime_error("a published result of " + std::to_string(msg.size()) + " bytes is too large to send");
    auto bytes = std::make_shared<std::vector<std::byte>>(std::move(msg));
    std::lock_guard<std::mutex> lock(xmu_);
    reap_sent();
    for (int k = 0; k < world_.size; ++k) {
      if (k == world_.rank) continue;
      Sent& sent = sent_.emplace_back(Sent{bytes, MPI_REQUEST_NULL});
      MPI_Isend(bytes->data(), int(bytes->size()), MPI_BYTE, k, kPostTag, xchg_, &sent.request);
    }
  }

  std::vector<std::vector<std::byte>> poll() override {
    std::lock_guard<std::mutex> lock(xmu_);
    std::vector<std::vector<std::byte>> out = std::move(late_);
    late_.clear();
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kPostTag, xchg_, &flag, &st);
      if (!flag) break;
      out.push_back(receive(st));
    }
    reap_sent();
    return out;
  }

  std::vector<std::vector<std::byte>> unite_end(std::int32_t /*region*/, std::vector<std::byte> mine) override {
    // 1. each rank tells the others that its co-methods ended, and receives
    // their posts until each has said so: nothing of this unite is left in
    // flight (MPI keeps one sender's messages in order), and every rank's board
    // gets every publish (a gather after the unite reads the same entries)
    {
      std::lock_guard<std::mutex> lock(xmu_);
      for (int k = 0; k < world_.size; ++k) {
        if (k == world_.rank) continue;
        Sent& sent = sent_.emplace_back(Sent{nullptr, MPI_REQUEST_NULL});
        MPI_Isend(nullptr, 0, MPI_BYTE, k, kDoneTag, xchg_, &sent.request);
      }
      std::vector<char> done(size_t(world_.size), 0);
      done[size_t(world_.rank)] = 1;
      for (int left = world_.size - 1; left > 0;) {
        bool any = false;
        for (int k = 0; k < world_.size; ++k) {
          if (done[size_t(k)]) continue;
          int flag = 0;
          MPI_Status st;
          MPI_Iprobe(k, MPI_ANY_TAG, xchg_, &flag, &st);
          if (!flag) continue;
          any = true;
          auto msg = receive(st);
          if (st.MPI_TAG == kDoneTag) done[size_t(k)] = 1, --left;
          else late_.push_back(std::move(msg));  // the next poll() returns them
        }
        if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      for (auto& sent : sent_) MPI_Wait(&sent.request, MPI_STATUS_IGNORE);
      sent_.clear();
    }
    // 2. every rank's records
    const int len = int(mine.size());
    std::vector<int> lens(size_t(world_.size)), displs(size_t(world_.size), 0);
    MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, ctrl_);
    for (size_t k = 1; k < lens.size(); ++k) displs[k] = displs[k - 1] + lens[k - 1];
    std::vector<std::byte> flat(size_t(displs.back() + lens.back()));
    MPI_Allgatherv(mine.data(), len, MPI_BYTE, flat.data(), lens.data(), displs.data(), MPI_BYTE, ctrl_);
    std::vector<std::vector<std::byte>> all;
    for (size_t k = 0; k < lens.size(); ++k)
      all.emplace_back(flat.begin() + displs[k], flat.begin() + displs[k] + lens[k]);
    // 3. what co-methods wrote, on their ranks without the other ranks knowing:
    // every rank drops its cached copies (each view: on the co-method's rank the
    // tensor and its tiles share the memory that holds the latest values)
    starpu_task_wait_for_all();
    for (size_t d = 0; d < whole_.size(); ++d) {
      if (place_.data_rank[d] < 0 || !whole_[d]) continue;
      starpu_mpi_cache_flush(MPI_COMM_WORLD, whole_[d]);
      for (auto h : tiles_[d]) starpu_mpi_cache_flush(MPI_COMM_WORLD, h);
      tiles_dirty_[d] = whole_dirty_[d] = 0;
    }
    return all;
  }

  bool copy(std::int32_t from, std::int32_t to) override {
    const size_t f = size_t(from), d = size_t(to);
    if (t_local || t_group >= 0 || !whole_[f] || !whole_[d]) return false;
    if (tiles_dirty_[f]) submit_sync(f, true), tiles_dirty_[f] = 0;
    if (tiles_dirty_[d]) submit_sync(d, true), tiles_dirty_[d] = 0;  // orders the copy after the tiles' writes
    starpu_data_descr descr[2] = {{whole_[f], STARPU_R}, {whole_[d], STARPU_W}};
    const int on = owners_[d][0];
    starpu_task* task = starpu_mpi_task_build(MPI_COMM_WORLD, &copy_cl_, STARPU_EXECUTE_ON_NODE, on,
                                              STARPU_DATA_MODE_ARRAY, descr, 2, 0);
    if (task && starpu_task_submit(task) != 0) error_ = "rank " + std::to_string(world_.rank) + ": cannot submit a copy";
    starpu_mpi_task_post_build(MPI_COMM_WORLD, &copy_cl_, STARPU_EXECUTE_ON_NODE, on, STARPU_DATA_MODE_ARRAY, descr, 2, 0);
    if (dag_.data[d].tiled()) whole_dirty_[d] = 1;
    return true;
  }

  // Contexts hold the co-methods of this rank (their tasks are local); the
  // SPMD tasks and StarPU-MPI's own stay in the global context.
  int create_context(const std::string& name, const std::vector<int>& workers, const char* policy) override {
    return create_sched_ctx(name, workers, policy);
  }
  void delete_context(int context) override { delete_sched_ctx(context); }
  int num_workers() const override { return int(starpu_worker_get_count()); }

  // Every rank reads the owner's latest value (a loop condition is evaluated
  // identically everywhere): joins dirty tiles, fetches the tensor on all ranks.
  void acquire(std::int32_t data, bool write) override {
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
  void release(std::int32_t data) override {
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
  TaskRunner& runner() override { return *runner_; }

  void close(ExecResult& r) override {
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
    if (g_board.slots) {
      if (world_.rank == 0) {
        sigaction(SIGTERM, &g_old_term, nullptr);
        for (auto& [slots, n] : g_all_boards)
          if (slots) munmap(const_cast<std::int64_t*>(slots), std::max<size_t>(n, 1) * sizeof(std::int64_t));
        g_all_boards.clear();
      }
      munmap(g_board.slots, kBoardSlots * sizeof(std::int64_t));
      g_board = RunningBoard{};
      std::remove(board_path(world_.rank).c_str());
    }
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

 private:
  static constexpr size_t kBoardSlots = 64;  // workers per rank a board can show (the file's fixed size)
  std::string board_path(int rank) const { return opts_.run_dir + "/rank-" + std::to_string(rank) + ".running"; }

  // the exchange messages (xmu_ held)
  std::vector<std::byte> receive(const MPI_Status& st) {
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    std::vector<std::byte> b(size_t(std::max(n, 0)));
    MPI_Recv(b.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, xchg_, MPI_STATUS_IGNORE);
    return b;
  }
  void reap_sent() {
    std::erase_if(sent_, [](Sent& s) {
      int flag = 0;
      MPI_Test(&s.request, &flag, MPI_STATUS_IGNORE);
      return flag != 0;
    });
  }

  // join (tiles -> tensor) or split (tensor -> tiles): a no-op task on the
  // tensor's owner that moves the tiles
  // (local: a co-method's data, all on this rank: a plain task that only orders
  // the accesses)
  void submit_sync(size_t di, bool join, bool local = false) {
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

  // A task's operands: the tensor or tile handle of each bound port (one
  // descriptor per handle; a handle bound to two ports gets the union of their
  // modes), after the join/split its views need; false with `err` set.
  bool operands(std::int32_t id, std::vector<starpu_data_descr>& descr, bool local, std::string& err) {
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

  // A task of a co-method running on this rank: its data are this rank's, its
  // inputs were brought here (unite_begin), so it is a plain StarPU task.
  starpu_task* submit_local(std::int32_t id, int context, int priority, std::string& err) {
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

  // Submits a co-method's task, waited for by its part, in the co-method's
  // `context` with its `priority`; on failure destroys it and says why ("": submitted).
  std::string submit_waited(starpu_task* task, std::int32_t id, int context, int priority) {
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

  // Submits a task built for task `id` (kept after it ends: successors in the
  // same part declare dependencies on it) with the compiler's dependencies on
  // this rank's tasks of the part (tiles alias their tensor, and wait/notify
  // events carry no data; earlier parts have finished); the error, or "".
  std::string submit_built(starpu_task* task, std::int32_t id) {
    const TaskNode& t = dag_.tasks[size_t(id)];
    task->cl_arg = &table_.execs[size_t(id)];
    task->cl_arg_free = 0;
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

  // A tiled tensor written whole (or by tiles) has stale tiles (or a stale whole).
  void mark_written(const TaskNode& t) {
    for (const Binding& b : t.bindings) {
      if (b.ref.data < 0 || b.mode == Access::read || !dag_.data[size_t(b.ref.data)].tiled()) continue;
      (b.ref.tile >= 0 ? tiles_dirty_ : whole_dirty_)[size_t(b.ref.data)] = 1;
    }
  }

  // The StarPU-MPI task of task `id`, submitted by every rank that runs the
  // part: the task where it runs on this rank, else null (or with `err` set).
  // `waited`: a co-method's task on a group of several ranks (submit_waited).
  starpu_task* submit(std::int32_t id, std::vector<starpu_data_descr>& descr, std::string& err, bool waited = false,
                      int context = 0, int priority = 0) {
    const TaskNode& t = dag_.tasks[size_t(id)];
    if (!operands(id, descr, false, err)) return nullptr;
    // owner computes; saving happens once, on rank 0 (outputs gathered there);
    // the join/split no-ops above are what ymlopt estimate replays
    const int xrank = task_rank(t, owners_);
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
  std::vector<std::int32_t> pos_;    // position in topo_order
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

}  // namespace

ExecResult StarpuMpiExecutor::execute(const Dag& dag, DataStore& store, const ExecOptions& opts, Progress& progress) {
  ExecResult r;
  MpiSession s(dag, store, opts, progress, stats_);
  if (!s.start(r, false)) return r;
  s.run(0, std::int32_t(dag.tasks.size()), 0, 0);
  s.close(r);
  return r;
}

std::unique_ptr<Session> StarpuMpiExecutor::open(const Dag& dag, DataStore& store, const ExecOptions& opts,
                                                 Progress& progress, ExecResult& r) {
  // a data written in co-methods lives on their group: two groups cannot both write it
  if (const UnitePlacement up = unite_placement(dag, mpi_world_init().size); !up.conflict.empty()) {
    const SrcLoc& at = dag.regions[size_t(up.conflict_region)].loc;
    r.error = (at.file ? *at.file : dag.file) + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) +
              ": error: data " + up.conflict +
              " write it, and they run on different rank groups under starpu-mpi (a co-method's data live on its group): "
              "give them data of their own, or use --backend starpu or sequential";
    return nullptr;
  }
  auto s = std::make_unique<MpiSession>(dag, store, opts, progress, stats_);
  if (!s->start(r, true)) {
    s->close(r);
    return nullptr;
  }
  return s;
}

// ---------------------------------------------------------------- merging

nlohmann::json rank_result_json(const ExecResult& r, const MpiRankStats& s) {
  using nlohmann::json;
  json recs = json::array();
  for (size_t i = 0; i < r.records.size(); ++i) {
    const TaskRecord& rec = r.records[i];
    if (!rec.ran && std::int32_t(i) != r.failed_task) continue;
    json res = json::array();
    for (const auto& [k, v] : rec.results) res.push_back({k, v});
    recs.push_back({i, rec.worker, rec.start_us, rec.end_us, rec.ran, res});
  }
  // earlier runs of looped tasks, and the loops' iteration counts (the same on every rank)
  json repeats = json::array();
  for (const TaskRecord& rec : r.repeats)
    if (rec.ran) repeats.push_back({rec.task, rec.worker, rec.start_us, rec.end_us, rec.iteration});
  json loops = json::array();
  for (const auto& [region, it] : r.loop_iterations) loops.push_back({region, it});
  return {{"rank", s.rank},         {"ok", r.ok},
          {"error", r.error},       {"failed_task", r.failed_task},
          {"workers", r.workers},   {"makespan_us", r.makespan_us},
          {"runtime", r.runtime},   {"scheduler", r.scheduler},
          {"warnings", r.warnings}, {"sent_to", s.sent_to}, {"allocated_bytes", s.allocated_bytes},
          {"records", recs},        {"repeats", repeats},
          {"loops", loops},         {"placement", placement_json(last_starpu_placement())}};
}

MergedRun merge_rank_results(const Dag& dag, const std::vector<std::string>& per_rank_json) {
  using nlohmann::json;
  MergedRun m;
  ExecResult& out = m.result;
  out.records.assign(dag.tasks.size(), TaskRecord{});
  for (size_t i = 0; i < out.records.size(); ++i) out.records[i].task = std::int32_t(i);
  m.task_ranks.assign(dag.tasks.size(), -1);
  out.ok = true;
  const size_t n = per_rank_json.size();
  std::vector<std::uint64_t> received(n, 0);
  std::vector<json> ranks;
  for (const auto& s : per_rank_json) ranks.push_back(json::parse(s));
  for (size_t r = 0; r < n; ++r) {
    const auto sent = ranks[r]["sent_to"].get<std::vector<std::uint64_t>>();
    for (size_t d = 0; d < sent.size() && d < n; ++d) received[d] += sent[d];
  }
  double first_failure_us = 0;
  for (size_t r = 0; r < n; ++r) {
    const json& j = ranks[r];
    const std::int32_t offset = std::int32_t(out.workers.size());
    for (const auto& w : j["workers"]) out.workers.push_back(std::to_string(r) + ":" + w.get<std::string>());
    out.makespan_us = std::max(out.makespan_us, j["makespan_us"].get<double>());
    if (out.runtime.empty()) out.runtime = j["runtime"].get<std::string>(), out.scheduler = j["scheduler"].get<std::string>();
    for (const auto& w : j["warnings"]) {
      const std::string s = w.get<std::string>();
      if (std::find(out.warnings.begin(), out.warnings.end(), s) == out.warnings.end()) out.warnings.push_back(s);
    }
    double busy = 0;
    std::int64_t ran = 0;
    for (const auto& rec : j["records"]) {
      const auto id = rec[0].get<std::size_t>();
      if (id >= out.records.size()) continue;
      TaskRecord& t = out.records[id];
      const std::int32_t w = rec[1].get<std::int32_t>();
      t.worker = w >= 0 ? offset + w : -1;
      t.start_us = rec[2].get<double>();
      t.end_us = rec[3].get<double>();
      t.ran = rec[4].get<bool>();
      for (const auto& kv : rec[5]) t.results.emplace_back(kv[0].get<std::string>(), kv[1].get<double>());
      m.task_ranks[id] = std::int32_t(r);
      if (t.ran) busy += t.end_us - t.start_us, ++ran;
    }
    for (const auto& rec : j.value("repeats", json::array())) {
      TaskRecord t;
      t.task = rec[0].get<std::int32_t>();
      const std::int32_t w = rec[1].get<std::int32_t>();
      t.worker = w >= 0 ? offset + w : -1;
      t.start_us = rec[2].get<double>();
      t.end_us = rec[3].get<double>();
      t.iteration = rec[4].get<std::int32_t>();
      t.ran = true;
      busy += t.end_us - t.start_us, ++ran;
      out.repeats.push_back(std::move(t));
    }
    if (r == 0)
      for (const auto& l : j.value("loops", json::array()))
        out.loop_iterations.emplace_back(l[0].get<std::int32_t>(), l[1].get<std::int64_t>());
    std::uint64_t sent = 0;
    for (auto b : j["sent_to"]) sent += b.get<std::uint64_t>();
    m.bytes_moved += sent;
    m.ranks.push_back({{"rank", r},
                       {"workers", j["workers"]},
                       {"tasks_run", ran},
                       {"busy_us", busy},
                       {"makespan_us", j["makespan_us"]},
                       {"bytes_sent", sent},
                       {"bytes_received", received[r]},
                       {"allocated_bytes", j.value("allocated_bytes", std::uint64_t(0))},
                       {"status", j["ok"].get<bool>() ? "ok" : "failed"}});
    if (!j["ok"].get<bool>()) {
      const std::int32_t ft = j["failed_task"].get<std::int32_t>();
      // a rank that only stopped with another (runtime loops agree after each
      // part) names no task: the rank whose task failed gives the error
      const double when = ft >= 0 && size_t(ft) < out.records.size() ? out.records[size_t(ft)].start_us
                                                                      : std::numeric_limits<double>::infinity();
      if (out.ok || when < first_failure_us) {
        out.ok = false;
        out.failed_task = ft;
        const std::string e = j["error"].get<std::string>();
        out.error = e.rfind("rank ", 0) == 0 ? e : "rank " + std::to_string(r) + ": " + e;
        first_failure_us = when;
      }
    }
  }
  // the same error on every rank (a workflow the backend refuses) is the run's, not a rank's
  if (!out.ok && std::all_of(ranks.begin(), ranks.end(), [&](const json& j) {
        return !j["ok"].get<bool>() && j["failed_task"].get<std::int32_t>() < 0 && j["error"] == ranks[0]["error"];
      }))
    out.error = ranks[0]["error"].get<std::string>();
  merge_rank_placements(ranks, m.ranks, out.warnings);  // each rank's cpuset and workers; overlapping ranks
  return m;
}

}  // namespace ymlopt
