// The wire format rank 0 broadcasts, and the JSON dump.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "plan/io/plan_io.hpp"
#include "plan/planner.hpp"
#include "tests/plan/plan_test_util.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

std::vector<Plan> sample_plans() {
  const CostModel cost = plantest::llama7b_cost();
  std::vector<Plan> plans;
  Rng rng(42);
  for (int i = 0; i < 12; ++i) {
    const plantest::Batch b = plantest::random_batch(rng, 256, 1.0, 300);
    PlannerOptions o;
    o.trainers = b.trainers;
    o.capacity = b.capacity;
    o.offload = i % 3 == 0;
    for (config::Planner name : all_planners())
      plans.push_back(plan_step({name}, b.lengths, o, cost));
  }
  return plans;
}

void put_u64(std::vector<uint8_t>& bytes, uint64_t v) {
  std::memcpy(bytes.data() + bytes.size() - 8, &v, 8);
}

uint64_t fnv(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i + 8 < b.size(); ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

TEST(Serialize, RoundTripIsExact) {
  for (const Plan& p : sample_plans()) {
    ASSERT_EQ(p.validate(), "") << p.planner;
    const std::vector<uint8_t> bytes = serialize(p);
    const Plan q = deserialize(bytes);
    EXPECT_TRUE(q == p) << p.planner;
    EXPECT_EQ(q.validate(), "");
    EXPECT_EQ(serialize(q), bytes);
  }
}

TEST(Serialize, IsCompact) {
  // 4,096 trainers and the byted distribution: groups are runs of ranks, so a
  // plan costs a few bytes per sequence and per piece.
  const CostModel cost = plantest::llama7b_cost();
  PlannerOptions o;
  o.trainers = 4096;
  o.capacity = 16384;
  const auto lengths = draw_batch(LengthSampler::named("byted"), int64_t(4096) * 16384, 1 << 21, 3);
  const Plan p = plan_step({config::Planner::hdp}, lengths, o, cost);
  const size_t size = serialize(p).size();
  EXPECT_LT(double(size), 16.0 * double(p.sequences() + p.pieces.size()))
      << size << " bytes for " << p.sequences() << " sequences";
}

TEST(Serialize, RefusesDamagedData) {
  const Plan p = sample_plans()[5];
  const std::vector<uint8_t> good = serialize(p);
  auto message = [](const std::vector<uint8_t>& b) {
    try {
      deserialize(b);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  std::vector<uint8_t> b = good;
  b.resize(b.size() / 2);
  EXPECT_NE(message(b), "accepted");
  b = good;
  b[b.size() / 2] ^= 0x40;
  EXPECT_NE(message(b).find("checksum"), std::string::npos);
  b = good;
  b[0] = 'X';
  EXPECT_NE(message(b).find("magic"), std::string::npos);
  // A well-formed checksum over a value out of range: trainers = 0.
  b = good;
  b[8] = 0;
  put_u64(b, fnv(b));
  EXPECT_NE(message(b).find("trainers"), std::string::npos) << message(b);
  EXPECT_NE(message({1, 2, 3}), "accepted");
}

TEST(Json, DumpHoldsThePlan) {
  const Plan p = sample_plans()[3];
  const auto j = nlohmann::json::parse(to_json(p));
  EXPECT_EQ(j["planner"], p.planner);
  EXPECT_EQ(j["trainers"], p.trainers);
  ASSERT_EQ(j["sequences"].size(), size_t(p.sequences()));
  ASSERT_EQ(j["trainer_plans"].size(), size_t(p.trainers));
  for (int32_t s = 0; s < p.sequences(); ++s) {
    EXPECT_EQ(j["sequences"][s]["length"], p.lengths[s]);
    EXPECT_EQ(j["sequences"][s]["group"].size(), size_t(p.group_size(s)));
    if (p.group_size(s) > 1) {
      EXPECT_EQ(j["sequences"][s]["chunks"].size(), size_t(p.group_size(s)));
    }
  }
  int64_t tokens = 0;
  for (const auto& t : j["trainer_plans"])
    for (const auto& mb : t["micro_batches"]) {
      EXPECT_LE(mb["start"].get<double>(), mb["end"].get<double>());
      tokens += mb["tokens"].get<int64_t>();
    }
  int64_t expect = 0;
  for (const Piece& pc : p.pieces) expect += p.slots(pc);
  EXPECT_EQ(tokens, expect);
  EXPECT_NEAR(j["makespan_s"].get<double>(), p.makespan(), 1e-9);
}
