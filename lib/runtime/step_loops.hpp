// The two loops every job runs, whatever it makes of the steps: rank 0
// dispatches steps and hands each completed one on; a trainer takes each
// batch, answers it and acknowledges it to rank 0. `meshloom train` and
// `meshloom data` differ only in what they do with a step (runtime/train_job,
// runtime/data_job).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "parallel/world.hpp"
#include "roles/lead.hpp"
#include "wire/protocol.hpp"

namespace meshloom::runtime {

// Rank 0: dispatches steps [first, end) through `lead` (blocking only for
// flow control) and calls on_step(s, acks) for every step in order, as soon as
// each trainer has acknowledged it (acks in trainer order). Then stops the loaders and constructors
// and returns every rank's final report.
using StepDone = std::function<void(int64_t step, std::vector<wire::Ack> acks)>;
std::vector<wire::Report> lead_steps(roles::Lead& lead, int64_t first, int64_t end,
                                     const StepDone& on_step);

// A trainer: receives its batches until the last one, answers each with
// answer(batch, seconds waited for it), sends the answer to rank 0, and at the
// end its final report (tokens received, busy seconds from the answers'
// step_seconds, memory, and what `add_totals` adds: what the caller counted).
using StepAnswer = std::function<wire::Ack(const wire::Batch& batch, double wait_seconds)>;
using AddTotals = std::function<void(wire::Report* report)>;
void trainer_steps(const parallel::World& w, const StepAnswer& answer,
                   const AddTotals& add_totals = {});

}  // namespace meshloom::runtime
