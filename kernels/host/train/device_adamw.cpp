#include "kernels/host/train/device_adamw.hpp"

#include <string>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

DeviceAdamW::DeviceAdamW(int64_t numel, int64_t padded, int64_t begin, int64_t end,
                         const AdamWHyper& hyper,
                         const std::vector<std::pair<int64_t, int64_t>>& decay, cudaStream_t stream)
    : numel_(numel), begin_(begin), end_(end), hyper_(hyper), stream_(stream) {
  ML_CHECK(0 <= begin && begin <= end && end <= numel && numel <= padded,
           "optimizer slice [" + std::to_string(begin) + ", " + std::to_string(end) +
               ") does not fit " + std::to_string(numel) + " parameters");
  master_.resize(size_t(padded));
  master_.zero(stream_);  // the padding all-gathers as zeros
  const size_t owned = size_t(end - begin);
  m_.resize(owned);
  v_.resize(owned);
  m_.zero(stream_);
  v_.zero(stream_);
  const std::vector<uint8_t> mask = adamw_decay_mask(begin, end, decay);
  decay_.resize(owned);
  upload_sync<uint8_t>(decay_.data(), mask, stream_);
}

void DeviceAdamW::load(std::span<const float> master, std::span<const float> m,
                       std::span<const float> v, int64_t step) {
  const size_t owned = size_t(end_ - begin_);
  ML_CHECK(int64_t(master.size()) == numel_, "optimizer load: wrong parameter count");
  ML_CHECK((m.empty() && v.empty()) || (m.size() == owned && v.size() == owned),
           "optimizer load: moments of the wrong size");
  ML_CHECK(step >= 0, "optimizer load: negative step");
  upload_sync(master_.data(), master, stream_);
  if (m.empty()) {
    m_.zero(stream_);
    v_.zero(stream_);
  } else {
    upload_sync(m_.data(), m, stream_);
    upload_sync(v_.data(), v, stream_);
  }
  step_ = step;
}

void DeviceAdamW::update(const float* grads, double lr, double grad_scale,
                         __nv_bfloat16* weights_bf16) {
  ++step_;
  adamw_update(master_.data() + begin_, m_.data(), v_.data(), grads + begin_, decay_.data(),
               end_ - begin_, step_, lr, grad_scale, nullptr, hyper_,
               weights_bf16 ? weights_bf16 + begin_ : nullptr, stream_);
}

void DeviceAdamW::download_master(std::span<float> out) const {
  ML_CHECK(int64_t(out.size()) == numel_, "optimizer download: wrong parameter count");
  download_sync(out, master_.data(), stream_);
}

void DeviceAdamW::download_moments(std::span<float> m, std::span<float> v) const {
  const size_t owned = size_t(end_ - begin_);
  ML_CHECK(m.size() == owned && v.size() == owned, "optimizer download: moments of the wrong size");
  download_sync(m, m_.data(), stream_);
  download_sync(v, v_.data(), stream_);
}

}  // namespace meshloom::cuda
