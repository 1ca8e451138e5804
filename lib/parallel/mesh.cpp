#include "parallel/mesh.hpp"

#include "base/strings.hpp"
#include "parallel/nodes.hpp"

namespace meshloom::parallel {

TrainerMesh trainer_mesh(const config::Config& config, int trainers) {
  return TrainerMesh{trainers, int(config.parallel.tp), int(config.parallel.pp)};
}

std::string groups_across_nodes(const TrainerMesh& mesh, int first_trainer_rank,
                                const std::vector<std::string>& hosts) {
  for (int t = 0; t < mesh.trainers; ++t) {
    const int first = first_trainer_rank + t - mesh.tp_rank_of(t);  // its TP rank 0
    const int rank = first_trainer_rank + t;
    if (hosts.at(size_t(rank)) != hosts.at(size_t(first)))
      return strf(
          "parallel.tp %d: the TP group of trainer %d spans nodes (rank %d on %s, rank %d "
          "on %s); TP groups run a collective per layer and must stay on one node: "
          "place a multiple of parallel.tp trainers on each node, or lower parallel.tp",
          mesh.tp, t, first, hosts[size_t(first)].c_str(), rank, hosts[size_t(rank)].c_str());
  }
  return "";
}

TrainerNodes trainer_nodes(const TrainerMesh& mesh, int first_trainer_rank,
                           const std::vector<std::string>& hosts) {
  const auto first = hosts.begin() + first_trainer_rank;
  const NodeIndex nodes = index_nodes({first, first + mesh.trainers});
  TrainerNodes out;
  out.names = nodes.names;
  out.trainers.assign(nodes.names.size(), 0);
  for (int n : nodes.node) ++out.trainers[size_t(n)];
  for (int h = 0; h < mesh.hdp_ranks(); ++h)
    out.hdp_rank_node.push_back(nodes.node[size_t(mesh.trainer_at(h, 0))]);
  return out;
}

std::string TrainerNodes::describe() const {
  std::string out = strf("trainers on %zu node%s:", names.size(), names.size() == 1 ? "" : "s");
  for (size_t n = 0; n < names.size(); ++n)
    out += strf("%s %s %d", n ? "," : "", names[n].c_str(), trainers[n]);
  return out;
}

std::string TrainerMesh::describe() const {
  if (group_size() == 1) return strf("%d HDP ranks, one trainer each (tp = 1)", hdp_ranks());
  std::string groups;
  for (int h = 0; h < hdp_ranks(); ++h) {
    if (h == 3 && hdp_ranks() > 4) {
      groups += ", ...";
      break;
    }
    groups += strf("%s%d-%d", h ? ", " : "", trainer_at(h, 0), trainer_at(h, group_size() - 1));
  }
  if (pp == 1)
    return strf("%d HDP ranks of %d trainers (TP groups: trainers %s)", hdp_ranks(), tp,
                groups.c_str());
  return strf("%d HDP ranks, each a pipeline of %d stages x tp %d (trainers %s)", hdp_ranks(), pp,
              tp, groups.c_str());
}

}  // namespace meshloom::parallel
