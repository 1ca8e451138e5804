// The lead (world rank 0): data plane, loader assignment, placement, flow control.
#include "roles/lead.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "comm/p2p.hpp"
#include "parallel/mesh.hpp"
#include "roles/report.hpp"

namespace meshloom::roles {

namespace {

// Predictions of the piece [offset, offset + length) of a document whose first
// `images` positions are image patches: every position but the piece's last
// predicts the next, except image positions (they predict nothing).
int64_t predictions(int64_t offset, int64_t length, int64_t images) {
  const int64_t end = offset + length - 1;  // positions that have a next one in the piece
  return std::max<int64_t>(0, length - 1) - std::max<int64_t>(0, std::min(images, end) - offset);
}
}  // namespace

Lead::Lead(const parallel::World& w, Evaluation evaluation) : w_(w), acks_(w) {
  const auto& sources = w.config.data.sources;
  const size_t n = sources.size();
  cost_.assign(n, 1.0);
  std::vector<int64_t>& docs = docs_;
  docs.assign(n, 0);
  const bool colocated = w.config.data.mode == config::DataMode::colocated;
  router_ = std::make_unique<LoaderRouter>(w);
  if (colocated) {
    // No loader ranks: the lead reads lengths itself, trainers read tokens.
    for (size_t i = 0; i < n; ++i) {
      local_.push_back(sources::open_doc_source(w.config, i));
      docs[i] = local_.back()->docs();
    }
  } else {
    LOG_INFO("%s%s", router_->shadows().describe().c_str(),
             w.config.data.shadows || w.layout.loaders < 2
                 ? ""
                 : " (data.shadows false: failover targets only, no hot standby)");
    send_assignment();
    // Each loader reports the document count of each source it serves.
    for (int l = 0; l < w.layout.loaders; ++l)
      for (size_t k = 0; k < assignment_.sources_of_loader[l].size(); ++k) {
        const int loader = w.layout.first_rank(parallel::Role::loader) + l;
        wire::LengthReply c = wire::decode_length_reply(
            comm::recv_bytes(loader, wire::kDocCount, MPI_COMM_WORLD, w.config.run.timeout,
                             "a document count from a loader"),
            loader);
        ML_CHECK(c.docs.size() == 1 && c.source >= 0 && size_t(c.source) < n,
                 strf("the document count from loader rank %d names source %d of %zu with %zu "
                      "counts",
                      loader, c.source, n, c.docs.size()));
        docs[size_t(c.source)] = c.docs[0];
      }
    own_constructor_ = std::make_unique<Constructor>(w, router_.get());
  }
  catalogue_ = std::make_unique<LengthCatalogue>(w, router_.get(), docs);
  for (size_t i = 0; i < n; ++i) {
    // Who serves it, so that a drill (faults.inject) can aim at a loader that is asked.
    std::string served;
    if (local_.empty()) {
      const int first = w.layout.first_rank(parallel::Role::loader), L = w.layout.loaders;
      std::vector<int> shadows;  // each once: loaders may share a shadow
      std::string ranks;
      for (int l : assignment_.loaders_of_source[i]) {
        ranks += strf("%s%d", ranks.empty() ? "" : ",", first + l);
        const int s = router_->shadows().shadow.at(first + l);
        if (L > 1 && w.config.data.shadows &&
            std::find(shadows.begin(), shadows.end(), s) == shadows.end())
          shadows.push_back(s);
      }
      std::vector<std::string> shadow_ranks;
      for (int s : shadows) shadow_ranks.push_back(std::to_string(s));
      served = strf("; loader rank%s %s, shadow%s %s",
                    assignment_.loaders_of_source[i].size() > 1 ? "s" : "", ranks.c_str(),
                    shadows.size() > 1 ? "s" : "",
                    shadows.empty() ? "none" : join(shadow_ranks, ",").c_str());
    }
    const bool images = sources[i].format == config::SourceFormat::webdataset;
    LOG_INFO("source %-10s %lld %s (%s, %s%s)%s", sources[i].name.c_str(), (long long)docs[i],
             images ? "image-text samples" : "documents", config::enum_name(sources[i].format),
             sources[i].path.c_str(), served.c_str(),
             images ? "; its mixture share counts image patches and caption tokens alike" : "");
  }
  plane_ = std::make_unique<dataplane::DataPlane>(
      w.config, docs, [this](int s, int64_t d) { return length(s, d); });
  placer_ = std::make_unique<StepPlacer>(w);
  if ((evaluation == Evaluation::after_steps && w.config.eval.every > 0) ||
      evaluation == Evaluation::only)
    build_eval_set();
}

Lead::~Lead() = default;

void Lead::send_assignment() {
  std::vector<double> weights;
  for (const auto& s : w_.config.data.sources) weights.push_back(s.weight);
  if (plane_) {
    dataplane::MixtureSchedule schedule(w_.config.data);
    weights = schedule.weights(next_step_);
  }
  dataplane::LoaderAssignment a = dataplane::assign_loaders(w_.layout.loaders, weights, cost_);
  if (plane_ && a == assignment_) return;
  const bool first = !plane_;
  assignment_ = a;
  if (!first) {
    ++reassignments_;
    std::string text, costs;
    for (size_t s = 0; s < a.loaders_of_source.size(); ++s) {
      text +=
          strf(" %s:%zu", w_.config.data.sources[s].name.c_str(), a.loaders_of_source[s].size());
      costs += strf("%s%s %.3g", s ? ", " : "", w_.config.data.sources[s].name.c_str(), cost_[s]);
    }
    LOG_INFO(
        "preparing step %lld: loaders re-partitioned by measured cost:%s (seconds per token: %s)",
        (long long)next_step_, text.c_str(), costs.c_str());
  }
  // Only the first assignment is sent: later ones change who is asked (loaders
  // open a source on its first request), so nothing has to move.
  if (first)
    for (int l = 0; l < w_.layout.loaders; ++l) {
      // A shadow opens the sources of every loader it shadows too.
      const int first_loader = w_.layout.first_rank(parallel::Role::loader),
                rank = first_loader + l;
      const parallel::ShadowPlan& shadows = router_->shadows();
      wire::Assign m;
      for (int s : a.sources_of_loader[l]) m.sources.push_back(s);
      if (w_.config.data.shadows && w_.layout.loaders > 1) {
        std::set<int32_t> standby;
        for (int r : shadows.shadowed_by(rank))
          for (int s : a.sources_of_loader[size_t(r - first_loader)]) standby.insert(s);
        m.shadow_sources.assign(standby.begin(), standby.end());
        m.shadow = shadows.shadow.at(rank);
      }
      comm::send_bytes(wire::encode(m), rank, wire::kAssign, MPI_COMM_WORLD);
    }
}

void Lead::maybe_reassign() {
  const int64_t every = w_.config.data.rebalance_every;
  if (w_.config.data.mode == config::DataMode::colocated || every <= 0 || next_step_ == 0 ||
      next_step_ % every != 0)
    return;
  send_assignment();
}

// A document's length, asked for when unknown (from the lead's own
// sources when colocated).
int64_t Lead::length(int source, int64_t doc) {
  if (!catalogue_->known(source, doc)) {
    if (!local_.empty()) {
      catalogue_->read_local(source, doc, *local_[size_t(source)]);
    } else {
      const int64_t epoch = plane_ ? plane_->streams()[size_t(source)].state().epoch : 0;
      catalogue_->fetch(source, doc, epoch, next_step_,
                        assignment_.loaders_of_source[size_t(source)], cost_);
    }
  }
  return catalogue_->length(source, doc);
}

int64_t Lead::eval_length(int source, int64_t doc) {
  if (catalogue_->known(source, doc)) return catalogue_->length(source, doc);
  if (!local_.empty()) return length(source, doc);
  const std::vector<int>& loaders = assignment_.loaders_of_source[size_t(source)];
  const dataplane::Holdout holdout = dataplane::holdout_of(w_.config, size_t(source));
  catalogue_->fetch_listed(
      source,
      dataplane::held_out_docs(holdout, doc, docs_[size_t(source)],
                               size_t(LengthCatalogue::kLengthBatch) * loaders.size()),
      next_step_, loaders, cost_);
  return catalogue_->length(source, doc);
}

void Lead::build_eval_set() {
  eval_set_ = std::make_unique<dataplane::EvalSet>(dataplane::build_eval_set(
      w_.config, docs_, [this](int s, int64_t d) { return eval_length(s, d); }));
  std::vector<std::string> per_source;
  for (size_t s = 0; s < docs_.size(); ++s) {
    const std::string& name = w_.config.data.sources[s].name;
    per_source.push_back(strf("%s %lld", name.c_str(), (long long)eval_set_->source_tokens[s]));
    if (eval_set_->source_tokens[s] < eval_set_->source_quota[s])
      LOG_WARN(
          "eval: source %s has %lld held-out tokens of the %lld its share asks for "
          "(eval.holdout %g): raise eval.holdout for a steadier held-out loss",
          name.c_str(), (long long)eval_set_->source_tokens[s],
          (long long)eval_set_->source_quota[s], w_.config.eval.holdout);
  }
  LOG_INFO(
      "eval: %lld held-out tokens (%s) in %zu batch(es)%s", (long long)eval_set_->tokens(),
      join(per_source, ", ").c_str(), eval_set_->batches.size(),
      w_.config.eval.every > 0
          ? strf(", after every %lld steps and the last", (long long)w_.config.eval.every).c_str()
          : "");
}

bool Lead::eval_after(int64_t step) const {
  const int64_t every = w_.config.eval.every;
  return eval_set_ && ((step + 1) % every == 0 || step + 1 == w_.config.run.steps);
}

wire::StepWork Lead::place_eval_batch(int64_t step, size_t batch) {
  dataplane::StepManifest m;
  m.step = step;
  m.samples = eval_set_->batches.at(batch);
  return place(m, false);
}

std::vector<wire::StepWork> Lead::place_eval(int64_t step) {
  std::vector<wire::StepWork> parts;
  for (size_t b = 0; b < eval_set_->batches.size(); ++b) parts.push_back(place_eval_batch(step, b));
  return parts;
}

// The step's samples with their loaders; the placer plans and places them.
wire::StepWork Lead::place(const dataplane::StepManifest& m, bool last) {
  wire::StepWork work;
  work.step = m.step;
  work.last = last;
  std::vector<int64_t> lengths;
  for (const auto& p : m.samples) {
    wire::Sample s;
    s.source = p.source;
    s.owner = local_.empty() ? catalogue_->owner(p.source, p.doc) : -1;
    s.epoch = p.epoch;
    s.doc = p.doc;
    s.offset = p.offset;
    s.length = p.length;
    work.samples.push_back(s);
    work.global_predictions +=
        predictions(p.offset, p.length, catalogue_->image_positions(p.source, p.doc));
    lengths.push_back(p.length);
  }
  placer_->place(work, lengths);
  return work;
}

// Flow control: at most data.prefetch steps ahead of the slowest trainer.
void Lead::wait_for_window() {
  while (next_step_ - steps_completed() > w_.config.data.prefetch) acks_.receive();
}

void Lead::dispatch_step(bool last) {
  wait_for_window();
  trim_.maybe();  // what the steps packed so far (patches, echoes) has been freed
  const auto busy = std::chrono::steady_clock::now();  // from here on, the lead's own work
  maybe_reassign();
  dataplane::StepManifest m = plane_->next();
  if (plane_->long_lane_empty() && !warned_long_) {
    warned_long_ = true;
    const int64_t longest = catalogue_->longest();
    LOG_WARN(
        "data.long_policy: no document is longer than data.long_policy.threshold %lld (the "
        "longest seen has %lld tokens), so the long share %g is 0",
        (long long)w_.config.data.long_policy.threshold, (long long)longest,
        w_.config.data.long_policy.share);
  }
  wire::StepWork work = place(m, last);
  trim_.worked();
  uint64_t h = 1469598103934665603ULL;
  for (const auto& p : m.samples) {
    const int64_t key[4] = {p.source, p.doc, p.offset, p.length};
    h = ckpt::fnv1a(key, sizeof(key), h);
  }
  hashes_.push_back(h);
  // Per trainer, its HDP rank's predicted time: the plan's, or its 1F1B makespan.
  predicted_.push_back(placer_->predicted_times());
  planners_.push_back(placer_->last_planner());
  // After the step's plan: trainers split the groups in this order too.
  if (eval_after(m.step)) work.eval = place_eval(m.step);
  const int64_t every = w_.config.checkpoint.every;
  // Also after the run's last step: a finished run requeued then has nothing to redo.
  if (every > 0 && ((m.step + 1) % every == 0 || m.step + 1 == w_.config.run.steps)) {
    work.checkpoint = true;
    work.ckpt_data = checkpoint_data();
  }
  send_work(work);
  busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - busy).count();
}

