// The lead's step placement: a step's sample lengths go to the planning
// entry point (plan::plan_step), the plan is relabeled toward the group
// communicators the trainers have cached, and each trainer's micro-batches
// become segment lists of the step's StepWork.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/group_comms.hpp"
#include "comm/member_sets.hpp"
#include "parallel/world.hpp"
#include "plan/pipeline/pipeline.hpp"
#include "plan/plan.hpp"
#include "plan/planner.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

class StepPlacer {
 public:
  // The cost model and one HDP rank's pipeline from the config, with the
  // trainers' nodes (logs a calibration when there is one).
  explicit StepPlacer(const parallel::World& w);
  // Plans `lengths` (the step's samples' lengths, in order; work.step set)
  // and fills work.capacity, work.groups and work.trainers.
  void place(wire::StepWork& work, const std::vector<int64_t>& lengths);
  // Per trainer, its HDP rank's predicted time in the last placed step: the
  // plan's, or with pipelines its 1F1B makespan.
  std::vector<double> predicted_times() const;
  // The planner that made the last placed step's plan.
  const std::string& last_planner() const { return last_plan_.planner; }
  const plan::CostModel& cost_model() const { return cost_; }
  // The replay of the trainers' communicator caches (checkpointed), least
  // recent first; restoring it drops sets of ranks this run lacks.
  std::vector<comm::MemberSet> group_sets() const { return group_history_.sets(); }
  void restore_group_sets(const std::vector<std::vector<int32_t>>& sets);

 private:
  void prefer_cached_groups();

  const parallel::World& w_;
  plan::CostModel cost_;
  // One HDP rank's pipeline stages (one at pp = 1) with their costs:
  // PP-Balance's model, and with pp > 1 each HDP rank's predicted time.
  plan::PipelineModel pipe_model_;
  bool cp_logged_ = false;     // the CP attention mix was logged
  bool rings_logged_ = false;  // the rings' nodes were logged
  plan::Plan last_plan_;
  // A replay of the trainers' group-communicator caches (the step groups
  // sent so far), for prefer_cached_groups().
  comm::MemberSetLru group_history_{comm::MpiGroupComms::kDefaultCapacity};
};

}  // namespace meshloom::roles
