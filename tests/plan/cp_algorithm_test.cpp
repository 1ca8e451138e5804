// CP algorithms per split sequence: the Ulysses volume worked by
// hand, head limits, the choice (forced and auto), validate(), the wire
// format with the new field (and version 1 files), and the report lines.
#include "plan/cp_algorithm.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "base/bytes.hpp"
#include "plan/io/plan_io.hpp"
#include "plan/io/summary.hpp"
#include "plan/model_shape.hpp"
#include "plan/planner.hpp"
#include "plan/simulate/simulate.hpp"
#include "tests/common/test_util.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;
using config::CpAlgorithm;

namespace {

// 4 query heads, 2 KV heads, head dim 8: 16 bytes a head and token in bf16.
HeadShape small_heads() { return HeadShape{4, 2, 16.0}; }

// A cost model with round numbers: every term easy to follow by hand.
CostModel round_cost() {
  CostModel m;
  m.a = 1e-9;
  m.b = 1e-6;
  m.g = 0;
  m.layers = 2;
  m.kv_bytes = 64;  // 2 KV heads x 16 bytes x (K and V)
  m.passes = 3;
  m.bandwidth = 1e9;
  m.intra_bandwidth = 4e9;
  m.trainers_per_node = 4;
  m.latency = 0;
  m.heads = small_heads();
  return m;
}

std::vector<Plan> plans_of(CpAlgorithm setting, int seed, int count) {
  const CostModel cost = plantest::llama7b_cost();
  std::vector<Plan> out;
  Rng rng{uint64_t(seed)};
  for (int i = 0; i < count; ++i) {
    const plantest::Batch b = plantest::random_batch(rng, 64, 1.0, 200);
    PlannerOptions o;
    o.trainers = b.trainers;
    o.capacity = b.capacity;
    o.offload = i % 4 == 0;
    o.cp_algorithm = setting;
    for (config::Planner name : {config::Planner::hdp, config::Planner::static_grid}) {
      try {
        out.push_back(plan_step({name}, b.lengths, o, cost));
      } catch (const Error&) {  // the static grid cannot hold every batch
      }
    }
  }
  return out;
}

// Writes `p` (all rings, no heads) as a version 1 file: the layout before
// CP algorithms (plan_io.hpp).
std::vector<uint8_t> version1_bytes(const Plan& p) {
  ByteWriter w;
  for (char c : std::string("MLPLAN")) w.put(uint8_t(c));
  w.put(uint8_t(1));
  w.put(uint8_t(p.rule));
  for (int64_t v : {int64_t(p.trainers), p.capacity, int64_t(p.static_cp), int64_t(p.layers)})
    w.put_varint(uint64_t(v));
  w.put(p.kv_bytes);
  w.put(p.passes);
  w.put(p.planning_seconds);
  w.put_varint(p.planner.size());
  for (char c : p.planner) w.put(uint8_t(c));
  w.put_varint(uint64_t(p.sequences()));
  for (int64_t L : p.lengths) w.put_varint(uint64_t(L));
  for (int32_t s = 0; s < p.sequences(); ++s) {
    auto g = p.group(s);
    w.put_varint(g.size());
    w.put_varint(g.size());  // every rank its own run
    for (int32_t r : g) {
      w.put_varint(uint64_t(r));
      w.put_varint(1);
    }
  }
  w.put(uint8_t(0));  // no offload
  for (int32_t t = 0; t < p.trainers; ++t) {
    w.put_varint(p.micro_batches_of(t).size());
    for (const MicroBatch& mb : p.micro_batches_of(t)) {
      w.put_varint(uint64_t(mb.piece_end - mb.piece_begin));
      w.put(mb.start);
      w.put(mb.end);
      for (const Piece& pc : p.pieces_of(mb)) {
        w.put_varint(uint64_t(pc.seq));
        w.put_varint(uint64_t(pc.member));
      }
    }
  }
  std::vector<uint8_t> out(w.bytes().begin(), w.bytes().end());
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : out) {
    h ^= b;
    h *= 1099511628211ull;
  }
  out.resize(out.size() + 8);
  std::memcpy(out.data() + out.size() - 8, &h, 8);
  return out;
}

