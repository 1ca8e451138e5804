// The lead (world rank 0): the data plane with its length catalogue
// (LengthCatalogue, length_catalogue.hpp), loader assignment and
// re-partitioning, every step's choice, plan and placement (StepPlacer,
// step_placer.hpp), and flow control (at most data.prefetch steps ahead of
// the slowest trainer; AckWindow, ack_window.hpp). It is also a constructor:
// it packs the share of the steps that falls to constructor 0.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/memory.hpp"
#include "ckpt/checkpoint.hpp"
#include "comm/p2p.hpp"
#include "dataplane/data_plane.hpp"
#include "dataplane/eval_set.hpp"
#include "dataplane/partition.hpp"
#include "parallel/world.hpp"
#include "plan/cost/cost_model.hpp"
#include "roles/ack_window.hpp"
#include "roles/constructor.hpp"
#include "roles/length_catalogue.hpp"
#include "roles/loader_router.hpp"
#include "roles/step_placer.hpp"
#include "sources/doc_source.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

// Rank 0: the data plane, loader assignment, step placement and flow control.
class Lead {
 public:
  // Held-out evaluation: none (`meshloom data`), after steps (training runs:
  // eval.every), or only (`meshloom eval`: dispatch_eval). The held-out
  // set's lengths are asked here.
  enum class Evaluation { none, after_steps, only };
  explicit Lead(const parallel::World& w, Evaluation evaluation = Evaluation::none);
  ~Lead();
  // Chooses, places and dispatches the next step. Blocks only for flow
  // control (at most data.prefetch steps ahead of the slowest trainer) and for
  // lengths that loaders have not published yet.
  void dispatch_step(bool last);
  // `meshloom eval`: dispatches held-out batch `batch` alone, as step
  // number next_step_ with no training work (flow control as for steps).
  void dispatch_eval(size_t batch, bool last);
  // `meshloom eval`: dispatches `sequences` (prompts the lead made, of
  // source `source`) as one held-out batch of inline samples, planned like a
  // step; sample i's predictions from position scored_from[i] on are scored
  // apart (Ack's EvalResult::sample_scores).
  void dispatch_prompts(const std::vector<std::vector<int32_t>>& sequences,
                        const std::vector<int64_t>& scored_from, int32_t source, bool last);
  // The held-out set (Evaluation other than none, eval.every > 0 in training).
  const dataplane::EvalSet* eval_set() const { return eval_set_.get(); }
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
  int64_t steps_completed() const { return acks_.completed(); }
  // The acks of step s (with echoed batches in data runs), in arrival order;
  // valid once the step is completed.
  std::vector<wire::Ack> take_acks(int64_t step) { return acks_.take(step); }
  int reassignments() const { return reassignments_; }
  // Loaders the lead found dead.
  std::set<int> dead_loaders() const { return router_ ? router_->dead_loaders() : std::set<int>{}; }
  // The cost model the plans use.
  const plan::CostModel& cost_model() const { return placer_->cost_model(); }
  // The planner's predicted compute seconds of `trainer` in step s.
  double predicted_time(int64_t step, int trainer) const {
    return predicted_.at(size_t(step - first_step_)).at(size_t(trainer));
  }
  // The planner that made step s's plan ("pp-balance", or "hdp" where
  // plan.balance: pp took hdp's plan: plan/pipeline/pp_plan.hpp).
  const std::string& planner_of(int64_t step) const {
    return planners_.at(size_t(step - first_step_));
  }

 private:
  int64_t length(int source, int64_t doc);
  // A held-out document's length, asked with the next held-out ones.
  int64_t eval_length(int source, int64_t doc);
  void build_eval_set();
  // Whether an evaluation follows step s.
  bool eval_after(int64_t step) const;
  // The held-out set's batches, planned after step s's work (eval steps).
  std::vector<wire::StepWork> place_eval(int64_t step);
  wire::StepWork place_eval_batch(int64_t step, size_t batch);
  void send_work(const wire::StepWork& work);
  void wait_for_window();
  // An evaluation-only step (no training work) holding `part`, sent.
  void dispatch_eval_part(wire::StepWork part, bool last);
  void maybe_reassign();
  void send_assignment();
  wire::StepWork place(const dataplane::StepManifest& m, bool last);
  std::string checkpoint_data();
  void warn_unfired_faults(const std::vector<wire::Report>& reports) const;

  const parallel::World& w_;
  std::unique_ptr<dataplane::DataPlane> plane_;
  dataplane::LoaderAssignment assignment_;
  std::vector<double> cost_;   // seconds per token per source (measured by loaders)
  std::vector<int64_t> docs_;  // per source
  std::unique_ptr<dataplane::EvalSet> eval_set_;  // with eval.every in a training run
  std::unique_ptr<LengthCatalogue> catalogue_;
  std::vector<std::unique_ptr<sources::DocSource>> local_;  // colocated mode
  std::unique_ptr<Constructor> own_constructor_;
  std::unique_ptr<LoaderRouter> router_;
  std::vector<comm::PendingSend> in_flight_;
  int64_t next_step_ = 0, first_step_ = 0;
  int64_t checkpoints_ = 0;
  bool warned_long_ = false;                    // about a long/short policy no document meets
  std::vector<uint64_t> hashes_;                // per dispatched step
  std::vector<std::vector<double>> predicted_;  // per dispatched step, per trainer
  std::vector<std::string> planners_;           // per dispatched step
  std::string last_full_;  // file name of the last checkpoint with full lengths
  int reassignments_ = 0;
  double busy_seconds_ = 0;             // choosing, planning, placing and constructing steps
  std::unique_ptr<StepPlacer> placer_;  // made after the data plane (its log follows)
  AckWindow acks_;
  HeapTrim trim_;  // rank 0 packs and frees a step's data each step
};

}  // namespace meshloom::roles
