#include "runtime/model_init.hpp"

#include <map>

#include "base/check.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/block_checksum.hpp"
#include "ckpt/weights_file.hpp"
#include "config/schema.hpp"
#include "data/hf_llama.hpp"
#include "data/safetensors.hpp"
#include "runtime/hf_checkpoint.hpp"
#include "train/state_blocks.hpp"

namespace meshloom::runtime {

namespace {

bool is_hf(const std::string& init) { return starts_with(init, "hf:"); }

std::string number_text(double x) { return strf("%.17g", x); }

bool written(const config::ModelConfig& m, const std::string& key) {
  for (const std::string& k : m.written)
    if (k == key) return true;
  return false;
}

}  // namespace

InitModel init_model(const std::string& init) {
  if (is_hf(init)) {
    const std::string dir = init.substr(3);
    const data::HfLlamaConfig hf = data::read_hf_llama_config(dir + "/config.json");
    data::check_hf_llama_tensors(dir, hf.model, data::SafetensorsCheckpoint(dir));
    return {hf.model, false};
  }
  const ckpt::WeightsReader reader(init);
  const ckpt::WeightsMeta& meta = reader.meta();
  InitModel out{config::parse_model_section(meta.config, init + ":/meta/config"),
                meta.shapes.count("model/patch_embed") > 0};
  check_weights_tensors(init, meta, out.model);
  return out;
}

config::Config load_run_config(const std::string& file, const std::vector<std::string>& overrides) {
  const config::Config given = config::load_config(file, overrides);
  const config::ModelConfig& g = given.model;
  if (g.init.empty()) return given;
  InitModel imported;
  try {
    imported = init_model(g.init);
  } catch (const Error& e) {
    throw config::ConfigError(file + ": model.init: " + e.what());
  }
  const config::ModelConfig& m = imported.model;
  std::vector<std::string> taken = overrides;
  const auto shape_key = [&](const char* key, const std::string& mine, const std::string& theirs) {
    if (written(g, key) && mine != theirs)
      throw config::ConfigError(strf("%s: model.%s is %s, but model.init (%s) has %s", file.c_str(),
                                     key, mine.c_str(), g.init.c_str(), theirs.c_str()));
    taken.push_back("model." + std::string(key) + "=" + theirs);
  };
  shape_key("vocab_size", std::to_string(g.vocab_size), std::to_string(m.vocab_size));
  shape_key("d_model", std::to_string(g.d_model), std::to_string(m.d_model));
  shape_key("n_layers", std::to_string(g.n_layers), std::to_string(m.n_layers));
  shape_key("n_heads", std::to_string(g.n_heads), std::to_string(m.n_heads));
  shape_key("n_kv_heads", std::to_string(g.n_kv_heads), std::to_string(m.n_kv_heads));
  shape_key("ffn_dim", std::to_string(g.ffn_dim), std::to_string(m.ffn_dim));
  shape_key("tied_embeddings", g.tied_embeddings ? "true" : "false",
            m.tied_embeddings ? "true" : "false");
  shape_key("rms_norm_eps", number_text(g.rms_norm_eps), number_text(m.rms_norm_eps));
  // RoPE: what the config writes wins (a longer context than the import's).
  if (written(g, "rope_theta") && g.rope_theta != m.rope_theta)
    LOG_INFO("model.rope_theta %g replaces model.init's %g", g.rope_theta, m.rope_theta);
  else
    taken.push_back("model.rope_theta=" + number_text(m.rope_theta));
  if (written(g, "rope_scaling")) {
    LOG_INFO("model.rope_scaling (%s, factor %g) replaces model.init's (%s, factor %g)",
             config::enum_name(g.rope_scaling.type), g.rope_scaling.factor,
             config::enum_name(m.rope_scaling.type), m.rope_scaling.factor);
  } else {
    const config::RopeScalingConfig& s = m.rope_scaling;
    const std::string key = "model.rope_scaling.";
    taken.push_back(key + "type=" + config::enum_name(s.type));
    taken.push_back(key + "factor=" + number_text(s.factor));
    taken.push_back(key + "low_freq_factor=" + number_text(s.low_freq_factor));
    taken.push_back(key + "high_freq_factor=" + number_text(s.high_freq_factor));
    taken.push_back(key + "original_max_position_embeddings=" +
                    std::to_string(s.original_max_position_embeddings));
  }
  config::Config c = config::load_config(file, taken);
  c.model.written = g.written;
  // Image sources need patch_embed, which no Hugging Face Llama has.
  if (config::patch_dim(c) > 0 && !imported.patch_embed)
    throw config::ConfigError(file + ": model.init: " + g.init +
                              " has no patch_embed, which the image sources of data.sources "
                              "need (start from a checkpoint of an image run, or train text)");
  return c;
}

namespace {

// Fills this trainer's pieces of each tensor from DIR's safetensors, reading
// only the elements it holds.
void fill_from_hf(const std::string& dir, const config::ModelConfig& model,
                  const model::ParamLayout& layout, std::span<float> params) {
  const data::SafetensorsCheckpoint st(dir);
  std::map<std::string, std::string> hf_name;
  for (const data::HfTensorName& n : data::hf_llama_tensor_names(model))
    hf_name[n.name] = n.hf_name;
  for (const train::StatePiece& p : train::pieces_of_range(layout, 0, layout.numel(), 0, true)) {
    const auto it = hf_name.find(p.name);
    if (it == hf_name.end())
      throw Error("model.init: " + dir + " has no tensor for meshloom's '" + p.name + "'");
    float* out = params.data() + p.offset;
    for (const ckpt::Block& b : p.blocks) {
      ckpt::for_each_run(p.dims, b, [&](int64_t flat, int64_t offset, int64_t run) {
        st.read_range(it->second, flat, run, out + offset);
      });
      out += b.numel();
    }
  }
}

}  // namespace

void load_init_weights(train::Trainer& trainer, const config::Config& config) {
  const std::string& init = config.model.init;
  if (init.empty()) return;
  if (is_hf(init)) {
    trainer.set_weights([&](const model::ParamLayout& layout, std::span<float> params) {
      fill_from_hf(init.substr(3), config.model, layout, params);
    });
  } else {
    trainer.load_weights(init, ckpt::WeightsReader(init).meta().sums);
  }
}

}  // namespace meshloom::runtime
