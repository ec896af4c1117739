// StarpuMpiExecutor: a whole static DAG, or a session for run_program.
#include "session.hpp"

namespace ymlopt {

using starpu_mpi::MpiSession;

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

}  // namespace ymlopt
