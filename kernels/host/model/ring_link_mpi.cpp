// The MPI transport of ring attention's blocks: staged through host memory,
// the CPU ring's protocol (lib/train/ring_attention: one message per shift,
// int64 n then the block, tags 300 and 301), so it works wherever trainers
// share a GPU. Each shift runs on the host while the step's kernels run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <utility>

#include "base/check.hpp"
#include "comm/ring_shift.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/ring_link.hpp"

namespace meshloom::cuda {

namespace {

constexpr int kTagForward = 300;  // the CPU ring's tags: one protocol
constexpr int kTagBackward = 301;

template <class T>
class MpiRingLink final : public RingLink<T> {
 public:
  explicit MpiRingLink(RingSpec ring) : ring_(std::move(ring)) {}

  void load(const FlashKv<T>& kv, int64_t kv_dim, bool with_grads, cudaStream_t stream) override {
    kv_dim_ = kv_dim;
    with_grads_ = with_grads;
    cur_.n = kv.n;
    cur_.bytes.assign(message_bytes(kv.n), 0);  // dK/dV start at zero
    std::memcpy(cur_.bytes.data(), &kv.n, sizeof(int64_t));
    copy_block_rows(kv, kv_dim, cur_.bytes.data() + sizeof(int64_t), cudaMemcpyDeviceToHost,
                    stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    uploaded_ = false;
  }

  void start(cudaStream_t) override {}  // the shift runs in finish(), beside the kernels

  RingBlock<T> current(cudaStream_t stream) override {
    const BlockLayout at(cur_.n, kv_dim_, sizeof(T));
    if (!uploaded_) {
      dev_.resize(at.bytes(with_grads_));
      const char* p = cur_.bytes.data() + sizeof(int64_t);
      if (cur_.n > 0) {
        CUDA_CHECK(cudaMemcpyAsync(dev_.data(), p, at.rows_bytes, cudaMemcpyHostToDevice, stream));
        if (with_grads_)
          CUDA_CHECK(cudaMemcpyAsync(dev_.data() + at.grads_offset, p + at.rows_bytes,
                                     at.grads_bytes, cudaMemcpyHostToDevice, stream));
      }
      uploaded_ = true;
    }
    return block_view<T>(dev_.data(), cur_.n, kv_dim_, with_grads_);
  }

  void finish(cudaStream_t stream) override {
    if (with_grads_) {
      // Pass the block on with what this member added (k passes bring it home).
      current(stream);
      const BlockLayout at(cur_.n, kv_dim_, sizeof(T));
      if (cur_.n > 0)
        CUDA_CHECK(cudaMemcpyAsync(cur_.bytes.data() + sizeof(int64_t) + at.rows_bytes,
                                   dev_.data() + at.grads_offset, at.grads_bytes,
                                   cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      shift();
    } else {
      shift();
      CUDA_CHECK(cudaStreamSynchronize(stream));  // the device buffer is reused next
    }
    uploaded_ = false;
  }

 private:
  // A block as it travels (host bytes): n, then the block laid out as
  // BlockLayout's rows and, with grads, the dK/dV right after them.
  struct Message {
    std::vector<char> bytes;
    int64_t n = 0;
  };
  size_t message_bytes(int64_t n) const {
    const BlockLayout at(n, kv_dim_, sizeof(T));
    return sizeof(int64_t) + at.rows_bytes + (with_grads_ ? at.grads_bytes : 0);
  }
  void shift() {
    const int k = int(ring_.members.size()), me = ring_.me;
    Message next;
    comm::RingShift transfer(
        ring_.comm, ring_.members[size_t((me + 1) % k)], ring_.members[size_t((me + k - 1) % k)],
        with_grads_ ? kTagBackward : kTagForward, cur_.bytes, message_bytes(ring_.max_tokens));
    transfer.wait(&next.bytes, ring_.timeout_s);
    ML_CHECK(next.bytes.size() >= sizeof(int64_t), "ring attention: a message without its size");
    std::memcpy(&next.n, next.bytes.data(), sizeof(int64_t));
    ML_CHECK(next.bytes.size() == message_bytes(next.n), "ring attention: a torn block");
    cur_ = std::move(next);
  }

  RingSpec ring_;
  int64_t kv_dim_ = 0;
  bool with_grads_ = false;
  Message cur_;
  DeviceBuffer<char> dev_;
  bool uploaded_ = false;
};

}  // namespace

template <class T>
std::unique_ptr<RingLink<T>> mpi_ring_link(RingSpec ring) {
  return std::make_unique<MpiRingLink<T>>(std::move(ring));
}

template std::unique_ptr<RingLink<float>> mpi_ring_link<float>(RingSpec);
template std::unique_ptr<RingLink<__nv_bfloat16>> mpi_ring_link<__nv_bfloat16>(RingSpec);

}  // namespace meshloom::cuda
