// Pipeline stage transfers over NCCL point-to-point (one GPU per trainer):
// the activations a stage sends to the next and the gradients it sends back
// stay on the device (TrainerBackend::moves_stages, lib/train/backend.hpp).
//
// The pipeline axis gets one NCCL communicator, bootstrapped through MPI once
// (as the TP group's), split into one two-rank communicator per link between
// neighbour stages and per direction, each with its own stream. So every
// communicator carries one stream of messages, sent and received in the
// 1F1B schedule's order on both sides, and a send waiting for its receiver
// (NCCL's sends are rendezvous) holds up nothing but later sends the same
// way, as the CPU path's non-blocking MPI sends. Sends are asynchronous and
// keep their buffer until done; a receive waits on the host with a deadline
// and fails (exit 3) naming what it waited for, as recv_bytes does.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/device_buffer.hpp"

namespace meshloom::cuda {

template <class T>
class StageLink {
 public:
  // Collective over `pipeline` (rank = stage), on `device`.
  StageLink(MPI_Comm pipeline, int device);
  ~StageLink();
  StageLink(const StageLink&) = delete;
  StageLink& operator=(const StageLink&) = delete;

  enum Way {
    activations,  // to the next stage
    gradients,    // to the stage before
  };
  // Sends `count` values of `values` once the work enqueued on `compute` is
  // done; keeps the buffer until the send is.
  void send(Way way, DeviceBuffer<T> values, int64_t count, cudaStream_t compute);
  // Receives `count` values into `into` (resized; its earlier contents may
  // still be read by the work enqueued on `compute`). Returns when they are
  // there; fails after `timeout_s` with waiting_for() (worked out only then).
  void recv(Way way, DeviceBuffer<T>& into, int64_t count, cudaStream_t compute, double timeout_s,
            const std::function<std::string()>& waiting_for);
  // Waits for every send, at most `timeout_s`.
  void finish(double timeout_s);
  // A buffer of a finished send, for the next one (empty when none).
  DeviceBuffer<T> spare();

 private:
  // One direction of one link: its communicator, the peer's rank there, and
  // the stream its messages go on.
  struct Link {
    ncclComm_t comm = nullptr;
    int peer = 0;
    cudaStream_t stream = nullptr;
  };
  struct Pending {
    DeviceBuffer<T> values;
    cudaEvent_t done = nullptr;
    ncclComm_t comm = nullptr;
  };
  // Splits the pipeline's communicator: this stage's link of parity
  // `parity` (link k joins stages k and k + 1) for `way`.
  ncclComm_t split(int parity);
  Link& out(Way way) { return way == activations ? act_out_ : grad_out_; }
  Link& in(Way way) { return way == activations ? act_in_ : grad_in_; }
  // Polls until `done` or `event` (null: the link's stream) completes.
  void wait(const Link& link, cudaEvent_t event, double timeout_s,
            const std::function<std::string()>& what);
  void reclaim();  // finished sends' buffers to spare_

  int stage_ = 0, stages_ = 1;
  std::unique_ptr<NcclComm> pipeline_;
  Link act_out_, act_in_, grad_out_, grad_in_;
  cudaEvent_t mark_ = nullptr;  // "the compute stream got here"
  std::deque<Pending> pending_;
  std::vector<DeviceBuffer<T>> spare_;
};

}  // namespace meshloom::cuda