void Lead::dispatch_eval(size_t batch, bool last) {
  wait_for_window();
  dispatch_eval_part(place_eval_batch(next_step_, batch), last);
}

void Lead::dispatch_prompts(const std::vector<std::vector<int32_t>>& sequences,
                            const std::vector<int64_t>& scored_from, int32_t source, bool last) {
  wait_for_window();
  wire::StepWork part;
  part.step = next_step_;
  part.inline_tokens = sequences;
  part.scored_from = scored_from;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < sequences.size(); ++i) {
    wire::Sample s;
    s.source = source;
    s.owner = wire::kInline;
    s.doc = int64_t(i);
    s.length = int64_t(sequences[i].size());
    part.samples.push_back(s);
    part.global_predictions += std::max<int64_t>(0, s.length - 1);
    lengths.push_back(s.length);
  }
  placer_->place(part, lengths);
  dispatch_eval_part(std::move(part), last);
}

void Lead::dispatch_eval_part(wire::StepWork part, bool last) {
  const auto busy = std::chrono::steady_clock::now();
  wire::StepWork work;
  work.step = next_step_;
  work.last = last;
  for (int t = 0; t < w_.mesh.hdp_ranks(); ++t) work.trainers.push_back({t, {}});
  work.eval.push_back(std::move(part));
  hashes_.push_back(0);
  predicted_.push_back(placer_->predicted_times());
  planners_.push_back(placer_->last_planner());
  send_work(work);
  busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - busy).count();
}

