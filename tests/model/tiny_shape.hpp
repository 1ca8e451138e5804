// The small model the model tests share: vocabulary 37, d 16, 2 layers, 4
// query and 2 KV heads of 4, FFN 24; a test changes what it needs otherwise.
#pragma once

#include <cstdint>

#include "model/params.hpp"

namespace meshloom::model {

inline Shape tiny_shape(bool tied, int64_t patch_dim = 0) {
  Shape s;
  s.vocab = 37;
  s.d_model = 16;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 4;
  s.ffn_dim = 24;
  s.tied = tied;
  s.patch_dim = patch_dim;
  return s;
}

// The same sized for layouts up to tp 4 and 3 stages (8 query and 4 KV heads
// of 2, 3 layers), with a vocabulary of 11 that no tp > 1 divides, so that
// vocabulary rows split unevenly; checkpoint tests use it.
inline Shape tp4_shape(bool tied, int64_t patch_dim = 0) {
  Shape s = tiny_shape(tied, patch_dim);
  s.vocab = 11;
  s.n_layers = 3;
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.head_dim = 2;
  return s;
}

}  // namespace meshloom::model
