// Micro-benchmark of the flash attention kernels on one packed micro-batch:
// times forward and backward (delta + block backward, the local-attention
// case) and prints TFLOP/s with causal FLOPs (forward 4·D·H·Σ L²/2, backward
// 2.5× forward), to compare against the 350 TFLOP/s target.
//
//   attention_bench [--docs 16384,8192,...] [--heads 16] [--kv-heads 16]
//                   [--dim 128] [--iters 20]
// Without --docs a long-tail mix of 32768 tokens is used. Exits 0 with a
// message where no GPU is visible.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/common/check.cuh"
#include "kernels/device/device_info.hpp"

namespace {

using meshloom::cuda::FlashDims;
using bf16 = __nv_bfloat16;

// Uniform values in [-1, 1) from a hash of (seed, index): no host copies.
template <class T>
__global__ void fill_kernel(T* x, int64_t n, uint32_t seed) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  x[i] = static_cast<T>(static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f);
}

template <class T>
T* device_random(int64_t n, uint32_t seed) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(n) * sizeof(T)));
  fill_kernel<T><<<static_cast<unsigned>((n + 255) / 256), 256>>>(p, n, seed);
  CUDA_CHECK(cudaGetLastError());
  return p;
}

std::vector<int> parse_docs(const char* s) {
  std::vector<int> docs;
  for (const char* c = s; *c;) {
    char* end = nullptr;
    const long v = std::strtol(c, &end, 10);
    if (end == c || v <= 0) {
      std::fprintf(stderr, "bad --docs list: %s\n", s);
      std::exit(2);
    }
    docs.push_back(static_cast<int>(v));
    c = *end == ',' ? end + 1 : end;
  }
  return docs;
}

struct BenchArgs {
  std::vector<int> docs = {16384, 8192, 4096, 2048, 1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1, 1};
  int heads = 16, kv_heads = 16, dim = 128, iters = 20;
};

BenchArgs parse_args(int argc, char** argv) {
  BenchArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--docs") {
      a.docs = parse_docs(argv[i + 1]);
    } else if (flag == "--heads") {
      a.heads = std::atoi(argv[i + 1]);
    } else if (flag == "--kv-heads") {
      a.kv_heads = std::atoi(argv[i + 1]);
    } else if (flag == "--dim") {
      a.dim = std::atoi(argv[i + 1]);
    } else if (flag == "--iters") {
      a.iters = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      std::exit(2);
    }
  }
  return a;
}

// Mean milliseconds of `fn` over `iters` runs on `stream`, after two warm-ups.
template <class Fn>
double mean_ms(cudaStream_t stream, int iters, Fn&& fn) {
  for (int i = 0; i < 2; ++i) fn();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) fn();
  CUDA_CHECK(cudaEventRecord(stop, stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / iters;
}

}  // namespace

