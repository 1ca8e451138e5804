#include "train/tp_comm.hpp"

#include <algorithm>
#include <climits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "parallel/watchdog.hpp"

namespace meshloom::train {
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
  parallel::WatchScope watch("a tensor-parallel all-gather");
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
  parallel::WatchScope watch("a sequence-parallel all-gather");
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
    parallel::WatchScope watch("a sequence-parallel reduce-scatter");
    MPI_CHECK(MPI_Alltoallv(all.data(), counts_.data(), displs_.data(), MPI_FLOAT, received_.data(),
                            recv_counts.data(), recv_displs.data(), MPI_FLOAT, comm_));
  }
  add_in_rank_order(received_.data(), size_t(count), size_, mine.data());
}

void MpiTpComm::all_reduce_max(std::span<double> values) {
  if (size_ == 1) return;
  // The maximum is exact in any order.
  parallel::WatchScope watch("a tensor-parallel all-reduce (max)");
  MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_MAX, comm_));
}

namespace {

// Puts each tensor of `part` (laid out as `layout`) into `whole` by name:
// TP shards with put_shard.
void put_by_name(const model::ParamLayout& layout, const float* part,
                 const model::ParamLayout& whole_layout, float* whole) {
  for (const model::TensorInfo& t : layout.tensors())
    model::put_shard(t, part + t.offset, whole + whole_layout.find(t.name).offset);
}

// Gathers every rank's buffer on rank 0 of `comm`, rank r's laid out as
// layouts[r], and puts them by name into `whole_layout`'s buffer (empty on
// the other ranks).
std::vector<float> gather_by_name(const std::vector<model::ParamLayout>& layouts, MPI_Comm comm,
                                  std::span<const float> mine,
                                  const model::ParamLayout& whole_layout, const char* what) {
  int size = 1, rank = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    counts[size_t(r)] = int(layouts[size_t(r)].numel());
    displs[size_t(r)] = r ? displs[size_t(r) - 1] + counts[size_t(r) - 1] : 0;
  }
  ML_CHECK(int64_t(mine.size()) == layouts[size_t(rank)].numel(), "shard buffer size");
  std::vector<float> all(rank == 0 ? size_t(displs.back() + counts.back()) : 0);
  parallel::WatchScope watch(what);
  MPI_CHECK(MPI_Gatherv(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), counts.data(),
                        displs.data(), MPI_FLOAT, 0, comm));
  if (rank != 0) return {};
  std::vector<float> out(size_t(whole_layout.numel()));
  for (int r = 0; r < size; ++r)
    put_by_name(layouts[size_t(r)], all.data() + displs[size_t(r)], whole_layout, out.data());
  return out;
}

}  // namespace

std::vector<float> gather_whole(const model::Shape& shape,
                                const std::vector<model::StageLayers>& stages, MPI_Comm tensor,
                                MPI_Comm pipeline, std::span<const float> mine) {
  int tp = 1, tp_rank = 0, stage = 0;
  MPI_CHECK(MPI_Comm_size(tensor, &tp));
  MPI_CHECK(MPI_Comm_rank(tensor, &tp_rank));
  MPI_CHECK(MPI_Comm_rank(pipeline, &stage));
  if (tp == 1 && stages.size() == 1) return std::vector<float>(mine.begin(), mine.end());
  // The stage's tensors, whole, on its TP rank 0.
  std::vector<model::ParamLayout> shards;
  for (int r = 0; r < tp; ++r)
    shards.emplace_back(shape, model::TpShard{tp, r}, stages[size_t(stage)]);
  const model::ParamLayout stage_layout(shape, {}, stages[size_t(stage)]);
  std::vector<float> stage_whole =
      tp == 1 ? std::vector<float>(mine.begin(), mine.end())
              : gather_by_name(shards, tensor, mine, stage_layout,
                               "the gather of the TP shards for a checkpoint or dump");
  if (tp_rank != 0 || stages.size() == 1) return stage_whole;
  std::vector<model::ParamLayout> per_stage;
  for (const model::StageLayers& s : stages) per_stage.emplace_back(shape, model::TpShard{}, s);
  return gather_by_name(per_stage, pipeline, stage_whole, model::ParamLayout(shape),
                        "the gather of the pipeline stages for a checkpoint or dump");
}

std::vector<float> shard_of_whole(const model::ParamLayout& mine, std::span<const float> whole) {
  const model::ParamLayout full(mine.shape());
  ML_CHECK(int64_t(whole.size()) == full.numel(), "whole-model buffer size");
  std::vector<float> out(size_t(mine.numel()));
  for (const model::TensorInfo& t : mine.tensors())
    model::take_shard(t, whole.data() + full.find(t.name).offset, out.data() + t.offset);
  return out;
}

}  // namespace meshloom::train
