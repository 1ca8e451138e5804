// What rank 0 makes of a step's held-out evaluation (Ack::eval): the
// held-out loss and perplexity, by source and by position, for the log,
// metrics.jsonl (its "eval" object, docs/formats.md) and eval_positions.csv
// (one row per evaluation and position bucket: the long-context curve).
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

// The held-out figures of one evaluation: the trainers' results summed in
// trainer order, `seconds` the slowest trainer's (pure).
struct EvalFigures : wire::EvalResult {
  double loss() const { return predictions > 0 ? loss_sum / double(predictions) : 0; }
  // Adds `other`'s sums (not its seconds: the caller knows whether the two
  // ran side by side or one after the other).
  void add(const wire::EvalResult& other);
};
// None when no evaluation followed the step.
std::optional<EvalFigures> eval_figures(const std::vector<wire::Ack>& acks);

// "eval after step 9: held-out loss 5.123 (perplexity 168), a 5.0, b 5.2, 4096 tokens in 0.31 s"
// ("eval: ..." for step < 0: `meshloom eval`).
std::string describe_eval(int64_t step, const EvalFigures& f, const config::Config& config);

// metrics.jsonl's "eval" object: loss, perplexity, tokens, seconds, by
// source and by position bucket ([first position, loss, predictions]).
nlohmann::ordered_json eval_json(const EvalFigures& f, const config::Config& config,
                                 const std::vector<int64_t>& edges);

// <run.dir>/eval_positions.csv: step, bucket's first and last position,
// predictions, mean loss; appended to on a resume.
class EvalPositionsCsv {
 public:
  EvalPositionsCsv(const std::string& path, bool append, std::vector<int64_t> edges,
                   int64_t seq_len);
  ~EvalPositionsCsv();
  EvalPositionsCsv(const EvalPositionsCsv&) = delete;
  EvalPositionsCsv& operator=(const EvalPositionsCsv&) = delete;
  void add(int64_t step, const EvalFigures& f);

 private:
  std::FILE* file_ = nullptr;
  std::vector<int64_t> edges_;
  int64_t seq_len_;
};

}  // namespace meshloom::runtime
