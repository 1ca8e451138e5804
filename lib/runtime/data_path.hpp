// The data path across roles: loaders serve sources, the lead (rank 0)
// chooses and places every step's samples, constructors pack them, trainers
// receive them. See protocol.hpp for the messages.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "comm/p2p.hpp"
#include "dataplane/data_plane.hpp"
#include "dataplane/partition.hpp"
#include "plan/planner.hpp"
#include "runtime/doc_source.hpp"
#include "runtime/loader_router.hpp"
#include "runtime/protocol.hpp"
#include "runtime/world.hpp"

namespace meshloom {

// Peak resident set of this process, KiB.
int64_t peak_rss_kib();
// Proportional set size of process `pid` (0: this one) now, KiB
// (/proc/PID/smaps_rollup): pages shared by several processes (a
// memory-mapped dataset) count once in the sum over processes. 0 where the
// kernel does not provide it.
int64_t pss_kib(int pid = 0);
// Fills the memory fields of a report; a colocated trainer's PSS includes
// its data worker processes.
void fill_memory(proto::Report* report);

// Serves (source, document) lengths and tokens until the lead says stop.
void run_loader(const World& w);

// Packs the lead's step work into trainer batches until the lead says stop.
void run_constructor(const World& w);

// Colocated mode: the batch of `work` (for one trainer) read from sources this
// process opens itself (in *local, on first use).
proto::Batch local_batch(const config::Config& config, const proto::StepWork& work,
                         std::vector<std::unique_ptr<DocSource>>* local);

// Fetches the tokens of `work` from the loaders (or from local sources in
// colocated mode) and sends each trainer its batch. Returns tokens packed.
class Constructor {
 public:
  // `router`: share the caller's view of dead loaders (the lead's), else own one.
  explicit Constructor(const World& w, LoaderRouter* router = nullptr);
  int64_t construct(const proto::StepWork& work);
  // Sends still in flight are completed (call before stopping).
  void drain();

 private:
  const World& w_;
  LoaderRouter own_router_;
  LoaderRouter* router_;
  std::vector<PendingSend> in_flight_;
};

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
  std::vector<proto::Report> stop();

  const dataplane::DataPlane& plane() const { return *plane_; }
  const dataplane::LoaderAssignment& assignment() const { return assignment_; }
  int64_t steps_dispatched() const { return next_step_; }
  // Steps whose every trainer has acknowledged, counted from step 0.
  int64_t steps_completed() const;
  // The acks of step s (with echoed batches in data runs), in arrival order;
  // valid once the step is completed.
  std::vector<proto::Ack> take_acks(int64_t step);
  int reassignments() const { return reassignments_; }
  // Loaders the lead found dead, and the seconds it lost finding out.
  std::set<int> dead_loaders() const { return router_ ? router_->dead_loaders() : std::set<int>{}; }
  double failover_stall() const { return router_ ? router_->stall_seconds() : 0.0; }
  // The plan of the last dispatched step, and the cost model it used.
  const plan::Plan& last_plan() const { return last_plan_; }
  const plan::CostModel& cost_model() const { return plan_cost_; }
  // The planner's predicted compute seconds of `trainer` in step s.
  double predicted_time(int64_t step, int trainer) const {
    return predicted_.at(size_t(step - first_step_)).at(size_t(trainer));
  }

 private:
  int64_t length(int source, int64_t doc);
  void fetch_lengths(int source, int64_t doc);
  void maybe_reassign();
  void send_assignment();
  proto::StepWork place(const dataplane::StepManifest& m, bool last);
  void receive_ack();
  std::string checkpoint_data();
  void warn_unfired_faults(const std::vector<proto::Report>& reports) const;

  const World& w_;
  std::unique_ptr<dataplane::DataPlane> plane_;
  dataplane::LoaderAssignment assignment_;
  std::vector<double> cost_;  // seconds per token per source (measured by loaders)
  // Per source: known lengths (-1: unknown) and which loader answered.
  std::vector<std::vector<int64_t>> lengths_;
  std::vector<std::vector<int32_t>> owner_;
  // Per source: permutation of the epoch last asked about, and its inverse.
  std::vector<int64_t> perm_epoch_;
  std::vector<std::vector<int64_t>> perm_, inverse_;
  std::vector<std::unique_ptr<DocSource>> local_;  // colocated mode
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
  std::string last_full_;                      // file name of the last checkpoint with full lengths
  std::vector<std::vector<proto::Ack>> acks_;  // per step, until taken
  std::vector<int> ack_count_;                 // per step
  int reassignments_ = 0;
  double busy_seconds_ = 0;  // choosing, planning, placing and constructing steps
  plan::CostModel plan_cost_;
  plan::Plan last_plan_;
};

// Runs this rank's role until the end of the job: loaders and non-lead
// constructors serve, rank 0 runs `lead`, trainers run `trainer`. A
// meshloom::Error on any rank (a bad source file, ...) is printed with the
// rank and ends the whole job with exit code 2. Returns the exit code.
int run_role(const World& w, const std::function<int()>& lead, const std::function<int()>& trainer);

// A trainer's side: the next batch from its constructor (or, colocated, from
// its own sources). *wait_seconds gets the time spent waiting.
proto::Batch receive_batch(const World& w, double* wait_seconds = nullptr);
// The trainer's answer to the lead for a step.
void send_ack(const proto::Ack& ack);

}  // namespace meshloom
