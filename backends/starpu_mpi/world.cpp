// The MPI job this process belongs to (starpu_mpi_backend.hpp: MpiWorld and
// the collectives the CLI uses around a run).
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "starpu_mpi_backend.hpp"

namespace ymlopt {

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

}  // namespace ymlopt
