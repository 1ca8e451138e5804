// Hugging Face checkpoints in and out (docs/formats.md "Hugging Face
// checkpoints"): `meshloom import-hf DIR --out FILE.h5` converts a Llama
// checkpoint (config.json + safetensors) into a weights file
// (ckpt/weights_file.hpp) that model.init takes; `meshloom export-hf
// FILE.h5 --out DIR` writes a weights file's or a format 2 checkpoint's model
// back as config.json, generation_config.json and model.safetensors (sharded
// above a size), which transformers' LlamaForCausalLM loads. Both hold one
// tensor at a time (export: one shard), never the whole model.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/weights_file.hpp"
#include "config/config.hpp"

namespace meshloom::runtime {

struct HfTransfer {
  int64_t tensors = 0, parameters = 0, bytes = 0, files = 0;
};

// The effective config a weights file stores for `model` (a default config
// around it, so that it parses on its own).
std::string weights_config_yaml(const config::ModelConfig& model);

HfTransfer import_hf(const std::string& dir, const std::string& out);

struct ExportOptions {
  std::string dtype = "bf16";  // bf16 or f32
  int64_t shard_bytes = int64_t(5) << 30;
  // tokenizer.json to copy beside the weights; empty: the config's first
  // hf: tokenizer, if any.
  std::string tokenizer;
  // max_position_embeddings; 0: the config's data.seq_len.
  int64_t max_positions = 0;
};
HfTransfer export_hf(const std::string& weights, const std::string& out_dir,
                     const ExportOptions& options);

// Every tensor of `model` is in the weights file or checkpoint at `path`
// (its `meta`), with the model's shape; throws naming the file and tensor.
void check_weights_tensors(const std::string& path, const ckpt::WeightsMeta& meta,
                           const config::ModelConfig& model);

// config.json's text for `model` (pure, for tests).
std::string hf_config_json(const config::ModelConfig& model, const std::string& dtype,
                           int64_t max_positions);

}  // namespace meshloom::runtime
