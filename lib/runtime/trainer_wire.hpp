// The trainer's step in the terms of the wire: a received batch as the
// trainer's step input, and its statistics as the acknowledgement to rank 0.
#pragma once

#include "train/step_io.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

// The trainer's view of a received batch: every micro-batch's tokens,
// targets, positions and patches, with the sample of every token (the
// document mask), and the samples' sources and lengths.
train::StepInput step_input(const wire::Batch& batch);

// The acknowledgement of a step (the fields the trainer measures; the caller
// adds the rest: wait, peak FLOP/s, echo).
wire::Ack to_ack(train::StepStats stats);

// Adds one held-out batch's evaluation to the step's (Ack::eval).
void add_eval(const train::EvalStats& stats, wire::EvalResult* result);

}  // namespace meshloom::runtime
