// How the world's ranks split into roles. Pure arithmetic, no MPI.
//
// Ranks are laid out in role order: constructors first (rank 0 is the lead
// constructor and the planner), then loaders, then trainers. With 8 ranks and
// roles {constructors: 1, loaders: 2}:
//   rank 0 constructor (lead) | ranks 1-2 loaders | ranks 3-7 trainers (T = 5)
// Each loader has a shadow, on another node whenever there is one
// (parallel/shadows.hpp; on one node, loader i's shadow is loader i+1 mod L).
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom::parallel {

enum class Role { constructor = 0, loader = 1, trainer = 2 };
const char* role_name(Role role);

struct RoleLayout {
  int world = 0;
  int constructors = 0, loaders = 0, trainers = 0;

  Role role_of(int rank) const;
  int first_rank(Role role) const;  // world rank of the role's index 0
  int count(Role role) const;
  int index_in_role(int rank) const;
  // "ranks 3-7" style spans, one line per role, for people.
  std::string describe(const std::vector<std::string>& hosts) const;
};

// The layout for `world` ranks, or a ConfigError naming cluster.roles when the
// roles do not fit (no trainer left, more roles than ranks).
RoleLayout make_layout(int world, const config::Config& config);

}  // namespace meshloom::parallel
