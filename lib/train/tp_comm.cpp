#include "train/tp_comm.hpp"

#include <algorithm>
#include <climits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "parallel/watchdog.hpp"

namespace meshloom {
namespace {

// out[i] = Σ_r parts[r·n + i], added in rank order: the same bits on every rank.
template <class T>
void add_in_rank_order(const T* parts, size_t n, int ranks, T* out) {
  for (size_t i = 0; i < n; ++i) {
    T sum = parts[i];
    for (int r = 1; r < ranks; ++r) sum += parts[size_t(r) * n + i];
    out[i] = sum;
  }
}

}  // namespace

MpiTpComm::MpiTpComm(MPI_Comm tensor) : comm_(tensor) {
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
}

template <class T>
void MpiTpComm::sum_in_rank_order(std::span<T> values, MPI_Datatype type) {
  if (size_ == 1) return;
  const size_t n = values.size();
  gathered_.resize(n * sizeof(T) * size_t(size_));
  auto* all = reinterpret_cast<T*>(gathered_.data());
  WatchScope watch("a tensor-parallel all-gather");
  MPI_CHECK(MPI_Allgather(values.data(), int(n), type, all, int(n), type, comm_));
  add_in_rank_order(all, n, size_, values.data());
}

void MpiTpComm::sum_activations(std::span<float> values) { sum_in_rank_order(values, MPI_FLOAT); }
void MpiTpComm::all_reduce_sum(std::span<double> values) { sum_in_rank_order(values, MPI_DOUBLE); }

void MpiTpComm::split_rows(int64_t n, int64_t width) {
  ML_CHECK(n * width <= INT_MAX,
           strf("a tensor-parallel row collective of %lld x %lld elements exceeds MPI's int counts",
                (long long)n, (long long)width));
  counts_.resize(size_t(size_));
  displs_.resize(size_t(size_));
  for (int r = 0; r < size_; ++r) {
    const model::RowRange rows = model::sequence_rows(n, size_, r);
    counts_[size_t(r)] = int(rows.count() * width);
    displs_[size_t(r)] = int(rows.begin * width);
  }
}

void MpiTpComm::all_gather_rows(std::span<const float> mine, std::span<float> all, int64_t width) {
  split_rows(int64_t(all.size()) / width, width);
  ML_CHECK(int64_t(mine.size()) == counts_[size_t(rank_)], "all_gather_rows: not this rank's rows");
  WatchScope watch("a sequence-parallel all-gather");
  MPI_CHECK(MPI_Allgatherv(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), counts_.data(),
                           displs_.data(), MPI_FLOAT, comm_));
}

void MpiTpComm::reduce_scatter_rows(std::span<const float> all, std::span<float> mine,
                                    int64_t width) {
  split_rows(int64_t(all.size()) / width, width);
  const int count = counts_[size_t(rank_)];
  ML_CHECK(int64_t(mine.size()) == count, "reduce_scatter_rows: not this rank's rows");
  // Rank r sends each rank its rows and gets its own rows from every rank.
  received_.resize(size_t(count) * size_t(size_));
  const std::vector<int> recv_counts(size_t(size_), count);
  std::vector<int> recv_displs(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) recv_displs[size_t(r)] = r * count;
  {
    WatchScope watch("a sequence-parallel reduce-scatter");
    MPI_CHECK(MPI_Alltoallv(all.data(), counts_.data(), displs_.data(), MPI_FLOAT, received_.data(),
                            recv_counts.data(), recv_displs.data(), MPI_FLOAT, comm_));
  }
  add_in_rank_order(received_.data(), size_t(count), size_, mine.data());
}

void MpiTpComm::all_reduce_max(std::span<double> values) {
  if (size_ == 1) return;
  // The maximum is exact in any order.
  WatchScope watch("a tensor-parallel all-reduce (max)");
  MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_MAX, comm_));
}

std::vector<float> gather_whole(const model::Shape& shape, MPI_Comm tensor,
                                std::span<const float> mine) {
  int tp = 1, rank = 0;
  MPI_CHECK(MPI_Comm_size(tensor, &tp));
  MPI_CHECK(MPI_Comm_rank(tensor, &rank));
  if (tp == 1) return std::vector<float>(mine.begin(), mine.end());
  std::vector<int> counts(static_cast<size_t>(tp)), displs(static_cast<size_t>(tp));
  std::vector<model::ParamLayout> parts;
  for (int r = 0; r < tp; ++r) {
    parts.emplace_back(shape, model::TpShard{tp, r});
    counts[size_t(r)] = int(parts.back().numel());
    displs[size_t(r)] = r ? displs[size_t(r) - 1] + counts[size_t(r) - 1] : 0;
  }
  ML_CHECK(int64_t(mine.size()) == parts[size_t(rank)].numel(), "shard buffer size");
  std::vector<float> all(rank == 0 ? size_t(displs.back() + counts.back()) : 0);
  WatchScope watch("the gather of the TP shards for a checkpoint or dump");
  MPI_CHECK(MPI_Gatherv(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), counts.data(),
                        displs.data(), MPI_FLOAT, 0, tensor));
  if (rank != 0) return {};
  const model::ParamLayout whole(shape);
  std::vector<float> out(size_t(whole.numel()));
  for (int r = 0; r < tp; ++r)
    for (size_t i = 0; i < whole.tensors().size(); ++i) {
      const model::TensorInfo& t = parts[size_t(r)].tensors()[i];
      model::put_shard(t, all.data() + displs[size_t(r)] + t.offset,
                       out.data() + whole.tensors()[i].offset);
    }
  return out;
}

std::vector<float> shard_of_whole(const model::ParamLayout& mine, std::span<const float> whole) {
  const model::ParamLayout full(mine.shape());
  ML_CHECK(int64_t(whole.size()) == full.numel(), "whole-model buffer size");
  std::vector<float> out(size_t(mine.numel()));
  for (size_t i = 0; i < full.tensors().size(); ++i) {
    const model::TensorInfo& t = mine.tensors()[i];
    model::take_shard(t, whole.data() + full.tensors()[i].offset, out.data() + t.offset);
  }
  return out;
}

}  // namespace meshloom