// One 4-way ring over trainers 0-3 (one node of round_cost) holding a
// sequence of 4,096 tokens, and a whole sequence on trainer 4.
Plan four_way_ring(const CostModel& cost) {
  PlanBuilder b("hand", 5, 1024, ChunkRule::kBalanced, {4096, 100}, cost);
  const int32_t ranks[] = {0, 1, 2, 3};
  b.set_group(0, ranks);
  b.set_group(1, 4);
  const int32_t seqs[] = {0};
  b.add_ring(0, seqs);
  const Piece whole{1, 0};
  b.add_micro_batch(4, 0, std::span<const Piece>(&whole, 1));
  return b.finish(cost);
}

}  // namespace

TEST(CpAlgorithm, UlyssesVolumeWorkedByHand) {
  const HeadShape h = small_heads();
  // u = 2: member 0 holds query heads 0-1 (KV head 0), member 1 heads 2-3
  // (KV head 1). Per token a member holds, forward: Q, 2 of its 4 heads to
  // the other (32 B); K and V, 1 KV head each to the other (32 B); O, 2
  // heads of the other's token back (32 B): 96 B.
  EXPECT_EQ(ulysses_kv_heads(h, 2), 1);
  EXPECT_DOUBLE_EQ(ulysses_bytes(h, 2), 96.0);
  // u = 4: one query head each, but 2 KV heads for 4 members: each KV head
  // goes to two members (replicated). Q: 3 heads out (48 B); K and V: the
  // one KV head each of 3 others needs (96 B); O: 3 heads back (48 B): 192 B,
  // where 144 B would do without replication (2 KV heads split 4 ways).
  EXPECT_EQ(ulysses_kv_heads(h, 4), 1);
  EXPECT_DOUBLE_EQ(ulysses_bytes(h, 4), 192.0);
  EXPECT_DOUBLE_EQ(ulysses_bytes(h, 1), 0.0);
  // The general formula without replication: (2 q_dim + 2 kv_dim) x 2 bytes
  // x (u - 1) / u per token: LLaMA-7B, TP 1, u = 8 (8 KV heads, no replication).
  const HeadShape llama = head_shape(model_shape("llama-7b"), 1);
  EXPECT_EQ(llama, (HeadShape{32, 8, 256.0}));
  EXPECT_DOUBLE_EQ(ulysses_bytes(llama, 8), (2.0 * 4096 + 2.0 * 1024) * 2 * 7 / 8);
  // A member whose query heads straddle two KV groups needs both: 12 heads,
  // 4 KV heads (3 queries each), u = 6 gives member 1 heads 2-3, KV heads 0-1.
  EXPECT_EQ(ulysses_kv_heads(HeadShape{12, 4, 16.0}, 6), 2);
  // The ring across subgroups carries u x (K, V of e KV heads) per token held.
  EXPECT_DOUBLE_EQ(cp_ring_block_bytes(h, 64.0, 1), 64.0);
  EXPECT_DOUBLE_EQ(cp_ring_block_bytes(h, 64.0, 2), 2 * 2 * 1 * 16.0);
}

