// The step dump (`meshloom train --dump-step N FILE`), docs/formats.md "Step dump":
//   /batch/tokens          int32   the global batch's samples concatenated in manifest order
//   /batch/sample_lengths  int32
//   /batch/source          int32   source index per sample
//   /loss                  float64 the global mean loss, before the update
//   /params/<name>         float32 before the update
//   /grads/<name>          float32 reduced over trainers, before clipping
// The same file whatever the number of trainers or the plan: trainers send
// their pieces to trainer 0, which puts every sample back together.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "model/transformer.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

// Collective over `trainers`. `holds_batch`: this trainer sends its batch
// (one of each HDP rank: the others of its TP group and pipeline have the
// same). `params` are the parameters before the update, `grads` the full
// reduced gradient; `loss_sum` this trainer's part.
void write_step_dump(const std::string& path, MPI_Comm trainers, const wire::Batch& batch,
                     bool holds_batch, const model::ParamLayout& layout,
                     const std::vector<float>& params, const std::vector<float>& grads,
                     double loss_sum);

}  // namespace meshloom::runtime
