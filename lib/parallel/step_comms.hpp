// The trainers' communicators, split once at start and kept, queried by axis
// (the manner of Megatron-core's parallel_state): the one place that knows
// which MPI communicator a collective of the step runs on.
//
//   Axis::trainers  every trainer (rank = trainer index): step dumps,
//                   checkpoints, the metrics every trainer adds to
//   Axis::tensor    this trainer's TP group (rank = TP rank)
//   Axis::data      the trainers of this (stage, TP rank) across HDP ranks
//                   (rank = HDP rank): gradient reduction, ZeRO-1 shards,
//                   CP rings
//   Axis::pipeline  the stages of this trainer's pipeline at its TP rank
//                   (rank = stage): activations and their gradients, the
//                   tied embedding's gradient
//   Axis::model     every trainer of this HDP rank, tp x pp (rank = its
//                   member index): the gradient norm's parts
//
// With tp = pp = 1, data spans every trainer and the others are this
// trainer alone.
#pragma once

#include <mpi.h>

#include <array>

#include "parallel/mesh.hpp"

namespace meshloom::parallel {

enum class Axis { trainers = 0, tensor, data, pipeline, model };

class StepComms {
 public:
  // Collective over `trainers` (each trainer calls it once).
  StepComms(MPI_Comm trainers, const TrainerMesh& mesh);
  ~StepComms();
  StepComms(const StepComms&) = delete;
  StepComms& operator=(const StepComms&) = delete;

  MPI_Comm comm(Axis axis) const { return comms_[size_t(axis)]; }
  int rank(Axis axis) const { return ranks_[size_t(axis)]; }
  int size(Axis axis) const { return sizes_[size_t(axis)]; }
  const TrainerMesh& mesh() const { return mesh_; }

 private:
  TrainerMesh mesh_;
  std::array<MPI_Comm, 5> comms_{};
  std::array<int, 5> ranks_{}, sizes_{};
};

}  // namespace meshloom::parallel
