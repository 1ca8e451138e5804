// What the tensor-parallel GPU model needs from its TP group: the device twin
// of model::TpComm (lib/model/tensor_parallel.hpp), called at the same places
// (Transformer: after the embedding lookup and the wo and w2 products in
// forward; on d(final states) and the input gradients of wq|wk|wv and w1|w3
// in backward; DeviceLmLoss: the per-token softmax statistics of each chunk).
// Every rank of a group makes the same calls in the same order with the same
// counts. Device pointers; the work is enqueued on (or done in the order of)
// `stream`, and the values are ready for work enqueued there after the call.
//
// Replicated activations must be bitwise equal on every rank of the group:
// the residual stream, the norms and the loss are computed by every rank from
// the sums, and the norm gains' gradients, which each rank computes itself,
// must come out the same, or the replicated weights drift apart (the trainer
// reduces gradients over the data axis only). Both transports give every
// rank the same bits:
//   nccl_tp_comm  ncclAllReduce in place on a communicator of the group (one
//                 GPU per trainer). NCCL computes each element's sum once,
//                 on one rank or the switch (ring: reduce-scatter then
//                 all-gather; tree: reduce then broadcast; NVLS likewise), and
//                 sends that result to the others: the summation order may
//                 vary with the algorithm, but not between ranks (NCCL's
//                 maintainers in NVIDIA/nccl#855; not in its documentation,
//                 so tests/kernels/host/model/tp_gpu_test.cpp checks it).
//   mpi_tp_comm   through host memory (trainers sharing a GPU): the stream
//                 is drained, the values copied to the host, all-gathered
//                 over MPI and added in rank order on every rank (as
//                 lib/train/tp_comm.cpp does; bf16 summed in fp32 and rounded
//                 once), then copied back: the same additions everywhere.
// The maximum is exact in any order.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace meshloom::cuda {

template <class T>
class DeviceTpComm {
 public:
  virtual ~DeviceTpComm() = default;
  virtual int size() const = 0;
  // values[0, count) = their sum over the group, in place.
  virtual void sum_activations(T* values, int64_t count, cudaStream_t stream) = 0;
  // The fused loss's per-token statistics (double), element-wise, in place.
  virtual void all_reduce_max(double* values, int64_t count, cudaStream_t stream) = 0;
  virtual void all_reduce_sum(double* values, int64_t count, cudaStream_t stream) = 0;
};

// `tensor`: an NCCL communicator of the TP group (rank = TP rank) on the
// current device; not owned.
template <class T>
std::unique_ptr<DeviceTpComm<T>> nccl_tp_comm(ncclComm_t tensor);
// `tensor`: the TP group's MPI communicator (rank = TP rank); not owned.
// `watched`, where given, runs each blocking MPI call (`wait`) under the
// program's watchdog, which names `what` if it outlasts run.timeout.
using WatchedWait = std::function<void(const char* what, const std::function<void()>& wait)>;
template <class T>
std::unique_ptr<DeviceTpComm<T>> mpi_tp_comm(MPI_Comm tensor, WatchedWait watched = {});

}  // namespace meshloom::cuda
