// The NCCL transport of ring attention's blocks: they stay on the device, in
// two buffers (current and next), and move with ring_exchange on a
// communication stream of its own while the compute stream runs the step's
// kernels. NCCL carries no size: the first load() gathers every member's
// block size around the ring (one host wait per ring attention); every
// shift's sizes follow from them.
//
// Stream order, with events (no host waits inside the ring):
//   (a) a send waits for the data it sends: the own block's pack (`packed_`)
//       or, later, the dK/dV the step's kernels added to (`consumed_`); a
//       block received earlier is on the communication stream already;
//   (b) a receive into a buffer waits until the kernels that read that
//       buffer in the step before are done (`consumed_[buffer]`);
//   (c) the compute stream waits for a shift's receives (`arrived_`) before
//       any later work, so the next step's kernels see the whole block;
//   (d) load() makes the compute stream wait for all earlier communication
//       before it packs into a buffer that may still be being sent.
// K/V rows and the dK/dV occupy different bytes of a buffer: a send of the
// rows may run while kernels add to the same buffer's dK/dV.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "base/check.hpp"
#include "comm/member_sets.hpp"
#include "comm/mpi_check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/comm/nccl_comm.hpp"
#include "kernels/host/comm/ring_exchange.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/ring_link.hpp"

namespace meshloom::cuda {

namespace {

template <class T>
class NcclRingLink final : public RingLink<T> {
 public:
  NcclRingLink(RingSpec ring, ncclComm_t nccl) : ring_(std::move(ring)), nccl_(nccl) {
    ML_CHECK(nccl_ != nullptr, "ring attention over NCCL without a communicator");
    const int k = int(ring_.members.size());
    ML_CHECK(ring_.me >= 0 && ring_.me < k, "ring member index out of range");
    comm::member_set(ring_.members);  // fails on a repeated or negative rank
    int ranks = 0, self = -1;
    NCCL_CHECK(ncclCommCount(nccl_, &ranks));
    NCCL_CHECK(ncclCommUserRank(nccl_, &self));
    for (int r : ring_.members)
      ML_CHECK(r < ranks, name() + ": rank " + std::to_string(r) + " is not in the " +
                              std::to_string(ranks) + "-rank NCCL communicator");
    ML_CHECK(ring_.members[size_t(ring_.me)] == self,
             name() + ": this member is NCCL rank " + std::to_string(self));
    if (ring_.comm != MPI_COMM_NULL) {  // members are ranks of both communicators
      int mpi_rank = -1;
      MPI_CHECK(MPI_Comm_rank(ring_.comm, &mpi_rank));
      ML_CHECK(mpi_rank == self, name() + ": MPI rank " + std::to_string(mpi_rank) +
                                     " is NCCL rank " + std::to_string(self));
    }
    check_current_device(nccl_, name());
    // Highest priority: a shift should not queue behind the ring's kernels.
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, greatest));
    for (cudaEvent_t* e : {&packed_, &arrived_, &consumed_[0], &consumed_[1]})
      CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }

  ~NcclRingLink() override {
    // Never fail in a destructor; let launched transfers end before the
    // buffers go.
    if (comm_) cudaStreamSynchronize(comm_);
    for (cudaEvent_t e : {packed_, arrived_, consumed_[0], consumed_[1]})
      if (e) cudaEventDestroy(e);
    if (comm_) cudaStreamDestroy(comm_);
  }
  NcclRingLink(const NcclRingLink&) = delete;
  NcclRingLink& operator=(const NcclRingLink&) = delete;

  void load(const FlashKv<T>& kv, int64_t kv_dim, bool with_grads, cudaStream_t stream) override {
    ML_CHECK(kv.n >= 0 && kv_dim > 0, name() + ": a block of " + std::to_string(kv.n) + " rows");
    if (counts_.empty()) gather_counts(kv.n);
    ML_CHECK(kv.n == counts_[size_t(ring_.me)],
             name() + ": this member's block has " + std::to_string(kv.n) + " rows, not the " +
                 std::to_string(counts_[size_t(ring_.me)]) + " it had at the first layer");
    kv_dim_ = kv_dim;
    with_grads_ = with_grads;
    cur_ = 0;
    shifts_ = 0;
    started_ = false;
    // Sized once for the largest block with its dK/dV (backward's too).
    const int64_t largest = *std::max_element(counts_.begin(), counts_.end());
    for (DeviceBuffer<char>& b : buf_)
      b.resize(BlockLayout(largest, kv_dim, sizeof(T)).bytes(true));
    // (d)
    CUDA_CHECK(cudaEventRecord(arrived_, comm_));
    CUDA_CHECK(cudaStreamWaitEvent(stream, arrived_, 0));
    const BlockLayout at(kv.n, kv_dim, sizeof(T));
    copy_block_rows(kv, kv_dim, buf_[0].data(), cudaMemcpyDeviceToDevice, stream);
    if (with_grads && at.grads_bytes > 0)
      CUDA_CHECK(cudaMemsetAsync(buf_[0].data() + at.grads_offset, 0, at.grads_bytes, stream));
    // (a) every later send is ordered after the pack.
    CUDA_CHECK(cudaEventRecord(packed_, stream));
    CUDA_CHECK(cudaStreamWaitEvent(comm_, packed_, 0));
  }

