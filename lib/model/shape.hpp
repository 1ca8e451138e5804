// The transformer's shape: one type for the model, the trainers and the
// planner. The model reads the dimensions; the planner adds what only a cost
// estimate needs (a name, mixture-of-experts routing, the image share) and
// prices it with the free functions of plan/cost/model_cost.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace meshloom::model {

struct Shape {
  std::string name;  // for reports: a named shape ("llama-7b"), "config", or empty
  int64_t vocab = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn_dim = 0;
  bool tied = true;  // the LM head is the embedding (model.tied_embeddings)
  double rope_theta = 10000.0;
  config::RopeScalingConfig rope_scaling;
  double norm_eps = 1e-5;  // RMSNorm's epsilon
  double init_std = 0.02;
  // Values of one image patch (p·p·3); 0: a text-only model, no patch_embed.
  int64_t patch_dim = 0;
  // The planner's view only (the model itself is dense and text-priced):
  int64_t experts = 1;  // feed-forward experts per layer (1: dense)
  int64_t top_k = 1;    // experts each token goes through
  // The share of tokens priced as image positions: the image sources' share
  // of the mixture's initial weights (the mixture counts an image sample's
  // patches and caption alike, so this overestimates a little).
  double image_share = 0;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  int64_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }

  // Fails (ML_CHECK) unless d_model = n_heads·head_dim, n_heads is a multiple
  // of n_kv_heads and head_dim is even (rotate-half RoPE pairs i with i+D/2).
  void validate() const;
  // patch_dim: config::patch_dim(config), 0 for a text-only run.
  static Shape from_config(const config::ModelConfig& c, int64_t patch_dim = 0);

  // Parameters, experts included (for reports).
  double parameters() const;
  // TP rank 0's share of what tensor parallelism splits (the largest, with
  // the split rounded up where tp does not divide).
  struct TpShare {
    int64_t heads, kv_heads, ffn, vocab_rows;
  };
  TpShare tp_share(int tp) const;
  // Elements of the flat parameter buffer exactly as ParamLayout lays out a
  // dense model (final norm included, no LM head when tied): what the CUDA
  // backend's weights, gradients and master copy hold. With tp > 1, TP rank
  // 0's shard (the largest): heads, KV heads and FFN columns split tp ways
  // (rounded up where tp does not divide them), ceil(V / tp) vocabulary rows,
  // the norm gains whole.
  int64_t numel(int tp = 1) const;
  // The same for one pipeline stage of `stage_layers` layers: the embedding
  // on the first stage (and on the last when tied: its head), the final
  // norm and an untied head on the last.
  int64_t stage_numel(int tp, int64_t stage_layers, bool first, bool last) const;
};

}  // namespace meshloom::model
