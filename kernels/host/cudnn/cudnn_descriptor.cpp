#include "kernels/host/cudnn/cudnn_descriptor.hpp"

#include <utility>

#include "kernels/host/cudnn/cudnn_check.hpp"

namespace meshloom {

std::string cudnn_error_text(cudnnStatus_t status) {
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string text = cudnnGetErrorString(status);
  if (detail[0] != '\0') text += std::string(": ") + detail;
  return text;
}

}  // namespace meshloom

namespace meshloom::cudnn {

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) {
  CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_));
}

Descriptor& Descriptor::operator=(Descriptor&& o) noexcept {
  if (this != &o) {
    reset();
    desc_ = std::exchange(o.desc_, nullptr);
  }
  return *this;
}

void Descriptor::reset() {
  // Destroying cannot usefully fail; a destructor must not throw.
  if (desc_) cudnnBackendDestroyDescriptor(desc_);
  desc_ = nullptr;
}

Descriptor& Descriptor::set_raw(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                                int64_t count, const void* values) {
  CUDNN_CHECK(cudnnBackendSetAttribute(desc_, name, type, count, values));
  return *this;
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, int64_t value) {
  return set_raw(name, CUDNN_TYPE_INT64, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values) {
  return set_raw(name, CUDNN_TYPE_INT64, int64_t(values.size()), values.data());
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, float value) {
  return set_raw(name, CUDNN_TYPE_FLOAT, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, bool value) {
  return set_raw(name, CUDNN_TYPE_BOOLEAN, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnDataType_t value) {
  return set_raw(name, CUDNN_TYPE_DATA_TYPE, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnPointwiseMode_t value) {
  return set_raw(name, CUDNN_TYPE_POINTWISE_MODE, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnReduceTensorOp_t value) {
  return set_raw(name, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendHeurMode_t value) {
  return set_raw(name, CUDNN_TYPE_HEUR_MODE, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, cudnnHandle_t value) {
  return set_raw(name, CUDNN_TYPE_HANDLE, 1, &value);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name, const Descriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  return set_raw(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}
Descriptor& Descriptor::set(cudnnBackendAttributeName_t name,
                            const std::vector<cudnnBackendDescriptor_t>& values) {
  return set_raw(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(values.size()), values.data());
}

Descriptor& Descriptor::finalize() {
  CUDNN_CHECK(cudnnBackendFinalize(desc_));
  return *this;
}

cudnnStatus_t Descriptor::try_finalize() { return cudnnBackendFinalize(desc_); }

}  // namespace meshloom::cudnn
