// Shared by the tokenizer tests: the reference file (ids from the real
// tokenizers, tests/tokenizer/CMakeLists.txt passes its path) and tokenizers
// loaded once per test process.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace meshloom::test {

struct ReferenceLine {
  std::string name, text;
  std::vector<std::string> special_allowed;
  std::map<std::string, std::vector<int32_t>> ids;  // "gpt2", "cl100k_base"
};

// Every line of the reference file; a missing or empty file is a test failure
// (ASSERT in the caller via `ok`), never a skip.
inline std::vector<ReferenceLine> reference_lines(std::string* error) {
  const std::string path = MESHLOOM_TOKENIZER_REFERENCE;
  std::ifstream in(path);
  if (!in) {
    *error = "tokenizer reference file " + path +
             " is missing: it holds the real tokenizers' ids these tests compare against "
             "(see ENVIRONMENT.md, \"Real data\")";
    return {};
  }
  std::vector<ReferenceLine> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    ReferenceLine r;
    r.name = j.at("name").get<std::string>();
    r.text = j.at("text").get<std::string>();
    if (j.contains("special_allowed"))
      r.special_allowed = j.at("special_allowed").get<std::vector<std::string>>();
    for (const char* key : {"gpt2", "cl100k_base"})
      if (j.contains(key)) r.ids[key] = j[key].get<std::vector<int32_t>>();
    lines.push_back(std::move(r));
  }
  if (lines.empty()) *error = "tokenizer reference file " + path + " has no lines";
  return lines;
}

// One tokenizer per spec for the whole process (loading takes ~0.1 s).
inline const tokenizer::Tokenizer& tokenizer(const std::string& spec) {
  static std::map<std::string, std::unique_ptr<tokenizer::Tokenizer>> cache;
  auto& t = cache[spec];
  if (!t) t = tokenizer::make_tokenizer(spec);
  return *t;
}

}  // namespace meshloom::test
