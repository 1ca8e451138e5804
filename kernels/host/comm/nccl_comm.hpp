// The trainers' NCCL communicator, bootstrapped through MPI, and the checks
// around it.
//
// Rank 0 of the MPI communicator draws the NCCL unique id and broadcasts it;
// every rank then joins with its MPI rank, so NCCL rank == MPI rank and the
// plan's trainer indices address both. NCCL refuses two ranks on one GPU:
// nccl_usable() says, collectively and with one answer on every rank, whether
// every rank can have its own device.
//
//   NcclComm trainers(trainers_mpi);        // collective over trainers_mpi
//   ncclAllReduce(..., trainers.get(), stream);
//   wait_stream(stream, trainers.get(), 600, "the gradient all-reduce");
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <functional>
#include <string>

namespace meshloom::cuda {

// This rank's place among the ranks of `comm` on its node (shared memory).
// Collective over `comm`.
struct NodeRanks {
  int local_rank = 0;
  int local_size = 1;
};
NodeRanks node_ranks(MPI_Comm comm);

// Whether every rank of `comm` sees a GPU and no node holds more ranks than
// visible GPUs. Collective over `comm`; the same answer on every rank, so
// callers that skip or fall back stay in step. *why says what is missing.
bool nccl_usable(MPI_Comm comm, std::string* why);

// An NCCL communicator over the ranks of an MPI communicator. Owns it; not
// copyable. Destroy it after every communicator split from it.
class NcclComm {
 public:
  // Collective over `comm`. Uses `device`, or when negative the rank's index
  // among the node's ranks modulo the visible devices; makes it current.
  explicit NcclComm(MPI_Comm comm, int device = -1);
  ~NcclComm();
  NcclComm(NcclComm&& other) noexcept;
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

 private:
  void release();
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  int device_ = -1;
};

// Waits for the work on `stream` without blocking blindly: polls the stream
// and the communicator's asynchronous error (with back-off), and fails naming
// `what` on an NCCL error or after `timeout_s`. A failure ends the run (the
// production fatal handler aborts every rank), so the communicator is left
// for the process teardown rather than aborted here.
void wait_stream(cudaStream_t stream, ncclComm_t comm, double timeout_s, const char* what);
// The loop under wait_stream, for any completion: polls `query` (a stream's
// or an event's) and the communicator's asynchronous error, and past
// `timeout_s` calls timed_out(seconds waited), which must fail.
void wait_device(const std::function<cudaError_t()>& query, ncclComm_t comm, double timeout_s,
                 const std::function<std::string()>& what,
                 const std::function<void(double)>& timed_out);

// Fails, naming `who`, unless `comm` lives on the current device.
void check_current_device(ncclComm_t comm, const std::string& who);

}  // namespace meshloom::cuda
