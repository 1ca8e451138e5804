// AdamW, gradient norm and clip-scale kernels (see adamw.hpp). The update is
// a grid-stride loop; rounding intrinsics (__fmul_rn, ...) keep nvcc from
// fusing multiply-adds so the arithmetic is the CPU's, operation for operation.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/device/common/check.cuh"
#include "kernels/device/ops/adamw.hpp"
#include "kernels/device/ops/ops_util.cuh"

namespace meshloom::cuda {

namespace {

using namespace ops_detail;

constexpr int kThreads = 256;
// Fixed grid of the sum of squares: the order of additions depends on n only.
constexpr int kNormBlocks = 512;
constexpr int kNormThreads = 256;

// fp32 constants of one step, derived on the host exactly as the CPU does.
struct StepConsts {
  float b1, b2, one_minus_b1, one_minus_b2, c1, c2, eps, lr, wd, gs;
};

__global__ void adamw_elems(float* master, float* m, float* v, const float* grads,
                            const uint8_t* decay, int64_t n, StepConsts k,
                            const float* device_grad_scale, __nv_bfloat16* weights) {
  const float gs = device_grad_scale ? *device_grad_scale : k.gs;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = __fmul_rn(grads[i], gs);
    const float mi = __fadd_rn(__fmul_rn(k.b1, m[i]), __fmul_rn(k.one_minus_b1, g));
    const float vi = __fadd_rn(__fmul_rn(k.b2, v[i]), __fmul_rn(__fmul_rn(k.one_minus_b2, g), g));
    m[i] = mi;
    v[i] = vi;
    const float update =
        __fdiv_rn(__fmul_rn(mi, k.c1), __fadd_rn(__fsqrt_rn(__fmul_rn(vi, k.c2)), k.eps));
    const float p = master[i];
    const float wd = (decay && decay[i]) ? __fmul_rn(k.wd, p) : 0.0f;
    const float updated = __fsub_rn(p, __fmul_rn(k.lr, __fadd_rn(update, wd)));
    master[i] = updated;
    if (weights) weights[i] = __float2bfloat16_rn(updated);
  }
}

// Stage 1: partial[block] = Σ over the block's grid-stride elements of g².
__global__ void sum_squares_partials(const float* g, int64_t n, double* partial) {
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double x = g[i];
    acc += x * x;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Stage 2 (one block of kNormBlocks threads): the partials in a fixed tree.
__global__ void sum_squares_finish(const double* partial, double* sum_sq) {
  const double total = block_sum(partial[threadIdx.x]);
  if (threadIdx.x == 0) *sum_sq = total;
}

__global__ void clip_scale_kernel(const double* sum_sq, double clip, float* scale, double* norm) {
  const double nrm = sqrt(*sum_sq);
  const double s = (clip <= 0 || nrm <= clip) ? 1.0 : clip / (nrm + 1e-6);
  *scale = float(s);
  if (norm) *norm = nrm;
}

}  // namespace

std::vector<uint8_t> adamw_decay_mask(int64_t begin, int64_t end,
                                      const std::vector<std::pair<int64_t, int64_t>>& decay) {
  std::vector<uint8_t> mask(size_t(std::max<int64_t>(0, end - begin)), 0);
  for (auto [a, b] : decay)
    for (int64_t i = std::max(a, begin); i < std::min(b, end); ++i) mask[size_t(i - begin)] = 1;
  return mask;
}

void adamw_update(float* master, float* m, float* v, const float* grads, const uint8_t* decay,
                  int64_t n, int64_t step, double lr, double grad_scale,
                  const float* device_grad_scale, const AdamWHyper& hyper,
                  __nv_bfloat16* weights_bf16, cudaStream_t stream) {
  ML_CHECK(step >= 1, "adamw_update: step counts from 1");
  if (n == 0) return;
  StepConsts k{};
  k.b1 = float(hyper.beta1);
  k.b2 = float(hyper.beta2);
  k.one_minus_b1 = 1 - k.b1;  // in float, as the CPU's (1 - b1)
  k.one_minus_b2 = 1 - k.b2;
  k.c1 = float(1.0 / (1.0 - std::pow(hyper.beta1, double(step))));
  k.c2 = float(1.0 / (1.0 - std::pow(hyper.beta2, double(step))));
  k.eps = float(hyper.eps);
  k.lr = float(lr);
  k.wd = float(hyper.weight_decay);
  k.gs = float(grad_scale);
  adamw_elems<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(master, m, v, grads, decay, n, k,
                                                                device_grad_scale, weights_bf16);
  CUDA_CHECK(cudaGetLastError());
}

void grad_sum_squares(const float* grads, int64_t n, double* sum_sq, cudaStream_t stream) {
  double* partial = nullptr;
  CUDA_CHECK(
      cudaMallocAsync(reinterpret_cast<void**>(&partial), kNormBlocks * sizeof(double), stream));
  sum_squares_partials<<<kNormBlocks, kNormThreads, 0, stream>>>(grads, n, partial);
  CUDA_CHECK(cudaGetLastError());
  sum_squares_finish<<<1, kNormBlocks, 0, stream>>>(partial, sum_sq);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaFreeAsync(partial, stream));
}

void clip_scale_device(const double* sum_sq, double clip, float* scale, double* norm,
                       cudaStream_t stream) {
  clip_scale_kernel<<<1, 1, 0, stream>>>(sum_sq, clip, scale, norm);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace meshloom::cuda
