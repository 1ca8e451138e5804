#include "runtime/hf_checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/check.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/weights_file.hpp"
#include "data/hf_llama.hpp"
#include "data/safetensors.hpp"

namespace meshloom::runtime {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Logs "NAME: 40% (tensors 12/30)" each time another tenth of the
// parameters is done: the long part of converting a large model.
class Progress {
 public:
  Progress(const char* what, int64_t total) : what_(what), total_(std::max<int64_t>(total, 1)) {}
  void done(int64_t parameters, size_t tensor, size_t tensors) {
    so_far_ += parameters;
    const int64_t tenth = so_far_ * 10 / total_;
    if (tenth == last_) return;
    last_ = tenth;
    LOG_INFO("%s: %lld%% (%zu of %zu tensors)", what_, (long long)(tenth * 10), tensor, tensors);
  }

 private:
  const char* what_;
  int64_t total_, so_far_ = 0, last_ = 0;
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw Error("cannot write " + path.string());
}

// A weights file's or checkpoint's stored config. Only a checkpoint's is a
// run's (data.seq_len, the tokenizers); a weights file's is its model section
// around defaults of no run.
config::Config stored_config(const std::string& path, const ckpt::WeightsMeta& meta) {
  const std::string name = path + ":/meta/config";
  if (!meta.weights_file) return config::parse_config(meta.config, name);
  config::Config c;
  c.model = config::parse_model_section(meta.config, name);
  return c;
}

// The tokenizer.json that export copies: the option, else the config's
// first hf: tokenizer that is a file.
std::string tokenizer_to_copy(const ExportOptions& o, const config::Config& c) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  for (const config::SourceConfig& s : c.data.sources)
    if (starts_with(s.tokenizer, "hf:") && fs::is_regular_file(s.tokenizer.substr(3)))
      return s.tokenizer.substr(3);
  return "";
}

}  // namespace

std::string weights_config_yaml(const config::ModelConfig& model) {
  config::Config c;
  c.model = model;
  c.model.init.clear();
  return config::to_yaml(c);
}

HfTransfer import_hf(const std::string& dir, const std::string& out) {
  const data::HfLlamaConfig hf = data::read_hf_llama_config(dir + "/config.json");
  const data::SafetensorsCheckpoint st(dir);
  data::check_hf_llama_tensors(dir, hf.model, st);
  const std::vector<data::HfTensorName> names = data::hf_llama_tensor_names(hf.model);
  int64_t total = 0;
  for (const data::HfTensorName& n : names) total += numel(n.shape);
  LOG_INFO("import-hf: %s: %zu tensors, %.3f B parameters -> %s", dir.c_str(), names.size(),
           double(total) / 1e9, out.c_str());
  HfTransfer t;
  ckpt::WeightsWriter writer(out, weights_config_yaml(hf.model));
  Progress progress("import-hf", total);
  for (const data::HfTensorName& n : names) {
    writer.add(n.name, n.shape, st.read(n.hf_name));
    t.tensors += 1;
    t.parameters += numel(n.shape);
    progress.done(numel(n.shape), size_t(t.tensors), names.size());
  }
  t.bytes = writer.finish();
  t.files = 1;
  return t;
}

void check_weights_tensors(const std::string& path, const ckpt::WeightsMeta& meta,
                           const config::ModelConfig& model) {
  for (const data::HfTensorName& n : data::hf_llama_tensor_names(model)) {
    const auto it = meta.shapes.find("model/" + n.name);
    if (it == meta.shapes.end()) throw Error("'" + path + "': no tensor /model/" + n.name);
    if (it->second != n.shape)
      throw Error("'" + path + "': /model/" + n.name + " is not shaped as its config says");
  }
}

