// MpiSession's rank groups (unite::RankGroups): the co-methods of a top-level
// unite on groups of ranks, their agreements, exchange messages and the
// unite's end.
#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <stdexcept>
#include <thread>

#include "session.hpp"

namespace ymlopt::starpu_mpi {
namespace {
constexpr int kPostTag = 1, kDoneTag = 2;  // on the exchange communicator
}  // namespace

bool MpiSession::run_comethod(std::int32_t first, std::int32_t end, int context, int priority) {
  std::vector<std::int32_t> part;
  const std::vector<std::int32_t>& ids = order_.range(first, end, part);
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

void MpiSession::agree_part(std::int32_t cm, std::string& err) {
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

void MpiSession::set_comethod(std::int32_t region) {
  t_local = false, t_group = -1;
  if (region < 0) return;
  const std::int32_t g = place_.region_group[size_t(region)];
  if (place_.groups[size_t(g)].size() < 2) t_local = true;
  else t_group = g;
}

std::vector<std::byte> MpiSession::share(std::vector<std::byte> bytes) {
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

double MpiSession::group_sum(double v) {
  if (t_group < 0) return v;
  double all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_DOUBLE, MPI_SUM, group_comms_[size_t(t_group)]);
  return all;
}

void MpiSession::comethod_end() {
  if (t_group < 0) return;
  for (size_t d = 0; d < whole_.size(); ++d) {
    if (place_.data_group[d] != t_group || !whole_[d]) continue;
    if (tiles_dirty_[d]) submit_sync(d, true), tiles_dirty_[d] = 0;
    if (whole_dirty_[d]) submit_sync(d, false), whole_dirty_[d] = 0;
  }
}

void MpiSession::unite_begin(std::int32_t region) {
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
                                                              : task_rank(dag_, dag_.tasks[size_t(t)], owners_);
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

void MpiSession::post(std::vector<std::byte> msg) {
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

std::vector<std::vector<std::byte>> MpiSession::poll() {
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

std::vector<std::vector<std::byte>> MpiSession::unite_end(std::int32_t /*region*/, std::vector<std::byte> mine) {
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

bool MpiSession::copy(std::int32_t from, std::int32_t to) {
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

std::vector<std::byte> MpiSession::receive(const MPI_Status& st) {
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  std::vector<std::byte> b(size_t(std::max(n, 0)));
  MPI_Recv(b.data(), n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, xchg_, MPI_STATUS_IGNORE);
  return b;
}

void MpiSession::reap_sent() {
  std::erase_if(sent_, [](Sent& s) {
    int flag = 0;
    MPI_Test(&s.request, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  });
}

}  // namespace ymlopt::starpu_mpi
