// A step's samples put back together from the batches the trainers received
// (step dumps, `meshloom data`): pure, no MPI.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/protocol.hpp"

namespace meshloom::wire {

struct SampleContent {
  std::vector<int32_t> tokens;  // -1 (model::kImagePosition) at image positions
  std::vector<float> patches;   // one patch per image position, in order
};

// The whole manifest of a step: each batch names only the samples it holds,
// the first batch (trainer 0's) all of them.
std::vector<Sample> merged_manifest(const std::vector<Batch>& batches);

// Every sample of `samples`, from the micro-batches of `batches` (one per
// HDP rank). Fails (ML_FAIL, naming the step) unless every token arrives
// exactly once, at its position, and every image position with one patch of
// the same size.
std::vector<SampleContent> reassemble(int64_t step, const std::vector<Sample>& samples,
                                      const std::vector<Batch>& batches);

}  // namespace meshloom::wire
