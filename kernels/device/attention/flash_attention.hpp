// Flash-style causal, document-masked grouped-query attention on the GPU: the
// CUDA twin of lib/model/attention.hpp (same function, same block operations
// for ring attention). Host-callable; includes only CUDA runtime headers and
// model/attention_blocks.hpp, so plain .cpp files can use it.
//
// Mask: query i sees key j iff sample[i] == sample[j] and pos[j] <= pos[i]
// (int32 per-token sample id and position, on the device). A block may hold
// several packed documents, the two zigzag chunks of a CP rank or a remote
// rank's K/V: the mask is always right.
//
// Layout (all pointers are device pointers, row-major, token-major):
//   q    [n_q, n_heads·D]     leading dimension q.ld   (head h at column h·D)
//   k, v [n_kv, n_kv_heads·D] leading dimensions ldk, ldv
//   out  [n_q, n_heads·D]     leading dimension out.ld
//   lse, delta [n_q, n_heads] dense float
//   dq [n_q, n_heads·D], dk/dv [n_kv, n_kv_heads·D] float, accumulated into (+=)
// Leading dimensions are in elements and free, so Q, K and V may be column
// slices of one fused QKV buffer. Query head h reads KV head
// h / (n_heads / n_kv_heads). Scores are scaled by 1/sqrt(D); D is 64 or 128.
//
// Element types: T (Q, K, V, dO) is __nv_bfloat16 (tensor cores, fp32
// accumulation) or float (exact fp32 path for checks). Forward's output TO is
// T or, for bf16 inputs, float (an fp32 accumulator for ring attention).
// lse, delta and the gradients are always float.
//
// Ring attention (see lib/model/attention.hpp): forward over the local K/V,
// then per remote block forward into a scratch (out, lse) and merge it in;
// backward: delta once from the final out, then backward per block pair with
// the FINAL lse, accumulating into dQ and the travelling dK/dV.
//
// Every call is asynchronous on `stream`; launch errors fail via CUDA_CHECK.
// Forward and backward allocate a small tile-range scratch with
// cudaMallocAsync on the stream (stream-ordered, freed before return).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/attention_blocks.hpp"

namespace meshloom::cuda {

struct FlashDims {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
};

// Query rows and key/value rows with their sample ids and positions, as the
// CPU attention takes them (model/attention_blocks.hpp).
template <class T>
using FlashQuery = model::QueryBlock<T>;
template <class T>
using FlashKv = model::KvBlock<T>;

// Forward result: out [n, n_heads·D] (leading dimension ld), lse [n, n_heads].
template <class TO>
struct FlashOut {
  TO* out = nullptr;
  int64_t ld = 0;
  float* lse = nullptr;
};

// Backward inputs of a query block (dout, FINAL lse, delta) and its dq (+=).
template <class T>
struct FlashQueryGrad {
  const T* dout = nullptr;
  int64_t lddo = 0;
  const float* lse = nullptr;
  const float* delta = nullptr;
  float* dq = nullptr;
  int64_t lddq = 0;
};

// dK and dV of a key/value block (fp32), accumulated into.
using FlashKvGrad = model::KvGrad<float>;

// Which bf16 kernels run (process-wide; tests and benchmarks compare them).
// Where the rows of every operand are 16-byte aligned:
//   automatic: forward and backward on wgmma where the device is an sm_90
//              (Hopper), else on mma.sync;
//   wgmma:     the same as automatic (named, for tests and benchmarks);
//   mma:       forward and backward on mma.sync (the register-tiled
//              FlashAttention-2 design, any sm_80 or later);
//   wmma:      forward and backward on the WMMA kernels (through shared memory).
// Unaligned rows always take the WMMA kernels, and fp32 their exact FMA path.
// The environment variable MESHLOOM_FLASH_KERNEL (automatic, wgmma, mma or
// wmma) sets the initial choice, e.g. to run a model on the mma.sync kernels.
enum class FlashKernel { automatic, wmma, mma, wgmma };
void set_flash_kernel(FlashKernel kernel);
// Whether the current device runs the wgmma forward (compute capability 9.0).
bool flash_wgmma_available();

// Whether the kernels are compiled for this head dimension.
bool flash_attention_supports_head_dim(int head_dim);

// Overwrites res.out and res.lse with the queries' attention over this KV
// block (zero row and lse = -inf where a query sees no key).
// T = __nv_bfloat16 with TO = __nv_bfloat16 or float; T = TO = float.
template <class T, class TO>
void flash_attention_forward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                             const FlashOut<TO>& res, cudaStream_t stream);

// acc ← online-softmax merge of acc and (out, lse), for n query rows.
// TO = __nv_bfloat16 or float.
template <class TO>
void flash_attention_merge(const FlashDims& dims, int64_t n, const FlashOut<TO>& acc, const TO* out,
                           int64_t ld, const float* lse, cudaStream_t stream);

// delta[i·n_heads + h] = Σ_c dout[i, h·D + c] · out[i, h·D + c] (fp32 sums).
// (TO, T) = (bf16, bf16), (float, bf16) or (float, float).
template <class TO, class T>
void flash_attention_delta(const FlashDims& dims, int64_t n, const TO* out, int64_t ldo,
                           const T* dout, int64_t lddo, float* delta, cudaStream_t stream);

// Adds this block pair's share to g.dq and to kv_grad.dk, .dv (fp32 atomics,
// so the order of additions, and the last bits, vary run to run).
template <class T>
void flash_attention_backward(const FlashDims& dims, const FlashQuery<T>& q, const FlashKv<T>& kv,
                              const FlashQueryGrad<T>& g, const FlashKvGrad& kv_grad,
                              cudaStream_t stream);

}  // namespace meshloom::cuda
