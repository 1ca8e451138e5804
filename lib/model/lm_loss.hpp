// The LM head and its softmax cross-entropy, fused and computed a chunk of
// tokens at a time, so that no more than chunk × rows logits ever exist (the
// whole [n, V] buffer is 3.3 GB at 16K tokens with GPT-2's vocabulary).
//
//   LmLoss<float> loss({.chunk = 512, .threads = 2});
//   WholeVocab whole;                                // tp = 1
//   LossSum ls = loss.forward(xf, n, {head, 0, V, d}, targets, whole, token_loss);
//   loss.backward(scale, dxf, dhead);                // dxf = scale·∂/∂xf, dhead += scale·∂/∂head
//
// The loss is the model's last operation, so forward() already computes both
// gradients of the loss sum, unscaled (d(xf) [n, d] and d(head) [rows, d]),
// while the chunk's logits are at hand; backward(scale) only scales them into
// the caller's buffers. Recomputing each chunk's logits in backward instead
// costs one more head GEMM and was slower (docs/performance.md, "Fused LM
// head and loss"). When the scale is known up front (a trainer's step),
// forward_with_grads() writes the scaled gradients straight into the
// caller's buffers and may borrow the caller's idle scratch for the chunk's
// logits, so that the loss adds no buffer of its own beyond per-token values.
//
// Tensor parallelism: the head may be a shard, vocabulary rows [first,
// first + rows) of V, one per rank of a TP group. A token's softmax needs the
// max, the sum of exponentials and the target's logit over the whole
// vocabulary, so for every chunk the shards combine their per-token values
// through a VocabReducer: first the max, then the sums and target logits
// (one sum: only the target's shard holds a non-zero logit). Each shard then
// holds exact softmax − onehot for its rows: its d(head) is complete, its
// d(xf) a partial sum over its rows that the caller sums over the group.
// Every shard must run the same n, targets and chunk. At tp = 1, WholeVocab
// combines nothing and no MPI is involved.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/profile.hpp"

namespace meshloom::model {

struct LossSum {
  double sum = 0;     // Σ −log p(target) over the micro-batch's predictions
  int64_t count = 0;  // number of predictions (targets ≠ −1)
  // −log p per token of the micro-batch (0 where nothing is predicted) when
  // the backend hands them out (the CPU backend's trainers: per-source
  // losses); else empty.
  std::vector<double> token_loss;
};

// Combines per-token statistics over the shards of the vocabulary: element-
// wise, in place, the same on every shard. Every shard makes the same calls
// in the same order with vectors of the same length.
class VocabReducer {
 public:
  virtual ~VocabReducer() = default;
  virtual void all_reduce_max(std::span<double> values) = 0;
  virtual void all_reduce_sum(std::span<double> values) = 0;
};

// The whole vocabulary on one shard (tp = 1): nothing to combine.
class WholeVocab final : public VocabReducer {
 public:
  void all_reduce_max(std::span<double>) override {}
  void all_reduce_sum(std::span<double>) override {}
};

// Vocabulary rows [first, first + rows) of the head matrix, row-major [rows, d].
template <class T>
struct HeadShard {
  const T* weight = nullptr;
  int64_t first = 0;
  int64_t rows = 0;
  int64_t d = 0;
};

// Where forward_with_grads() puts the gradients of the loss sum, times
// `scale`: d(xf) overwritten ([n, d]; this shard's part), d(head) accumulated
// (+=, [rows, d]). `scratch`, if it holds min(n, chunk) × rows elements, takes
// the chunk's logits instead of a buffer of the loss's own.
template <class T>
struct LossGrads {
  double scale = 1;
  T* dxf = nullptr;
  T* dhead = nullptr;
  std::span<T> scratch;
};

struct LmLossOptions {
  int64_t chunk = 512;  // tokens whose logits exist at once
  int threads = 1;      // OpenMP threads of the GEMMs and row loops
};

template <class T>
class LmLoss {
 public:
  explicit LmLoss(const LmLossOptions& opt);

  int64_t chunk() const { return chunk_; }

  // Loss of the n tokens whose final hidden states are xf [n, head.d]:
  // token_loss[i] = −log p(targets[i]) (0 where the target is −1), returned
  // with its sum; keeps the unscaled gradients for backward(). `vocab`
  // combines the shards' statistics (WholeVocab when head is the whole head).
  LossSum forward(const T* xf, int64_t n, const HeadShard<T>& head, const int32_t* targets,
                  VocabReducer& vocab, std::span<double> token_loss, Profile* profile = nullptr);
  // forward(), with the gradients already scaled and written to `grads`;
  // backward() has nothing left to do after it.
  LossSum forward_with_grads(const T* xf, int64_t n, const HeadShard<T>& head,
                             const int32_t* targets, VocabReducer& vocab,
                             std::span<double> token_loss, const LossGrads<T>& grads,
                             Profile* profile = nullptr);
  // The loss alone (evaluation): the same per-token losses and sum as the
  // calls above, no gradient computed; the chunk's logits go to `scratch`
  // when it is large enough (as forward_with_grads()). backward() refuses
  // after it.
  LossSum forward_loss_only(const T* xf, int64_t n, const HeadShard<T>& head,
                            const int32_t* targets, VocabReducer& vocab,
                            std::span<double> token_loss, std::span<T> scratch,
                            Profile* profile = nullptr);
  // dxf = scale·∂(loss sum)/∂xf ([n, d], overwritten; this shard's part) and
  // dhead += scale·∂(loss sum)/∂head ([rows, d]) of the last forward().
  void backward(double scale, T* dxf, T* dhead, Profile* profile = nullptr) const;

  // Allocates and touches forward()'s buffers for up to n tokens and a head
  // shard of rows × d, so that a measured step does not pay for fresh pages.
  void reserve(int64_t n, int64_t rows, int64_t d);
  // Bytes of the buffers it holds now.
  int64_t buffer_bytes() const;

 private:
  // Runs every chunk: logits in z, gradients × alpha into dxf and dhead (the
  // first chunk overwrites dhead unless `accumulate`; none when dxf is null).
  LossSum run(const T* xf, int64_t n, const HeadShard<T>& head, const int32_t* targets,
              VocabReducer& vocab, std::span<double> token_loss, T* z, T alpha, T* dxf, T* dhead,
              bool accumulate, Profile* profile);
  void softmax_minus_onehot(T* z, int64_t m, const HeadShard<T>& head, const int32_t* targets,
                            VocabReducer& vocab, double* token_loss);
  void fit_token_buffers(int64_t n);
  // `scratch` when it holds a chunk's logits, else logits_.
  T* logits_for(int64_t n, int64_t rows, std::span<T> scratch);

  int64_t chunk_;
  int threads_;
  int64_t n_ = 0, rows_ = 0, d_ = 0;
  bool have_forward_ = false, grads_written_ = false;
  std::vector<T> logits_;     // [min(n, chunk), rows]: one chunk's, then its softmax − onehot
  std::vector<double> max_;   // per token of the chunk
  std::vector<double> sums_;  // per token of the chunk: Σ exp(z − max), then the target's logit
  std::vector<T> dxf_, dhead_;  // unscaled gradients of the loss sum
};

}  // namespace meshloom::model
