// LM loss kernels (see lm_loss.hpp): one block per token row of the chunk,
// threads over the shard's vocabulary rows; a single-block fixed-order sum of
// the per-token losses; grid-stride loops for the scaled copies.
#include <cuda_bf16.h>

#include <cmath>

#include "base/check.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/ops/lm_loss.hpp"
#include "kernels/device/ops/ops_util.cuh"

namespace meshloom::cuda {

namespace {

using namespace ops_detail;

constexpr int kRowThreads = 512;
constexpr int kSumThreads = 1024;
constexpr int kElemThreads = 256;

// The target's column in the shard, or −1 when another shard holds it (or
// the token has no target).
__device__ inline int64_t local_column(int32_t target, VocabRows shard) {
  const int64_t c = int64_t(target) - shard.first;
  return target >= 0 && c >= 0 && c < shard.rows ? c : -1;
}

template <class T>
__global__ void shard_max_rows(const T* z, VocabRows shard, const int32_t* targets, double* max,
                               double* target_logit) {
  const int64_t i = blockIdx.x;
  const T* row = z + i * shard.rows;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < shard.rows; c += blockDim.x) m = fmaxf(m, to_f32(row[c]));
  m = block_max(m);
  if (threadIdx.x != 0) return;
  const int64_t c = local_column(targets[i], shard);
  max[i] = double(m);
  target_logit[i] = c >= 0 ? double(to_f32(row[c])) : 0.0;
}

template <class T>
__global__ void shard_sum_rows(const T* z, int64_t rows, const int32_t* targets, const double* max,
                               double* sum) {
  const int64_t i = blockIdx.x;
  if (targets[i] < 0) {  // the whole block leaves: no barrier is reached
    if (threadIdx.x == 0) sum[i] = 0.0;
    return;
  }
  const T* row = z + i * rows;
  const float m = float(max[i]);  // a logit: exact in fp32
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < rows; c += blockDim.x) s += expf(to_f32(row[c]) - m);
  const double total = block_sum(double(s));
  if (threadIdx.x == 0) sum[i] = total;
}

template <class T>
__global__ void softmax_grad_rows(T* z, VocabRows shard, const int32_t* targets, const double* max,
                                  const double* sum, const double* target_logit, double* row_loss) {
  const int64_t i = blockIdx.x;
  T* row = z + i * shard.rows;
  const int32_t target = targets[i];
  if (target < 0) {
    for (int64_t c = threadIdx.x; c < shard.rows; c += blockDim.x) row[c] = from_f32<T>(0.0f);
    if (threadIdx.x == 0) row_loss[i] = 0.0;
    return;
  }
  const float m = float(max[i]);
  const float inv = float(1.0 / sum[i]);
  const int64_t own = local_column(target, shard);
  for (int64_t c = threadIdx.x; c < shard.rows; c += blockDim.x) {
    float p = expf(to_f32(row[c]) - m) * inv;
    if (c == own) p -= 1.0f;
    row[c] = from_f32<T>(p);
  }
  // −log p(target) = log Σ exp(z − max) − (z_target − max), as the CPU.
  if (threadIdx.x == 0) row_loss[i] = log(sum[i]) - (target_logit[i] - max[i]);
}

// One block: thread j sums rows j, j + blockDim, ... in order, then a fixed
// tree over the block.
__global__ void sum_row_losses(const double* row_loss, const int32_t* targets, int64_t n,
                               double* loss_sum, int64_t* count) {
  double sum = 0;
  long long k = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += row_loss[i];
    k += targets[i] >= 0 ? 1 : 0;
  }
  sum = block_sum(sum);
  k = block_sum(k);
  if (threadIdx.x == 0) {
    *loss_sum = sum;
    *count = int64_t(k);
  }
}

template <class T>
__global__ void scale_elems(const T* src, int64_t n, float scale, T* dst) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[e] = from_f32<T>(scale * to_f32(src[e]));
}

__global__ void add_scaled_elems(const float* src, int64_t n, float scale, float* dst) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[e] += scale * src[e];
}

void check_shard(VocabRows shard) {
  ML_CHECK(shard.rows > 0 && shard.first >= 0, "lm_loss: empty vocabulary shard");
}

}  // namespace

template <class T>
void lm_loss_shard_max(const T* z, int64_t m, VocabRows shard, const int32_t* targets, double* max,
                       double* target_logit, cudaStream_t stream) {
  check_shard(shard);
  if (m == 0) return;
  shard_max_rows<T><<<unsigned(m), threads_for(shard.rows, kRowThreads), 0, stream>>>(
      z, shard, targets, max, target_logit);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void lm_loss_shard_sums(const T* z, int64_t m, int64_t rows, const int32_t* targets,
                        const double* max, double* sum, cudaStream_t stream) {
  check_shard(VocabRows{0, rows});
  if (m == 0) return;
  shard_sum_rows<T>
      <<<unsigned(m), threads_for(rows, kRowThreads), 0, stream>>>(z, rows, targets, max, sum);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void lm_loss_softmax_grad(T* z, int64_t m, VocabRows shard, const int32_t* targets,
                          const double* max, const double* sum, const double* target_logit,
                          double* row_loss, cudaStream_t stream) {
  check_shard(shard);
  if (m == 0) return;
  softmax_grad_rows<T><<<unsigned(m), threads_for(shard.rows, kRowThreads), 0, stream>>>(
      z, shard, targets, max, sum, target_logit, row_loss);
  CUDA_CHECK(cudaGetLastError());
}

void lm_loss_total(const double* row_loss, const int32_t* targets, int64_t n, double* loss_sum,
                   int64_t* count, cudaStream_t stream) {
  sum_row_losses<<<1, kSumThreads, 0, stream>>>(row_loss, targets, n, loss_sum, count);
  CUDA_CHECK(cudaGetLastError());
}

template <class T>
void scale_into(const T* src, int64_t n, float scale, T* dst, cudaStream_t stream) {
  if (n <= 0) return;
  scale_elems<T><<<blocks_for(n, kElemThreads), kElemThreads, 0, stream>>>(src, n, scale, dst);
  CUDA_CHECK(cudaGetLastError());
}

void add_scaled(const float* src, int64_t n, float scale, float* dst, cudaStream_t stream) {
  if (n <= 0) return;
  add_scaled_elems<<<blocks_for(n, kElemThreads), kElemThreads, 0, stream>>>(src, n, scale, dst);
  CUDA_CHECK(cudaGetLastError());
}

#define ML_LM_LOSS(T)                                                                            \
  template void lm_loss_shard_max<T>(const T*, int64_t, VocabRows, const int32_t*, double*,      \
                                     double*, cudaStream_t);                                     \
  template void lm_loss_shard_sums<T>(const T*, int64_t, int64_t, const int32_t*, const double*, \
                                      double*, cudaStream_t);                                    \
  template void lm_loss_softmax_grad<T>(T*, int64_t, VocabRows, const int32_t*, const double*,   \
                                        const double*, const double*, double*, cudaStream_t);    \
  template void scale_into<T>(const T*, int64_t, float, T*, cudaStream_t);
ML_LM_LOSS(float)
ML_LM_LOSS(__nv_bfloat16)
#undef ML_LM_LOSS

}  // namespace meshloom::cuda