// To the constructors (or, colocated, to every trainer), with the step's acks opened.
void Lead::send_work(const wire::StepWork& work) {
  acks_.open();
  const int K = w_.layout.constructors;
  if (!local_.empty()) {
    // Colocated: every trainer gets its own work and loads it itself (the
    // trainers of an HDP rank the same work).
    for (const auto& t : work.trainers) {
      const std::string bytes =
          wire::encode(wire::work_for(work, [&](int32_t trainer) { return trainer == t.trainer; }));
      for (int j = 0; j < w_.mesh.group_size(); ++j)
        in_flight_.emplace_back(
            bytes, w_.layout.first_rank(parallel::Role::trainer) + w_.mesh.trainer_at(t.trainer, j),
            wire::kStepWork, MPI_COMM_WORLD);
    }
  } else {
    // Constructor c packs for trainers t with t mod K = c, with only the
    // samples they touch: a step costs O(samples) on the wire, not
    // O(constructors x samples).
    auto part = [&](int c) {
      return wire::work_for(work, [&](int32_t trainer) { return trainer % K == c; });
    };
    for (int c = 1; c < K; ++c)
      in_flight_.emplace_back(wire::encode(part(c)), c, wire::kStepWork, MPI_COMM_WORLD);
    own_constructor_->construct(part(0));
  }
  std::vector<comm::PendingSend> still;
  for (auto& s : in_flight_)
    if (!s.done()) still.push_back(std::move(s));
  in_flight_ = std::move(still);
  ++next_step_;
}

