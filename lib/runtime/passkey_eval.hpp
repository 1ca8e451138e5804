// `meshloom eval`'s passkey grid (eval.passkey; dataplane/passkey.hpp on the
// lead): the prompts built from held-out text of the first text source
// (read on rank 0) with that source's tokenizer, each candidate an inline
// sample, dispatched in batches planned like steps; the trainers' scored
// losses make each candidate's log-likelihood. Results: passkey.csv (the
// grid), passkey_prompts.jsonl (every prompt's tokens and scores, for an
// independent check), passkey.png (the heatmap, scripts/plot/plot_passkey.py),
// the log and the report's "passkey".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/eval_set.hpp"
#include "dataplane/passkey.hpp"
#include "parallel/world.hpp"
#include "roles/lead.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

class PasskeyEval {
 public:
  // Builds the prompts (none without eval.passkey.lengths). Lead only.
  PasskeyEval(const parallel::World& w, const dataplane::EvalSet& set);
  size_t batches() const { return batches_.size(); }
  void dispatch(roles::Lead& lead, size_t batch, bool last) const;
  // Batch `batch`'s acks: each sample's scored losses, summed over trainers.
  void take(size_t batch, const std::vector<wire::Ack>& acks);
  // The grid: logged, written into `out_dir` (CSV, prompts, heatmap), and
  // returned for the report.
  nlohmann::ordered_json finish(const std::string& out_dir) const;

 private:
  const parallel::World& w_;
  int32_t source_ = 0;
  std::vector<dataplane::PasskeyPrompt> prompts_;
  std::vector<std::vector<std::pair<size_t, size_t>>> batches_;  // (prompt, candidate) per sample
  std::vector<std::vector<double>> scores_;  // log-likelihood per prompt and candidate
};

}  // namespace meshloom::runtime
