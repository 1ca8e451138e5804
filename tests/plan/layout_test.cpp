// Zigzag chunk layout, the Plan structure, and validate() on plans broken on
// purpose: every invariant must be caught with a message that names it.
#include <gtest/gtest.h>

#include <numeric>

#include "plan/plan.hpp"
#include "plan/planner.hpp"
#include "tests/common/test_util.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

// Causal attention work of a span: token at position p attends to p + 1 keys.
double causal_work(const Span& s) {
  return (double(s.end) * (s.end + 1) - double(s.begin) * (s.begin + 1)) / 2;
}

// A plan from explicit groups and per-trainer micro-batches, not retimed.
Plan make_plan_by_hand(int32_t T, int64_t C, std::vector<int64_t> lengths,
                       const std::vector<std::vector<int32_t>>& groups,
                       const std::vector<std::vector<std::vector<Piece>>>& mbs) {
  Plan p;
  p.planner = "hand";
  p.trainers = T;
  p.capacity = C;
  p.lengths = std::move(lengths);
  p.group_begin = {0};
  for (const auto& g : groups) {
    p.members.insert(p.members.end(), g.begin(), g.end());
    p.group_begin.push_back(int32_t(p.members.size()));
  }
  p.trainer_begin = {0};
  for (const auto& trainer : mbs) {
    for (const auto& mb : trainer) {
      MicroBatch m;
      m.piece_begin = int32_t(p.pieces.size());
      p.pieces.insert(p.pieces.end(), mb.begin(), mb.end());
      m.piece_end = int32_t(p.pieces.size());
      p.micro_batches.push_back(m);
    }
    p.trainer_begin.push_back(int32_t(p.micro_batches.size()));
  }
  return p;
}

// Two sequences: 0 (10 tokens) on a ring of trainers {0, 1}, 1 (3 tokens) whole on 2.
Plan small_valid_plan() {
  return make_plan_by_hand(3, 8, {10, 3}, {{0, 1}, {2}}, {{{{0, 0}}}, {{{0, 1}}}, {{{1, 0}}}});
}

}  // namespace

TEST(Zigzag, BalancedRulePartitionsAndBalances) {
  for (int64_t L = 1; L <= 160; ++L)
    for (int k = 1; k <= std::min<int64_t>(L, 40); ++k) {
      int64_t total = 0, lo = INT64_MAX, hi = 0;
      std::vector<int> covered(L, 0);
      for (int c = 0; c < k; ++c) {
        const MemberChunks m = member_chunks(L, k, c, ChunkRule::kBalanced);
        ASSERT_GE(m.front.size(), 0);
        ASSERT_GE(m.back.size(), 0);
        for (int64_t i = m.front.begin; i < m.front.end; ++i) ++covered[i];
        for (int64_t i = m.back.begin; i < m.back.end; ++i) ++covered[i];
        total += m.tokens();
        lo = std::min(lo, m.tokens());
        hi = std::max(hi, m.tokens());
        EXPECT_EQ(m.tokens(), member_slots(L, k, c, ChunkRule::kBalanced));
        if (k > 1) {
          // Member c's front chunk lies before member c+1's; its back chunk after.
          const MemberChunks next =
              member_chunks(L, k, std::min(c + 1, k - 1), ChunkRule::kBalanced);
          if (c + 1 < k) {
            EXPECT_EQ(m.front.end, next.front.begin);
            EXPECT_EQ(m.back.begin, next.back.end);
          }
        }
      }
      EXPECT_EQ(total, L);
      for (int64_t i = 0; i < L; ++i) ASSERT_EQ(covered[i], 1) << "L=" << L << " k=" << k;
      EXPECT_GE(lo, 1) << "every member holds a token when k <= L";
      EXPECT_LE(hi - lo, 1);
      EXPECT_LE(hi, (L + k - 1) / k);
    }
}

