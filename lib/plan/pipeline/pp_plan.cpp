#include "plan/pipeline/pp_plan.hpp"

#include <algorithm>
#include <chrono>

#include "base/check.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/pipeline/pipeline_schedule.hpp"
#include "plan/pipeline/pipeline_slots.hpp"
#include "plan/pipeline/pp_balance.hpp"
#include "plan/planners/hdp_planner.hpp"

namespace meshloom::plan {

PipelineModel balanced_pipeline(const model::Shape& shape, const CostModel& cost, int pp,
                                int64_t capacity) {
  const std::vector<int> stages = balance_stages(
      layer_costs(shape, cost), pp, MicroBatchLoad::of_lengths(std::vector<int64_t>{capacity}));
  return pipeline_model(shape, cost, stages);
}

namespace {

bool holds_long(const Plan& plan, const MicroBatch& mb) {
  for (const Piece& p : plan.pieces_of(mb))
    if (plan.lengths[size_t(p.seq)] > plan.capacity) return true;
  return false;
}

// Phase 1: `hdp`, hdp's plan of the whole batch (no static fallback); its
// micro-batches that hold a sequence longer than C are copied into `b`, first in each trainer's
// list (keys 0, 1, ...). Returns each trainer's count of them, marks their sequences in `placed`,
// and sets `start` to each pipeline's makespan of them with the pipelines run together
// (pipeline_times): a ring waits for its slowest member, so a pipeline's rings can end well after
// their own work would, and PP-Balance would fill that wait with short micro-batches.
std::vector<int32_t> add_rings(PlanBuilder& b, const Plan& hdp, const std::vector<int64_t>& lengths,
                               const PlannerOptions& options, const CostModel& cost,
                               const PipelineModel& model, std::vector<uint8_t>& placed,
                               std::vector<double>& start) {
  std::vector<int32_t> count(size_t(options.trainers), 0);
  if (std::none_of(lengths.begin(), lengths.end(), [&](int64_t L) { return L > options.capacity; }))
    return count;
  ML_CHECK(hdp.rule == ChunkRule::kBalanced && hdp.trainers == options.trainers,
           "hdp's plan has another layout");
  // The rings alone, to time them: the other sequences grouped, not placed.
  PlanBuilder rings("rings", options.trainers, options.capacity, ChunkRule::kBalanced, lengths,
                    cost);
  for (int32_t s = 0; s < hdp.sequences(); ++s) rings.set_group(s, hdp.group(s));
  for (int32_t t = 0; t < hdp.trainers; ++t)
    for (const MicroBatch& mb : hdp.micro_batches_of(t)) {
      if (!holds_long(hdp, mb)) continue;
      const std::span<const Piece> pieces = hdp.pieces_of(mb);
      for (const Piece& p : pieces)
        if (p.member == 0) {  // once per sequence
          b.set_group(p.seq, hdp.group(p.seq));
          b.set_offload(p.seq, hdp.offload_ratio(p.seq));
          rings.set_offload(p.seq, hdp.offload_ratio(p.seq));
          placed[size_t(p.seq)] = 1;
        }
      const double key = double(count[size_t(t)]++);
      b.add_micro_batch(t, key, pieces);
      rings.add_micro_batch(t, key, pieces);
    }
  start = pipeline_times(rings.finish(cost), model, cost);
  return count;
}

// PP-Balance in runs of whole micro-batches, or by sequence where that is
// predicted faster and cheap to plan (n x D simulations).
PipelineBatch best_balance(const std::vector<int64_t>& lengths, const PipelineBalanceOptions& o,
                           const PipelineModel& model) {
  constexpr double kBySequenceLimit = 1 << 16;  // sequences x pipelines
  PipelineBatch runs = pp_balance(lengths, o, model);
  if (double(lengths.size()) * o.pipelines > kBySequenceLimit) return runs;
  PipelineBatch by_sequence = pp_balance_by_sequence(lengths, o, model);
  return by_sequence.makespan(o.start) < runs.makespan(o.start) * (1 - 1e-3) ? by_sequence : runs;
}

// Phase 2: the sequences not yet placed, all of at most C tokens, by
// PP-Balance after each pipeline's rings.
void add_whole(PlanBuilder& b, const std::vector<int64_t>& lengths, const PlannerOptions& options,
               const PipelineModel& model, const std::vector<uint8_t>& placed,
               const std::vector<int32_t>& rings, std::vector<double> start) {
  std::vector<int32_t> ids;
  std::vector<int64_t> whole;
  for (int32_t i = 0; i < int32_t(lengths.size()); ++i)
    if (!placed[size_t(i)]) {
      ids.push_back(i);
      whole.push_back(lengths[size_t(i)]);
    }
  PipelineBalanceOptions o;
  o.pipelines = options.trainers;
  o.capacity = options.capacity;
  o.slack = options.slack;
  o.start = std::move(start);
  const PipelineBatch batch = best_balance(whole, o, model);
  for (int32_t p = 0; p < batch.pipelines(); ++p)
    for (int32_t j = batch.pipeline_begin[size_t(p)]; j < batch.pipeline_begin[size_t(p) + 1];
         ++j) {
      std::vector<Piece> pieces;
      for (int32_t i : batch.micro_batches[size_t(j)]) {
        b.set_group(ids[size_t(i)], p);
        pieces.push_back({ids[size_t(i)], 0});
      }
      b.add_micro_batch(p, double(rings[size_t(p)] + j), pieces);
    }
}

// pp_balance_plan around `hdp`, hdp's plan of the batch without the
// static fallback.
Plan balance_around(const Plan& hdp, const std::vector<int64_t>& lengths,
                    const PlannerOptions& options, const CostModel& cost,
                    const PipelineModel& model) {
  PlanBuilder b("pp-balance", options.trainers, options.capacity, ChunkRule::kBalanced, lengths,
                cost);
  std::vector<uint8_t> placed(lengths.size(), 0);
  std::vector<double> start(size_t(options.trainers), 0.0);
  const std::vector<int32_t> rings =
      add_rings(b, hdp, lengths, options, cost, model, placed, start);
  add_whole(b, lengths, options, model, placed, rings, std::move(start));
  Plan plan = b.finish(cost);
  choose_cp_algorithms(plan, cost, options.cp_algorithm);
  return plan;
}

PlannerOptions without_fallback(const PlannerOptions& options) {
  PlannerOptions o = options;
  o.static_fallback = false;  // the grid's padded chunks would split short sequences too
  return o;
}

}  // namespace

Plan pp_balance_plan(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                     const CostModel& cost, const PipelineModel& model) {
  check_plan_inputs(lengths, options);
  const auto t0 = std::chrono::steady_clock::now();
  Plan plan = balance_around(plan_hdp(lengths, without_fallback(options), cost), lengths, options,
                             cost, model);
  plan.planning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

double slowest_pipeline(const Plan& plan, const PipelineModel& model, const CostModel& cost) {
  const std::vector<double> t = pipeline_times(plan, model, cost);
  return t.empty() ? 0.0 : *std::max_element(t.begin(), t.end());
}

Plan pp_step_plan(const std::vector<int64_t>& lengths, const PlannerOptions& options,
                  const CostModel& cost, const PipelineModel& pipeline) {
  const auto t0 = std::chrono::steady_clock::now();
  Plan hdp = plan_step({config::Planner::hdp}, lengths, options, cost);
  // Without the static fallback hdp's plan is the one PP-Balance keeps the
  // rings of (its CP algorithms aside, which add_rings does not read).
  Plan pp = options.static_fallback ? pp_balance_plan(lengths, options, cost, pipeline)
                                    : balance_around(hdp, lengths, options, cost, pipeline);
  // Strictly faster only, so that ties keep PP-Balance.
  Plan& best =
      slowest_pipeline(hdp, pipeline, cost) < slowest_pipeline(pp, pipeline, cost) * (1 - 1e-3)
          ? hdp
          : pp;
  best.planning_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::move(best);
}

}  // namespace meshloom::plan
