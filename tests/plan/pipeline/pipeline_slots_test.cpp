// Pipeline slots (pipeline_slots.hpp): coupled 1F1B pipelines never
// deadlock when each runs its list over slots. A hand-made plan deadlocks
// with plain list indices and runs with slots, so the check bites; then
// random plans of the hdp, bytescale and pp-balance planners, random pp
// 1..5, run in process with every ring a rendezvous and every message
// checked against its receive, in order.
#include "plan/pipeline/pipeline_slots.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/strings.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pp_plan.hpp"
#include "plan/planner.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

// The header's example: rings R = 0 and Q = 2 on trainers 0 and 1, a whole
// micro-batch A = 1 between them on trainer 1 only.
Plan ring_a_ring_plan() {
  const CostModel cost = plantest::llama7b_cost();
  PlanBuilder b("test", 2, 100, ChunkRule::kBalanced, {200, 50, 200}, cost);
  const int32_t both[] = {0, 1};
  b.set_group(0, both);
  b.set_group(1, 1);
  b.set_group(2, both);
  const int32_t r[] = {0}, q[] = {2};
  const Piece a[] = {{1, 0}};
  b.add_ring(0, r);
  b.add_micro_batch(1, 1, a);
  b.add_ring(2, q);
  return b.finish(cost);
}

// Every pipeline's 1F1B over plain list indices: what runs without slots.
std::vector<PipeSchedule> by_list_index(const Plan& plan, int pp) {
  std::vector<PipeSchedule> out;
  for (int32_t t = 0; t < plan.trainers; ++t)
    out.push_back(one_f_one_b(pp, int(plan.micro_batches_of(t).size())));
  return out;
}

std::vector<PipeSchedule> by_slots(const Plan& plan, int pp) {
  const PipelineSlots slots = pipeline_slots(plan);
  std::vector<PipeSchedule> out;
  for (int32_t t = 0; t < plan.trainers; ++t) out.push_back(pipeline_schedule(plan, slots, t, pp));
  return out;
}

std::string ops_text(const std::vector<PipeOp>& ops) {
  std::vector<std::string> parts;
  for (const PipeOp& op : ops) parts.push_back(to_string(op));
  return join(parts, " ");
}

// Slots increase along every list, a ring has one slot on all members, and
// S is each list's last slot + 1.
std::string check_slots(const Plan& plan, const PipelineSlots& s) {
  for (int32_t t = 0; t < plan.trainers; ++t) {
    int32_t last = -1;
    for (int32_t i = plan.trainer_begin[t]; i < plan.trainer_begin[t + 1]; ++i) {
      if (s.slot[i] <= last) return strf("trainer %d: slot %d after %d", t, s.slot[i], last);
      last = s.slot[i];
    }
    if (s.slots[t] != last + 1)
      return strf("trainer %d: S = %d, last slot %d", t, s.slots[t], last);
  }
  std::vector<int32_t> ring_slot(plan.sequences(), -1);
  for (size_t i = 0; i < plan.micro_batches.size(); ++i) {
    const int32_t seq = plan.pieces[plan.micro_batches[i].piece_begin].seq;
    if (plan.group_size(seq) == 1) continue;
    if (ring_slot[seq] < 0) ring_slot[seq] = s.slot[i];
    if (ring_slot[seq] != s.slot[i])
      return strf("ring of sequence %d in slots %d and %d", seq, ring_slot[seq], s.slot[i]);
  }
  return "";
}

// Lengths from 1 to 4C, log-uniform: with a small C many rings of 2..4.
std::vector<int64_t> random_lengths(Rng& rng, int32_t trainers, int64_t capacity) {
  const int n = 1 + int(rng.below(6 * uint64_t(trainers)));
  std::vector<int64_t> lengths;
  for (int i = 0; i < n; ++i) {
    const int64_t L = int64_t(std::exp(rng.uniform() * std::log(4.0 * double(capacity))));
    lengths.push_back(std::clamp<int64_t>(L, 1, int64_t(trainers) * capacity));
  }
  return lengths;
}

