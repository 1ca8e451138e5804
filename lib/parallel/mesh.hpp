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
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom {

struct TrainerMesh {
  int trainers = 1;
  int tp = 1;

  int hdp_ranks() const { return trainers / tp; }
  int hdp_rank_of(int trainer) const { return trainer / tp; }
  int tp_rank_of(int trainer) const { return trainer % tp; }
  int trainer_at(int hdp_rank, int tp_rank) const { return hdp_rank * tp + tp_rank; }
  // "4 HDP ranks of 2 trainers (TP groups: trainers 0-1, 2-3, ...)", for the log.
  std::string describe() const;
};

// The mesh of a run's `trainers` (parallel.tp).
TrainerMesh trainer_mesh(const config::Config& config, int trainers);
// Why a TP group would span nodes (`hosts` per world rank), or "".
std::string groups_across_nodes(const TrainerMesh& mesh, int first_trainer_rank,
                                const std::vector<std::string>& hosts);

}  // namespace meshloom