void Lead::drain_acks() { acks_.drain(); }

std::vector<wire::Report> Lead::stop() {
  drain_acks();
  in_flight_.clear();
  if (own_constructor_) own_constructor_->drain();
  // Constructors first: once they are done, nobody asks loaders anything.
  std::vector<wire::Report> reports;
  for (int r = 1; r < w_.size; ++r)
    if (w_.layout.role_of(r) == parallel::Role::constructor)
      comm::send_bytes(std::string(1, '\0'), r, wire::kStop, MPI_COMM_WORLD);
  // Trainers stop after their last batch; constructors after Stop.
  for (int r = 1; r < w_.size; ++r)
    if (w_.layout.role_of(r) != parallel::Role::loader)
      reports.push_back(
          wire::decode_report(comm::recv_bytes(r, wire::kReport, MPI_COMM_WORLD,
                                               w_.config.run.timeout, "a final report"),
                              r));
  // Loaders: a dead one never answers; a hung one still obeys Stop.
  for (int l = 0; l < w_.layout.loaders; ++l) {
    const int r = w_.layout.first_rank(parallel::Role::loader) + l;
    std::string reply;
    if (router_->try_request(r, wire::kStop, std::string(1, '\0'), wire::kReport, &reply))
      reports.push_back(wire::decode_report(reply, r));
    else
      LOG_WARN("loader rank %d did not answer Stop: its process is gone", r);
  }
  wire::Report mine;
  mine.role = int(parallel::Role::constructor);
  mine.busy_seconds = busy_seconds_;
  fill_memory(&mine);
  reports.push_back(mine);
  warn_unfired_faults(reports);
  return reports;
}

// A drill whose fault never fired tests nothing: say so. A rank that reported
// nothing died (a crash fires so); trainers' crashes and hangs end the job.
void Lead::warn_unfired_faults(const std::vector<wire::Report>& reports) const {
  for (const auto& f : w_.config.faults.inject) {
    const auto r = std::find_if(reports.begin(), reports.end(),
                                [&](const wire::Report& x) { return x.rank == f.rank; });
    if (r == reports.end() || r->faults_fired > 0) continue;
    const parallel::Role role = w_.layout.role_of(int(f.rank));
    LOG_WARN("faults.inject: the %s on rank %lld from step %lld never fired: %s",
             config::enum_name(f.kind), (long long)f.rank, (long long)f.step,
             role == parallel::Role::loader
                 ? "that loader was asked nothing from then on (the source lines at start name who "
                   "serves what; data.rebalance_every: 0 keeps it fixed)"
             : role == parallel::Role::trainer
                 ? "the run ended before that step (`meshloom data` runs no trainer faults)"
                 : "faults act on loaders and trainers, and this rank is a constructor");
  }
}

}  // namespace meshloom::roles