TEST(Zigzag, ShortSequenceRule) {
  // L = 3 over k = 3: front chunks empty, back chunks one token each, in
  // zigzag order: chunk 3 = [0,1) on member 2, chunk 5 = [2,3) on member 0.
  EXPECT_EQ(member_chunks(3, 3, 0, ChunkRule::kBalanced).back, (Span{2, 3}));
  EXPECT_EQ(member_chunks(3, 3, 2, ChunkRule::kBalanced).back, (Span{0, 1}));
  EXPECT_EQ(member_chunks(3, 3, 1, ChunkRule::kBalanced).front.size(), 0);
  // k = 1: the whole sequence is the front chunk.
  EXPECT_EQ(member_chunks(7, 1, 0, ChunkRule::kBalanced).front, (Span{0, 7}));
  EXPECT_EQ(member_chunks(7, 1, 0, ChunkRule::kBalanced).back.size(), 0);
}

TEST(Zigzag, CausalWorkIsEqualAcrossMembers) {
  for (int k : {2, 3, 7, 64, 255}) {
    const int64_t L = 1000003;
    double lo = INFINITY, hi = 0;
    for (int c = 0; c < k; ++c) {
      const MemberChunks m = member_chunks(L, k, c, ChunkRule::kBalanced);
      const double w = causal_work(m.front) + causal_work(m.back);
      lo = std::min(lo, w);
      hi = std::max(hi, w);
    }
    EXPECT_LT(hi / lo - 1, 0.01) << "k=" << k;
    // A plain contiguous split would give the last member about 2k-1 times the first's work.
  }
}

TEST(Zigzag, PaddedRuleIsMegatronsEqualChunks) {
  // L = 10, k = 4: padded to 16, chunks of 2; member 0 holds chunk 0 and 7.
  const MemberChunks m0 = member_chunks(10, 4, 0, ChunkRule::kPadded);
  EXPECT_EQ(m0.front, (Span{0, 2}));
  EXPECT_EQ(m0.back.size(), 0);  // chunk 7 = [14, 16) is padding
  EXPECT_EQ(member_chunks(10, 4, 3, ChunkRule::kPadded).front, (Span{6, 8}));
  EXPECT_EQ(member_chunks(10, 4, 3, ChunkRule::kPadded).back, (Span{8, 10}));
  EXPECT_EQ(member_slots(10, 4, ChunkRule::kPadded), 4);
  // A 3-token sequence on 8 members: most members hold nothing, all pay 2 slots.
  int64_t total = 0;
  for (int c = 0; c < 8; ++c) total += member_chunks(3, 8, c, ChunkRule::kPadded).tokens();
  EXPECT_EQ(total, 3);
  EXPECT_EQ(member_slots(3, 8, ChunkRule::kPadded), 2);
}

TEST(Validate, AcceptsAValidPlanAndRetimesIt) {
  Plan p = small_valid_plan();
  EXPECT_EQ(p.validate(), "");
  p.retime(plantest::llama7b_cost());
  EXPECT_EQ(p.validate(), "");
  EXPECT_GT(p.trainer_time(0), 0);
  EXPECT_EQ(p.trainer_time(0), p.trainer_time(1)) << "ring members run together";
  const auto layout = p.layout(1, 0);
  ASSERT_EQ(layout.size(), 1u);
  EXPECT_EQ(layout[0].k, 2);
  EXPECT_EQ(layout[0].prev_rank, 0);
  EXPECT_EQ(layout[0].next_rank, 0);
  EXPECT_EQ(layout[0].chunks.tokens(), 5);
  const auto tr = p.transfers();
  ASSERT_EQ(tr.size(), 2u);
  EXPECT_EQ(tr[0].from, 0);
  EXPECT_EQ(tr[0].to, 1);
}