  void start(cudaStream_t) override {
    ML_CHECK(!counts_.empty() && !started_, name() + ": start() out of turn");
    const int other = 1 - cur_;
    // (b) the receive overwrites the buffer the last step's kernels read.
    CUDA_CHECK(cudaStreamWaitEvent(comm_, consumed_[other], 0));
    const BlockLayout out = layout(shifts_), in = layout(shifts_ + 1);
    ring_exchange(nccl_, ring_.members, ring_.me, buf_[cur_].data(), out.rows_bytes,
                  buf_[other].data(), in.rows_bytes, comm_);
    started_ = true;
  }

  RingBlock<T> current(cudaStream_t) override {
    ML_CHECK(!counts_.empty(), name() + ": current() before load()");
    return block_view<T>(buf_[cur_].data(), holder_count(shifts_), kv_dim_, with_grads_);
  }

  void finish(cudaStream_t stream) override {
    ML_CHECK(!counts_.empty() && (started_ || with_grads_),
             name() + ": finish() without the block's K/V moving");
    const int other = 1 - cur_;
    // Everything the step's kernels do to the current buffer is enqueued.
    CUDA_CHECK(cudaEventRecord(consumed_[cur_], stream));
    if (with_grads_) {
      // (a) the dK/dV go on once the kernels have added to them; (b) the
      // receive's buffer, as in start() (which the last shift skips).
      CUDA_CHECK(cudaStreamWaitEvent(comm_, consumed_[cur_], 0));
      CUDA_CHECK(cudaStreamWaitEvent(comm_, consumed_[other], 0));
      const BlockLayout out = layout(shifts_), in = layout(shifts_ + 1);
      ring_exchange(nccl_, ring_.members, ring_.me, buf_[cur_].data() + out.grads_offset,
                    out.grads_bytes, buf_[other].data() + in.grads_offset, in.grads_bytes, comm_);
    }
    // (c)
    CUDA_CHECK(cudaEventRecord(arrived_, comm_));
    CUDA_CHECK(cudaStreamWaitEvent(stream, arrived_, 0));
    cur_ = other;
    ++shifts_;
    started_ = false;
  }

 private:
  // The rows of the block this member holds after `shifts` shifts: member
  // (me - shifts)'s, in ring order.
  int64_t holder_count(int shifts) const {
    const int k = int(ring_.members.size());
    return counts_[size_t(((ring_.me - shifts) % k + k) % k)];
  }
  BlockLayout layout(int shifts) const {
    return BlockLayout(holder_count(shifts), kv_dim_, sizeof(T));
  }
  std::string name() const {
    std::string s = "ring attention over NCCL ranks";
    for (int r : ring_.members) s.append(1, ' ').append(std::to_string(r));
    return s.append(" (member ").append(std::to_string(ring_.me)).append(")");
  }

  // Every member's block size, by ring index, checked against the capacity.
  void gather_counts(int64_t mine) {
    const size_t k = ring_.members.size();
    std::vector<int64_t> counts(k, 0);
    counts[size_t(ring_.me)] = mine;
    DeviceBuffer<int64_t> all(k);
    CUDA_CHECK(cudaMemcpyAsync(all.data() + ring_.me, &mine, sizeof(int64_t),
                               cudaMemcpyHostToDevice, comm_));
    ring_all_gather(nccl_, ring_.members, ring_.me, all.data(), sizeof(int64_t), comm_);
    // The one host wait: sizes must be known before any block moves.
    wait_stream(comm_, nccl_, ring_.timeout_s, (name() + ": the members' block sizes").c_str());
    CUDA_CHECK(cudaMemcpy(counts.data(), all.data(), k * sizeof(int64_t), cudaMemcpyDeviceToHost));
    for (size_t j = 0; j < k; ++j)
      ML_CHECK(counts[j] >= 0 && counts[j] <= ring_.max_tokens,
               name() + ": member " + std::to_string(j) + " has a block of " +
                   std::to_string(counts[j]) + " rows (capacity " +
                   std::to_string(ring_.max_tokens) + ")");
    counts_ = std::move(counts);
  }

  RingSpec ring_;
  ncclComm_t nccl_;
  cudaStream_t comm_ = nullptr;
  cudaEvent_t packed_ = nullptr, arrived_ = nullptr, consumed_[2] = {nullptr, nullptr};
  DeviceBuffer<char> buf_[2];
  std::vector<int64_t> counts_;  // rows of every member's block; empty before the first load()
  int64_t kv_dim_ = 0;
  bool with_grads_ = false;
  int cur_ = 0;     // the buffer holding the current block
  int shifts_ = 0;  // since load(): the current block is member (me - shifts_)'s
  bool started_ = false;
};

}  // namespace

template <class T>
std::unique_ptr<RingLink<T>> nccl_ring_link(RingSpec ring, ncclComm_t nccl) {
  return std::make_unique<NcclRingLink<T>>(std::move(ring), nccl);
}

template std::unique_ptr<RingLink<float>> nccl_ring_link<float>(RingSpec, ncclComm_t);
template std::unique_ptr<RingLink<__nv_bfloat16>> nccl_ring_link<__nv_bfloat16>(RingSpec,
                                                                                ncclComm_t);

}  // namespace meshloom::cuda
