#include "runtime/passkey_eval.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "runtime/plan_chart.hpp"
#include "sources/doc_source.hpp"
#include "tokenizer/tokenizer.hpp"

namespace meshloom::runtime {

namespace {

using Json = nlohmann::ordered_json;

// The first text source with a mixture weight: its held-out text hides the keys.
int32_t filler_source(const config::Config& c) {
  for (size_t i = 0; i < c.data.sources.size(); ++i)
    if (c.data.sources[i].format != config::SourceFormat::webdataset &&
        c.data.sources[i].weight > 0)
      return int32_t(i);
  throw Error("eval.passkey needs a text source (data.sources) to hide the keys in");
}

// Up to `want` held-out tokens of `source`: the evaluation set's pieces, read here.
std::vector<int32_t> held_out_text(const config::Config& c, const dataplane::EvalSet& set,
                                   int32_t source, int64_t want) {
  const auto src = sources::open_doc_source(c, size_t(source));
  std::vector<int32_t> tokens;
  for (const auto& batch : set.batches)
    for (const dataplane::Piece& p : batch)
      if (p.source == source && int64_t(tokens.size()) < want)
        src->read(p.doc, p.offset, p.length, &tokens);
  return tokens;
}

}  // namespace

PasskeyEval::PasskeyEval(const parallel::World& w, const dataplane::EvalSet& set) : w_(w) {
  const config::PasskeyConfig& spec = w.config.eval.passkey;
  if (spec.lengths.empty()) return;
  source_ = filler_source(w.config);
  const auto tok = tokenizer::make_tokenizer(w.config.data.sources[size_t(source_)].tokenizer);
  const int64_t longest = *std::max_element(spec.lengths.begin(), spec.lengths.end());
  prompts_ = dataplane::passkey_prompts(spec, uint64_t(w.config.run.seed),
                                        held_out_text(w.config, set, source_, 4 * longest),
                                        [&](const std::string& text) { return tok->encode(text); });
  scores_.resize(prompts_.size());
  // Candidates in batches of up to a step's tokens (one prompt's at least).
  int64_t in_batch = 0;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    scores_[i].assign(prompts_[i].candidates.size(), 0.0);
    for (size_t c = 0; c < prompts_[i].sequences.size(); ++c) {
      const int64_t n = int64_t(prompts_[i].sequences[c].size());
      if (batches_.empty() || in_batch + n > w.config.data.tokens_per_step) {
        batches_.emplace_back();
        in_batch = 0;
      }
      batches_.back().emplace_back(i, c);
      in_batch += n;
    }
  }
  LOG_INFO(
      "passkey: %zu prompts (%zu lengths x %zu depths x %lld trials), %lld decoys each, "
      "in %zu batch(es); text from source %s",
      prompts_.size(), spec.lengths.size(), spec.depths.size(), (long long)spec.trials,
      (long long)spec.decoys, batches_.size(), w.config.data.sources[size_t(source_)].name.c_str());
}

void PasskeyEval::dispatch(roles::Lead& lead, size_t batch, bool last) const {
  std::vector<std::vector<int32_t>> sequences;
  std::vector<int64_t> scored_from;
  for (const auto& [i, c] : batches_.at(batch)) {
    sequences.push_back(prompts_[i].sequences[c]);
    scored_from.push_back(prompts_[i].scored_from);
  }
  lead.dispatch_prompts(sequences, scored_from, source_, last);
}

void PasskeyEval::take(size_t batch, const std::vector<wire::Ack>& acks) {
  const auto& samples = batches_.at(batch);
  for (const wire::Ack& a : acks)  // in trainer order: the same sums every run
    for (size_t k = 0; k < a.eval.sample_scores.size() && k < samples.size(); ++k)
      scores_[samples[k].first][samples[k].second] -= a.eval.sample_scores[k];
}

Json PasskeyEval::finish(const std::string& out_dir) const {
  const std::vector<dataplane::PasskeyCell> grid = dataplane::passkey_grid(prompts_, scores_);
  const std::string csv = out_dir + "/passkey.csv";
  std::FILE* f = std::fopen(csv.c_str(), "w");
  if (!f) throw Error("cannot write " + csv);
  std::fprintf(f, "length,depth,trials,correct,accuracy,key_logprob\n");
  Json cells = Json::array();
  int correct = 0, trials = 0;
  for (const auto& c : grid) {
    const double accuracy = double(c.correct) / c.trials;
    std::fprintf(f, "%lld,%g,%d,%d,%.6g,%.9g\n", (long long)c.length, c.depth, c.trials, c.correct,
                 accuracy, c.key_logprob);
    cells.push_back({{"length", c.length},
                     {"depth", c.depth},
                     {"trials", c.trials},
                     {"correct", c.correct},
                     {"accuracy", accuracy},
                     {"key_logprob", c.key_logprob}});
    correct += c.correct;
    trials += c.trials;
  }
  std::fclose(f);
  std::ofstream jsonl(out_dir + "/passkey_prompts.jsonl");
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const auto& p = prompts_[i];
    jsonl << Json({{"length", p.length},
                   {"depth", p.depth},
                   {"trial", p.trial},
                   {"candidates", p.candidates},
                   {"scored_from", p.scored_from},
                   {"sequences", p.sequences},
                   {"scores", scores_[i]}})
                 .dump()
          << "\n";
  }
  if (!jsonl) throw Error("cannot write " + out_dir + "/passkey_prompts.jsonl");
  const int decoys = int(w_.config.eval.passkey.decoys);
  LOG_INFO(
      "passkey: %d of %d correct (%.0f%%; chance %.0f%%): the true key's log-likelihood "
      "ranked against %d decoys; grid in %s",
      correct, trials, 100.0 * correct / std::max(trials, 1), 100.0 / (decoys + 1), decoys,
      csv.c_str());
  try {  // the grid is written: a machine without matplotlib still has it
    run_plot_script("plot_passkey.py", {csv, out_dir + "/passkey.png"});
    LOG_INFO("passkey heatmap: %s/passkey.png", out_dir.c_str());
  } catch (const Error& e) {
    LOG_WARN("passkey heatmap not drawn (%s); the grid is in %s", e.what(), csv.c_str());
  }
  return {{"scoring", strf("log-likelihood of the true key ranked against %d decoys", decoys)},
          {"correct", correct},
          {"trials", trials},
          {"cells", cells}};
}

}  // namespace meshloom::runtime
