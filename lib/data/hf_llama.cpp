#include "data/hf_llama.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/check.hpp"
#include "data/safetensors.hpp"

namespace meshloom::data {

namespace {

using nlohmann::json;

[[noreturn]] void bad_key(const std::string& path, const std::string& key,
                          const std::string& what) {
  throw Error(path + ": key '" + key + "': " + what);
}

bool present(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// A positive integer key; `fallback` < 0 means required.
int64_t get_count(const std::string& path, const json& j, const char* key, int64_t fallback = -1) {
  if (!present(j, key)) {
    if (fallback < 0) bad_key(path, key, "missing");
    return fallback;
  }
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t(1) << 40))
    bad_key(path, key, "is not a positive integer: " + v.dump());
  return v.get<int64_t>();
}

double get_number(const std::string& path, const json& j, const char* key, double fallback) {
  if (!present(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number()) bad_key(path, key, "is not a number: " + v.dump());
  return v.get<double>();
}

bool get_bool(const std::string& path, const json& j, const char* key, bool fallback) {
  if (!present(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) bad_key(path, key, "is not true or false: " + v.dump());
  return v.get<bool>();
}

// Keys of features meshloom's model does not compute.
void refuse_features(const std::string& path, const json& j) {
  if (present(j, "architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.size() != 1 || !a[0].is_string() ||
        (a[0] != "LlamaForCausalLM" && a[0] != "MistralForCausalLM"))
      bad_key(path, "architectures",
              a.dump() + " is not [\"LlamaForCausalLM\"] or [\"MistralForCausalLM\"]");
  } else if (!present(j, "model_type")) {
    bad_key(path, "architectures", "missing (and no model_type)");
  }
  if (present(j, "model_type") && j.at("model_type") != "llama" && j.at("model_type") != "mistral")
    bad_key(path, "model_type", j.at("model_type").dump() + " is not \"llama\" or \"mistral\"");
  if (present(j, "hidden_act") && j.at("hidden_act") != "silu")
    bad_key(path, "hidden_act", j.at("hidden_act").dump() + ": meshloom's MLP is SwiGLU (silu)");
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (get_bool(path, j, key, false)) bad_key(path, key, "true: meshloom's layers have no biases");
  if (present(j, "sliding_window"))
    bad_key(path, "sliding_window",
            j.at("sliding_window").dump() + ": meshloom attends to the whole sample");
  for (const char* key : {"qk_norm", "use_qk_norm", "qk_layernorm"})
    if (present(j, key) && j.at(key) != false) bad_key(path, key, "meshloom has no query/key norm");
  for (const char* key : {"num_local_experts", "num_experts", "num_experts_per_tok",
                          "n_routed_experts", "moe_intermediate_size"})
    if (present(j, key)) bad_key(path, key, "mixture of experts: meshloom's MLP is dense");
}

// rope_scaling: null, or {"rope_type" (or "type"): "linear" | "llama3", ...}
// with the keys those types use; any other type (yarn, dynamic, longrope) is
// refused. HF's llama3 defaults: none (every key is required).
config::RopeScalingConfig parse_rope_scaling(const std::string& path, const json& j) {
  config::RopeScalingConfig out;
  if (!present(j, "rope_scaling")) return out;
  const json& s = j.at("rope_scaling");
  if (!s.is_object()) bad_key(path, "rope_scaling", "is not an object or null: " + s.dump());
  std::string type;
  for (const char* k : {"rope_type", "type"})
    if (s.contains(k) && s.at(k).is_string()) type = s.at(k).get<std::string>();
  const std::string key = "rope_scaling";
  if (type == "default") return out;
  if (type != "linear" && type != "llama3")
    bad_key(path, key + ".rope_type",
            "'" + type + "': meshloom implements linear and llama3 RoPE scaling");
  out.type = type == "linear" ? config::RopeScaling::linear : config::RopeScaling::llama3;
  const auto number = [&](const char* k) {
    if (!s.contains(k) || !s.at(k).is_number())
      bad_key(path, key + "." + k, "missing or not a number");
    return s.at(k).get<double>();
  };
  out.factor = number("factor");
  if (!(out.factor >= 1.0) || !std::isfinite(out.factor))
    bad_key(path, key + ".factor", "must be a finite number >= 1");
  if (out.type == config::RopeScaling::llama3) {
    out.low_freq_factor = number("low_freq_factor");
    out.high_freq_factor = number("high_freq_factor");
    const double original = number("original_max_position_embeddings");
    if (!(out.low_freq_factor > 0) || !(out.high_freq_factor > out.low_freq_factor))
      bad_key(path, key + ".high_freq_factor", "must exceed low_freq_factor > 0");
    if (!(original >= 1) || original != std::floor(original))
      bad_key(path, key + ".original_max_position_embeddings", "must be a positive integer");
    out.original_max_position_embeddings = int64_t(original);
  }
  for (const char* k : {"attention_factor", "beta_fast", "beta_slow", "mscale", "long_factor"})
    if (s.contains(k)) bad_key(path, key + "." + k, "is not used by " + type + " scaling");
  return out;
}

}  // namespace

HfLlamaConfig parse_hf_llama_config(const std::string& path, const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw Error(path + ": not a JSON object");
  refuse_features(path, j);
  HfLlamaConfig out;
  config::ModelConfig& m = out.model;
  m.d_model = get_count(path, j, "hidden_size");
  m.n_layers = get_count(path, j, "num_hidden_layers");
  m.n_heads = get_count(path, j, "num_attention_heads");
  m.n_kv_heads = get_count(path, j, "num_key_value_heads", m.n_heads);
  m.ffn_dim = get_count(path, j, "intermediate_size");
  m.vocab_size = get_count(path, j, "vocab_size");
  m.tied_embeddings = get_bool(path, j, "tie_word_embeddings", false);  // HF's default
  m.rope_theta = get_number(path, j, "rope_theta", 10000.0);
  out.max_position_embeddings = get_count(path, j, "max_position_embeddings", 0);
  if (m.d_model % m.n_heads != 0)
    bad_key(
        path, "num_attention_heads",
        std::to_string(m.n_heads) + " does not divide hidden_size " + std::to_string(m.d_model));
  if (m.n_heads % m.n_kv_heads != 0)
    bad_key(path, "num_key_value_heads",
            std::to_string(m.n_kv_heads) + " does not divide num_attention_heads " +
                std::to_string(m.n_heads));
  if (present(j, "head_dim") && get_count(path, j, "head_dim") != m.d_model / m.n_heads)
    bad_key(path, "head_dim",
            j.at("head_dim").dump() +
                ": meshloom's head size is hidden_size / "
                "num_attention_heads = " +
                std::to_string(m.d_model / m.n_heads));
  if (m.vocab_size < 2 || m.vocab_size > (1 << 24))
    bad_key(path, "vocab_size", "must be in [2, 2^24] for meshloom");
  if (!(m.rope_theta >= 1.0) || !std::isfinite(m.rope_theta))
    bad_key(path, "rope_theta", "must be a finite number >= 1");
  m.rms_norm_eps = get_number(path, j, "rms_norm_eps", 1e-6);  // HF's default
  if (!(m.rms_norm_eps >= 1e-12 && m.rms_norm_eps <= 1.0))
    bad_key(path, "rms_norm_eps", "must be in [1e-12, 1]");
  m.rope_scaling = parse_rope_scaling(path, j);
  return out;
}

HfLlamaConfig read_hf_llama_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hf_llama_config(path, text.str());
}

std::vector<HfTensorName> hf_llama_tensor_names(const config::ModelConfig& m) {
  const int64_t d = m.d_model, hd = m.d_model / m.n_heads, f = m.ffn_dim;
  const int64_t q = m.n_heads * hd, kv = m.n_kv_heads * hd;
  std::vector<HfTensorName> out;
  out.push_back({"model.embed_tokens.weight", "embed", {m.vocab_size, d}});
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string hf = "model.layers." + std::to_string(i) + ".";
    const std::string ml = "layers." + std::to_string(i) + ".";
    out.push_back({hf + "input_layernorm.weight", ml + "attn_norm", {d}});
    out.push_back({hf + "self_attn.q_proj.weight", ml + "wq", {q, d}});
    out.push_back({hf + "self_attn.k_proj.weight", ml + "wk", {kv, d}});
    out.push_back({hf + "self_attn.v_proj.weight", ml + "wv", {kv, d}});
    out.push_back({hf + "self_attn.o_proj.weight", ml + "wo", {d, q}});
    out.push_back({hf + "post_attention_layernorm.weight", ml + "mlp_norm", {d}});
    out.push_back({hf + "mlp.gate_proj.weight", ml + "w1", {f, d}});
    out.push_back({hf + "mlp.up_proj.weight", ml + "w3", {f, d}});
    out.push_back({hf + "mlp.down_proj.weight", ml + "w2", {d, f}});
  }
  out.push_back({"model.norm.weight", "final_norm", {d}});
  if (!m.tied_embeddings) out.push_back({"lm_head.weight", "lm_head", {m.vocab_size, d}});
  return out;
}

