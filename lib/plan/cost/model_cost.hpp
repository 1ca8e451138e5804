// What one token of a model costs, per the planner's cost model: FLOPs, K/V
// bytes and activation bytes of a model::Shape. Free functions, not members:
// these are estimates of the planner's, not facts of the model's layout.
#pragma once

#include "model/shape.hpp"

namespace meshloom::plan {

// Forward FLOPs per token of every matrix product: the projections and
// (active) experts of all layers, plus the LM head (and the patch embedding
// for the image share of tokens).
double linear_flops_per_token(const model::Shape& shape);
// Forward FLOPs of causal attention over one sequence of L tokens, all
// layers, divided by L^2: scores and weighted sum over the causal half.
double attention_flops_per_token2(const model::Shape& shape);
// Bytes of K and V (bf16) of one token in one layer: what a CP ring moves.
double kv_bytes_per_token_layer(const model::Shape& shape);
// Activation bytes one token keeps for backward in one layer (bf16, no
// recomputation, flash attention: about 34 x hidden, Korthikanti et al.).
double act_bytes_per_token_layer(const model::Shape& shape);

}  // namespace meshloom::plan
