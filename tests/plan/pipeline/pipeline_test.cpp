// Pipeline parallelism, planning half: stage assignment (exact against
// brute force, embedding and head counted, user overrides checked), the 1F1B
// op lists (hand-worked), the event simulation (hand-worked timings,
// deadlocks reported) and a property test over thousands of random pipelines.
#include "plan/pipeline/pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "plan/model_shape.hpp"
#include "plan/pipeline/pipeline_schedule.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

std::string ops_text(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const PipeOp& op : ops) {
    if (!s.empty()) s += ' ';
    s += to_string(op);
  }
  return s;
}

// Every contiguous split of `layer` into pp stages: the least bottleneck.
double brute_force_bottleneck(const std::vector<double>& layer, double first, double last, int pp) {
  const int L = int(layer.size());
  double best = INFINITY;
  std::vector<int> counts;
  std::function<void(int, int)> go = [&](int s, int used) {
    if (s == pp - 1) {
      counts.push_back(L - used);
      double worst = 0;
      for (int st = 0, at = 0; st < pp; at += counts[st], ++st) {
        double c = (st == 0 ? first : 0) + (st == pp - 1 ? last : 0);
        for (int l = at; l < at + counts[st]; ++l) c += layer[l];
        worst = std::max(worst, c);
      }
      best = std::min(best, worst);
      counts.pop_back();
      return;
    }
    for (int n = 1; used + n <= L - (pp - 1 - s); ++n) {
      counts.push_back(n);
      go(s + 1, used + n);
      counts.pop_back();
    }
  };
  go(0, 0);
  return best;
}

double bottleneck(const std::vector<double>& layer, double first, double last,
                  const std::vector<int>& counts) {
  double worst = 0;
  const int pp = int(counts.size());
  for (int s = 0, at = 0; s < pp; at += counts[s], ++s) {
    double c = (s == 0 ? first : 0) + (s == pp - 1 ? last : 0);
    for (int l = at; l < at + counts[s]; ++l) c += layer[l];
    worst = std::max(worst, c);
  }
  return worst;
}

