#include "kernels/host/model/stage_link.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {

namespace {

template <class T>
constexpr ncclDataType_t nccl_type() {
  return std::is_same_v<T, float> ? ncclFloat32 : ncclBfloat16;
}

}  // namespace

template <class T>
StageLink<T>::StageLink(MPI_Comm pipeline, int device)
    : pipeline_(std::make_unique<NcclComm>(pipeline, device)) {
  stage_ = pipeline_->rank();
  stages_ = pipeline_->size();
  // Link k joins stages k and k + 1 (ranks 0 and 1 of its communicator);
  // the links of one parity are disjoint, so one split makes all of them.
  // This stage's link to the next has its parity, the one to the stage
  // before the other. Every stage makes the same four splits in order.
  const int next = stage_ % 2, before = 1 - next;
  ncclComm_t links[2][2];
  for (auto& way : links)
    for (int parity = 0; parity < 2; ++parity) way[parity] = split(parity);
  act_out_ = {links[0][next], 1};
  act_in_ = {links[0][before], 0};
  grad_out_ = {links[1][before], 0};
  grad_in_ = {links[1][next], 1};
  for (Link* link : {&act_out_, &act_in_, &grad_out_, &grad_in_})
    if (link->comm) CUDA_CHECK(cudaStreamCreateWithFlags(&link->stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&mark_, cudaEventDisableTiming));
}

template <class T>
StageLink<T>::~StageLink() {
  // Never fail in a destructor: the run is over or failing already.
  for (Pending& p : pending_) cudaEventDestroy(p.done);
  for (Link* link : {&act_out_, &act_in_, &grad_out_, &grad_in_}) {
    if (link->stream) {
      cudaStreamSynchronize(link->stream);
      cudaStreamDestroy(link->stream);
    }
    if (link->comm) ncclCommDestroy(link->comm);
  }
  if (mark_) cudaEventDestroy(mark_);
  pending_.clear();
  pipeline_.reset();  // after the communicators split from it
}

template <class T>
ncclComm_t StageLink<T>::split(int parity) {
  const int link = stage_ % 2 == parity ? stage_ : stage_ - 1;
  const int color = link >= 0 && link + 1 < stages_ ? link : NCCL_SPLIT_NOCOLOR;
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommSplit(pipeline_->get(), color, stage_, &comm, nullptr));
  return comm;
}

template <class T>
void StageLink<T>::send(Way way, DeviceBuffer<T> values, int64_t count, cudaStream_t compute) {
  const Link& link = out(way);
  ML_CHECK(link.comm, strf("pipeline stage %d has no stage to send %s to", stage_,
                           way == activations ? "activations" : "gradients"));
  ML_CHECK(int64_t(values.size()) >= count, "StageLink::send: buffer too small");
  reclaim();
  CUDA_CHECK(cudaEventRecord(mark_, compute));
  CUDA_CHECK(cudaStreamWaitEvent(link.stream, mark_));
  NCCL_CHECK(
      ncclSend(values.data(), size_t(count), nccl_type<T>(), link.peer, link.comm, link.stream));
  Pending p{std::move(values), nullptr, link.comm};
  CUDA_CHECK(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(p.done, link.stream));
  pending_.push_back(std::move(p));
}

template <class T>
void StageLink<T>::recv(Way way, DeviceBuffer<T>& into, int64_t count, cudaStream_t compute,
                        double timeout_s, const std::function<std::string()>& waiting_for) {
  const Link& link = in(way);
  ML_CHECK(link.comm, strf("pipeline stage %d has no stage to receive %s from", stage_,
                           way == activations ? "activations" : "gradients"));
  into.resize(size_t(count));
  CUDA_CHECK(cudaEventRecord(mark_, compute));  // whatever still reads `into`
  CUDA_CHECK(cudaStreamWaitEvent(link.stream, mark_));
  NCCL_CHECK(
      ncclRecv(into.data(), size_t(count), nccl_type<T>(), link.peer, link.comm, link.stream));
  wait(link, nullptr, timeout_s, waiting_for);
}

template <class T>
void StageLink<T>::finish(double timeout_s) {
  for (Pending& p : pending_) {
    const Link& link = p.comm == act_out_.comm ? act_out_ : grad_out_;
    wait(link, p.done, timeout_s, [&] {
      return strf("the end of pipeline stage %d's sends of %s", stage_,
                  &link == &act_out_ ? "activations" : "gradients");
    });
  }
  reclaim();
}

template <class T>
DeviceBuffer<T> StageLink<T>::spare() {
  reclaim();
  if (spare_.empty()) return {};
  DeviceBuffer<T> b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

template <class T>
void StageLink<T>::reclaim() {
  // Sends on one link finish in order: the first unfinished one ends the scan
  // of its link, but the two links interleave, so look at all of them.
  for (auto it = pending_.begin(); it != pending_.end();) {
    const cudaError_t state = cudaEventQuery(it->done);
    if (state == cudaErrorNotReady) {
      ++it;
      continue;
    }
    CUDA_CHECK(state);
    CUDA_CHECK(cudaEventDestroy(it->done));
    spare_.push_back(std::move(it->values));
    it = pending_.erase(it);
  }
}

template <class T>
void StageLink<T>::wait(const Link& link, cudaEvent_t event, double timeout_s,
                        const std::function<std::string()>& what) {
  wait_device([&] { return event ? cudaEventQuery(event) : cudaStreamQuery(link.stream); },
              link.comm, timeout_s, [&] { return what() + " over NCCL"; },
              [&](double waited) {
                ML_TIMEOUT(
                    strf("waited %.0f s for %s over NCCL and got nothing: that rank is dead, "
                         "hung or far behind (run.timeout sets this limit)",
                         waited, what().c_str()));
              });
}

template class StageLink<float>;
template class StageLink<__nv_bfloat16>;

}  // namespace meshloom::cuda
