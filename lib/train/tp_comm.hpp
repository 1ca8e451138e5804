// A trainer's TP group over MPI (the tensor axis of parallel/step_comms.hpp):
// the collectives the tensor-parallel model calls, and the moves between a
// rank's shard of the model and the whole model that checkpoints and step
// dumps need (they stay in the unsharded layout of docs/formats.md).
//
// Sums are an all-gather and an add in rank order, not MPI_Allreduce: the
// replicated activations must be the same bits on every rank of the group
// (MPI does not promise that for a reduction), or the replicated norm gains
// would drift apart. Sequence parallelism's reduce-scatter is an all-to-all
// of the rows and the same add in rank order (so its rows are the bits the
// sum would give), its all-gather an MPI_Allgatherv of the uneven rows.
#pragma once

#include <mpi.h>

#include <span>
#include <vector>

#include "model/params.hpp"
#include "model/tensor_parallel.hpp"

namespace meshloom::train {

class MpiTpComm final : public model::TpComm<float> {
 public:
  // `tensor`: the TP group (rank = TP rank).
  explicit MpiTpComm(MPI_Comm tensor);
  void sum_activations(std::span<float> values) override;
  void all_gather_rows(std::span<const float> mine, std::span<float> all, int64_t width) override;
  void reduce_scatter_rows(std::span<const float> all, std::span<float> mine,
                           int64_t width) override;
  void all_reduce_max(std::span<double> values) override;
  void all_reduce_sum(std::span<double> values) override;

 private:
  template <class T>
  void sum_in_rank_order(std::span<T> values, MPI_Datatype type);
  // Every rank's rows of an [n, width] matrix, in elements: counts_, displs_.
  void split_rows(int64_t n, int64_t width);
  MPI_Comm comm_;
  int size_ = 1, rank_ = 0;
  std::vector<char> gathered_;
  std::vector<int> counts_, displs_;
  std::vector<float> received_;  // [size, my rows, width]: the ranks' parts of my rows
};

// The whole model's flat buffer (ParamLayout(shape) order) on TP rank 0 of
// pipeline stage 0, from every rank's `mine` (its ParamLayout(shape, {tp,
// rank}, stages[stage]) order; `stages`: every stage's layers, one entry
// without a pipeline). Collective over `tensor`, then over `pipeline` among
// TP ranks 0; the other ranks get an empty vector. At tp = pp = 1 a copy of
// `mine`. A tensor two stages hold (the tied embedding) is taken from the
// last of them: the stages keep it the same.
std::vector<float> gather_whole(const model::Shape& shape,
                                const std::vector<model::StageLayers>& stages, MPI_Comm tensor,
                                MPI_Comm pipeline, std::span<const float> mine);
// This rank's buffer (`mine`'s layout: a TP shard of a stage's tensors) out
// of the whole model's.
std::vector<float> shard_of_whole(const model::ParamLayout& mine, std::span<const float> whole);

}  // namespace meshloom::train
