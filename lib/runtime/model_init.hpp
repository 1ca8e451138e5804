// model.init: a run that starts from pretrained weights (docs/config.md,
// docs/formats.md "Hugging Face checkpoints"). The model keys come from what
// model.init names, checked on rank 0 before the job starts; each trainer
// then reads only its own share of the weights.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "config/config.hpp"
#include "train/trainer.hpp"

namespace meshloom::runtime {

// load_config, then with model.init: the model section from DIR/config.json
// (hf:DIR) or from a weights file or format 2 checkpoint (FILE.h5), whose
// tensors are checked (names and shapes) without being read. A shape key
// (vocab_size, d_model, n_layers, n_heads, n_kv_heads, ffn_dim,
// tied_embeddings, rms_norm_eps) written beside model.init must agree with
// it: ConfigError naming the key and both values. rope_theta and
// rope_scaling written beside it replace the imported ones (context
// extension) and are logged.
config::Config load_run_config(const std::string& file, const std::vector<std::string>& overrides);

// The imported model section alone (hf:DIR or FILE.h5), checked as above,
// and whether it has an image model's patch_embed (no Hugging Face Llama has).
struct InitModel {
  config::ModelConfig model;
  bool patch_embed = false;
};
InitModel init_model(const std::string& init);

// Collective over the trainers: replaces the random initialization with the
// weights model.init names (no-op when it is empty).
void load_init_weights(train::Trainer& trainer, const config::Config& config);

}  // namespace meshloom::runtime
