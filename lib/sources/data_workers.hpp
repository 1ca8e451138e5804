// DataLoader-style worker processes for the colocated baseline
// (data.colocated_processes: N). Per-rank data loading in PyTorch runs
// `num_workers` processes per rank, each holding its own copy of every
// source's state (files, indexes, tokenizer); worker k builds the batches
// k, k + N, ... With this option a colocated trainer does the same: it spawns
// N copies of meshloom (`meshloom data-worker`, started fresh as with the
// "spawn" start method, so nothing is shared copy-on-write), forwards each
// step's work to the next worker and takes the packed batches back in order.
// The workers never touch MPI; they talk to their trainer over a socket.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom::sources {

class DataWorkerPool {
 public:
  // Spawns config.data.colocated_processes workers for trainer `rank` and
  // sends each the effective config.
  DataWorkerPool(const config::Config& config, int rank);
  // Closes the sockets (the workers exit at end of input) and reaps them.
  ~DataWorkerPool();
  DataWorkerPool(const DataWorkerPool&) = delete;
  DataWorkerPool& operator=(const DataWorkerPool&) = delete;

  int size() const { return int(workers_.size()); }
  int in_flight() const { return int(submitted_ - taken_); }
  // Sends an encoded wire::StepWork to the next worker (round robin). At
  // most size() steps may be in flight.
  void submit(const std::string& step_work);
  // The encoded wire::Batch of the oldest submitted step. A worker that
  // dies or stays silent for `timeout` seconds is a clear error naming it.
  std::string take(double timeout);
  // Sum of the workers' proportional set sizes now, KiB.
  int64_t pss_kib() const;

 private:
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
  };
  // `closed`: the socket closed, so the worker is exiting (wait to say how).
  [[noreturn]] void worker_failed(int k, const std::string& what, bool closed = true);
  int rank_;
  std::vector<Worker> workers_;
  int64_t submitted_ = 0, taken_ = 0;
};

// One step's batch as a worker builds it: an encoded wire::StepWork in, the
// encoded wire::Batch out. The builder lives in roles/ (it packs as a
// constructor does), so this folder stays below the roles.
using BuildBatch = std::function<std::string(const config::Config&, const std::string&)>;

// The worker's side (`meshloom data-worker`): reads the config and then step
// work from `fd` until end of input, answering each with build's batch.
// Returns the exit code.
int serve_data_worker(int fd, int rank, int index, const BuildBatch& build);

}  // namespace meshloom::sources
