// The shape of a transformer as the planner sees it: enough to count FLOPs,
// K/V bytes and activation bytes per token, nothing about its weights.
//
// Named shapes are the models of ByteScale's evaluation (Table 1: layers /
// heads / KV groups / hidden) with the feed-forward sizes of their public
// releases, so `meshloom simulate --model llama-7b` means the same model the
// paper trained. One rule is not obvious: ByteScale lists 56 heads for the
// 30B model, which does not divide its hidden size 6656; we use LLaMA-30B's 52
// heads (head size 128). Attention FLOPs depend only on heads x head size =
// hidden, so only the K/V bytes per token follow from that choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom::plan {

struct ModelShape {
  std::string name;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int64_t hidden = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;
  int experts = 1;    // feed-forward experts per layer (1: dense)
  int top_k = 1;      // experts each token goes through
  bool tied = false;  // the LM head is the embedding (model.tied_embeddings)
  // Images (config::patch_dim): patch_embed [hidden, patch_dim] on stage 0,
  // and the share of tokens priced as image positions: the image sources'
  // share of the mixture's initial weights (the mixture counts an image
  // sample's patches and caption alike, so this overestimates a little).
  int64_t patch_dim = 0;
  double image_share = 0;

  int64_t head_dim() const { return hidden / heads; }
  // Forward FLOPs per token of every matrix product: the projections and
  // (active) experts of all layers, plus the LM head.
  double linear_flops_per_token() const;
  // Forward FLOPs of causal attention over one sequence of L tokens, all
  // layers, divided by L^2: scores and weighted sum over the causal half.
  double attention_flops_per_token2() const;
  // Bytes of K and V (bf16) of one token in one layer: what a CP ring moves.
  double kv_bytes_per_token_layer() const;
  // Activation bytes one token keeps for backward in one layer (bf16, no
  // recomputation, flash attention: about 34 x hidden, Korthikanti et al.).
  double act_bytes_per_token_layer() const;
  // Parameters (for reports).
  double parameters() const;
  // Elements of the flat parameter buffer exactly as model::ParamLayout lays
  // out a dense model (final norm included, no LM head when tied): what the
  // CUDA backend's weights, gradients and master copy hold. With tp > 1, TP
  // rank 0's shard (the largest): heads, KV heads and FFN columns split tp
  // ways (rounded up where tp does not divide them), ceil(V / tp) vocabulary
  // rows, the norm gains whole.
  int64_t numel(int tp = 1) const;
  // The same for one pipeline stage of `stage_layers` layers: the embedding
  // on the first stage (and on the last when tied: its head), the final
  // norm and an untied head on the last.
  int64_t stage_numel(int tp, int64_t stage_layers, bool first, bool last) const;
  // TP rank 0's share of what tensor parallelism splits (the largest, with
  // the split rounded up where tp does not divide).
  struct TpShare {
    int64_t heads, kv_heads, ffn, vocab_rows;
  };
  TpShare tp_share(int tp) const;
};

// llama-7b, llama-13b, llama-30b, llama-70b, mixtral-8x7b, mixtral-8x22b;
// "7b", "13b", "30b", "70b" are accepted too. Throws meshloom::Error naming
// the known shapes on anything else.
ModelShape model_shape(const std::string& name);
std::vector<std::string> model_shape_names();

// The shape of the experiment's own model (the `model:` config section, and
// the patch embedding when the data has image sources).
ModelShape shape_from_config(const config::Config& c);

}  // namespace meshloom::plan
