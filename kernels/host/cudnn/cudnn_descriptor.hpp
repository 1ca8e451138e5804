// A cuDNN backend descriptor (cudnnBackendDescriptor_t) owned RAII-style,
// with typed setters for the attribute kinds the attention graphs use. Every
// call goes through CUDNN_CHECK, so a refused attribute or finalize fails
// with cuDNN's own message (a meshloom::Error under the test handler).
// Handle-free: creating, setting and finalizing tensors and operations needs
// no GPU; only heuristics, plans and execution do (sdpa_plan.hpp).
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace meshloom::cudnn {

class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  ~Descriptor() { reset(); }
  Descriptor(Descriptor&& o) noexcept : desc_(o.desc_) { o.desc_ = nullptr; }
  Descriptor& operator=(Descriptor&& o) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  explicit operator bool() const { return desc_ != nullptr; }

  // Setters return *this, so a descriptor reads as one chain of attributes.
  Descriptor& set(cudnnBackendAttributeName_t name, int64_t value);
  Descriptor& set(cudnnBackendAttributeName_t name, const std::vector<int64_t>& values);
  Descriptor& set(cudnnBackendAttributeName_t name, float value);
  Descriptor& set(cudnnBackendAttributeName_t name, bool value);
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnDataType_t value);
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnPointwiseMode_t value);
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnReduceTensorOp_t value);
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendHeurMode_t value);
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnHandle_t value);
  // One descriptor-valued attribute, or an array of them (the graph's ops).
  Descriptor& set(cudnnBackendAttributeName_t name, const Descriptor& value);
  Descriptor& set(cudnnBackendAttributeName_t name,
                  const std::vector<cudnnBackendDescriptor_t>& values);
  // Raw form, for the variant pack's pointer array and such.
  Descriptor& set_raw(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                      int64_t count, const void* values);

  Descriptor& finalize();
  // Finalize where refusal is an answer, not an error (an engine config
  // that does not fit this graph): the status, unchecked.
  cudnnStatus_t try_finalize();

 private:
  void reset();
  cudnnBackendDescriptor_t desc_ = nullptr;
};

}  // namespace meshloom::cudnn
