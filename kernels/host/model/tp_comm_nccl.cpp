// The NCCL transport of the TP group's collectives (device_tp_comm.hpp):
// in-place all-reduces on the compute stream, so they order with the kernels
// around them and the host never waits.
#include <cuda_bf16.h>

#include <type_traits>

#include "kernels/device/common/check.cuh"
#include "kernels/host/model/device_tp_comm.hpp"

namespace meshloom::cuda {

namespace {

template <class T>
constexpr ncclDataType_t nccl_type() {
  return std::is_same_v<T, float> ? ncclFloat32 : ncclBfloat16;
}

template <class T>
class NcclTpComm final : public DeviceTpComm<T> {
 public:
  explicit NcclTpComm(ncclComm_t comm) : comm_(comm) { NCCL_CHECK(ncclCommCount(comm_, &size_)); }
  int size() const override { return size_; }

  void sum_activations(T* values, int64_t count, cudaStream_t stream) override {
    all_reduce(values, count, nccl_type<T>(), ncclSum, stream);
  }
  void all_reduce_max(double* values, int64_t count, cudaStream_t stream) override {
    all_reduce(values, count, ncclFloat64, ncclMax, stream);
  }
  void all_reduce_sum(double* values, int64_t count, cudaStream_t stream) override {
    all_reduce(values, count, ncclFloat64, ncclSum, stream);
  }

 private:
  void all_reduce(void* values, int64_t count, ncclDataType_t type, ncclRedOp_t op,
                  cudaStream_t stream) {
    if (size_ == 1 || count == 0) return;
    NCCL_CHECK(ncclAllReduce(values, values, size_t(count), type, op, comm_, stream));
  }

  ncclComm_t comm_;
  int size_ = 1;
};

}  // namespace

template <class T>
std::unique_ptr<DeviceTpComm<T>> nccl_tp_comm(ncclComm_t tensor) {
  return std::make_unique<NcclTpComm<T>>(tensor);
}

template std::unique_ptr<DeviceTpComm<float>> nccl_tp_comm<float>(ncclComm_t);
template std::unique_ptr<DeviceTpComm<__nv_bfloat16>> nccl_tp_comm<__nv_bfloat16>(ncclComm_t);

}  // namespace meshloom::cuda
