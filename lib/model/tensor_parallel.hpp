// What a tensor-parallel model needs from its TP group (Megatron's f and g
// operators): sums over the group of activations and of their gradients, and
// the vocabulary statistics of the fused loss (VocabReducer). The trainer
// implements it over MPI on the tensor axis (train/tp_comm.hpp); lib/model
// stays free of MPI. Every rank of a group makes the same calls in the same
// order with spans of the same length.
//
// Where model::Transformer (transformer.hpp) calls sum_activations, with
// [n, d] spans: forward, after the embedding lookup (each rank looks up its
// vocabulary rows, zero elsewhere) and after each layer's wo and w2 products
// (row-parallel: a partial sum over the rank's heads / FFN columns), before
// the residual add; backward, on d(final states) from the LM head's shard and
// on the input gradients of wq|wk|wv and w1|w3 (column-parallel), before the
// norms' backward. That is 1 + 2·layers sums in forward, 1 + 2·layers in
// backward. The LM loss (forward) calls all_reduce_max, then all_reduce_sum,
// once per chunk of tokens.
#pragma once

#include <span>

#include "model/lm_loss.hpp"

namespace meshloom::model {

template <class T>
class TpComm : public VocabReducer {
 public:
  // Element-wise sum over the group, in place; the same bits on every rank.
  virtual void sum_activations(std::span<T> values) = 0;
};

}  // namespace meshloom::model
