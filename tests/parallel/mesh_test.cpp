#include "parallel/mesh.hpp"

#include <gtest/gtest.h>

#include "parallel/roles.hpp"

using namespace meshloom;
using namespace meshloom::parallel;

TEST(Mesh, TpGroupsAreConsecutiveTrainersAndTheDataAxisLinksEqualTpRanks) {
  const TrainerMesh m{8, 2};
  EXPECT_EQ(m.hdp_ranks(), 4);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(m.hdp_rank_of(t), t / 2);
    EXPECT_EQ(m.tp_rank_of(t), t % 2);
    EXPECT_EQ(m.trainer_at(m.hdp_rank_of(t), m.tp_rank_of(t)), t);
  }
  const std::string text = m.describe();
  EXPECT_NE(text.find("4 HDP ranks of 2 trainers"), std::string::npos) << text;
  EXPECT_NE(text.find("0-1, 2-3"), std::string::npos) << text;
}

TEST(Mesh, AGroupSpanningNodesIsNamed) {
  // Ranks 0-1 constructor and loader, trainers at ranks 2-7; node b starts at rank 5.
  const std::vector<std::string> hosts = {"a", "a", "a", "a", "a", "b", "b", "b"};
  EXPECT_EQ(groups_across_nodes(TrainerMesh{6, 1}, 2, hosts), "");
  EXPECT_EQ(groups_across_nodes(TrainerMesh{6, 3}, 2, hosts), "");           // trainers 0-2 | 3-5
  const std::string why = groups_across_nodes(TrainerMesh{6, 2}, 2, hosts);  // 2-3 spans a|b
  EXPECT_NE(why.find("TP group of trainer 3 spans nodes (rank 4 on a, rank 5 on b)"),
            std::string::npos)
      << why;
}

TEST(Mesh, TrainersThatTpDoesNotDivideAreRefusedNamingTheKey) {
  config::Config c;
  c.cluster.roles.constructors = 1;
  c.cluster.roles.loaders = 1;
  c.parallel.tp = 4;
  try {
    make_layout(8, c);  // 6 trainers
    FAIL() << "accepted 6 trainers with tp 4";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tp 4 must divide the trainers, and the "
                                         "layout has 6"),
              std::string::npos)
        << e.what();
  }
}

TEST(Mesh, SequenceParallelIsAcceptedOnTheCpuOnly) {
  config::Config c;
  c.parallel.tp = 2;
  c.parallel.sequence_parallel = true;
  EXPECT_NO_THROW(make_layout(6, c));  // 4 trainers, 2 TP groups
  c.parallel.tp = 1;
  EXPECT_NO_THROW(make_layout(6, c));  // a no-op
  c.parallel.tp = 2;
  c.run.backend = config::Backend::cuda;
  c.model.d_model = 512;  // head_dim 64: what the GPU kernels take
  try {
    make_layout(6, c);
    FAIL() << "accepted sequence parallelism with run.backend: cuda";
  } catch (const config::ConfigError& e) {
    // Either refusal names what to change (CUDA TP itself may come first).
    EXPECT_NE(std::string(e.what()).find("run.backend: cpu"), std::string::npos) << e.what();
  }
}

TEST(Mesh, PipelineStagesAreAcceptedWithCuda) {
  config::Config c;
  c.parallel.pp = 2;
  c.run.backend = config::Backend::cuda;
  c.model.d_model = 512;  // head_dim 64: what the GPU kernels take
#ifdef MESHLOOM_HAVE_CUDA
  EXPECT_NO_THROW(make_layout(6, c));  // 4 trainers, 2 pipelines of 2 stages
  c.parallel.tp = 2;
  EXPECT_NO_THROW(make_layout(6, c));  // one pipeline of 2 stages, TP 2 each
#else
  // A build without the CUDA backend refuses run.backend: cuda, whatever the layout.
  try {
    make_layout(6, c);
    FAIL() << "accepted run.backend: cuda without the CUDA backend";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("built without the CUDA backend"), std::string::npos)
        << e.what();
  }
#endif
}

TEST(Mesh, TrainerNodesNumberHostsInFirstSeenOrder) {
  // 9 ranks over 3 nodes of 3, constructor and 2 loaders first: trainers 1, 3, 2.
  const std::vector<std::string> hosts = {"vm-a", "vm-a", "vm-a", "vm-b", "vm-b",
                                          "vm-b", "vm-c", "vm-c", "vm-c"};
  const TrainerNodes one = trainer_nodes(TrainerMesh{6, 1}, 3, hosts);
  EXPECT_EQ(one.names, (std::vector<std::string>{"vm-b", "vm-c"}));
  EXPECT_EQ(one.trainers, (std::vector<int>{3, 3}));
  EXPECT_EQ(one.hdp_rank_node, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(one.describe(), "trainers on 2 nodes: vm-b 3, vm-c 3");
  const TrainerNodes uneven = trainer_nodes(TrainerMesh{6, 1}, 2, hosts);  // 1 loader
  EXPECT_EQ(uneven.trainers, (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(uneven.hdp_rank_node, (std::vector<int32_t>{0, 1, 1, 1, 2, 2}));
  // tp 2: HDP rank 1 (trainers 2-3, ranks 5-6) spans vm-b and vm-c: its first
  // trainer's node counts.
  const TrainerNodes groups = trainer_nodes(TrainerMesh{6, 2}, 3, hosts);
  EXPECT_EQ(groups.hdp_rank_node, (std::vector<int32_t>{0, 0, 1}));
  // One host: one node.
  const TrainerNodes single = trainer_nodes(TrainerMesh{4, 1}, 1, std::vector<std::string>(5, "h"));
  EXPECT_EQ(single.hdp_rank_node, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(single.describe(), "trainers on 1 node: h 4");
}
