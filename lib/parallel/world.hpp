// The MPI world of one meshloom process: start-up, the role split and a clean
// way out.
//
// Start-up is collective over MPI_COMM_WORLD and happens once: rank 0 reads
// and checks the config, every rank learns the outcome from one broadcast, so
// a bad config or a layout that does not fit ends every rank at once with one
// message from rank 0 (never a hang). After start-up no collective includes
// the loaders, so that a dead loader cannot stall the others.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "parallel/mesh.hpp"
#include "parallel/roles.hpp"

namespace meshloom::parallel {

struct World {
  int rank = 0;
  int size = 1;
  Role role = Role::trainer;
  int role_index = 0;
  RoleLayout layout;
  TrainerMesh mesh;                    // trainers -> HDP ranks and TP ranks (parallel.tp)
  MPI_Comm role_comm = MPI_COMM_NULL;  // ranks of the same role
  std::vector<std::string> hosts;      // per world rank
  config::Config config;
  std::string config_text;  // effective config, YAML
};

// MPI_Init, MPI_ERRORS_RETURN on the world, and a fatal handler that aborts the
// job (a lone exiting rank would hang the rest). Arms a start-up guard: a
// process that has not called start_finished() (or mpi_finish) within
// kStartTimeoutSeconds (environment: MESHLOOM_START_TIMEOUT) exits with code
// 3, as a rank lost during the world-wide start-up collectives would
// otherwise leave the rest waiting for ever.
constexpr double kStartTimeoutSeconds = 60;
void mpi_start(int* argc, char*** argv);
// Start-up's world-wide collectives are over (after preflight_on_root).
void start_finished();
// Whether MPI takes calls from several threads at once (MPI_THREAD_MULTIPLE):
// trainers then write their part of a checkpoint in the background.
bool mpi_threads_multiple();
// mpirun --enable-recovery (OpenMPI 4.1) exits 0 whatever its ranks return,
// so each rank appends "rank R exit CODE" to $MESHLOOM_EXIT_FILE (when set)
// on its way out: mpi_finish, the fatal handler, the watchdog, the start-up
// guard (once per process: the first code stands). A rank killed by a
// signal writes nothing.
void record_exit(int code);
// This process's rank as the launcher tells it (PMIX_RANK, OMPI_COMM_WORLD_RANK,
// SLURM_PROCID), usable before MPI_Init; "?" when no launcher says.
std::string launcher_rank();
// MPI_Finalize, bounded: a process still in it after kFinalizeGraceSeconds
// (a dead rank can stall its fence) exits with `code` without it. Returns
// `code` for main to return.
constexpr int kFinalizeGraceSeconds = 10;
int mpi_finish(int code);

// Rank 0 loads `file` with `overrides` (through `load`: config::load_config,
// or one that also resolves model.init), checks the layout for the world
// size; all ranks get the result. Returns false on every rank when it failed
// (rank 0 has printed the one message).
using ConfigLoader =
    std::function<config::Config(const std::string&, const std::vector<std::string>&)>;
bool world_from_config(const std::string& file, const std::vector<std::string>& overrides,
                       World* world, const ConfigLoader& load = config::load_config);

// Start-up checks that only rank 0 needs to run (e.g. that every source file
// opens): every rank learns the outcome; on failure rank 0 prints the one
// message and every rank returns false.
bool preflight_on_root(const World& w, const std::function<void()>& check);

}  // namespace meshloom::parallel