bool hf_llama_skipped_tensor(const std::string& hf_name) {
  const std::string suffix = ".self_attn.rotary_emb.inv_freq";
  return hf_name.rfind("model.layers.", 0) == 0 && hf_name.size() > suffix.size() &&
         hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

void check_hf_llama_tensors(const std::string& dir, const config::ModelConfig& model,
                            const SafetensorsCheckpoint& ckpt) {
  const std::vector<HfTensorName> names = hf_llama_tensor_names(model);
  std::set<std::string> known;
  for (const HfTensorName& n : names) known.insert(n.hf_name);
  const bool tied = model.tied_embeddings;
  for (const std::string& name : ckpt.names())
    if (!known.count(name) && !hf_llama_skipped_tensor(name) && !(tied && name == "lm_head.weight"))
      throw Error(ckpt.file_of(name) + ": tensor '" + name +
                  "' is no parameter of meshloom's model (config " + dir + "/config.json)");
  for (const HfTensorName& n : names) {
    const StTensor* t = ckpt.find(n.hf_name);
    if (!t) throw Error(dir + ": tensor '" + n.hf_name + "' is missing from the checkpoint");
    if (t->shape != n.shape)
      throw Error(ckpt.file_of(n.hf_name) + ": tensor '" + n.hf_name + "' has shape " +
                  shape_text(t->shape) + ", config.json says " + shape_text(n.shape));
  }
  // A tied checkpoint may store the head anyway; it must be the embedding.
  if (tied && ckpt.find("lm_head.weight") &&
      (ckpt.find("lm_head.weight")->shape != names[0].shape ||
       ckpt.read("lm_head.weight") != ckpt.read(names[0].hf_name)))
    throw Error(ckpt.file_of("lm_head.weight") +
                ": tensor 'lm_head.weight' differs from model.embed_tokens.weight but "
                "tie_word_embeddings is true");
}

HfLlamaModel read_hf_llama(const std::string& dir) {
  HfLlamaModel out;
  out.config = read_hf_llama_config(dir + "/config.json");
  const SafetensorsCheckpoint ckpt(dir);
  check_hf_llama_tensors(dir, out.config.model, ckpt);
  for (const HfTensorName& n : hf_llama_tensor_names(out.config.model))
    out.tensors.emplace_back(n.name, ckpt.read(n.hf_name));
  return out;
}

}  // namespace meshloom::data
