// Which loader shadows which, and who serves a dead loader's requests. Pure,
// no MPI.
//
// A loader's shadow keeps the loader's sources open and prepares what it
// prepared (hot standby), to take over at once when it dies. A lost node takes
// all of its loaders with it, so a shadow lives on another node (host name)
// whenever loaders exist on two or more.
//
// The loaders form a ring `order` that spreads each node's loaders evenly
// round it: node h's k-th loader (by rank, of n_h) sits at (k + 1/2) / n_h of
// the way round, ties in the order the nodes are first met. shadow(l) is the
// first loader after l in that order on another node; with a single node it
// is simply the next one, loader l+1 mod L. With unequal nodes several loaders
// share a shadow, which then stands by for each of them.
//
// Example: loader ranks 1,2,3 on vm-a and 4,5 on vm-b:
//   positions  vm-a 1/6 3/6 5/6, vm-b 1/4 3/4
//   order      1 4 2 5 3
//   shadows    1->4, 2->5, 3->4 (1 is on vm-a too), 4->2, 5->3
// Lose vm-a: 4 serves 1 and 3, 5 serves 2. Lose vm-b: 2 serves 4, 3 serves 5.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "parallel/roles.hpp"

namespace meshloom::parallel {

struct ShadowPlan {
  std::vector<int> order;           // loader world ranks, ring order
  std::map<int, int> shadow;        // loader -> its shadow (itself when it is alone)
  std::map<int, std::string> host;  // loader -> its node

  // The loaders `rank` shadows, in order (empty for a lone loader).
  std::vector<int> shadowed_by(int rank) const;
  // Who serves `rank`'s requests when the loaders in `dead` are dead: itself
  // while alive, else the first live loader of the order from its shadow on
  // (the shadow while it lives). -1 when every loader is dead.
  int route(int rank, const std::set<int>& dead) const;
  // One line for people: "loader ranks 1,2 (vm-a), 3 (vm-b); shadows 1->3,
  // 2->3, 3->2" (hosts named only when there are several).
  std::string describe() const;
};

// `ranks` are the loaders' world ranks (a node's loaders count in this
// order), `hosts` the node of each.
ShadowPlan plan_shadows(const std::vector<int>& ranks, const std::vector<std::string>& hosts);
// The same for the layout's loaders, `hosts` per world rank (a rank without
// one counts as on one unnamed node).
ShadowPlan loader_shadows(const RoleLayout& layout, const std::vector<std::string>& hosts);

}  // namespace meshloom::parallel
