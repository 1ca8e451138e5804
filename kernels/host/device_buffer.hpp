// DeviceBuffer<T>: an owned cudaMalloc allocation of n elements (RAII,
// movable), with copies to and from host vectors. For tests and the trainer's
// long-lived buffers; hot paths keep their buffers and reuse them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { resize(n); }
  explicit DeviceBuffer(const std::vector<T>& host) { upload(host); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Reallocates (contents lost) unless n fits the current allocation.
  void resize(size_t n) {
    if (n <= size_ && ptr_) return;
    release();
    if (n > 0) CUDA_CHECK(cudaMalloc(&ptr_, n * sizeof(T)));
    size_ = n;
  }
  void zero(cudaStream_t stream = nullptr) {
    if (size_) CUDA_CHECK(cudaMemsetAsync(ptr_, 0, size_ * sizeof(T), stream));
  }
  void upload(const std::vector<T>& host) {
    resize(host.size());
    if (!host.empty())
      CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_) CUDA_CHECK(cudaMemcpy(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  T* ptr_ = nullptr;
  size_t size_ = 0;
};

// Copies on `stream`, after the work enqueued there, then waits for them:
// the host side may go away on return. (cudaMemcpy would run on the legacy
// default stream, which does not order with non-blocking streams.)
template <class T>
void upload_sync(T* dst, std::span<const T> src, cudaStream_t stream) {
  if (src.empty()) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <class T>
void download_sync(std::span<T> dst, const T* src, cudaStream_t stream) {
  if (dst.empty()) return;
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, dst.size_bytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace meshloom::cuda
