// changed_keys (the resume check's view of two configs) and the resume rule
// built on it.
#include "config/diff.hpp"

#include <gtest/gtest.h>

#include "base/check.hpp"
#include "ckpt/resume.hpp"

using namespace meshloom;

namespace {

config::Config parse(const std::vector<std::string>& sets = {}) {
  return config::parse_config(R"(
data:
  sources:
    - {name: docs, path: data/docs}
    - {name: web, path: data/web.jsonl, format: jsonl, tokenizer: byte}
)",
                              "x.yaml", sets);
}

std::string keys(const std::vector<config::KeyChange>& changes) {
  std::string out;
  for (const auto& c : changes) out += c.key + "=" + c.before + ">" + c.after + " ";
  return out;
}

}  // namespace

TEST(ConfigDiff, SameConfigNoChange) {
  EXPECT_EQ(keys(config::changed_keys(parse(), parse())), "");
}

TEST(ConfigDiff, NamesEveryChangedLeafInSchemaOrder) {
  const auto c = config::changed_keys(
      parse(), parse({"optim.lr=0.001", "run.seed=7", "data.sources.1.path=other.jsonl"}));
  EXPECT_EQ(
      keys(c),
      "run.seed=1234>7 optim.lr=0.003>0.001 data.sources[1].path=data/web.jsonl>other.jsonl ");
}

TEST(ConfigDiff, ListsOfOtherLengths) {
  const auto before = parse();
  const auto after =
      config::parse_config("data:\n  sources:\n    - {name: docs, path: data/docs}\n", "y.yaml");
  const std::string k = keys(config::changed_keys(before, after));
  EXPECT_NE(k.find("data.sources.size=2>1"), std::string::npos) << k;
  EXPECT_NE(k.find("data.sources[1].name=web>(none)"), std::string::npos) << k;
  EXPECT_NE(keys(config::changed_keys(after, before)).find("data.sources[1].name=(none)>web"),
            std::string::npos);
}

TEST(ResumeConfig, RefusesWhatDecidesTheFunctionOrTheSamples) {
  set_fatal_handler(throwing_fatal_handler);
  const auto saved = parse();
  for (const char* set : {"model.n_layers=2", "run.seed=9", "data.sources.1.name=www",
                          "data.sources.1.tokenizer=gpt2", "data.sources.0.format=text"}) {
    try {
      ckpt::check_resume_config(saved, parse({set}), "ck.h5");
      ADD_FAILURE() << set << " was accepted";
    } catch (const Error& e) {
      const std::string key = std::string(set).substr(0, std::string(set).find('='));
      const std::string what = e.what();
      EXPECT_NE(what.find("ck.h5 was written by a run with another config"), std::string::npos)
          << what;
      const std::string shown = key.find("sources.1") != std::string::npos
                                    ? "data.sources[1]" + key.substr(key.rfind('.'))
                                : key.find("sources.0") != std::string::npos
                                    ? "data.sources[0]" + key.substr(key.rfind('.'))
                                    : key;
      EXPECT_NE(what.find(shown + " "), std::string::npos) << shown << ": " << what;
    }
  }
  // Swapped sources: the state is by position.
  const auto swapped = config::parse_config(R"(
data:
  sources:
    - {name: web, path: data/web.jsonl, format: jsonl, tokenizer: byte}
    - {name: docs, path: data/docs}
)",
                                            "z.yaml");
  EXPECT_THROW(ckpt::check_resume_config(saved, swapped, "ck.h5"), Error);
}

TEST(ResumeConfig, AcceptsWhatMayChangeBetweenAttempts) {
  const auto saved = parse();
  EXPECT_NO_THROW(ckpt::check_resume_config(
      saved,
      parse({"optim.lr=0.001", "run.steps=500", "data.sources.1.path=moved.jsonl",
             "cluster.roles.loaders=3", "checkpoint.every=10", "data.sources.0.weight=2",
             "model.loss_chunk=256"}),
      "ck.h5"));
}