// Random batches (trainers 1-8, C 64-511, pp 1..max_pp), each planned by
// hdp, bytescale and pp-balance: check(plan, model, pp) on every plan,
// under a trace naming it; stops at the first fatal failure.
template <class Check>
void for_random_plans(uint64_t seed, int batches, int max_pp, Check check) {
  const CostModel cost = plantest::llama7b_cost();
  Rng rng(seed);
  for (int iter = 0; iter < batches && !::testing::Test::HasFatalFailure(); ++iter) {
    PlannerOptions o;
    o.trainers = 1 + int32_t(rng.below(8));
    o.capacity = 64 + int64_t(rng.below(448));
    const int pp = 1 + int(rng.below(uint64_t(max_pp)));
    const std::vector<int64_t> lengths = random_lengths(rng, o.trainers, o.capacity);
    const PipelineModel model = balanced_pipeline(model_shape("llama-7b"), cost, pp, o.capacity);
    for (const std::string planner : {"hdp", "bytescale", "pp-balance"}) {
      SCOPED_TRACE(strf("iter %d, %s, T %d, C %lld, pp %d, %zu sequences", iter, planner.c_str(),
                        o.trainers, (long long)o.capacity, pp, lengths.size()));
      const Plan plan =
          planner == "pp-balance"
              ? pp_balance_plan(lengths, o, cost, model)
              : plan_step({config::choice_from_name<config::Planner>(planner, "planner")}, lengths,
                          o, cost);
      check(plan, model, pp);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace

TEST(PipelineSlots, PlainIndicesDeadlockSlotsDoNot) {
  const Plan plan = ring_a_ring_plan();
  ASSERT_EQ(plan.validate(), "");
  const std::string plain = simulate_pipelines(plan, by_list_index(plan, 2));
  EXPECT_NE(plain.find("pipelines deadlock"), std::string::npos) << plain;
  EXPECT_NE(plain.find("pipeline 0 stage 0 at F1 (ring of sequence 2) waits for pipeline 1, at B0"),
            std::string::npos)
      << plain;

  const PipelineSlots slots = pipeline_slots(plan);
  EXPECT_EQ(slots.slot, (std::vector<int32_t>{0, 2, 0, 1, 2}));
  EXPECT_EQ(slots.slots, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(check_slots(plan, slots), "");
  const PipeSchedule x = pipeline_schedule(plan, slots, 0, 2);
  EXPECT_EQ(ops_text(x[0]), "F0 B0 F1 B1");  // slot 1 empty: no warm-up past it
  EXPECT_EQ(ops_text(x[1]), "F0 B0 F1 B1");
  for (int pp = 1; pp <= 6; ++pp)
    EXPECT_EQ(simulate_pipelines(plan, by_slots(plan, pp)), "") << "pp " << pp;
  // One stage has no order to get wrong.
  EXPECT_EQ(simulate_pipelines(plan, by_list_index(plan, 1)), "");
}

TEST(PipelineSlots, SlotScheduleIsOneFOneBWithEmptiesSkipped) {
  for (int pp = 1; pp <= 5; ++pp) {
    for (int m = 0; m <= 7; ++m) {  // consecutive slots: plain 1F1B
      std::vector<int32_t> slots(m);
      for (int i = 0; i < m; ++i) slots[i] = i;
      EXPECT_EQ(one_f_one_b_slots(pp, slots), one_f_one_b(pp, m)) << pp << " " << m;
    }
  }
  const int32_t sparse[] = {1, 4};  // stage 0 of 4: F1 F4 in warm-up, then both B
  const PipeSchedule s = one_f_one_b_slots(4, sparse);
  EXPECT_EQ(ops_text(s[0]), "F0 F1 B0 B1");
  EXPECT_EQ(ops_text(s[3]), "F0 B0 F1 B1");
  EXPECT_EQ(check_message_order(s, 2), "");
}

TEST(PipelineSlots, ReportsMessagesOutOfOrder) {
  const Plan plan = ring_a_ring_plan();
  std::vector<PipeSchedule> bad = by_slots(plan, 2);
  ASSERT_EQ(ops_text(bad[1][1]), "F0 B0 F1 B1 F2 B2");
  std::swap(bad[1][1][0], bad[1][1][2]);  // trainer 1, stage 1 takes F1 before F0
  EXPECT_EQ(simulate_pipelines(plan, bad),
            "pipeline 1: stage 0 sends activations in another order than stage 1 receives them");
  std::swap(bad[1][1][0], bad[1][1][2]);
  std::swap(bad[1][1][0], bad[1][1][1]);  // B0 before its F0
  EXPECT_EQ(simulate_pipelines(plan, bad),
            "pipeline 1 stage 1 at B0 (ring of sequence 0): its forward has not run");
  std::vector<PipeSchedule> few = by_slots(plan, 2);
  few.pop_back();
  EXPECT_EQ(simulate_pipelines(plan, few), "1 schedules for 2 pipelines");
}

TEST(PipelineSlots, RandomPlansNeverDeadlock) {
  int plans = 0, rings = 0, plain_deadlocks = 0;
  for_random_plans(20, 1000, 5, [&](const Plan& plan, const PipelineModel&, int pp) {
    ASSERT_EQ(plan.validate(), "");
    const PipelineSlots slots = pipeline_slots(plan);
    ASSERT_EQ(check_slots(plan, slots), "");
    ASSERT_EQ(simulate_pipelines(plan, by_slots(plan, pp)), "");
    ++plans;
    for (int32_t s = 0; s < plan.sequences(); ++s) rings += plan.group_size(s) > 1;
    if (!simulate_pipelines(plan, by_list_index(plan, pp)).empty()) ++plain_deadlocks;
  });
  std::printf("%d plans, %d rings; %d deadlock with plain list indices, none with slots\n", plans,
              rings, plain_deadlocks);
  EXPECT_GT(rings, plans);        // the batches do couple pipelines
  EXPECT_GT(plain_deadlocks, 0);  // and without slots some of them deadlock
}

namespace {

// Each pipeline's slot schedule simulated alone: no waits for ring members.
std::vector<PipeTiming> alone(const Plan& plan, const PipelineModel& model, const CostModel& cost) {
  const std::vector<PipeSchedule> schedules = by_slots(plan, model.pp());
  const auto loads = plan_loads(plan, cost);
  std::vector<PipeTiming> out;
  for (int32_t t = 0; t < plan.trainers; ++t)
    out.push_back(simulate_pipeline(schedules[t], pipe_costs(model, loads[t])));
  return out;
}

// Every ring's op, at every stage, starts and ends at one time on all its
// members; "" or the first that does not.
std::string rings_together(const Plan& plan, const std::vector<PipeTiming>& timing, int pp) {
  const std::vector<PipeSchedule> schedules = by_slots(plan, pp);
  std::map<std::tuple<int32_t, int, bool>, OpTime> seen;  // (ring, stage, backward)
  for (int32_t t = 0; t < plan.trainers; ++t)
    for (int s = 0; s < pp; ++s)
      for (size_t k = 0; k < schedules[t][s].size(); ++k) {
        const PipeOp& op = schedules[t][s][k];
        const int32_t seq = plan.pieces[plan.micro_batches_of(t)[op.micro_batch].piece_begin].seq;
        if (plan.group_size(seq) == 1) continue;
        const OpTime at = timing[t].ops[s][k];
        const auto [it, first] = seen.emplace(std::tuple(seq, s, op.backward), at);
        if (!first && (it->second.start != at.start || it->second.end != at.end))
          return strf("ring of sequence %d, stage %d, %s: [%g, %g] on pipeline %d, [%g, %g] before",
                      seq, s, op.backward ? "backward" : "forward", at.start, at.end, t,
                      it->second.start, it->second.end);
      }
  return "";
}

}  // namespace

TEST(PipelineTimings, ARingWaitsForItsSlowestMember) {
  // Trainer 0 runs R and Q; trainer 1 runs A between them, so trainer 0's Q
  // waits for trainer 1's A and both pipelines end with Q's backward, when
  // trainer 1 alone would.
  const Plan plan = ring_a_ring_plan();
  const CostModel cost = plantest::llama7b_cost();
  for (int pp = 1; pp <= 3; ++pp) {
    SCOPED_TRACE(strf("pp %d", pp));
    const PipelineModel model = balanced_pipeline(model_shape("llama-7b"), cost, pp, 200);
    const std::vector<PipeTiming> coupled = pipeline_timings(plan, model, cost);
    const std::vector<PipeTiming> own = alone(plan, model, cost);
    ASSERT_EQ(coupled.size(), 2u);
    EXPECT_EQ(rings_together(plan, coupled, pp), "");
    EXPECT_DOUBLE_EQ(coupled[0].makespan, coupled[1].makespan);
    EXPECT_DOUBLE_EQ(coupled[1].makespan, own[1].makespan);  // trainer 1 never waited
    // With one stage A cannot hide in a bubble: trainer 0 waits for it.
    if (pp == 1) {
      EXPECT_GT(coupled[0].makespan, own[0].makespan * 1.05);
    }
    EXPECT_EQ(pipeline_times(plan, model, cost),
              (std::vector<double>{coupled[0].makespan, coupled[1].makespan}));
  }
}

TEST(PipelineTimings, RandomPlansOnlyWaitForRings) {
  const CostModel cost = plantest::llama7b_cost();
  int coupled_later = 0, ringless = 0;
  for_random_plans(21, 300, 4, [&](const Plan& plan, const PipelineModel& model, int pp) {
    const std::vector<PipeTiming> coupled = pipeline_timings(plan, model, cost);
    const std::vector<PipeTiming> own = alone(plan, model, cost);
    ASSERT_EQ(rings_together(plan, coupled, pp), "");
    bool rings = false;
    for (int32_t s = 0; s < plan.sequences(); ++s) rings = rings || plan.group_size(s) > 1;
    for (int32_t t = 0; t < plan.trainers; ++t) {
      // Waiting only delays: never earlier than alone, the same without rings.
      ASSERT_GE(coupled[t].makespan, own[t].makespan * (1 - 1e-12));
      if (!rings) {
        ASSERT_DOUBLE_EQ(coupled[t].makespan, own[t].makespan);
      }
      coupled_later += coupled[t].makespan > own[t].makespan * (1 + 1e-9);
    }
    ringless += !rings;
  });
  std::printf("%d pipelines waited for ring members; %d plans without rings\n", coupled_later,
              ringless);
  EXPECT_GT(coupled_later, 0);
  EXPECT_GT(ringless, 0);
}
