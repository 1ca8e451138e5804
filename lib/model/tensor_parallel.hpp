// What a tensor-parallel model needs from its TP group (Megatron's f and g
// operators): sums over the group of activations and of their gradients, and
// the vocabulary statistics of the fused loss (VocabReducer). The trainer
// implements it over MPI on the tensor axis (train/tp_comm.hpp); lib/model
// stays free of MPI. Every rank of a group makes the same calls in the same
// order with spans of the same length.
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