TEST(CpAlgorithm, HeadLimits) {
  const HeadShape h = small_heads();
  EXPECT_TRUE(ulysses_fits(h, 1));
  EXPECT_TRUE(ulysses_fits(h, 4));
  EXPECT_FALSE(ulysses_fits(h, 3));
  EXPECT_FALSE(ulysses_fits(h, 8));
  EXPECT_FALSE(ulysses_fits(HeadShape{}, 2)) << "heads unknown: ring only";
  EXPECT_EQ(ulysses_degrees(8, h), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(ulysses_degrees(6, h), (std::vector<int>{1, 2}));
  EXPECT_EQ(ulysses_degrees(5, h), (std::vector<int>{1}));
  EXPECT_EQ(ulysses_degrees(8, HeadShape{}), (std::vector<int>{1}));
  // TP splits the heads first: LLaMA-7B at TP 8 has 4 heads a rank.
  EXPECT_EQ(ulysses_degrees(16, head_shape(model_shape("llama-7b"), 8)),
            (std::vector<int>{1, 2, 4}));
}

TEST(CpAlgorithm, CostWorkedByHand) {
  const CostModel m = round_cost();
  const double tokens = 1000, l2 = 4e6;  // a 4-way group over 4,000 tokens
  // u = 1 is the ring, exactly.
  EXPECT_EQ(m.cp_micro_batch(tokens, l2, 4, 1, {true, true}), m.micro_batch(tokens, l2, 4, true));
  // Ulysses, u = 4 in one node: b tokens + a l2 (nothing overlaps) + layers
  // x 2 passes x tokens x 192 B / 4 GB/s = 1 ms + 4 ms + 0.192 ms.
  EXPECT_NEAR(m.cp_micro_batch(tokens, l2, 4, 4, {true, true}), 1e-3 + 4e-3 + 0.192e-3, 1e-12);
  // Across nodes the all-to-all runs at 1 GB/s.
  EXPECT_NEAR(m.cp_micro_batch(tokens, l2, 4, 4, {false, false}), 5e-3 + 0.768e-3, 1e-12);
  // Hybrid 2 x 2: all-to-all of u = 2 (96 B/token) intra, then a ring of 2
  // steps of 2 ms, each hiding layers x 3 x tokens x 64 B / 1 GB/s = 0.384 ms.
  EXPECT_NEAR(m.cp_micro_batch(tokens, l2, 4, 2, {true, false}),
              1e-3 + 2 * 2 * 1000 * 96 / 4e9 + 2e-3 + 2e-3, 1e-12);
  test::ThrowOnFatal throws;
  EXPECT_THROW(m.cp_micro_batch(tokens, l2, 4, 3, {}), Error) << "3 does not divide 4";
  EXPECT_THROW(m.cp_micro_batch(tokens, l2, 8, 8, {}), Error) << "8 does not divide 4 heads";
}

TEST(CpAlgorithm, ChoiceRespectsHeadLimits) {
  for (CpAlgorithm setting : {CpAlgorithm::ulysses, CpAlgorithm::hybrid, CpAlgorithm::automatic})
    for (const Plan& p : plans_of(setting, 7, 40)) {
      ASSERT_EQ(p.validate(), "") << p.planner;
      EXPECT_EQ(p.heads, plantest::llama7b_cost().heads);
      for (int32_t s = 0; s < p.sequences(); ++s) {
        const int k = p.group_size(s), u = p.cp_algo(s).u;
        EXPECT_EQ(k % u, 0);
        EXPECT_EQ(32 % u, 0) << "u must divide the 32 heads";
        if (setting == CpAlgorithm::ulysses) {
          EXPECT_EQ(u, std::gcd(k, 32));
        }
        if (setting == CpAlgorithm::hybrid && k > 1) {
          EXPECT_LT(u, k);
        }
      }
    }
  // Forced hybrid keeps its subgroups in one node: ranks 2-9 over nodes of 8.
  const CostModel cost = plantest::llama7b_cost();
  const int32_t ranks[] = {2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(forced_ulysses_degree(CpAlgorithm::hybrid, ranks, cost), 2);
  EXPECT_EQ(forced_ulysses_degree(CpAlgorithm::ulysses, ranks, cost), 8);
  EXPECT_EQ(forced_ulysses_degree(CpAlgorithm::ring, ranks, cost), 1);
  CostModel nodeless = cost;
  nodeless.trainers_per_node = 0;
  EXPECT_EQ(forced_ulysses_degree(CpAlgorithm::hybrid, ranks, nodeless), 4);
  CostModel headless = cost;
  headless.heads = {};
  EXPECT_EQ(forced_ulysses_degree(CpAlgorithm::ulysses, ranks, headless), 1);
}

TEST(CpAlgorithm, AutoNeverPredictsSlowerThanRing) {
  const std::vector<Plan> ring = plans_of(CpAlgorithm::ring, 11, 60);
  const std::vector<Plan> best = plans_of(CpAlgorithm::automatic, 11, 60);
  ASSERT_EQ(ring.size(), best.size());
  int faster = 0;
  for (size_t i = 0; i < ring.size(); ++i) {
    ASSERT_EQ(best[i].validate(), "");
    EXPECT_TRUE(ring[i].cp.empty());
    // Only the algorithms change: the same groups and micro-batches.
    EXPECT_EQ(best[i].members, ring[i].members);
    EXPECT_EQ(best[i].pieces, ring[i].pieces);
    EXPECT_LE(best[i].makespan(), ring[i].makespan()) << i << " " << ring[i].planner;
    faster += best[i].makespan() < ring[i].makespan();
  }
  EXPECT_GT(faster, 0) << "auto should beat the ring somewhere";
}

TEST(CpAlgorithm, AutoPicksUlyssesInsideANode) {
  // Multi-head attention (4 KV heads of 4, so no replication). A 4-way group
  // in one node with little attention: Ulysses' all-to-all (192 B/token, 2
  // passes, at 4 GB/s) undercuts the ring, whose K/V steps (128 B/token, 3
  // steps of 3 passes) outlast its short attention steps, and the hybrid
  // 2 x 2 (128 B/token all-to-all plus a 2-step ring).
  CostModel cost = round_cost();
  cost.heads = HeadShape{4, 4, 16.0};
  cost.kv_bytes = 128;
  cost.a = 1e-12;
  Plan p = four_way_ring(cost);
  const double ring_time = p.makespan();
  choose_cp_algorithms(p, cost, CpAlgorithm::automatic);
  EXPECT_EQ(p.validate(), "");
  ASSERT_EQ(p.cp.size(), 2u);
  EXPECT_EQ(p.cp_algo(0), (CpAlgo{config::CpAlgorithm::ulysses, 4}));
  EXPECT_EQ(p.cp_algo(1), CpAlgo{});
  EXPECT_LT(p.makespan(), ring_time);
  EXPECT_TRUE(p.transfers().empty()) << "pure Ulysses has no ring edges";
  EXPECT_DOUBLE_EQ(p.a2a_bytes(), 4096.0 * 192 * 2 * 2);  // tokens x A(4) x layers x passes
  // With attention dominant the ring hides its traffic and stays.
  cost.a = 1e-6;
  Plan q = four_way_ring(cost);
  choose_cp_algorithms(q, cost, CpAlgorithm::automatic);
  EXPECT_TRUE(q.cp.empty());
  // Forced hybrid 2 x 2: ring edges from member c to c + 2.
  choose_cp_algorithms(q, cost, CpAlgorithm::hybrid);
  EXPECT_EQ(q.cp_algo(0), (CpAlgo{config::CpAlgorithm::hybrid, 2}));
  const auto tr = q.transfers();
  ASSERT_EQ(tr.size(), 4u);
  EXPECT_EQ(tr[0].from, 0);
  EXPECT_EQ(tr[0].to, 2);
  // Each passes on the other subgroup's 2,048 tokens: K and V of the 2 KV
  // heads a member holds after the all-to-all.
  EXPECT_EQ(tr[0].bytes_per_layer, 2048 * 2 * 2 * 16);
  EXPECT_EQ(cp_algo_name(q.cp_algo(0), 4), "hybrid(2x2)");
  EXPECT_NE(plan_summary(q, 0).find("CP algorithms: hybrid(2x2) 1"), std::string::npos)
      << plan_summary(q, 0);
}

TEST(CpAlgorithm, ValidateCatchesABadDegree) {
  const CostModel cost = round_cost();
  struct Case {
    CpAlgo algo;
    HeadShape heads;
    const char* expect;
  };
  const Case cases[] = {
      {{config::CpAlgorithm::hybrid, 3}, small_heads(), "does not divide its group"},
      {{config::CpAlgorithm::ulysses, 0}, small_heads(), "does not divide its group"},
      {{config::CpAlgorithm::hybrid, 4}, small_heads(), "CP algorithm hybrid"},
      {{config::CpAlgorithm::ring, 2}, small_heads(), "CP algorithm ring"},
      {{config::CpAlgorithm::ulysses, 4}, HeadShape{2, 1, 16.0}, "heads of a TP rank"},
      {{config::CpAlgorithm::hybrid, 2}, HeadShape{}, "heads of a TP rank"},
  };
  for (const Case& c : cases) {
    Plan p = four_way_ring(cost);
    p.heads = c.heads;
    p.cp = {c.algo, CpAlgo{}};
    const std::string msg = p.validate();
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.expect << ": " << msg;
  }
  Plan p = four_way_ring(cost);
  p.cp = {CpAlgo{}};
  EXPECT_NE(p.validate().find("CP algorithms do not match"), std::string::npos);
  // Two sequences of one ring must share its algorithm.
  PlanBuilder b("hand", 2, 1024, ChunkRule::kBalanced, {1000, 1000}, cost);
  const int32_t ranks[] = {0, 1};
  b.set_group(0, ranks);
  b.set_group(1, ranks);
  const int32_t seqs[] = {0, 1};
  b.add_ring(0, seqs);
  Plan two = b.finish(cost);
  EXPECT_EQ(two.validate(), "");
  two.cp = {CpAlgo{config::CpAlgorithm::ulysses, 2}, CpAlgo{}};
  EXPECT_NE(two.validate().find("but not a CP algorithm"), std::string::npos) << two.validate();
}

TEST(CpAlgorithm, WireFormatCarriesIt) {
  int with_cp = 0;
  for (const Plan& p : plans_of(CpAlgorithm::automatic, 5, 30)) {
    const std::vector<uint8_t> bytes = serialize(p);
    const Plan q = deserialize(bytes);
    EXPECT_TRUE(q == p) << p.planner;
    EXPECT_EQ(q.validate(), "");
    with_cp += !p.cp.empty();
  }
  EXPECT_GT(with_cp, 0);
  // Version 1 files (before CP algorithms) still read, as rings.
  const Plan ring = four_way_ring(round_cost());
  const Plan old = deserialize(version1_bytes(ring));
  EXPECT_TRUE(old.cp.empty());
  EXPECT_EQ(old.heads, HeadShape{});
  EXPECT_EQ(old.members, ring.members);
  EXPECT_EQ(old.micro_batches, ring.micro_batches);
  EXPECT_EQ(old.validate(), "");
  // The JSON dump names each split sequence's algorithm.
  Plan hybrid = ring;
  choose_cp_algorithms(hybrid, round_cost(), CpAlgorithm::hybrid);
  const std::string json = to_json(hybrid);
  EXPECT_NE(json.find("\"cp\": \"hybrid(2x2)\""), std::string::npos);
  EXPECT_NE(json.find("\"ulysses_degree\": 2"), std::string::npos);
}

TEST(CpAlgorithm, SimulateComparesWithRing) {
  SimulateSpec s;
  s.gpus = 64;
  s.context = 256 * 1024;
  s.batch = 2 * 1024 * 1024;
  s.planners = {config::Planner::hdp};
  s.steps = 2;
  const LengthSampler byted = LengthSampler::named("byted");
  const SimResult ring = simulate(s, byted);
  s.cp_algorithm = CpAlgorithm::automatic;
  const SimResult best = simulate(s, byted);
  const SimRow& r = *ring.row(config::Planner::hdp);
  const SimRow& a = *best.row(config::Planner::hdp);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(a.error, "");
  EXPECT_LE(a.step_s, r.step_s);
  EXPECT_EQ(r.a2a_bytes, 0.0);
  const std::string report = simulate_report(best);
  EXPECT_NE(report.find("CP algorithms (auto"), std::string::npos) << report;
  EXPECT_EQ(simulate_report(ring).find("CP algorithms"), std::string::npos);
  EXPECT_NE(simulate_csv_rows(best).find(",auto,"), std::string::npos);
}
