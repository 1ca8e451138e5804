// The role split on a real MPI world: every rank agrees on the layout and the
// role communicators hold exactly the ranks of their role.
#include <gtest/gtest.h>
#include <mpi.h>

#include "parallel/world.hpp"
#include "tests/common/test_util.hpp"

using namespace meshloom;
using namespace meshloom::parallel;

TEST(World, RoleCommunicatorsMatchTheLayout) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Same path on all ranks: rank 0 writes it, the others only need the name.
  std::string path = "/tmp/meshloom_world_mpi_test.yaml";
  const int loaders = size >= 3 ? 1 : 0;
  if (rank == 0) {
    test::write_file(path,
                     "cluster: {roles: {constructors: 1, loaders: " + std::to_string(loaders) +
                         "}}\n"
                         "data:\n  mode: " +
                         (loaders ? "disaggregated" : "colocated") +
                         "\n  sources: [{name: a, path: p}]\n");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  World w;
  if (size == 1) {  // one rank cannot hold a constructor and a trainer
    EXPECT_FALSE(world_from_config(path, {}, &w));
    return;
  }
  ASSERT_TRUE(world_from_config(path, {}, &w));
  EXPECT_EQ(w.layout.trainers, size - 1 - loaders);
  int role_size = 0;
  MPI_Comm_size(w.role_comm, &role_size);
  EXPECT_EQ(role_size, w.layout.count(w.role));
  int role_rank = 0;
  MPI_Comm_rank(w.role_comm, &role_rank);
  EXPECT_EQ(role_rank, w.role_index);
  EXPECT_EQ(int(w.hosts.size()), size);
  // Every rank holds the same effective config text.
  unsigned long long h = std::hash<std::string>{}(w.config_text), h0 = h;
  MPI_Bcast(&h0, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  EXPECT_EQ(h, h0);
  MPI_Comm_free(&w.role_comm);
}

TEST(World, BadConfigFailsOnEveryRankTogether) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  World w;
  EXPECT_FALSE(world_from_config("/nonexistent/bad.yaml", {}, &w));
}