PipeCosts uniform_costs(int pp, int m, double f, double b, double msg) {
  PipeCosts c;
  c.forward.assign(pp, std::vector<double>(m, f));
  c.backward.assign(pp, std::vector<double>(m, b));
  c.transfer.assign(m, msg);
  return c;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(PipelineStages, PartitionIsTheExactLeastBottleneck) {
  Rng rng(7);
  for (int c = 0; c < 400; ++c) {
    const int L = 1 + int(rng.below(10));
    const int pp = 1 + int(rng.below(uint64_t(L)));
    std::vector<double> layer(L);
    for (double& x : layer) x = 0.1 + rng.uniform();
    const double first = rng.uniform() * 2, last = rng.uniform() * 2;
    const std::vector<int> counts = partition_layers(layer, first, last, pp);
    ASSERT_EQ(int(counts.size()), pp);
    int sum = 0;
    for (int n : counts) {
      EXPECT_GE(n, 1);
      sum += n;
    }
    EXPECT_EQ(sum, L);
    EXPECT_NEAR(bottleneck(layer, first, last, counts),
                brute_force_bottleneck(layer, first, last, pp), 1e-12)
        << "L " << L << " pp " << pp;
  }
}

TEST(PipelineStages, HeadAndEmbeddingShiftLayersOffTheEnds) {
  // Equal layers: an even split where it divides, the heavy last stage lighter.
  EXPECT_EQ(partition_layers(std::vector<double>(8, 1.0), 0, 0, 4), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(partition_layers(std::vector<double>(8, 1.0), 0, 1.5, 3), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(partition_layers(std::vector<double>(7, 1.0), 0, 0, 1), (std::vector<int>{7}));

  const model::Shape shape = model_shape("llama-7b");
  const CostModel cost = plantest::llama7b_cost();
  const LayerCosts lc = layer_costs(shape, cost);
  const MicroBatchLoad typical = MicroBatchLoad::of_lengths(std::vector<int64_t>{8192});
  // The head (d x V, 32K vocabulary) weighs about 0.6 of a 7B layer, the embedding next to nothing.
  EXPECT_GT(lc.head.seconds(typical), 0.3 * lc.layer.seconds(typical));
  EXPECT_LT(lc.embedding.seconds(typical), 0.01 * lc.layer.seconds(typical));
  for (int pp : {1, 2, 3, 4, 5, 8, 32}) {
    const std::vector<int> counts = balance_stages(lc, pp, typical);
    EXPECT_NO_THROW(check_stage_layers(counts, 32, pp));
    EXPECT_LE(counts.back(), counts.front()) << "pp " << pp;
  }
  // 32 layers + 0.6 of a layer: where pp divides 32, an even split (its
  // bottleneck is the last stage's 32/pp + 0.6 < 32/pp + 1); else the last
  // stage holds the fewest.
  EXPECT_EQ(balance_stages(lc, 2, typical), (std::vector<int>{16, 16}));
  EXPECT_EQ(balance_stages(lc, 4, typical), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(balance_stages(lc, 3, typical), (std::vector<int>{11, 11, 10}));
  EXPECT_NE(error_of([&] { balance_stages(lc, 33, typical); }).find("parallel.pp"),
            std::string::npos);
}

TEST(PipelineStages, StageCostsAddUpToTheCostModel) {
  const model::Shape shape = model_shape("llama-7b");
  CostModel cost = plantest::llama7b_cost();
  cost.g = 1e-3;
  for (int64_t L : {1024, 8192, 32768}) {
    const MicroBatchLoad m = MicroBatchLoad::of_lengths(std::vector<int64_t>{L, L / 2});
    const PipelineModel pm = pipeline_model(shape, cost, std::vector<int>{9, 8, 8, 7});
    double sum = 0;
    for (int s = 0; s < pm.pp(); ++s) {
      EXPECT_NEAR(pm.forward(s, m) + pm.backward(s, m), pm.stages[s].seconds(m), 1e-15);
      EXPECT_GT(pm.backward(s, m), 1.9 * pm.forward(s, m));  // backward ~2-2.5x forward
      sum += pm.stages[s].seconds(m);
    }
    const double whole = cost.micro_batch(m.tokens, m.attn_l2, 1);
    EXPECT_GE(sum, whole * (1 - 1e-12));
    EXPECT_LE(sum, whole * 1.001) << "the embedding and the loss are small extras";
    EXPECT_DOUBLE_EQ(pm.transfer(m), cost.latency + m.tokens * 2 * 4096 / cost.bandwidth);
  }
}

TEST(PipelineStages, OverridesAreCheckedWithTheirKey) {
  EXPECT_NO_THROW(check_stage_layers(std::vector<int>{3, 2, 2}, 7, 3));
  const std::string size = error_of([] { check_stage_layers(std::vector<int>{4, 3}, 7, 3); });
  EXPECT_NE(size.find("parallel.stage_layers has 2 entries, but parallel.pp is 3"),
            std::string::npos)
      << size;
  const std::string zero = error_of([] { check_stage_layers(std::vector<int>{7, 0, 0}, 7, 3); });
  EXPECT_NE(zero.find("parallel.stage_layers[1] is 0"), std::string::npos) << zero;
  const std::string sum = error_of([] { check_stage_layers(std::vector<int>{3, 3, 3}, 7, 3); });
  EXPECT_NE(sum.find("parallel.stage_layers sums to 9 layers, but the model has 7"),
            std::string::npos)
      << sum;
  EXPECT_THROW(
      pipeline_model(model_shape("7b"), plantest::llama7b_cost(), std::vector<int>{16, 15}), Error);
}

TEST(OneFOneB, OpListsByHand) {
  const PipeSchedule a = one_f_one_b(4, 6);
  EXPECT_EQ(ops_text(a[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(ops_text(a[1]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(ops_text(a[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  const PipeSchedule b = one_f_one_b(4, 2);  // fewer micro-batches than stages
  EXPECT_EQ(ops_text(b[0]), "F0 F1 B0 B1");
  EXPECT_EQ(ops_text(b[2]), "F0 F1 B0 B1");
  EXPECT_EQ(ops_text(b[3]), "F0 B0 F1 B1");
  EXPECT_EQ(ops_text(one_f_one_b(1, 3)[0]), "F0 B0 F1 B1 F2 B2");
  EXPECT_TRUE(one_f_one_b(3, 0)[2].empty());
  EXPECT_EQ(check_message_order(a, 6), "");
}

TEST(OneFOneB, TimingsByHand) {
  // pp 3, 2 micro-batches, F 1 s, B 2 s, free messages: the last stage runs
  // F1 at 5 after B0; the step is (M + pp - 1)(F + B) = 12, half of it idle.
  const PipeTiming t = simulate_pipeline(one_f_one_b(3, 2), uniform_costs(3, 2, 1, 2, 0));
  EXPECT_DOUBLE_EQ(t.makespan, 12);
  EXPECT_DOUBLE_EQ(t.bubble(), 0.5);
  EXPECT_DOUBLE_EQ(t.ops[2][2].start, 5);   // F1
  EXPECT_DOUBLE_EQ(t.ops[1][2].start, 5);   // B0 after stage 2's B0
  EXPECT_DOUBLE_EQ(t.ops[0][3].start, 10);  // B1
  for (double b : t.busy) EXPECT_DOUBLE_EQ(b, 6);
  // pp 2, one micro-batch, messages of 0.5 s: 0-1, 1.5-2.5, 2.5-4.5, 5-7.
  const PipeTiming u = simulate_pipeline(one_f_one_b(2, 1), uniform_costs(2, 1, 1, 2, 0.5));
  EXPECT_DOUBLE_EQ(u.ops[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(u.ops[0][1].start, 5);
  EXPECT_DOUBLE_EQ(u.makespan, 7);
  EXPECT_DOUBLE_EQ(pipeline_lower_bound(uniform_costs(2, 1, 1, 2, 0.5)), 7);
  // An empty pipeline takes no time.
  EXPECT_EQ(simulate_pipeline(one_f_one_b(3, 0), uniform_costs(3, 0, 1, 1, 0)).makespan, 0);
}

TEST(OneFOneB, DeadlocksAreReportedNotLooped) {
  // Stage 1 wants F1 first, which stage 0 sends only after B0, which needs
  // stage 1's B0, which comes after its F1.
  PipeSchedule bad = {{{false, 0}, {true, 0}, {false, 1}, {true, 1}},
                      {{false, 1}, {false, 0}, {true, 0}, {true, 1}}};
  EXPECT_NE(check_message_order(bad, 2).find("activations in another order"), std::string::npos);
  const std::string e = error_of([&] { simulate_pipeline(bad, uniform_costs(2, 2, 1, 1, 0)); });
  EXPECT_NE(e.find("deadlocks"), std::string::npos) << e;
  EXPECT_NE(e.find("stage 0 at B0 waits for B0 of stage 1"), std::string::npos) << e;
  EXPECT_NE(e.find("stage 1 at F1 waits for F1 of stage 0"), std::string::npos) << e;
  // A backward before its own forward.
  PipeSchedule own = {{{true, 0}, {false, 0}}};
  EXPECT_NE(error_of([&] {
              simulate_pipeline(own, uniform_costs(1, 1, 1, 1, 0));
            }).find("stage 0 at B0 waits for its own F0"),
            std::string::npos);
  PipeSchedule twice = {{{false, 0}, {false, 0}, {true, 0}}};
  EXPECT_NE(error_of([&] { simulate_pipeline(twice, uniform_costs(1, 1, 1, 1, 0)); }).find("twice"),
            std::string::npos);
  PipeSchedule outside = {{{false, 3}}};
  EXPECT_NE(error_of([&] {
              simulate_pipeline(outside, uniform_costs(1, 1, 1, 1, 0));
            }).find("there are 1 micro-batches"),
            std::string::npos);
}

TEST(OneFOneB, PropertyRandomPipelines) {
  Rng rng(2026);
  constexpr double kEps = 1e-9;
  int equal_cases = 0;
  for (int c = 0; c < 4000; ++c) {
    const int pp = 1 + int(rng.below(8));
    const int M = 1 + int(rng.below(40));
    const bool equal = c % 3 == 0;
    PipeCosts costs;
    if (equal) {
      const double f = 0.1 + rng.uniform(), b = f * (1 + 2 * rng.uniform());
      costs = uniform_costs(pp, M, f, b, 0);
    } else {
      // Per micro-batch lengths and per stage speeds, as unequal micro-batches on uneven stages.
      std::vector<double> length(M), stage(pp);
      for (double& x : length) x = std::exp(rng.uniform() * std::log(64.0));
      for (double& x : stage) x = 0.5 + rng.uniform();
      const double msg = rng.below(3) == 0 ? 0.0 : 0.3 * rng.uniform();
      costs.forward.assign(pp, std::vector<double>(M));
      costs.backward.assign(pp, std::vector<double>(M));
      for (int s = 0; s < pp; ++s)
        for (int i = 0; i < M; ++i) {
          costs.forward[s][i] = stage[s] * length[i] * (0.5 + rng.uniform());
          costs.backward[s][i] = costs.forward[s][i] * (1.5 + rng.uniform());
        }
      for (int i = 0; i < M; ++i) costs.transfer.push_back(msg * length[i]);
    }
    const PipeSchedule sch = one_f_one_b(pp, M);
    ASSERT_EQ(check_message_order(sch, M), "") << "pp " << pp << " M " << M;
    PipeTiming t;
    ASSERT_NO_THROW(t = simulate_pipeline(sch, costs)) << "pp " << pp << " M " << M;

    // When each op ran, by stage and micro-batch.
    std::vector<std::vector<OpTime>> F(pp, std::vector<OpTime>(M)), B = F;
    double max_busy = 0;
    for (int s = 0; s < pp; ++s) {
      ASSERT_EQ(int(sch[s].size()), 2 * M);
      double busy = 0, prev_end = 0;
      int in_flight = 0;
      for (size_t k = 0; k < sch[s].size(); ++k) {
        const PipeOp& op = sch[s][k];
        const OpTime& ot = t.ops[s][k];
        const double len = (op.backward ? costs.backward : costs.forward)[s][op.micro_batch];
        EXPECT_NEAR(ot.end - ot.start, len, kEps);
        EXPECT_GE(ot.start, prev_end - kEps) << "ops of one stage overlap";
        prev_end = ot.end;
        busy += len;
        (op.backward ? B : F)[s][op.micro_batch] = ot;
        in_flight += op.backward ? -1 : 1;
        EXPECT_LE(in_flight, std::min(pp - s, M)) << "1F1B keeps at most pp - s activations";
      }
      EXPECT_NEAR(t.busy[s], busy, kEps * (1 + busy));
      max_busy = std::max(max_busy, busy);
    }
    // Dependencies, and no op starts later than its stage and inputs allow.
    for (int s = 0; s < pp; ++s) {
      for (size_t k = 0; k < sch[s].size(); ++k) {
        const PipeOp& op = sch[s][k];
        const int i = op.micro_batch;
        double ready = k ? t.ops[s][k - 1].end : 0.0;
        if (!op.backward && s > 0) {
          EXPECT_GE(F[s][i].start, F[s - 1][i].end + costs.transfer[i] - kEps);
          ready = std::max(ready, F[s - 1][i].end + costs.transfer[i]);
        }
        if (op.backward) {
          EXPECT_GE(B[s][i].start, F[s][i].end - kEps);
          ready = std::max(ready, F[s][i].end);
          if (s + 1 < pp) {
            EXPECT_GE(B[s][i].start, B[s + 1][i].end + costs.transfer[i] - kEps);
            ready = std::max(ready, B[s + 1][i].end + costs.transfer[i]);
          }
        }
        EXPECT_NEAR(t.ops[s][k].start, ready, kEps * (1 + ready));
      }
    }
    EXPECT_GE(t.makespan, pipeline_lower_bound(costs) * (1 - 1e-12));
    EXPECT_GE(t.makespan, max_busy * (1 - 1e-12));
    if (equal) {
      ++equal_cases;
      const double textbook = double(pp - 1) / double(M + pp - 1);
      EXPECT_NEAR(t.bubble(), textbook, 1e-9) << "pp " << pp << " M " << M;
      EXPECT_NEAR(t.makespan, (M + pp - 1) * (costs.forward[0][0] + costs.backward[0][0]),
                  1e-9 * t.makespan);
    }
    if (HasFailure()) {
      ADD_FAILURE() << "case " << c << ": pp " << pp << " M " << M;
      return;
    }
  }
  EXPECT_GT(equal_cases, 1000);
}
