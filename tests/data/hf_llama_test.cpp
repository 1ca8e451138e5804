// Hugging Face Llama checkpoints: tiny random ones written by an independent
// Python script (tests/data/make_hf_llama.py, numpy only) read back bit for
// bit, the name map, and each refusal of config.json.
#include "data/hf_llama.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "data/safetensors.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::TempDir;
using test::write_file;

const char* kPython = "/usr/bin/python3";

bool have_numpy() {
  static const bool ok =
      std::filesystem::exists(kPython) &&
      std::system((std::string(kPython) + " -c 'import numpy' 2>/dev/null").c_str()) == 0;
  return ok;
}

void make_checkpoint(const std::string& dir, const std::string& args) {
  const std::string cmd = std::string(kPython) +
                          " " MESHLOOM_SOURCE_DIR "/tests/data/make_hf_llama.py " + dir + " " +
                          args;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

struct Expected {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// expected.txt / expected.f32, as the script wrote them.
std::map<std::string, Expected> read_expected(const std::string& dir) {
  std::ifstream index(dir + "/expected.txt");
  std::ifstream vals(dir + "/expected.f32", std::ios::binary);
  std::map<std::string, Expected> out;
  std::string name, dtype, dims;
  int64_t offset = 0, count = 0;
  while (index >> name >> dtype >> dims >> offset >> count) {
    Expected e;
    std::stringstream ds(dims);
    for (std::string d; std::getline(ds, d, 'x');) e.shape.push_back(std::stoll(d));
    e.values.resize(size_t(count));
    vals.seekg(offset * 4);
    vals.read(reinterpret_cast<char*>(e.values.data()), count * 4);
    out[name] = e;
  }
  return out;
}

void check_bits(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& n) {
  ASSERT_EQ(got.size(), want.size()) << n;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << n << "[" << i << "]";
}

void check_checkpoint(const std::string& args, bool tied) {
  if (!have_numpy()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy";
  TempDir dir;
  make_checkpoint(dir.path(), args);
  const std::map<std::string, Expected> want = read_expected(dir.path());
  const HfLlamaModel m = read_hf_llama(dir.path());
  const config::ModelConfig& c = m.config.model;
  EXPECT_EQ(c.d_model, 16);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.ffn_dim, 24);
  EXPECT_EQ(c.vocab_size, 40);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.tied_embeddings, tied);
  EXPECT_EQ(m.config.max_position_embeddings, 128);

  // The name map covers every stored tensor exactly once.
  const std::vector<HfTensorName> names = hf_llama_tensor_names(c);
  std::multiset<std::string> hf, ml;
  for (const HfTensorName& n : names) {
    hf.insert(n.hf_name);
    ml.insert(n.name);
  }
  EXPECT_EQ(hf.size(), want.size());
  for (const auto& [name, e] : want) {
    EXPECT_EQ(hf.count(name), 1u) << name;
  }
  EXPECT_EQ(std::set<std::string>(ml.begin(), ml.end()).size(), ml.size());

  ASSERT_EQ(m.tensors.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(m.tensors[i].first, names[i].name);
    const Expected& e = want.at(names[i].hf_name);
    EXPECT_EQ(e.shape, names[i].shape) << names[i].hf_name;
    check_bits(m.tensors[i].second, e.values, names[i].hf_name);
  }
}

TEST(HfLlama, UntiedBf16Sharded) { check_checkpoint("--dtype bf16 --shards 3", false); }
TEST(HfLlama, TiedF32) { check_checkpoint("--dtype f32 --tied --seed 2", true); }
TEST(HfLlama, UntiedF16) { check_checkpoint("--dtype f16 --seed 3", false); }

TEST(HfLlama, NameMap) {
  config::ModelConfig c;
  c.d_model = 8, c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 1, c.ffn_dim = 12, c.vocab_size = 10;
  c.tied_embeddings = false;
  const std::vector<HfTensorName> n = hf_llama_tensor_names(c);
  ASSERT_EQ(n.size(), 12u);
  EXPECT_EQ(n[0].name, "embed");
  EXPECT_EQ(n[2].hf_name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(n[2].name, "layers.0.wq");
  EXPECT_EQ(n[3].name, "layers.0.wk");
  EXPECT_EQ(n[3].shape, (std::vector<int64_t>{2, 8}));  // one KV head of size 2
  EXPECT_EQ(n[7].hf_name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(n[7].name, "layers.0.w1");
  EXPECT_EQ(n[9].name, "layers.0.w2");
  EXPECT_EQ(n[9].shape, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(n[11].name, "lm_head");
  EXPECT_TRUE(hf_llama_skipped_tensor("model.layers.3.self_attn.rotary_emb.inv_freq"));
  EXPECT_FALSE(hf_llama_skipped_tensor("model.layers.3.self_attn.q_proj.weight"));
}

const char* kGood = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 16,
  "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24,
  "vocab_size": 40, "rms_norm_eps": 1e-05)";

std::string config_error(const std::string& extra) {
  try {
    parse_hf_llama_config("cfg/config.json", kGood + extra + "}");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HfLlama, ConfigDefaults) {
  const HfLlamaConfig c = parse_hf_llama_config("c.json", std::string(kGood) + "}");
  EXPECT_EQ(c.model.n_kv_heads, 4);  // HF: num_attention_heads when absent
  EXPECT_FALSE(c.model.tied_embeddings);
  EXPECT_EQ(c.model.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 0);
  EXPECT_EQ(config_error(R"(, "rope_scaling": null, "sliding_window": null, "mlp_bias": false,
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "head_dim": 4)"),
            "no error");
}

TEST(HfLlama, ConfigRefusalsNameFileAndKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(, "architectures": ["Qwen2ForCausalLM"])", "key 'architectures': [\"Qwen2ForCausalLM\"]"},
      {R"(, "model_type": "gemma")", "key 'model_type': \"gemma\""},
      {R"(, "hidden_act": "gelu")", "key 'hidden_act': \"gelu\""},
      {R"(, "attention_bias": true)", "key 'attention_bias': true"},
      {R"(, "mlp_bias": true)", "key 'mlp_bias': true"},
      {R"(, "sliding_window": 4096)", "key 'sliding_window': 4096"},
      {R"(, "use_qk_norm": true)", "key 'use_qk_norm'"},
      {R"(, "num_local_experts": 8)", "key 'num_local_experts': mixture of experts"},
      {R"(, "rope_scaling": {"rope_type": "yarn", "factor": 8.0})",
       "key 'rope_scaling.rope_type': 'yarn': meshloom implements linear and llama3"},
      {R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0})",
       "key 'rope_scaling.low_freq_factor': missing"},
      {R"(, "rope_scaling": {"type": "linear", "factor": 0.5})",
       "key 'rope_scaling.factor': must be"},
      {R"(, "rope_scaling": {"type": "linear", "factor": 2, "attention_factor": 1})",
       "key 'rope_scaling.attention_factor'"},
      {R"(, "rope_scaling": 3)", "key 'rope_scaling': is not an object"},
      {R"(, "rms_norm_eps": 0)", "key 'rms_norm_eps': must be in"},
      {R"(, "num_key_value_heads": 3)", "key 'num_key_value_heads': 3 does not divide"},
      {R"(, "num_attention_heads": 5)",
       "key 'num_attention_heads': 5 does not divide hidden_size 16"},
      {R"(, "head_dim": 8)", "key 'head_dim': 8"},
      {R"(, "hidden_size": -1)", "key 'hidden_size': is not a positive integer"},
      {R"(, "vocab_size": "big")", "key 'vocab_size': is not a positive integer"},
      {R"(, "tie_word_embeddings": 1)", "key 'tie_word_embeddings': is not true or false"},
      {R"(, "rope_theta": "x")", "key 'rope_theta': is not a number"},
      {R"(, "rope_theta": 0.5)", "key 'rope_theta': must be"},
      {R"(, "intermediate_size": null)", "key 'intermediate_size': missing"},
  };
  for (const auto& [extra, want] : cases) {
    const std::string msg = config_error(extra);
    EXPECT_EQ(msg.rfind("cfg/config.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
  }
}

TEST(HfLlama, ConfigNormAndRopeScaling) {
  // rms_norm_eps absent is HF's 1e-6.
  const HfLlamaConfig absent = parse_hf_llama_config("c.json", R"({"model_type": "llama",
    "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 24, "vocab_size": 40})");
  EXPECT_EQ(absent.model.rms_norm_eps, 1e-6);
  EXPECT_EQ(absent.model.rope_scaling.type, config::RopeScaling::none);
  const HfLlamaConfig l3 = parse_hf_llama_config(
      "c.json", std::string(kGood) + R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  EXPECT_EQ(l3.model.rms_norm_eps, 1e-5);
  EXPECT_EQ(l3.model.rope_scaling.type, config::RopeScaling::llama3);
  EXPECT_EQ(l3.model.rope_scaling.factor, 8.0);
  EXPECT_EQ(l3.model.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(l3.model.rope_scaling.original_max_position_embeddings, 8192);
  const HfLlamaConfig lin = parse_hf_llama_config(
      "c.json", std::string(kGood) + R"(, "rope_scaling": {"type": "linear", "factor": 4}})");
  EXPECT_EQ(lin.model.rope_scaling.type, config::RopeScaling::linear);
  EXPECT_EQ(lin.model.rope_scaling.factor, 4.0);
}

TEST(HfLlama, CheckpointRefusals) {
  if (!have_numpy()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy";
  TempDir dir;
  make_checkpoint(dir.path(), "--dtype f32");
  auto error = [&]() -> std::string {
    try {
      read_hf_llama(dir.path());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string file = dir.file("model.safetensors");
  const SafetensorsFile orig(file);
  std::vector<std::pair<std::string, std::vector<float>>> vals;
  for (const StTensor& t : orig.tensors()) vals.emplace_back(t.name, orig.read(t.name));
  auto rewrite = [&](const std::string& drop, const std::string& add,
                     std::vector<int64_t> add_shape) {
    std::vector<StWriteTensor> ts;
    for (const auto& [name, v] : vals)
      if (name != drop) ts.push_back({name, orig.find(name)->shape, v.data()});
    if (!add.empty()) ts.push_back({add, add_shape, vals[0].second.data()});
    write_safetensors(file, ts, StDtype::F32);
  };
  rewrite("model.norm.weight", "", {});
  EXPECT_EQ(error(), dir.path() + ": tensor 'model.norm.weight' is missing from the checkpoint");
  rewrite("model.norm.weight", "model.norm.weight", {17});
  EXPECT_EQ(error(), file + ": tensor 'model.norm.weight' has shape [17], config.json says [16]");
  rewrite("", "model.layers.0.self_attn.q_norm.weight", {4});
  EXPECT_NE(
      error().find(file + ": tensor 'model.layers.0.self_attn.q_norm.weight' is no parameter"),
      std::string::npos);
  // Old checkpoints' rotary buffers are skipped.
  rewrite("", "model.layers.0.self_attn.rotary_emb.inv_freq", {2});
  EXPECT_EQ(error(), "no error");

  // A tied checkpoint may store lm_head.weight only as the embedding itself.
  std::string cfg;
  {
    std::ifstream in(dir.file("config.json"));
    std::stringstream ss;
    ss << in.rdbuf();
    cfg = ss.str();
  }
  const size_t at = cfg.find("\"tie_word_embeddings\": false");
  ASSERT_NE(at, std::string::npos);
  write_file(dir.file("config.json"), cfg.replace(at, 28, "\"tie_word_embeddings\": true"));
  rewrite("lm_head.weight", "", {});
  EXPECT_EQ(error(), "no error");
  const std::vector<int64_t> head = orig.find("model.embed_tokens.weight")->shape;
  ASSERT_EQ(vals[0].first, "lm_head.weight");  // sorted: the untied head's values
  rewrite("lm_head.weight", "lm_head.weight", head);
  EXPECT_EQ(error(), file +
                         ": tensor 'lm_head.weight' differs from model.embed_tokens.weight but "
                         "tie_word_embeddings is true");
  ASSERT_EQ(vals[1].first, "model.embed_tokens.weight");
  vals[0].second = vals[1].second;
  rewrite("lm_head.weight", "lm_head.weight", head);
  EXPECT_EQ(error(), "no error");
}

}  // namespace
}  // namespace meshloom::data
