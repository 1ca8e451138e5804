// What a tensor-parallel model needs from its TP group (Megatron's f and g
// operators): sums over the group of activations and of their gradients, the
// row all-gather and reduce-scatter of sequence parallelism, and the
// vocabulary statistics of the fused loss (VocabReducer). The trainer
// implements it over MPI on the tensor axis (train/tp_comm.hpp); lib/model
// stays free of MPI. Every rank of a group makes the same calls in the same
// order with spans of the same length (the rows' spans: each its own rows).
//
// Where model::Transformer (transformer.hpp) calls them, with [n, d] spans:
//   without sequence parallelism, sum_activations: forward, after the
//   embedding lookup (each rank looks up its vocabulary rows, zero elsewhere)
//   and after each layer's wo and w2 products (row-parallel: a partial sum
//   over the rank's heads / FFN columns), before the residual add; backward,
//   on d(final states) from the LM head's shard and on the input gradients of
//   wq|wk|wv and w1|w3 (column-parallel), before the norms' backward. That is
//   1 + 2·layers sums in forward, 1 + 2·layers in backward.
//   with sequence parallelism (ModelOptions::sequence_parallel), each of those
//   sums is a reduce_scatter_rows, and all_gather_rows brings the rows
//   together before wq|wk|wv, w1|w3 and the LM head (forward: 1 + 2·layers
//   reduce-scatters and 1 + 2·layers all-gathers) and, in backward, before
//   the products that need all rows: d(layer output) and d(h) (the gradients
//   of the reduce-scatters) and the normalized inputs, gathered again for
//   the weight gradients of wq|wk|wv and w1|w3 (1 + 4·layers all-gathers,
//   1 + 2·layers reduce-scatters); plus one sum_activations of the norm
//   gains' gradients, [(2·layers + 1)·d], at the end of backward.
// The LM loss (forward) calls all_reduce_max, then all_reduce_sum, once per
// chunk of tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "model/lm_loss.hpp"

namespace meshloom::model {

// Rows [begin, end) of a micro-batch.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t count() const { return end - begin; }
};

// Sequence parallelism's split of n tokens over a TP group of `size`: rank r
// holds an even share, the first n mod size ranks one row more (a rank may
// hold none when n < size).
inline RowRange sequence_rows(int64_t n, int64_t size, int64_t rank) {
  const int64_t base = n / size, extra = n % size;
  const int64_t begin = rank * base + std::min(rank, extra);
  return RowRange{begin, begin + base + (rank < extra ? 1 : 0)};
}

template <class T>
class TpComm : public VocabReducer {
 public:
  // Element-wise sum over the group, in place; the same bits on every rank.
  virtual void sum_activations(std::span<T> values) = 0;
  // Sequence parallelism: `all` is a row-major [n, width] matrix whose rows
  // the group splits as sequence_rows(n, size, rank); `mine` is this rank's
  // rows. all_gather_rows puts every rank's `mine` together into `all` (the
  // same on every rank); reduce_scatter_rows sets `mine` to this rank's rows
  // of the element-wise sum of the ranks' `all`, summed in rank order (the
  // same bits as those rows of sum_activations).
  virtual void all_gather_rows(std::span<const T> mine, std::span<T> all, int64_t width) = 0;
  virtual void reduce_scatter_rows(std::span<const T> all, std::span<T> mine, int64_t width) = 0;
};

}  // namespace meshloom::model
