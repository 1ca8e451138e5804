// What rank 0 makes of each training step's acknowledgements: the loss over
// the global batch, tokens/s, MFU against the trainers' peak (none once a
// step shows that peak too low), imbalance
// (slowest / mean compute), stragglers; a log line every log.every steps,
// progress, and one line of metrics.jsonl per step (docs/formats.md), then a
// final line with every rank's busy time and memory.
//
// Straggler rule: a trainer whose compute time exceeds the step's median by
// faults.straggler_factor for faults.straggler_steps steps in a row is named
// (once in the log when the streak reaches the count, in metrics every step).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "parallel/world.hpp"
#include "roles/lead.hpp"
#include "runtime/eval_metrics.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

// The step's figures from its acknowledgements (pure).
struct StepFigures {
  double loss = 0;   // global mean over the step's predictions
  double flops = 0;  // model FLOPs, all trainers
  double peak = 0;   // FLOP/s the trainers could reach together
  double max_compute = 0, mean_compute = 0, median_compute = 0;
  double max_wait = 0;   // the longest data wait
  double wall = 0;       // the step on the slowest trainer, data wait included
  double grad_norm = 0;  // global, before clipping
  int64_t tokens = 0;
  // Micro-batches of the HDP rank that ran the fewest and the most: with
  // PP-Balance or HDP, pipelines may run different numbers.
  int64_t micro_min = 0, micro_max = 0;
  // Per source: Σ −log p and predictions (empty where trainers keep no
  // per-token losses, as on the GPU).
  std::vector<double> source_loss;
  std::vector<int64_t> source_predictions;
  double imbalance() const { return mean_compute > 0 ? max_compute / mean_compute : 1.0; }
  // Useful FLOPs over what the peak allows in the slowest trainer's compute
  // time; 0 without a peak, above 1 where the peak is too low.
  double mfu() const { return peak > 0 ? flops / (std::max(max_compute, 1e-9) * peak) : 0; }
};
StepFigures step_figures(const std::vector<wire::Ack>& acks);

// Tracks each trainer's run of slow steps (compute > factor x median).
class StragglerWatch {
 public:
  StragglerWatch(int trainers, double factor, int64_t steps)
      : streak_(size_t(trainers)), factor_(factor), steps_(steps) {}
  // The trainers slow for `steps` steps in a row or more, after this step.
  std::vector<int> update(const std::vector<wire::Ack>& acks, double median);
  int64_t streak(int trainer) const { return streak_.at(size_t(trainer)); }
  bool just_reached(int trainer) const { return streak(trainer) == steps_; }

 private:
  std::vector<int64_t> streak_;
  double factor_;
  int64_t steps_;
};

// The run's checkpoints in one line, from the trainers' final reports: how
// many, trainer 0's save time (start to file complete), the stall training
// saw (the slowest trainer), the state bytes each trainer wrote and its
// memory peak against the peak before the first save. "" when none was saved.
std::string describe_checkpoints(const std::vector<wire::Report>& reports);

class TrainMetrics {
 public:
  // Steps [first, end) of a run of run.steps; metrics.jsonl is appended to
  // when the run resumes (first > 0).
  TrainMetrics(const parallel::World& w, const roles::Lead& lead, int64_t first, int64_t end);
  ~TrainMetrics();
  TrainMetrics(const TrainMetrics&) = delete;
  TrainMetrics& operator=(const TrainMetrics&) = delete;

  void step(int64_t s, const std::vector<wire::Ack>& acks);
  // The final metrics line and the run's summary in the log.
  void finish(std::vector<wire::Report> reports);

 private:
  std::optional<double> reported_mfu(int64_t s, const StepFigures& f);
  void log_step(int64_t s, const StepFigures& f, std::optional<double> mfu);
  void show_progress(int64_t s);
  void write_step(int64_t s, const StepFigures& f, std::optional<double> mfu,
                  const std::vector<wire::Ack>& acks, const std::vector<int>& stragglers,
                  const std::optional<EvalFigures>& eval);
  nlohmann::ordered_json source_losses(const StepFigures& f) const;
  void add_to_windows(int64_t s, const StepFigures& f);
  std::string describe_source_losses() const;

  const parallel::World& w_;
  const roles::Lead& lead_;
  int64_t first_, end_;
  std::FILE* jsonl_ = nullptr;
  Progress progress_;
  Clock::time_point start_ = Clock::now();
  StragglerWatch stragglers_;
  double first_loss_ = 0, last_loss_ = 0;
  // Per source, over the run's first and last tenth of steps: Σ −log p and
  // predictions, for the summary's loss by source.
  struct SourceWindow {
    std::vector<double> loss;
    std::vector<int64_t> predictions;
    void add(const StepFigures& f);
    std::optional<double> mean(size_t source) const;  // none: no predictions
  };
  SourceWindow early_, late_;
  // Held-out evaluations (eval.every): the position buckets, their CSV, the
  // first and the last held-out loss.
  std::vector<int64_t> eval_edges_;
  std::unique_ptr<EvalPositionsCsv> eval_csv_;
  std::optional<double> first_eval_, last_eval_;
  // A step's MFU went above 1: the peak is too low, so MFU is unknown from
  // then on.
  bool peak_too_low_ = false;
};

}  // namespace meshloom::runtime
