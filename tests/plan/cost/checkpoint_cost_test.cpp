// The checkpoint model (plan/cost/checkpoint_cost.hpp) against figures worked
// out by hand for LLaMA-70B: its state, what each writer holds and writes,
// and which of the network, one writer or the file system bounds each method.
#include "plan/cost/checkpoint_cost.hpp"

#include <gtest/gtest.h>

#include "base/check.hpp"
#include "plan/model_shape.hpp"

namespace meshloom::plan {
namespace {

CheckpointSetup llama70b(int64_t gpus) {
  CheckpointSetup s;
  s.model = model_shape("llama-70b");
  s.gpus = gpus;
  s.tp = 8;
  s.pp = 2;
  return s;
}

TEST(CheckpointCost, StateIsTwelveBytesAParameterWhicheverMethod) {
  const CheckpointSetup s = llama70b(1024);
  const double p = s.model.parameters();
  for (const CheckpointCost& c : checkpoint_costs(s)) EXPECT_DOUBLE_EQ(c.state_bytes, 12 * p);
}

TEST(CheckpointCost, GatheredIsBoundByTrainerZerosLinkAndOneWriter) {
  const CheckpointSetup s = llama70b(1024);
  const CheckpointCost g = checkpoint_costs(s)[0];
  ASSERT_EQ(g.method, "gathered");
  const double state = g.state_bytes;
  EXPECT_DOUBLE_EQ(g.trainer0_bytes, state);
  EXPECT_DOUBLE_EQ(g.save_s, state / 25e9 + state / 2e9);  // network, then one writer
  EXPECT_DOUBLE_EQ(g.stall_s, state / 25e9);
}

TEST(CheckpointCost, CollectiveWritersHoldTheirShardAndShareTheFileSystem) {
  for (int64_t gpus : {1024, 8192}) {
    const CheckpointSetup s = llama70b(gpus);
    const CheckpointCost c = checkpoint_costs(s)[1];
    ASSERT_EQ(c.method, "collective");
    const double p = s.model.parameters(), group = 16, data = double(gpus) / group;
    // Every trainer writes an equal share, and holds its weights and its
    // moment shard.
    EXPECT_DOUBLE_EQ(c.writer_bytes, c.state_bytes / double(gpus));
    EXPECT_DOUBLE_EQ(c.trainer0_bytes, 4 * p / group + 8 * p / group / data);
    EXPECT_EQ(c.writers, double(gpus));
    // At this scale the file system, not one writer, is the bound.
    EXPECT_DOUBLE_EQ(c.save_s - c.stall_s, c.state_bytes / s.fs_bandwidth);
    EXPECT_DOUBLE_EQ(c.stall_s, c.trainer0_bytes / s.host_bandwidth);
    EXPECT_LT(c.save_s, checkpoint_costs(s)[0].save_s / 10);
  }
}

TEST(CheckpointCost, ALayoutThatDoesNotFitTheGpusIsRefused) {
  CheckpointSetup s = llama70b(1000);  // not a multiple of tp x pp = 16
  EXPECT_THROW(checkpoint_costs(s), Error);
}

TEST(CheckpointCost, ReportNamesBothMethods) {
  const CheckpointSetup s = llama70b(8192);
  const std::string r = checkpoint_report(s, checkpoint_costs(s));
  EXPECT_NE(r.find("| gathered |"), std::string::npos) << r;
  EXPECT_NE(r.find("| collective |"), std::string::npos) << r;
  EXPECT_NE(r.find("8192 GPUs"), std::string::npos) << r;
}

}  // namespace
}  // namespace meshloom::plan
