// The `model:` section: the transformer's shape, its RoPE and norm settings,
// and the weights it starts from (model.init). Part of config.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/schema.hpp"

namespace meshloom::config {

enum class RopeScaling { none, linear, llama3 };
template <>
struct EnumNames<RopeScaling> {
  static constexpr std::array<const char*, 3> names{"none", "linear", "llama3"};
};

// RoPE's frequencies stretched for a longer context, as Hugging Face's
// rope_scaling computes them (docs/design.md "The model").
struct RopeScalingConfig {
  ML_CONFIG_SECTION;
  RopeScaling type = RopeScaling::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  template <class V>
  void visit(V& v) {
    v.field("type", type, "none, linear (every frequency / factor) or llama3 (Llama 3.1's)");
    v.field("factor", factor, "How many times longer the context becomes", in_range(1.0, 1e6));
    v.field("low_freq_factor", low_freq_factor,
            "llama3: wavelengths above original_max_position_embeddings / this are divided "
            "by factor",
            in_range(1e-6, 1e6));
    v.field("high_freq_factor", high_freq_factor,
            "llama3: wavelengths below original_max_position_embeddings / this are kept "
            "(must exceed low_freq_factor)",
            in_range(1e-6, 1e6));
    v.field("original_max_position_embeddings", original_max_position_embeddings,
            "llama3: the context length the model was trained at", in_range(1, 1 << 30));
  }
};

struct ModelConfig {
  ML_CONFIG_SECTION;
  std::string init;
  int64_t vocab_size = 50257;
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 8;
  int64_t n_kv_heads = 8;
  int64_t ffn_dim = 688;
  bool tied_embeddings = true;
  double rope_theta = 10000.0;
  RopeScalingConfig rope_scaling;
  double rms_norm_eps = 1e-5;
  double init_std = 0.02;
  int64_t loss_chunk = 512;
  // Model keys written in the file or by --set (no key itself; runtime/model_init.hpp).
  std::vector<std::string> written;
  template <class V>
  void visit(V& v) {
    v.field("init", init,
            "Start from pretrained weights instead of random ones: hf:DIR (a Hugging Face "
            "Llama checkpoint: config.json and safetensors) or FILE.h5 (meshloom import-hf's "
            "output, or a checkpoint's weights). The model keys come from it; keys given "
            "beside it must agree. A resume ignores it");
    v.field("vocab_size", vocab_size, "Vocabulary size V (must cover the tokenizer's ids)",
            in_range(2, 1 << 24));
    v.field("d_model", d_model, "Hidden size d", in_range(1, 1 << 16));
    v.field("n_layers", n_layers, "Transformer layers", in_range(1, 1024));
    v.field("n_heads", n_heads, "Query heads (head size D = d_model / n_heads)", in_range(1, 1024));
    v.field("n_kv_heads", n_kv_heads, "Key/value heads (grouped-query attention)",
            in_range(1, 1024));
    v.field("ffn_dim", ffn_dim, "SwiGLU hidden size", in_range(1, 1 << 20));
    v.field("tied_embeddings", tied_embeddings, "LM head shares the embedding matrix");
    v.field("rope_theta", rope_theta, "Rotary embedding base", at_least(1.0));
    v.field("rope_scaling", rope_scaling, "RoPE scaling for context extension (HF's rope_scaling)");
    v.field("rms_norm_eps", rms_norm_eps, "RMSNorm's epsilon", in_range(1e-12, 1.0));
    v.field("init_std", init_std, "Std of the normal initialization of matrices",
            in_range(0.0, 1.0));
    v.field("loss_chunk", loss_chunk,
            "Tokens whose LM-head logits exist at once (loss_chunk x vocab_size / parallel.tp "
            "values, CPU and CUDA backends; results change only by rounding, so a resume may "
            "change it)",
            in_range(1, 1 << 20));
  }
};

}  // namespace meshloom::config
