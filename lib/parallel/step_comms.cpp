#include "parallel/step_comms.hpp"

#include "base/strings.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom::parallel {

StepComms::StepComms(MPI_Comm trainers, const TrainerMesh& mesh) : mesh_(mesh) {
  int me = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(trainers, &me));
  MPI_CHECK(MPI_Comm_size(trainers, &size));
  ML_CHECK(size == mesh.trainers && mesh.tp >= 1 && mesh.pp >= 1 && size % mesh.group_size() == 0,
           strf("%d trainers do not form groups of tp %d x pp %d", size, mesh.tp, mesh.pp));
  MPI_CHECK(MPI_Comm_dup(trainers, &comms_[size_t(Axis::trainers)]));
  // Keyed by the trainer index, so that ranks inside each group follow it.
  auto split = [&](int color, Axis axis) {
    MPI_CHECK(MPI_Comm_split(trainers, color, me, &comms_[size_t(axis)]));
  };
  const int hdp = mesh.hdp_rank_of(me);
  split(me / mesh.tp, Axis::tensor);                           // HDP rank and stage
  split(mesh.member_of(me), Axis::data);                       // stage and TP rank
  split(hdp * mesh.tp + mesh.tp_rank_of(me), Axis::pipeline);  // HDP rank and TP rank
  split(hdp, Axis::model);
  for (size_t a = 0; a < comms_.size(); ++a) {
    MPI_CHECK(MPI_Comm_set_errhandler(comms_[a], MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(comms_[a], &ranks_[a]));
    MPI_CHECK(MPI_Comm_size(comms_[a], &sizes_[a]));
  }
}

StepComms::~StepComms() {
  for (MPI_Comm& c : comms_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

}  // namespace meshloom::parallel
