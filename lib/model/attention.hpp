// Causal, document-masked grouped-query attention as block operations, the
// shape ring attention (context parallelism) needs.
//
// A query block (rows of Q) meets a key/value block (rows of K and V); the
// mask is computed from each token's (sample id, position): query i sees key j
// iff sample[i] == sample[j] and pos[j] <= pos[i]. So a block may hold any
// tokens at all (several packed documents, the two zigzag chunks a CP rank
// holds, a remote rank's K/V) and the mask is always right.
//
// Forward:  attention_block_forward() gives, for each query row and head, the
//           softmax-weighted sum over this block's visible keys and the
//           log-sum-exp of its scores (-inf and a zero row when it sees none).
//           attention_merge() folds another block's partial result in (online
//           softmax), so   full = merge over all key blocks of block_forward.
// Backward: with the FINAL output O and log-sum-exp, and dO:
//           attention_delta() computes delta = rowsum(dO ⊙ O) per head once,
//           attention_block_backward() then adds this block pair's share to
//           dQ and to the block's dK, dV.
//
// Ring attention on rank r of a CP group of size k, per layer:
//   forward:  block_forward(Q_r, KV_r) → (O, lse); k-1 times: receive the
//             next K/V block, block_forward(Q_r, KV_remote) → partial,
//             merge(O, lse, partial) — the receive overlaps the compute.
//   backward: delta = attention_delta(O, dO); dQ = 0; dKV_r = 0;
//             block_backward(Q_r, KV_r, ...); k-1 times: receive the next K/V
//             block with its travelling dK/dV accumulator, block_backward into
//             it, pass both on; finally the accumulator of KV_r comes home.
//
// Layout: token-major rows; Q rows hold n_heads heads of head_dim values
// (column h·D), K and V rows hold n_kv_heads heads; query head h reads KV head
// h / (n_heads / n_kv_heads). Leading dimensions are free, so Q, K and V can
// be column slices of one fused QKV buffer. lse and delta are [n, n_heads].
// Scores are scaled by 1/sqrt(head_dim).
//
// Inside, work is tiled (tile_q query rows × tile_k keys per step, one GEMM
// for QKᵀ and one for PV per tile, flash-attention style online softmax), so
// no score matrix larger than a tile ever exists. From the (sample, position)
// ranges of each tile pair, fully masked pairs are skipped and partly masked
// ones are trimmed to the rows and keys that can matter before any GEMM.
// Forward runs (head, query tile) units on `threads` threads; backward runs
// one unit per KV head (so dK/dV/dQ writes never collide), cut further into
// key-tile stripes with private dQ buffers when the thread count does not
// divide n_kv_heads. Results do not depend on the thread count, except
// backward's dQ rounding in that striped case.
#pragma once

#include <cstdint>
#include <vector>

#include "model/attention_blocks.hpp"

namespace meshloom::model {

struct AttnDims {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t group() const { return n_heads / n_kv_heads; }
};

struct AttnOptions {
  int64_t tile_q = 64;
  int64_t tile_k = 128;
  int threads = 1;
};

// Where a forward result goes: out [n, n_heads·D] (leading dimension ld) and
// lse [n, n_heads].
template <class T>
struct AttnOut {
  T* out = nullptr;
  int64_t ld = 0;
  T* lse = nullptr;
};

// Backward inputs and outputs of a query block: dout [n, n_heads·D], the
// final lse and delta [n, n_heads], and dq (accumulated into).
template <class T>
struct QueryGrad {
  const T* dout = nullptr;
  int64_t lddo = 0;
  const T* lse = nullptr;
  const T* delta = nullptr;
  T* dq = nullptr;
  int64_t lddq = 0;
};

// Overwrites res.out and res.lse with the queries' attention over this block.
template <class T>
void attention_block_forward(const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                             const AttnOut<T>& res, const AttnOptions& opt);

// acc ← softmax-merge(acc, (out, lse)) for n query rows.
template <class T>
void attention_merge(const AttnDims& dims, int64_t n, const AttnOut<T>& acc, const T* out,
                     int64_t ld, const T* lse, int threads = 1);

// delta[i, h] = Σ_c dout[i, h·D + c] · out[i, h·D + c].
template <class T>
void attention_delta(const AttnDims& dims, int64_t n, const T* out, int64_t ldo, const T* dout,
                     int64_t lddo, T* delta, int threads = 1);

// Adds this block pair's contribution to g.dq and to kv_grad.dk, .dv.
template <class T>
void attention_block_backward(const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                              const QueryGrad<T>& g, const KvGrad<T>& kv_grad,
                              const AttnOptions& opt);

// How the model computes attention over one micro-batch. The default,
// LocalAttention, sees every key in the micro-batch itself; a context-parallel
// trainer substitutes one that runs the ring over its CP group.
template <class T>
class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  // Writes res.out / res.lse for the queries over every key they may see
  // (`kv` is this micro-batch's own K/V).
  virtual void forward(int layer, const AttnDims& dims, const QueryBlock<T>& q,
                       const KvBlock<T>& kv, const AttnOut<T>& res) = 0;
  // Given forward's out/lse and dout, writes dq and the local dk, dv (the
  // model zeroes them first). Every gradient of the local K/V — also from
  // other ranks' queries — must have arrived in kv_grad on return.
  virtual void backward(int layer, const AttnDims& dims, const QueryBlock<T>& q,
                        const KvBlock<T>& kv, const T* out, int64_t ldo, const T* lse,
                        const T* dout, int64_t lddo, T* dq, int64_t lddq,
                        const KvGrad<T>& kv_grad) = 0;
};

template <class T>
class LocalAttention final : public AttentionBackend<T> {
 public:
  explicit LocalAttention(const AttnOptions& opt) : opt_(opt) {}
  void forward(int layer, const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
               const AttnOut<T>& res) override;
  void backward(int layer, const AttnDims& dims, const QueryBlock<T>& q, const KvBlock<T>& kv,
                const T* out, int64_t ldo, const T* lse, const T* dout, int64_t lddo, T* dq,
                int64_t lddq, const KvGrad<T>& kv_grad) override;
  AttnOptions& options() { return opt_; }

 private:
  AttnOptions opt_;
  T* delta_scratch(int64_t size);
  std::vector<T> delta_;
};

}  // namespace meshloom::model
