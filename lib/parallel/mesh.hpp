// How trainers form the HDP ranks the planner plans over. Pure arithmetic,
// no MPI (parallel/step_comms.hpp builds the communicators from it).
//
// Trainers form model-parallel groups of `tp` consecutive trainer indices
// (tensor parallelism, on one node); each group is one HDP rank. With 8
// trainers and tp = 2:
//
//   trainer   0 1 | 2 3 | 4 5 | 6 7
//   HDP rank   0  |  1  |  2  |  3        (the planner sees 4 ranks)
//   TP rank   0 1 | 0 1 | 0 1 | 0 1
//
// The "data" axis links the trainers of equal TP rank across HDP ranks: the
// gradients of a shard are reduced there, and a CP ring of HDP ranks runs
// there (the j-th TP rank of each member group), so the K/V that travel are
// already split by heads.
//
// With pipeline parallelism (parallel.pp) an HDP rank is a pipeline of pp
// stages, each a TP group: tp x pp consecutive trainers, TP rank fastest.
// With 8 trainers, tp = 2 and pp = 2:
//
//   trainer   0 1  2 3 | 4 5  6 7
//   HDP rank      0    |    1
//   stage     0 0  1 1 | 0 0  1 1
//   TP rank   0 1  0 1 | 0 1  0 1
//
// The data axis then links trainers of equal (stage, TP rank): they hold
// the same shard of the same layers, and a ring runs stage by stage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom::parallel {

struct TrainerMesh {
  int trainers = 1;
  int tp = 1;
  int pp = 1;

  int group_size() const { return tp * pp; }  // trainers of one HDP rank
  int hdp_ranks() const { return trainers / group_size(); }
  int hdp_rank_of(int trainer) const { return trainer / group_size(); }
  int tp_rank_of(int trainer) const { return trainer % tp; }
  // The trainer's index inside its HDP rank: stage x tp + TP rank.
  int member_of(int trainer) const { return trainer % group_size(); }
  int trainer_at(int hdp_rank, int member) const { return hdp_rank * group_size() + member; }
  // "4 HDP ranks of 2 trainers (TP groups: trainers 0-1, 2-3, ...)", for the log.
  std::string describe() const;
};

// The nodes the trainers sit on, from their host names: nodes are numbered
// in the order their names first appear among the trainers.
struct TrainerNodes {
  std::vector<std::string> names;  // per node
  std::vector<int> trainers;       // per node
  // Per HDP rank: the node of its first trainer (TP rank 0 of stage 0). An HDP
  // rank whose trainers span nodes is counted on that one node; the preflight
  // refuses TP groups across nodes (groups_across_nodes), stages may span.
  std::vector<int32_t> hdp_rank_node;
  // "trainers on 2 nodes: vm-a 4, vm-b 4", for the log.
  std::string describe() const;
};

// The mesh of a run's `trainers` (parallel.tp).
TrainerMesh trainer_mesh(const config::Config& config, int trainers);
// The trainers' nodes (`hosts` per world rank, trainers from world rank
// `first_trainer_rank` on).
TrainerNodes trainer_nodes(const TrainerMesh& mesh, int first_trainer_rank,
                           const std::vector<std::string>& hosts);
// Why a TP group would span nodes (`hosts` per world rank), or "".
std::string groups_across_nodes(const TrainerMesh& mesh, int first_trainer_rank,
                                const std::vector<std::string>& hosts);

}  // namespace meshloom::parallel
