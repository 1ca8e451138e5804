#include "runtime/trainer_wire.hpp"

#include <tuple>
#include <utility>

#include "base/math.hpp"

namespace meshloom::runtime {

static_assert(train::kMicroColumns == wire::kMicroColumns, "Ack::micro carries StepStats::micro");

train::StepInput step_input(const wire::Batch& batch) {
  train::StepInput in;
  in.step = batch.step;
  in.global_predictions = batch.global_predictions;
  in.capacity = batch.capacity;
  in.samples.reserve(batch.samples.size());
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    const wire::Sample& s = batch.samples[i];
    in.samples.push_back(
        {s.source, s.length, i < batch.scored_from.size() ? batch.scored_from[i] : -1});
  }
  in.groups = batch.groups;
  in.micro.reserve(batch.micro.size());
  for (const wire::MicroBatch& mb : batch.micro) {
    train::MicroInput& m = in.micro.emplace_back();
    m.batch.tokens = mb.tokens;
    m.batch.targets = mb.targets;
    m.batch.positions = mb.positions;
    m.batch.patches = mb.patches;
    m.batch.samples.reserve(mb.tokens.size());
    for (const wire::Segment& seg : mb.segments) {
      m.batch.samples.insert(m.batch.samples.end(), size_t(seg.length), seg.sample);
      m.runs.push_back({seg.sample, seg.length});
    }
    m.group = mb.group;
    m.member = mb.member;
    m.offload = mb.offload;
    m.slot = mb.slot;
    m.ulysses = mb.ulysses;
  }
  return in;
}

wire::Ack to_ack(train::StepStats stats) {
  wire::Ack ack;
  std::tie(ack.step, ack.trainer, ack.loss_sum, ack.predictions, ack.tokens, ack.flops,
           ack.step_seconds, ack.compute_seconds, ack.grad_norm) =
      std::tie(stats.step, stats.trainer, stats.loss_sum, stats.predictions, stats.tokens,
               stats.flops, stats.step_seconds, stats.compute_seconds, stats.grad_norm);
  std::tie(ack.group_hits, ack.group_misses, ack.group_split_seconds, ack.group_device_bytes,
           ack.group_device_evictions) =
      std::tie(stats.group_hits, stats.group_misses, stats.group_split_seconds,
               stats.group_device_bytes, stats.group_device_evictions);
  ack.note = std::move(stats.note);
  ack.micro = std::move(stats.micro);
  ack.source_loss = std::move(stats.source_loss);
  ack.source_predictions = std::move(stats.source_predictions);
  return ack;
}

void add_eval(const train::EvalStats& stats, wire::EvalResult* result) {
  ++result->batches;
  result->tokens += stats.tokens;
  result->predictions += stats.predictions;
  result->loss_sum += stats.loss_sum;
  result->flops += stats.flops;
  result->seconds += stats.seconds;
  add_elementwise(result->source_loss, stats.source_loss);
  add_elementwise(result->source_predictions, stats.source_predictions);
  add_elementwise(result->position_loss, stats.position_loss);
  add_elementwise(result->position_predictions, stats.position_predictions);
  add_elementwise(result->sample_scores, stats.sample_scores);
}

}  // namespace meshloom::runtime
