// What each rank is running, for the message when a rank dies (the run's
// progress as the launcher's SIGTERM finds it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {

/// This rank's running board (RUN_DIR/rank-N.running, one slot per worker,
/// `workers` at most 64), with the task lines the handler prints.
void running_board_open(const Dag& dag, const std::string& run_dir, int rank, std::size_t workers);
/// Rank 0, after every rank opened its board: maps them all and prints them on
/// SIGTERM. Nothing when no board is open.
void running_board_watch(const std::string& run_dir, int ranks);
/// Worker `worker` starts (running) or ended (!running) task `task`.
void running_board_mark(int worker, std::int32_t task, bool running);
/// Unmaps the boards and removes this rank's file (rank 0: the handler too).
void running_board_close(const std::string& run_dir, int rank);

}  // namespace ymlopt
