// The running boards (see progress.hpp).
#include "progress.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <utility>
#include <vector>

namespace ymlopt {
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

constexpr size_t kBoardSlots = 64;  // workers per rank a board can show (the file's fixed size)

std::string board_path(const std::string& run_dir, int rank) { return run_dir + "/rank-" + std::to_string(rank) + ".running"; }

}  // namespace

void running_board_open(const Dag& dag, const std::string& run_dir, int rank, std::size_t workers) {
  g_task_lines.clear();
  for (const auto& t : dag.tasks)
    g_task_lines.push_back("task " + (t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : "'" + t.label + "'") +
                           " (component " + t.comp->name + ", " + (t.loc.file ? *t.loc.file : dag.file) + ":" +
                           std::to_string(t.loc.line) + ")\n");
  g_board.nworkers = std::min(workers, kBoardSlots);
  g_board.slots = map_board(board_path(run_dir, rank), kBoardSlots, true);
}

void running_board_watch(const std::string& run_dir, int ranks) {
  if (!g_board.slots) return;
  g_all_boards.clear();
  for (int k = 0; k < ranks; ++k) g_all_boards.emplace_back(map_board(board_path(run_dir, k), kBoardSlots, false), kBoardSlots);
  struct sigaction sa {};
  sa.sa_handler = on_terminate;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &g_old_term);
}

void running_board_mark(int w, std::int32_t task, bool running) {
  if (!g_board.slots || w < 0 || size_t(w) >= g_board.nworkers) return;
  const std::int64_t v = std::int64_t(task) + 1;
  __atomic_store_n(&g_board.slots[w], running ? v : -v, __ATOMIC_RELAXED);
}

void running_board_close(const std::string& run_dir, int rank) {
  if (!g_board.slots) return;
  if (rank == 0) {
    sigaction(SIGTERM, &g_old_term, nullptr);
    for (auto& [slots, n] : g_all_boards)
      if (slots) munmap(const_cast<std::int64_t*>(slots), std::max<size_t>(n, 1) * sizeof(std::int64_t));
    g_all_boards.clear();
  }
  munmap(g_board.slots, kBoardSlots * sizeof(std::int64_t));
  g_board = RunningBoard{};
  std::remove(board_path(run_dir, rank).c_str());
}

}  // namespace ymlopt
