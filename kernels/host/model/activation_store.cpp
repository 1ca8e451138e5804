#include "kernels/host/model/activation_store.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

template <class T>
ActivationStore<T>::ActivationStore(const model::Shape& shape, model::TpShard shard,
                                    cudaStream_t compute, int64_t layers)
    : shape_(shape),
      my_(shape, shard),
      layers_(layers < 0 ? shape.n_layers : layers),
      compute_(compute) {
  const size_t L = size_t(layers_);
  resident_.resize(L);
  host_.assign(L, nullptr);
  host_bytes_.assign(L, 0);
  stored_.resize(L);
  fetched_.resize(L);
  for (size_t l = 0; l < L; ++l) {
    CUDA_CHECK(cudaEventCreateWithFlags(&stored_[l], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&fetched_[l], cudaEventDisableTiming));
  }
  CUDA_CHECK(cudaEventCreateWithFlags(&mark_, cudaEventDisableTiming));
  CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
}

template <class T>
ActivationStore<T>::~ActivationStore() {
  if (copy_) cudaStreamSynchronize(copy_);
  for (char* p : host_)
    if (p) cudaFreeHost(p);
  for (cudaEvent_t e : stored_) cudaEventDestroy(e);
  for (cudaEvent_t e : fetched_) cudaEventDestroy(e);
  if (mark_) cudaEventDestroy(mark_);
  if (copy_) cudaStreamDestroy(copy_);
}

template <class T>
std::vector<typename ActivationStore<T>::Field> ActivationStore<T>::fields(LayerActs<T>& a) const {
  const size_t N = size_t(n_), d = size_t(shape_.d_model), f = size_t(my_.ffn);
  const size_t qd = size_t(my_.q_dim), qkvd = size_t(my_.qkv_dim), H = size_t(my_.heads);
  const size_t t = sizeof(T), fl = sizeof(float);
  return {{a.x.data(), N * d * t},      {a.xn1.data(), N * d * t}, {a.qkv.data(), N * qkvd * t},
          {a.o.data(), N * qd * t},     {a.h.data(), N * d * t},   {a.xn2.data(), N * d * t},
          {a.ab.data(), N * 2 * f * t}, {a.rstd1.data(), N * fl},  {a.lse.data(), N * H * fl},
          {a.rstd2.data(), N * fl}};
}

template <class T>
void ActivationStore<T>::resize(LayerActs<T>& a) const {
  const size_t N = size_t(n_), d = size_t(shape_.d_model), f = size_t(my_.ffn);
  a.x.resize(N * d);
  a.xn1.resize(N * d);
  a.qkv.resize(N * size_t(my_.qkv_dim));
  a.o.resize(N * size_t(my_.q_dim));
  a.h.resize(N * d);
  a.xn2.resize(N * d);
  a.ab.resize(N * 2 * f);
  a.rstd1.resize(N);
  a.lse.resize(N * size_t(my_.heads));
  a.rstd2.resize(N);
}

template <class T>
void ActivationStore<T>::begin(int64_t n, int offloaded) {
  // The previous micro-batch's copies must be done before buffers change.
  CUDA_CHECK(cudaStreamSynchronize(copy_));
  n_ = n;
  offloaded_ = std::clamp(offloaded, 0, int(layers_));
  for (int64_t l = offloaded_; l < layers_; ++l) resize(resident_[size_t(l)]);
  if (offloaded_ > 0)
    for (LayerActs<T>& s : slots_) resize(s);
  for (int64_t l = 0; l < layers_; ++l) {
    if (!travels(l)) continue;
    size_t bytes = 0;
    for (const Field& fd : fields(slots_[0])) bytes += fd.bytes;
    if (bytes > host_bytes_[size_t(l)]) {
      if (host_[size_t(l)]) CUDA_CHECK(cudaFreeHost(host_[size_t(l)]));
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_[size_t(l)]), bytes));
      host_bytes_[size_t(l)] = bytes;
    }
  }
}

template <class T>
LayerActs<T>& ActivationStore<T>::operator[](int64_t layer) {
  return layer < offloaded_ ? slots_[layer % 2] : resident_[size_t(layer)];
}

template <class T>
void ActivationStore<T>::claim(int64_t layer) {
  // The slot's previous layer (layer − 2) must have reached the host.
  if (layer < layers_ && layer >= 2 && travels(layer - 2))
    CUDA_CHECK(cudaStreamWaitEvent(compute_, stored_[size_t(layer - 2)]));
}

template <class T>
void ActivationStore<T>::saved(int64_t layer) {
  if (!travels(layer)) return;
  CUDA_CHECK(cudaEventRecord(mark_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(copy_, mark_));
  char* host = host_[size_t(layer)];
  for (const Field& fd : fields((*this)[layer])) {
    CUDA_CHECK(cudaMemcpyAsync(host, fd.device, fd.bytes, cudaMemcpyDeviceToHost, copy_));
    host += fd.bytes;
  }
  CUDA_CHECK(cudaEventRecord(stored_[size_t(layer)], copy_));
}

template <class T>
void ActivationStore<T>::need(int64_t layer) {
  if (travels(layer)) CUDA_CHECK(cudaStreamWaitEvent(compute_, fetched_[size_t(layer)]));
}

template <class T>
void ActivationStore<T>::done(int64_t layer) {
  // Bring layer − 2 back into the slot this layer just freed.
  const int64_t back = layer - 2;
  if (back < 0 || !travels(back)) return;
  CUDA_CHECK(cudaEventRecord(mark_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(copy_, mark_));
  const char* host = host_[size_t(back)];
  for (const Field& fd : fields(slots_[back % 2])) {
    CUDA_CHECK(cudaMemcpyAsync(fd.device, host, fd.bytes, cudaMemcpyHostToDevice, copy_));
    host += fd.bytes;
  }
  CUDA_CHECK(cudaEventRecord(fetched_[size_t(back)], copy_));
}

template <class T>
void ActivationStore<T>::swap_resident(std::vector<LayerActs<T>>& other) {
  ML_CHECK(offloaded_ == 0, "a pipeline stage's activations are not offloaded");
  other.resize(size_t(layers_));
  resident_.swap(other);
}

template class ActivationStore<float>;
template class ActivationStore<__nv_bfloat16>;

}  // namespace meshloom::cuda