std::string hf_config_json(const config::ModelConfig& m, const std::string& dtype,
                           int64_t max_positions) {
  json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = m.d_model;
  j["intermediate_size"] = m.ffn_dim;
  j["num_hidden_layers"] = m.n_layers;
  j["num_attention_heads"] = m.n_heads;
  j["num_key_value_heads"] = m.n_kv_heads;
  j["head_dim"] = m.d_model / m.n_heads;
  j["vocab_size"] = m.vocab_size;
  j["rms_norm_eps"] = m.rms_norm_eps;
  j["rope_theta"] = m.rope_theta;
  const config::RopeScalingConfig& s = m.rope_scaling;
  if (s.type == config::RopeScaling::none) {
    j["rope_scaling"] = nullptr;
  } else {
    json r = {{"rope_type", config::enum_name(s.type)}, {"factor", s.factor}};
    if (s.type == config::RopeScaling::llama3) {
      r["low_freq_factor"] = s.low_freq_factor;
      r["high_freq_factor"] = s.high_freq_factor;
      r["original_max_position_embeddings"] = s.original_max_position_embeddings;
    }
    j["rope_scaling"] = r;
  }
  j["tie_word_embeddings"] = m.tied_embeddings;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = m.init_std;
  j["max_position_embeddings"] = max_positions;
  j["torch_dtype"] = dtype == "bf16" ? "bfloat16" : "float32";
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

HfTransfer export_hf(const std::string& weights, const std::string& out_dir,
                     const ExportOptions& o) {
  if (o.dtype != "bf16" && o.dtype != "f32")
    throw Error("export-hf: --dtype must be bf16 or f32, not '" + o.dtype + "'");
  const ckpt::WeightsReader reader(weights);
  const config::Config c = stored_config(weights, reader.meta());
  check_weights_tensors(weights, reader.meta(), c.model);
  const std::vector<data::HfTensorName> names = data::hf_llama_tensor_names(c.model);
  const data::StDtype dtype = o.dtype == "bf16" ? data::StDtype::BF16 : data::StDtype::F32;
  const int64_t elem = int64_t(data::st_dtype_size(dtype));
  // Shards: tensors in order, a new one when the next tensor would pass the size.
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const int64_t bytes = numel(names[i].shape) * elem;
    if (!shards.back().empty() && in_shard + bytes > o.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }
  fs::create_directories(out_dir);
  const int64_t positions = o.max_positions > 0 ? o.max_positions : c.data.seq_len;
  write_text(fs::path(out_dir) / "config.json", hf_config_json(c.model, o.dtype, positions));
  write_text(fs::path(out_dir) / "generation_config.json",
             json({{"_from_model_config", true}}).dump(2) + "\n");
  LOG_INFO("export-hf: %s -> %s: %zu tensors in %zu file(s), %s", weights.c_str(), out_dir.c_str(),
           names.size(), shards.size(), o.dtype.c_str());
  HfTransfer t;
  json weight_map = json::object();
  Progress progress("export-hf", total / elem);
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1
                                 ? "model.safetensors"
                                 : strf("model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    std::vector<std::vector<float>> values;
    std::vector<data::StWriteTensor> tensors;
    values.reserve(shards[s].size());
    for (size_t i : shards[s]) {
      values.push_back(reader.tensor(names[i].name));
      tensors.push_back({names[i].hf_name, names[i].shape, values.back().data()});
      weight_map[names[i].hf_name] = file;
    }
    data::write_safetensors((fs::path(out_dir) / file).string(), tensors, dtype,
                            {{"format", "pt"}});
    for (size_t i : shards[s]) {
      t.tensors += 1;
      t.parameters += numel(names[i].shape);
      progress.done(numel(names[i].shape), size_t(t.tensors), names.size());
    }
    t.bytes += int64_t(fs::file_size(fs::path(out_dir) / file));
    t.files += 1;
  }
  if (shards.size() > 1)
    write_text(
        fs::path(out_dir) / "model.safetensors.index.json",
        json({{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}).dump(2) + "\n");
  const std::string tokenizer = tokenizer_to_copy(o, c);
  if (!tokenizer.empty()) {
    std::error_code ec;
    fs::copy_file(tokenizer, fs::path(out_dir) / "tokenizer.json",
                  fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error("export-hf: cannot copy " + tokenizer + ": " + ec.message());
    const fs::path beside = fs::path(tokenizer).parent_path() / "tokenizer_config.json";
    if (fs::is_regular_file(beside))
      fs::copy_file(beside, fs::path(out_dir) / "tokenizer_config.json",
                    fs::copy_options::overwrite_existing, ec);
    LOG_INFO("export-hf: copied %s", tokenizer.c_str());
  }
  return t;
}

}  // namespace meshloom::runtime
