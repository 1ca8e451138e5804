#include "parallel/world.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "base/check.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_util.hpp"

namespace meshloom::parallel {
namespace {

void abort_job(const std::string&) {
  record_exit(fatal_exit_code());
  MPI_Abort(MPI_COMM_WORLD, fatal_exit_code());
}

// A detached thread that ends the process with `code` (after printing
// `message`, if any) unless `*busy` turns false within `seconds`: for
// world-wide waits that a dead rank can make endless.
void exit_if_stuck(double seconds, const std::atomic<bool>* busy, int code, std::string message) {
  std::thread([=] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (*busy && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!*busy) return;
    if (!message.empty()) print_error(message, launcher_rank());
    std::fflush(nullptr);
    record_exit(code);
    std::_Exit(code);
  }).detach();
}

// Start-up (MPI_Init, the config broadcast, the role split) involves every
// rank. Under mpirun --enable-recovery a rank that dies then leaves the others
// waiting in those collectives for ever.
std::atomic<bool> g_starting{false};
bool g_threads_multiple = false;  // MPI_THREAD_MULTIPLE provided
// OpenMPI 4.1's MPI_Finalize fences every process of the job. After a loader
// died (mpirun --enable-recovery) that fence now and then never completes,
// though the survivors' work is done and written.
std::atomic<bool> g_finalizing{false};

double start_timeout_seconds() {
  const char* text = std::getenv("MESHLOOM_START_TIMEOUT");
  const double value = text ? std::atof(text) : 0.0;
  return value > 0 ? value : kStartTimeoutSeconds;
}

void report_on_root(int rank, const std::string& text) {
  if (rank != 0) return;
  print_error(text);
}

}  // namespace

void mpi_start(int* argc, char*** argv) {
  g_starting = true;
  const double limit = start_timeout_seconds();
  exit_if_stuck(limit, &g_starting, 3,
                strf("start-up (MPI_Init, config broadcast, role split) did not finish "
                     "within %.0f s: did a rank die while starting? Exiting (code 3); "
                     "MESHLOOM_START_TIMEOUT sets the limit",
                     limit));
  int provided = 0;
  // The main thread makes the step's MPI calls; a trainer's checkpoint thread
  // writes its part of a checkpoint collectively on a communicator of its
  // own where the library allows calls from several threads at once
  // (mpi_threads_multiple), else that part is written between two steps.
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  g_threads_multiple = provided >= MPI_THREAD_MULTIPLE;
  if (provided < MPI_THREAD_FUNNELED)
    ML_FAIL(
        strf("this MPI library offers thread level %d, below MPI_THREAD_FUNNELED (%d), which "
             "meshloom needs (its helper threads run beside MPI calls)",
             provided, MPI_THREAD_FUNNELED));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  set_process_identity(rank, "");
  set_fatal_handler(abort_job);
}

void start_finished() { g_starting = false; }

bool mpi_threads_multiple() { return g_threads_multiple; }

std::string launcher_rank() {
  for (const char* name : {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name)) return value;
  return "?";
}

void record_exit(int code) {
  static std::atomic<bool> recorded{false};  // a process leaves once: its first code stands
  const char* path = std::getenv("MESHLOOM_EXIT_FILE");
  if (!path || !*path || recorded.exchange(true)) return;
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  char line[64];
  const std::string rank =
      process_rank() >= 0 ? std::to_string(process_rank()) : launcher_rank();  // before MPI_Init
  const int n = std::snprintf(line, sizeof(line), "rank %s exit %d\n", rank.c_str(), code);
  // One short O_APPEND write: lines of different ranks never interleave.
  [[maybe_unused]] const ssize_t written = ::write(fd, line, size_t(n));
  ::close(fd);
}

int mpi_finish(int code) {
  start_finished();
  record_exit(code);
  g_finalizing = true;  // never reset: the process ends when MPI_Finalize returns
  exit_if_stuck(kFinalizeGraceSeconds, &g_finalizing, code,
                process_rank() == 0 ? strf("MPI_Finalize did not return within %d s (a rank of "
                                           "this job died?); exiting without it",
                                           kFinalizeGraceSeconds)
                                    : std::string());
  MPI_Finalize();
  return code;
}

bool world_from_config(const std::string& file, const std::vector<std::string>& overrides, World* w,
                       const ConfigLoader& load) {
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w->size));
  const int world_size = w->size;
  std::string text;
  bool ok = comm::run_on_root(
      MPI_COMM_WORLD,
      [&] {
        config::Config c = load(file, overrides);
        make_layout(world_size, c);  // throws when the roles do not fit
        return config::to_yaml(c);
      },
      &text);
  if (!ok) {
    report_on_root(w->rank, text);
    return false;
  }
  // The effective text was produced by the checked config, so it parses.
  w->config = config::parse_config(text, file);
  w->config_text = text;
  w->layout = make_layout(w->size, w->config);
  w->mesh = trainer_mesh(w->config, w->layout.trainers);
  w->role = w->layout.role_of(w->rank);
  w->role_index = w->layout.index_in_role(w->rank);
  set_process_identity(w->rank, role_name(w->role));
  set_log_level(w->config.log.level);
  set_log_all_ranks(w->config.log.all_ranks);
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, int(w->role), w->rank, &w->role_comm));
  MPI_CHECK(MPI_Comm_set_errhandler(w->role_comm, MPI_ERRORS_RETURN));
  w->hosts = comm::all_host_names(MPI_COMM_WORLD);
  return true;
}

bool preflight_on_root(const World& w, const std::function<void()>& check) {
  std::string text;
  bool ok = comm::run_on_root(
      MPI_COMM_WORLD,
      [&] {
        check();
        return std::string();
      },
      &text);
  if (!ok) report_on_root(w.rank, text);
  return ok;
}

}  // namespace meshloom::parallel
