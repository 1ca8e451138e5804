// The MPI transport of the TP group's collectives (device_tp_comm.hpp):
// through host memory, for trainers that share a GPU (NCCL refuses two ranks
// on one device). Each call drains the stream, so it costs a round trip; it
// exists for correctness (the one-GPU invariance runs), not speed.
#include <cuda_bf16.h>

#include <climits>
#include <cstddef>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/check.hpp"
#include "comm/mpi_check.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/device_tp_comm.hpp"

namespace meshloom::cuda {

namespace {

// What a value is added in: bf16 in fp32 (rounded once at the end), float
// and double in themselves (as lib/train/tp_comm.cpp).
template <class V>
using Sum = std::conditional_t<std::is_same_v<V, __nv_bfloat16>, float, V>;

template <class V>
Sum<V> widen(V v) {
  if constexpr (std::is_same_v<V, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}

template <class V>
V narrow(Sum<V> s) {
  if constexpr (std::is_same_v<V, __nv_bfloat16>)
    return __float2bfloat16_rn(s);
  else
    return s;
}

template <class T>
class MpiTpComm final : public DeviceTpComm<T> {
 public:
  MpiTpComm(MPI_Comm comm, WatchedWait watched) : comm_(comm), watched_(std::move(watched)) {
    MPI_CHECK(MPI_Comm_size(comm_, &size_));
    if (!watched_) watched_ = [](const char*, const std::function<void()>& wait) { wait(); };
  }
  int size() const override { return size_; }

  void sum_activations(T* values, int64_t count, cudaStream_t stream) override {
    sum_in_rank_order(values, count, stream);
  }
  void all_reduce_sum(double* values, int64_t count, cudaStream_t stream) override {
    sum_in_rank_order(values, count, stream);
  }
  void all_reduce_max(double* values, int64_t count, cudaStream_t stream) override {
    if (size_ == 1 || count == 0) return;
    std::span<double> host = staged<double>(values, count, stream);
    watched_("a tensor-parallel all-reduce (max) through host memory", [&] {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, host.data(), int(count), MPI_DOUBLE, MPI_MAX, comm_));
    });
    upload_sync<double>(values, host, stream);
  }

 private:
  // The device values, copied into host_ once the stream got there.
  template <class V>
  std::span<V> staged(const V* values, int64_t count, cudaStream_t stream) {
    ML_CHECK(int64_t(sizeof(V)) * count * size_ <= INT_MAX,
             "a tensor-parallel sum through host memory is too large for one MPI call");
    host_.resize(size_t(count) * sizeof(V));
    const std::span<V> host(reinterpret_cast<V*>(host_.data()), size_t(count));
    download_sync<V>(host, values, stream);
    return host;
  }

  // All-gather, then every rank adds the ranks' values in rank order: the
  // same additions, so the same bits, on every rank.
  template <class V>
  void sum_in_rank_order(V* values, int64_t count, cudaStream_t stream) {
    if (size_ == 1 || count == 0) return;
    std::span<V> mine = staged<V>(values, count, stream);
    const int bytes = int(mine.size_bytes());
    gathered_.resize(mine.size_bytes() * size_t(size_));
    watched_("a tensor-parallel sum through host memory", [&] {
      MPI_CHECK(
          MPI_Allgather(mine.data(), bytes, MPI_BYTE, gathered_.data(), bytes, MPI_BYTE, comm_));
    });
    const V* all = reinterpret_cast<const V*>(gathered_.data());
    const size_t n = size_t(count);
    for (size_t i = 0; i < n; ++i) {
      Sum<V> sum = widen(all[i]);
      for (size_t r = 1; r < size_t(size_); ++r) sum += widen(all[r * n + i]);
      mine[i] = narrow<V>(sum);
    }
    upload_sync<V>(values, mine, stream);
  }

  MPI_Comm comm_;
  WatchedWait watched_;  // never empty: a plain call where none was given
  int size_ = 1;
  std::vector<std::byte> host_, gathered_;
};

}  // namespace

template <class T>
std::unique_ptr<DeviceTpComm<T>> mpi_tp_comm(MPI_Comm tensor, WatchedWait watched) {
  return std::make_unique<MpiTpComm<T>>(tensor, std::move(watched));
}

template std::unique_ptr<DeviceTpComm<float>> mpi_tp_comm<float>(MPI_Comm, WatchedWait);
template std::unique_ptr<DeviceTpComm<__nv_bfloat16>> mpi_tp_comm<__nv_bfloat16>(MPI_Comm,
                                                                                 WatchedWait);

}  // namespace meshloom::cuda