int main(int argc, char** argv) {
  const BenchArgs args = parse_args(argc, argv);
  const std::vector<int>& docs = args.docs;
  const int heads = args.heads, kv_heads = args.kv_heads, dim = args.dim, iters = args.iters;
  std::string why;
  if (meshloom::cuda::device_count(&why) == 0) {
    std::printf("attention_bench: no GPU (%s); nothing to measure\n", why.c_str());
    return 0;
  }
  std::printf("%s\n", meshloom::cuda::summary().c_str());

  std::vector<int32_t> sample, pos;
  double sum_sq = 0.0;
  for (size_t d = 0; d < docs.size(); ++d) {
    for (int t = 0; t < docs[d]; ++t) {
      sample.push_back(static_cast<int32_t>(d));
      pos.push_back(t);
    }
    sum_sq += static_cast<double>(docs[d]) * docs[d];
  }
  const int64_t n = static_cast<int64_t>(sample.size());
  const FlashDims dims{heads, kv_heads, dim};
  const int64_t ld_qkv = static_cast<int64_t>(heads + 2 * kv_heads) * dim;
  const int64_t ld_o = static_cast<int64_t>(heads) * dim;
  const int64_t ld_kv = static_cast<int64_t>(kv_heads) * dim;

  bf16* qkv = device_random<bf16>(n * ld_qkv, 1);
  bf16* dout = device_random<bf16>(n * ld_o, 2);
  bf16* out = nullptr;
  float *lse = nullptr, *delta = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  int32_t *d_sample = nullptr, *d_pos = nullptr;
  CUDA_CHECK(cudaMalloc(&out, n * ld_o * sizeof(bf16)));
  CUDA_CHECK(cudaMalloc(&lse, n * heads * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&delta, n * heads * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dq, n * ld_o * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dk, n * ld_kv * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dv, n * ld_kv * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_sample, n * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc(&d_pos, n * sizeof(int32_t)));
  CUDA_CHECK(cudaMemcpy(d_sample, sample.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_pos, pos.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dq, 0, n * ld_o * sizeof(float)));
  CUDA_CHECK(cudaMemset(dk, 0, n * ld_kv * sizeof(float)));
  CUDA_CHECK(cudaMemset(dv, 0, n * ld_kv * sizeof(float)));

  using namespace meshloom::cuda;
  const FlashQuery<bf16> q{qkv, ld_qkv, d_sample, d_pos, n};
  const FlashKv<bf16> kv{qkv + ld_o, qkv + ld_o + ld_kv, ld_qkv, ld_qkv, d_sample, d_pos, n};
  const FlashOut<bf16> res{out, ld_o, lse};
  const FlashQueryGrad<bf16> g{dout, ld_o, lse, delta, dq, ld_o};
  const FlashKvGrad kvg{dk, dv, ld_kv, ld_kv};
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  auto forward = [&] { flash_attention_forward(dims, q, kv, res, stream); };
  auto backward = [&] {
    flash_attention_delta(dims, n, out, ld_o, dout, ld_o, delta, stream);
    flash_attention_backward(dims, q, kv, g, kvg, stream);
  };
  auto time_ms = [&](auto&& fn) { return mean_ms(stream, iters, fn); };
  // The default kernels (wgmma forward on an sm_90, else mma.sync), then
  // each family by name; the outputs of the default and the mma.sync forward
  // are compared, as a sanity check of the timed kernels.
  const double fwd_ms = time_ms(forward);
  const double bwd_ms = time_ms(backward);
  std::vector<bf16> out_default(static_cast<size_t>(n * ld_o)), out_mma(out_default.size());
  CUDA_CHECK(cudaMemcpy(out_default.data(), out, out_default.size() * sizeof(bf16),
                        cudaMemcpyDeviceToHost));
  set_flash_kernel(FlashKernel::mma);
  const double fwd_mma_ms = time_ms(forward);
  const double bwd_mma_ms = time_ms(backward);
  CUDA_CHECK(
      cudaMemcpy(out_mma.data(), out, out_mma.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
  set_flash_kernel(FlashKernel::wmma);
  const double fwd_wmma_ms = time_ms(forward);
  const double bwd_wmma_ms = time_ms(backward);
  set_flash_kernel(FlashKernel::automatic);
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < out_mma.size(); ++i) {
    const double a = __bfloat162float(out_default[i]), b = __bfloat162float(out_mma[i]);
    max_diff = std::max(max_diff, std::abs(a - b));
    max_ref = std::max(max_ref, std::abs(b));
  }
  const double fwd_flops = 4.0 * dim * heads * sum_sq / 2.0;
  const double bwd_flops = 2.5 * fwd_flops;
  auto tflops = [](double flops, double ms) { return flops / (ms * 1e9); };
  std::printf("tokens %lld in %zu documents, heads %d/%d, head_dim %d, bf16\n",
              static_cast<long long>(n), docs.size(), heads, kv_heads, dim);
  std::printf("forward kernel: %s\n", flash_wgmma_available() ? "wgmma" : "mma.sync");
  std::printf("forward : %8.3f ms  %7.1f TFLOP/s\n", fwd_ms, tflops(fwd_flops, fwd_ms));
  std::printf("forward (mma.sync kernel): %8.3f ms  %7.1f TFLOP/s\n", fwd_mma_ms,
              tflops(fwd_flops, fwd_mma_ms));
  std::printf("forward (WMMA kernel): %8.3f ms  %7.1f TFLOP/s\n", fwd_wmma_ms,
              tflops(fwd_flops, fwd_wmma_ms));
  std::printf("backward: %8.3f ms  %7.1f TFLOP/s (delta + backward)\n", bwd_ms,
              tflops(bwd_flops, bwd_ms));
  std::printf("backward (mma.sync kernel): %8.3f ms  %7.1f TFLOP/s\n", bwd_mma_ms,
              tflops(bwd_flops, bwd_mma_ms));
  std::printf("backward (WMMA kernel): %8.3f ms  %7.1f TFLOP/s\n", bwd_wmma_ms,
              tflops(bwd_flops, bwd_wmma_ms));
  std::printf("forward output, default vs mma.sync: max |diff| %.3g (max |out| %.3g)\n", max_diff,
              max_ref);
  std::printf("target  : 350 TFLOP/s\n");

  CUDA_CHECK(cudaStreamDestroy(stream));
  for (void* ptr : {static_cast<void*>(qkv), static_cast<void*>(dout), static_cast<void*>(out),
                    static_cast<void*>(lse), static_cast<void*>(delta), static_cast<void*>(dq),
                    static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(d_sample),
                    static_cast<void*>(d_pos)}) {
    CUDA_CHECK(cudaFree(ptr));
  }
  return 0;
}
