#include "parallel/step_comms.hpp"

#include "base/strings.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom {

StepComms::StepComms(MPI_Comm trainers, const TrainerMesh& mesh) : mesh_(mesh) {
  int me = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(trainers, &me));
  MPI_CHECK(MPI_Comm_size(trainers, &size));
  ML_CHECK(size == mesh.trainers && mesh.tp >= 1 && size % mesh.tp == 0,
           strf("%d trainers do not form TP groups of %d", size, mesh.tp));
  MPI_CHECK(MPI_Comm_dup(trainers, &comms_[size_t(Axis::trainers)]));
  // Keyed by the trainer index, so that ranks inside each group follow it.
  MPI_CHECK(MPI_Comm_split(trainers, mesh.hdp_rank_of(me), me, &comms_[size_t(Axis::tensor)]));
  MPI_CHECK(MPI_Comm_split(trainers, mesh.tp_rank_of(me), me, &comms_[size_t(Axis::data)]));
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

}  // namespace meshloom
