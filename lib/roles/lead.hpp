// The lead (world rank 0): the data plane, loader assignment and
// re-partitioning, every step's choice, plan and placement, and flow control
// (at most data.prefetch steps ahead of the slowest trainer). It is also a
// constructor: it packs the share of the steps that falls to constructor 0.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/memory.hpp"
#include "ckpt/checkpoint.hpp"
#include "comm/group_comms.hpp"
#include "comm/member_sets.hpp"
#include "comm/p2p.hpp"
#include "dataplane/data_plane.hpp"
#include "dataplane/partition.hpp"
#include "parallel/world.hpp"
#include "plan/pipeline.hpp"
#include "plan/planner.hpp"
#include "roles/constructor.hpp"
#include "roles/loader_router.hpp"
#include "sources/doc_source.hpp"
#include "wire/protocol.hpp"

namespace meshloom {

// Rank 0: the data plane, loader assignment, step placement and flow control.
class Lead {
 public:
  explicit Lead(const World& w);
  ~Lead();
  // Chooses, places and dispatches the next step. Blocks only for flow
  // control (at most data.prefetch steps ahead of the slowest trainer) and for
  // lengths that loaders have not published yet.
  void dispatch_step(bool last);
  // Waits for the acks of every dispatched step; returns them in step order
  // (each ack carries what the trainer got in data runs).
  void drain_acks();
  // Continues from a checkpoint: data plane state, first step, and the
  // document lengths known then (full, or a base plus a delta).
  void resume(const ckpt::Checkpoint& c, const std::vector<ckpt::SourceLengths>& lengths);
  int64_t first_step() const { return first_step_; }
  // FNV-1a of step s's manifest (source, document, offset, length of every
  // sample): equal hashes, equal data, whatever the layout.
  uint64_t manifest_hash(int64_t step) const { return hashes_.at(size_t(step - first_step_)); }
  // Tells loaders and constructors to stop and collects every rank's report.
  std::vector<wire::Report> stop();

  const dataplane::DataPlane& plane() const { return *plane_; }
  const dataplane::LoaderAssignment& assignment() const { return assignment_; }
  // Steps whose every trainer has acknowledged, counted from step 0.
  int64_t steps_completed() const;
  // The acks of step s (with echoed batches in data runs), in arrival order;
  // valid once the step is completed.
  std::vector<wire::Ack> take_acks(int64_t step);
  int reassignments() const { return reassignments_; }
  // Loaders the lead found dead, and the seconds it lost finding out.
  std::set<int> dead_loaders() const { return router_ ? router_->dead_loaders() : std::set<int>{}; }
  double failover_stall() const { return router_ ? router_->stall_seconds() : 0.0; }
  // The cost model the plans use.
  const plan::CostModel& cost_model() const { return plan_cost_; }
  // The planner's predicted compute seconds of `trainer` in step s.
  double predicted_time(int64_t step, int trainer) const {
    return predicted_.at(size_t(step - first_step_)).at(size_t(trainer));
  }
  // The planner that made step s's plan ("pp-balance", or "hdp" where
  // plan.balance: pp took hdp's plan: plan/pp_plan.hpp).
  const std::string& planner_of(int64_t step) const {
    return planners_.at(size_t(step - first_step_));
  }

 private:
  int64_t length(int source, int64_t doc);
  void fetch_lengths(int source, int64_t doc);
  void maybe_reassign();
  void send_assignment();
  wire::StepWork place(const dataplane::StepManifest& m, bool last);
  void prefer_cached_groups();
  void receive_ack();
  std::string checkpoint_data();
  void warn_unfired_faults(const std::vector<wire::Report>& reports) const;

  const World& w_;
  std::unique_ptr<dataplane::DataPlane> plane_;
  dataplane::LoaderAssignment assignment_;
  std::vector<double> cost_;  // seconds per token per source (measured by loaders)
  // Per source: known lengths (-1: unknown) and which loader answered.
  std::vector<std::vector<int64_t>> lengths_;
  // Per image-text source: each document's leading image positions (0:
  // unknown or none); empty for text sources.
  std::vector<std::vector<int64_t>> images_;
  std::vector<std::vector<int32_t>> owner_;
  // Per source: permutation of the epoch last asked about, and its inverse.
  std::vector<int64_t> perm_epoch_;
  std::vector<std::vector<int64_t>> perm_, inverse_;
  std::vector<std::unique_ptr<sources::DocSource>> local_;  // colocated mode
  std::unique_ptr<Constructor> own_constructor_;
  std::unique_ptr<LoaderRouter> router_;
  std::vector<PendingSend> in_flight_;
  int64_t next_step_ = 0, first_step_ = 0;
  std::vector<std::vector<int64_t>> learned_;  // per source: documents in the order learned
  std::vector<size_t> logged_;                 // per source: learned_ entries checkpointed
  int64_t checkpoints_ = 0;
  bool warned_long_ = false;                    // about a long/short policy no document meets
  std::vector<uint64_t> hashes_;                // per dispatched step
  std::vector<std::vector<double>> predicted_;  // per dispatched step, per trainer
  std::vector<std::string> planners_;           // per dispatched step
  std::string last_full_;                     // file name of the last checkpoint with full lengths
  std::vector<std::vector<wire::Ack>> acks_;  // per step, until taken
  std::vector<int> ack_count_;                // per step
  int reassignments_ = 0;
  double busy_seconds_ = 0;  // choosing, planning, placing and constructing steps
  plan::CostModel plan_cost_;
  // One HDP rank's pipeline stages (one at pp = 1) with their costs:
  // PP-Balance's model, and with pp > 1 each HDP rank's predicted time.
  plan::PipelineModel pipe_model_;
  bool cp_logged_ = false;     // the CP attention mix was logged
  bool rings_logged_ = false;  // the rings' nodes were logged
  plan::Plan last_plan_;
  HeapTrim trim_;  // rank 0 packs and frees a step's data each step
  // A replay of the trainers' group-communicator caches (the step groups
  // sent so far), for prefer_cached_groups().
  MemberSetLru group_history_{MpiGroupComms::kDefaultCapacity};
};

}  // namespace meshloom
