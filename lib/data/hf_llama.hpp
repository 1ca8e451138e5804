// Hugging Face Llama checkpoints (LlamaForCausalLM, MistralForCausalLM):
// their config.json as meshloom's ModelConfig, and their tensor names as
// meshloom's parameters (docs/design.md "The model").
//
// Only what meshloom's model computes is accepted; anything else is one
// meshloom::Error naming the file and the key, never a silently different
// model. rms_norm_eps (HF's default 1e-6 when absent), rope_theta and
// rope_scaling (linear, llama3) map to the model keys of the same names.
// max_position_embeddings is returned but maps to no model key (meshloom's
// RoPE has no table and no length limit).
//
// RoPE: HF Llama applies rotate_half (dimension i pairs with i + D/2 in each
// head), which is meshloom's convention too, so q_proj and k_proj rows are
// copied as they are. (Meta's original consolidated.*.pth files use
// interleaved pairs; HF's conversion script already permuted those rows.)
// Shapes match as well: HF's nn.Linear weight is [out, in], as meshloom's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace meshloom::data {

struct HfLlamaConfig {
  config::ModelConfig model;
  int64_t max_position_embeddings = 0;  // 0 when absent
};

// Parses config.json's text; `path` is named in errors.
HfLlamaConfig parse_hf_llama_config(const std::string& path, const std::string& text);
HfLlamaConfig read_hf_llama_config(const std::string& path);

// One HF tensor and the meshloom parameter it is.
struct HfTensorName {
  std::string hf_name;  // e.g. model.layers.0.self_attn.q_proj.weight
  std::string name;     // e.g. layers.0.wq
  std::vector<int64_t> shape;
};

// Every parameter of the model in meshloom's order (lib/model/params.hpp):
// lm_head only when untied.
std::vector<HfTensorName> hf_llama_tensor_names(const config::ModelConfig& model);

// Buffers HF checkpoints may carry that are no parameter (older
// checkpoints' model.layers.N.self_attn.rotary_emb.inv_freq): skipped.
bool hf_llama_skipped_tensor(const std::string& hf_name);

struct HfLlamaModel {
  HfLlamaConfig config;
  // meshloom name and values, in hf_llama_tensor_names' order.
  std::vector<std::pair<std::string, std::vector<float>>> tensors;
};

class SafetensorsCheckpoint;

// Checks DIR's checkpoint against `model` (its config.json's) without
// reading the tensors: throws naming the file and tensor when one is
// missing, has the wrong shape, or is no parameter meshloom knows; with tied
// embeddings a stored lm_head.weight must equal the embedding.
void check_hf_llama_tensors(const std::string& dir, const config::ModelConfig& model,
                            const SafetensorsCheckpoint& ckpt);

// Reads DIR/config.json and the safetensors checkpoint in DIR (sharded or
// not), checked as above. Holds the whole model: for tests and small models
// (import-hf reads one tensor at a time).
HfLlamaModel read_hf_llama(const std::string& dir);

}  // namespace meshloom::data
