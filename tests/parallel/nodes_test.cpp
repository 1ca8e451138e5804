#include "parallel/nodes.hpp"

#include <gtest/gtest.h>

using namespace meshloom;
using namespace meshloom::parallel;

TEST(DescribeNodes, OneHostSaysNothing) {
  const RoleLayout layout{4, 1, 1, 2};
  EXPECT_TRUE(describe_nodes(layout, TrainerMesh{2, 1}, {"vm", "vm", "vm", "vm"}).empty());
}

TEST(DescribeNodes, EachNodeListsItsRanksRolesAndHdpRanks) {
  // 3 nodes x 3 ranks, 1 constructor, 2 loaders, 6 trainers in TP groups of 3.
  const RoleLayout layout{9, 1, 2, 6};
  const std::vector<std::string> hosts = {"n1", "n1", "n1", "n2", "n2", "n2", "n3", "n3", "n3"};
  const auto lines = describe_nodes(layout, TrainerMesh{6, 3}, hosts);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "3 nodes, 3 ranks each");
  EXPECT_EQ(lines[1], "n1: ranks 0-2: constructor 0 (lead), loaders 0-1");
  EXPECT_EQ(lines[2], "n2: ranks 3-5: trainers 0-2 (HDP rank 0)");
  EXPECT_EQ(lines[3], "n3: ranks 6-8: trainers 3-5 (HDP rank 1)");
}

TEST(DescribeNodes, RanksPlacedRoundRobinAndUnevenNodesReadBack) {
  // srun's cyclic distribution: rank r on node r % 2, 5 ranks.
  const RoleLayout layout{5, 1, 1, 3};
  const std::vector<std::string> hosts = {"a", "b", "a", "b", "a"};
  const auto lines = describe_nodes(layout, TrainerMesh{3, 1}, hosts);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "2 nodes, 2 to 3 ranks each");
  EXPECT_EQ(lines[1], "a: ranks 0,2,4: constructor 0 (lead), trainers 0,2 (HDP ranks 0,2)");
  EXPECT_EQ(lines[2], "b: ranks 1,3: loader 0, trainer 1 (HDP rank 1)");
}
