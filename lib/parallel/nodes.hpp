// Where a run's ranks sit, node by node, for the log. Pure, no MPI.
//
// With 9 ranks on 3 nodes, roles {constructors: 1, loaders: 2}:
//   3 nodes, 3 ranks each
//   mlnode1: ranks 0-2: constructor 0 (lead), loaders 0-1
//   mlnode2: ranks 3-5: trainers 0-2 (HDP ranks 0-2)
//   mlnode3: ranks 6-8: trainers 3-5 (HDP ranks 3-5)
#pragma once

#include <string>
#include <vector>

#include "parallel/mesh.hpp"
#include "parallel/roles.hpp"

namespace meshloom::parallel {

// Host names numbered in the order first met: `names` per node, and node[i]
// the node of hosts[i]. What every per-node rule here counts by.
struct NodeIndex {
  std::vector<std::string> names;
  std::vector<int> node;
};
NodeIndex index_nodes(const std::vector<std::string>& hosts);

// One line per node, nodes in order of their first rank, after a heading
// line; empty when every rank is on one host. `hosts`: one per world rank.
std::vector<std::string> describe_nodes(const RoleLayout& layout, const TrainerMesh& mesh,
                                        const std::vector<std::string>& hosts);

}  // namespace meshloom::parallel