TEST(Validate, NamesEveryBrokenInvariant) {
  struct Case {
    const char* what;
    Plan plan;
    const char* expect;
  };
  std::vector<Case> cases;
  {  // a piece of sequence 1 on trainer 2 and again on trainer 0
    Plan p = make_plan_by_hand(3, 8, {10, 3}, {{0, 1}, {2}},
                               {{{{0, 0}}, {{1, 0}}}, {{{0, 1}}}, {{{1, 0}}}});
    cases.push_back({"token twice", p, "its group says"});
  }
  {  // group says trainer 2, piece sits on trainer 1 only
    Plan p =
        make_plan_by_hand(3, 8, {10, 3}, {{0, 1}, {2}}, {{{{0, 0}}}, {{{0, 1}}, {{1, 0}}}, {}});
    cases.push_back({"wrong trainer", p, "its group says"});
  }
  {  // sequence 1 on no trainer
    Plan p = make_plan_by_hand(3, 8, {10, 3}, {{0, 1}, {2}}, {{{{0, 0}}}, {{{0, 1}}}, {}});
    cases.push_back({"missing", p, "on no trainer"});
  }
  {  // 12 tokens in a micro-batch of capacity 8
    Plan p = make_plan_by_hand(1, 8, {6, 6}, {{0}, {0}}, {{{{0, 0}, {1, 0}}}});
    cases.push_back({"capacity", p, "capacity"});
  }
  {  // a whole sequence packed with a ring piece
    Plan p = make_plan_by_hand(3, 16, {10, 3}, {{0, 1}, {0}}, {{{{0, 0}, {1, 0}}}, {{{0, 1}}}, {}});
    cases.push_back({"mixed rings", p, "mixes rings"});
  }
  {  // rings in opposite orders on trainers 0 and 1
    Plan p = make_plan_by_hand(2, 8, {10, 10}, {{0, 1}, {0, 1}},
                               {{{{0, 0}}, {{1, 0}}}, {{{1, 1}}, {{0, 1}}}});
    cases.push_back({"deadlock", p, "deadlock"});
  }
  {  // a rank twice in one group
    Plan p = make_plan_by_hand(2, 8, {10}, {{1, 1}}, {{}, {{{0, 0}}, {{0, 1}}}});
    cases.push_back({"duplicate rank", p, "twice in its group"});
  }
  {  // more members than tokens under the balanced rule
    Plan p = make_plan_by_hand(3, 8, {2}, {{0, 1, 2}}, {{{{0, 0}}}, {{{0, 1}}}, {{{0, 2}}}});
    cases.push_back({"empty member", p, "would hold none"});
  }
  {  // two sequences of one micro-batch with different groups
    Plan p = make_plan_by_hand(3, 16, {10, 10}, {{0, 1}, {0, 2}},
                               {{{{0, 0}, {1, 0}}}, {{{0, 1}}}, {{{1, 1}}}});
    cases.push_back({"group mismatch", p, "but not a group"});
  }
  {  // a rank outside the trainers
    Plan p = make_plan_by_hand(2, 8, {3}, {{5}}, {{}, {}});
    cases.push_back({"rank range", p, "outside"});
  }
  for (const Case& c : cases) {
    const std::string msg = c.plan.validate();
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find("invalid plan"), std::string::npos) << c.what;
  }
}

TEST(Validate, TimesMustBeConsistent) {
  Plan p = small_valid_plan();
  p.retime(plantest::llama7b_cost());
  p.micro_batches[1].end += 1.0f;  // one ring member ends later than the other
  EXPECT_NE(p.validate().find("different predicted times"), std::string::npos);
}

TEST(Stats, LowerBoundAndImbalance) {
  // One trainer with a 4K sequence, the other idle: imbalance 2.
  const CostModel cost = plantest::llama7b_cost();
  PlannerOptions o;
  o.trainers = 2;
  o.capacity = 8192;
  const Plan p = plan_step({config::Planner::hdp}, {4096}, o, cost);
  ASSERT_EQ(p.validate(), "");
  const PlanStats st = plan_stats(p);
  EXPECT_NEAR(st.imbalance, 2.0, 1e-6);
  EXPECT_NEAR(st.makespan, cost.whole(4096) + cost.g, 1e-6);
  EXPECT_NEAR(st.lower_bound, st.makespan, 1e-6);
  EXPECT_EQ(st.split_sequences, 0);
}
