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
#include "plan/cache_relabel.hpp"
#include "plan/cp_algorithm.hpp"
#include "plan/pipeline_schedule.hpp"
#include "plan/pipeline_slots.hpp"
#include "plan/pp_plan.hpp"
#include "plan/summary.hpp"
#include "roles/report.hpp"

namespace meshloom {

namespace {

// The step's CP groups (group size > 1) and the Ulysses subgroups of its
// hybrid ones (u consecutive members of the sorted set, as the group's
// communicator ranks them), each member set once, in plan order.
std::vector<std::vector<int32_t>> step_groups(const plan::Plan& plan) {
  std::vector<std::vector<int32_t>> groups;
  std::set<std::vector<int32_t>> seen;
  auto add = [&](std::vector<int32_t> members) {
    std::vector<int32_t> key = members;
    std::sort(key.begin(), key.end());
    if (seen.insert(key).second) groups.push_back(std::move(members));
  };
  for (int32_t seq = 0; seq < plan.sequences(); ++seq) {
    if (plan.group_size(seq) < 2) continue;
    const auto g = plan.group(seq);
    add({g.begin(), g.end()});
    const int32_t u = plan.cp_algo(seq).u;
    if (u <= 1 || u >= int32_t(g.size())) continue;
    std::vector<int32_t> sorted(g.begin(), g.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < sorted.size(); j += size_t(u))
      add({sorted.begin() + long(j), sorted.begin() + long(j) + u});
  }
  return groups;
}

constexpr int64_t kLengthBatch = 256;  // lengths asked per request, in stream order

// Predictions of the piece [offset, offset + length) of a document whose first
// `images` positions are image patches: every position but the piece's last
// predicts the next, except image positions (they predict nothing).
int64_t predictions(int64_t offset, int64_t length, int64_t images) {
  const int64_t end = offset + length - 1;  // positions that have a next one in the piece
  return std::max<int64_t>(0, length - 1) - std::max<int64_t>(0, std::min(images, end) - offset);
}
}  // namespace

Lead::Lead(const World& w) : w_(w) {
  const auto& sources = w.config.data.sources;
  const size_t n = sources.size();
  cost_.assign(n, 1.0);
  std::vector<int64_t> docs(n, 0);
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
        const int loader = w.layout.first_rank(Role::loader) + l;
        wire::LengthReply c = wire::decode_length_reply(
            recv_bytes(loader, wire::kDocCount, MPI_COMM_WORLD, w.config.run.timeout,
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
  lengths_.resize(n);
  images_.resize(n);
  owner_.resize(n);
  learned_.resize(n);
  logged_.assign(n, 0);
  perm_epoch_.assign(n, -1);
  perm_.resize(n);
  inverse_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    lengths_[i].assign(size_t(docs[i]), -1);
    if (sources[i].format == config::SourceFormat::webdataset)
      images_[i].assign(size_t(docs[i]), 0);
    owner_[i].assign(size_t(docs[i]), -1);
    // Who serves it, so that a drill (faults.inject) can aim at a loader that is asked.
    std::string served;
    if (local_.empty()) {
      const int first = w.layout.first_rank(Role::loader), L = w.layout.loaders;
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
  // An HDP rank is a TP group, or a pipeline of them (plan/pipeline.hpp).
  const plan::RunCosts costs = plan::run_costs(w.config);
  plan_cost_ = costs.hdp_rank;
  pipe_model_ = costs.pipeline;
  // The HDP ranks' nodes, from the trainers' host names: rings inside a node
  // use plan.intra_bandwidth and the planner keeps rings inside nodes. One
  // host: one node, every ring on plan.intra_bandwidth (plan.bandwidth unless set).
  const TrainerNodes nodes = trainer_nodes(w.mesh, w.layout.first_rank(Role::trainer), w.hosts);
  plan_cost_.set_nodes(nodes.hdp_rank_node);  // (the job logs the nodes: parallel/nodes.hpp)
  if (!costs.calibration.empty())
    LOG_INFO("cost model calibrated from %s: %s", w.config.plan.calibration.c_str(),
             costs.calibration.c_str());
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
      const int first_loader = w_.layout.first_rank(Role::loader), rank = first_loader + l;
      const ShadowPlan& shadows = router_->shadows();
      wire::Assign m;
      for (int s : a.sources_of_loader[l]) m.sources.push_back(s);
      if (w_.config.data.shadows && w_.layout.loaders > 1) {
        std::set<int32_t> standby;
        for (int r : shadows.shadowed_by(rank))
          for (int s : a.sources_of_loader[size_t(r - first_loader)]) standby.insert(s);
        m.shadow_sources.assign(standby.begin(), standby.end());
        m.shadow = shadows.shadow.at(rank);
      }
      send_bytes(wire::encode(m), rank, wire::kAssign, MPI_COMM_WORLD);
    }
}

void Lead::maybe_reassign() {
  const int64_t every = w_.config.data.rebalance_every;
  if (w_.config.data.mode == config::DataMode::colocated || every <= 0 || next_step_ == 0 ||
      next_step_ % every != 0)
    return;
  send_assignment();
}

int64_t Lead::length(int source, int64_t doc) {
  int64_t& known = lengths_[size_t(source)][size_t(doc)];
  if (known < 0) fetch_lengths(source, doc);
  return known;
}

// Asks for the length of `doc` and of the documents that follow it in its
// source's current epoch order (the ones the data plane will ask about next).
void Lead::fetch_lengths(int source, int64_t doc) {
  const size_t s = size_t(source);
  if (!local_.empty()) {
    lengths_[s][size_t(doc)] = local_[s]->length(doc);
    if (!images_[s].empty()) images_[s][size_t(doc)] = local_[s]->image_positions(doc);
    learned_[s].push_back(doc);
    return;
  }
  const int64_t epoch = plane_ ? plane_->streams()[s].state().epoch : 0;
  const int64_t n = int64_t(lengths_[s].size());
  if (perm_epoch_[s] != epoch) {
    perm_[s] = dataplane::permutation(uint64_t(w_.config.run.seed), source, epoch, n);
    inverse_[s].assign(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) inverse_[s][size_t(perm_[s][size_t(i)])] = i;
    perm_epoch_[s] = epoch;
  }
  // The batch holding `doc`, and as many following batches as the source has
  // loaders, each to its own loader: they tokenize in parallel.
  const int64_t pos = inverse_[s][size_t(doc)];
  const auto& loaders = assignment_.loaders_of_source[s];
  std::vector<int> targets;
  std::vector<std::string> payloads;
  std::vector<std::vector<int64_t>> asked;
  for (size_t j = 0; j < loaders.size(); ++j) {
    wire::LengthRequest req;
    req.step = next_step_;
    req.source = source;
    const int64_t from = pos + int64_t(j) * kLengthBatch;
    for (int64_t p = from; p < n && p < from + kLengthBatch; ++p) {
      const int64_t d = perm_[s][size_t(p)];
      if (lengths_[s][size_t(d)] < 0) req.docs.push_back(d);
    }
    if (req.docs.empty()) continue;
    // Batches of positions are dealt round-robin over the source's loaders.
    const int loader = loaders[size_t((pos / kLengthBatch + int64_t(j)) % int64_t(loaders.size()))];
    targets.push_back(w_.layout.first_rank(Role::loader) + loader);
    payloads.push_back(wire::encode(req));
  }
  std::vector<int> served;
  std::vector<std::string> replies = router_->request_many(
      targets, payloads, wire::kLengthReq, wire::kLengthRep, "a length request", &served);
  for (size_t j = 0; j < replies.size(); ++j) {
    wire::LengthReply rep = wire::decode_length_reply(replies[j], served[j]);
    ML_CHECK(
        rep.docs.size() == rep.lengths.size() &&
            (rep.images.empty() || (!images_[s].empty() && rep.images.size() == rep.docs.size())),
        strf("the length reply from rank %d has %zu documents, %zu lengths and %zu image "
             "counts for source %d (%s)",
             served[j], rep.docs.size(), rep.lengths.size(), rep.images.size(), source,
             images_[s].empty() ? "text" : "image-text"));
    for (size_t i = 0; i < rep.docs.size(); ++i) {
      ML_CHECK(rep.docs[i] >= 0 && size_t(rep.docs[i]) < lengths_[s].size(),
               strf("the length reply from rank %d names document %lld of source %d, which has "
                    "%zu",
                    served[j], (long long)rep.docs[i], source, lengths_[s].size()));
      if (lengths_[s][size_t(rep.docs[i])] < 0) learned_[s].push_back(rep.docs[i]);
      lengths_[s][size_t(rep.docs[i])] = rep.lengths[i];
      if (!rep.images.empty()) images_[s][size_t(rep.docs[i])] = rep.images[i];
      owner_[s][size_t(rep.docs[i])] = served[j];
    }
    if (rep.seconds_per_token > 0) cost_[s] = rep.seconds_per_token;
  }
}

// Placement: the configured planner (HDP by default) turns the step's sample
// lengths into a plan; each trainer's micro-batches become segment lists. A
// CP micro-batch carries its ring (trainer indices in order) and this
// member's place; every member holds its zigzag chunks (front, then back).
wire::StepWork Lead::place(const dataplane::StepManifest& m, bool last) {
  wire::StepWork work;
  work.step = m.step;
  work.last = last;
  std::vector<int64_t> lengths;
  for (const auto& p : m.samples) {
    wire::Sample s;
    s.source = p.source;
    s.owner = local_.empty() ? owner_[size_t(p.source)][size_t(p.doc)] : -1;
    s.epoch = p.epoch;
    s.doc = p.doc;
    s.offset = p.offset;
    s.length = p.length;
    work.samples.push_back(s);
    const std::vector<int64_t>& images = images_[size_t(p.source)];
    work.global_predictions +=
        predictions(p.offset, p.length, images.empty() ? 0 : images[size_t(p.doc)]);
    lengths.push_back(p.length);
  }
  const int T = w_.mesh.hdp_ranks();  // the planner's "trainers" are HDP ranks
  plan::PlannerOptions options =
      plan::options_from_config(w_.config.plan, T, w_.config.data.seq_len);
  last_plan_ = plan::make_step_plan(w_.config.plan, lengths, options, plan_cost_, pipe_model_);
  prefer_cached_groups();
  // Which CP attention the split sequences got, once, when it is not all rings.
  if (!cp_logged_ && w_.config.plan.cp_algorithm != config::CpAlgorithm::ring &&
      plan::plan_stats(last_plan_).split_sequences > 0) {
    LOG_INFO("step %lld: CP attention of the split sequences (plan.cp_algorithm %s): %s",
             (long long)m.step, config::enum_name(w_.config.plan.cp_algorithm),
             plan::format_cp_counts(plan::cp_counts(last_plan_)).c_str());
    cp_logged_ = true;
  }
  // Where the rings went, once, on several nodes (the planner keeps them inside nodes).
  if (!rings_logged_ && plan_cost_.places_by_node()) {
    const plan::RingNodes rings = plan::ring_nodes(last_plan_, plan_cost_);
    if (rings.rings > 0) {
      LOG_INFO("step %lld: %s", (long long)m.step, plan::format_ring_nodes(rings).c_str());
      rings_logged_ = true;
    }
  }
  ML_DCHECK(last_plan_.validate().empty(), last_plan_.validate());
  work.capacity = last_plan_.capacity;
  // Pipelines run 1F1B over slots, a ring at the same slot in each member.
  plan::PipelineSlots slots;
  if (w_.mesh.pp > 1) slots = plan::pipeline_slots(last_plan_);
  work.groups = step_groups(last_plan_);
  group_history_.prepare(distinct_member_sets(work.groups));  // as every trainer's cache does
  work.trainers.resize(size_t(T));
  for (int t = 0; t < T; ++t) {
    wire::TrainerWork& tw = work.trainers[size_t(t)];
    tw.trainer = t;
    const size_t count = last_plan_.micro_batches_of(t).size();
    for (size_t i = 0; i < count; ++i) {
      wire::MicroBatchWork mbw;
      if (w_.mesh.pp > 1) mbw.slot = slots.slot[size_t(last_plan_.trainer_begin[size_t(t)]) + i];
      for (const plan::PieceLayout& pl : last_plan_.layout(t, i)) {
        for (const plan::Span& span : {pl.chunks.front, pl.chunks.back})
          if (span.size() > 0) mbw.segments.push_back({pl.seq, span.begin, span.size()});
        mbw.offload = std::max(mbw.offload, last_plan_.offload_ratio(pl.seq));
        if (pl.k > 1) {
          auto g = last_plan_.group(pl.seq);
          mbw.group.assign(g.begin(), g.end());
          mbw.member = pl.member;
          mbw.ulysses = last_plan_.cp_algo(pl.seq).u;
        }
      }
      tw.micro.push_back(std::move(mbw));
    }
  }
  return work;
}

// Relabels the plan's HDP ranks, within nodes, so that its CP groups fall
// on member sets the trainers have cached (free: plan/cache_relabel.hpp).
void Lead::prefer_cached_groups() {
  std::vector<MemberSet> cached = group_history_.sets();
  if (cached.empty()) return;
  std::reverse(cached.begin(), cached.end());  // most recent first
  const std::vector<int32_t> new_rank =
      plan::cache_relabeling(last_plan_, cached, plan_cost_.nodes());
  for (size_t r = 0; r < new_rank.size(); ++r)
    if (new_rank[r] != int32_t(r)) {
      last_plan_ = plan::relabel_ranks(last_plan_, new_rank);
      return;
    }
}

int64_t Lead::steps_completed() const {
  int64_t c = 0;
  while (c < int64_t(ack_count_.size()) && ack_count_[size_t(c)] == w_.layout.trainers) ++c;
  return first_step_ + c;
}

void Lead::dispatch_step(bool last) {
  // Flow control: at most `prefetch` steps ahead of the slowest trainer.
  const int64_t prefetch = w_.config.data.prefetch;
  while (next_step_ - steps_completed() > prefetch) receive_ack();
  trim_.maybe();  // what the steps packed so far (patches, echoes) has been freed
  const auto busy = std::chrono::steady_clock::now();  // from here on, the lead's own work
  maybe_reassign();
  dataplane::StepManifest m = plane_->next();
  if (plane_->long_lane_empty() && !warned_long_) {
    warned_long_ = true;
    int64_t longest = 0;
    for (const auto& source : lengths_)
      for (int64_t n : source) longest = std::max(longest, n);
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
  const bool pipelines = w_.mesh.pp > 1;
  std::vector<double> per_rank;
  if (pipelines) per_rank = plan::pipeline_times(last_plan_, pipe_model_, plan_cost_);
  std::vector<double> predicted;
  for (int t = 0; t < w_.layout.trainers; ++t) {
    const int rank = w_.mesh.hdp_rank_of(t);
    predicted.push_back(pipelines ? per_rank[size_t(rank)] : last_plan_.trainer_time(rank));
  }
  predicted_.push_back(std::move(predicted));
  planners_.push_back(last_plan_.planner);
  const int64_t every = w_.config.checkpoint.every;
  // Also after the run's last step: a finished run requeued then has nothing to redo.
  if (every > 0 && ((m.step + 1) % every == 0 || m.step + 1 == w_.config.run.steps)) {
    work.checkpoint = true;
    work.ckpt_data = checkpoint_data();
  }
  acks_.emplace_back();
  ack_count_.push_back(0);
  const int K = w_.layout.constructors;
  if (!local_.empty()) {
    // Colocated: every trainer gets its own work and loads it itself (the
    // trainers of an HDP rank the same work).
    for (const auto& t : work.trainers) {
      wire::StepWork mine = work;
      mine.samples = wire::samples_for(work.samples, t);
      mine.trainers = {t};
      const std::string bytes = wire::encode(mine);
      for (int j = 0; j < w_.mesh.group_size(); ++j)
        in_flight_.emplace_back(
            bytes, w_.layout.first_rank(Role::trainer) + w_.mesh.trainer_at(t.trainer, j),
            wire::kStepWork, MPI_COMM_WORLD);
    }
  } else {
    std::vector<wire::StepWork> per(static_cast<size_t>(K));
    for (int c = 0; c < K; ++c) {
      per[size_t(c)] = work;
      per[size_t(c)].trainers.clear();
    }
    for (const auto& t : work.trainers) per[size_t(t.trainer % K)].trainers.push_back(t);
    for (int c = 1; c < K; ++c) {
      // Only the samples its trainers touch: a step costs O(samples) on the
      // wire, not O(constructors x samples).
      per[size_t(c)].samples = wire::samples_for(work.samples, per[size_t(c)].trainers);
      in_flight_.emplace_back(wire::encode(per[size_t(c)]), c, wire::kStepWork, MPI_COMM_WORLD);
    }
    own_constructor_->construct(per[0]);
  }
  std::vector<PendingSend> still;
  for (auto& s : in_flight_)
    if (!s.done()) still.push_back(std::move(s));
  in_flight_ = std::move(still);
  ++next_step_;
  busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - busy).count();
}

void Lead::receive_ack() {
  // Named in the message if the wait times out: who the oldest open step lacks.
  auto what = [this] {
    std::string text = "a trainer's acknowledgement";
    const size_t i = size_t(steps_completed() - first_step_);
    if (i >= ack_count_.size()) return text;
    std::vector<bool> got(size_t(w_.layout.trainers), false);
    for (const wire::Ack& a : acks_[i]) got[size_t(a.trainer)] = true;
    std::string missing;
    for (int t = 0; t < w_.layout.trainers; ++t)
      if (!got[size_t(t)])
        missing += strf("%strainer %d = rank %d", missing.empty() ? "" : ", ", t,
                        w_.layout.first_rank(Role::trainer) + t);
    return text + strf(" (step %lld still waits for %s)", (long long)(first_step_ + int64_t(i)),
                       missing.c_str());
  };
  int from = -1;
  std::string msg =
      recv_bytes(MPI_ANY_SOURCE, wire::kAck, MPI_COMM_WORLD, w_.config.run.timeout, what, &from);
  wire::Ack ack = wire::decode_ack(msg, from);
  const int64_t i = ack.step - first_step_;
  ML_CHECK(i >= 0 && i < int64_t(acks_.size()), "ack for an unknown step");
  ++ack_count_[size_t(i)];
  acks_[size_t(i)].push_back(std::move(ack));
}

void Lead::drain_acks() {
  while (steps_completed() < first_step_ + int64_t(ack_count_.size())) receive_ack();
}

std::vector<wire::Ack> Lead::take_acks(int64_t step) {
  return std::move(acks_.at(size_t(step - first_step_)));
}

std::vector<wire::Report> Lead::stop() {
  drain_acks();
  in_flight_.clear();
  if (own_constructor_) own_constructor_->drain();
  // Constructors first: once they are done, nobody asks loaders anything.
  std::vector<wire::Report> reports;
  for (int r = 1; r < w_.size; ++r)
    if (w_.layout.role_of(r) == Role::constructor)
      send_bytes(std::string(1, '\0'), r, wire::kStop, MPI_COMM_WORLD);
  // Trainers stop after their last batch; constructors after Stop.
  for (int r = 1; r < w_.size; ++r)
    if (w_.layout.role_of(r) != Role::loader)
      reports.push_back(wire::decode_report(
          recv_bytes(r, wire::kReport, MPI_COMM_WORLD, w_.config.run.timeout, "a final report"),
          r));
  // Loaders: a dead one never answers; a hung one still obeys Stop.
  for (int l = 0; l < w_.layout.loaders; ++l) {
    const int r = w_.layout.first_rank(Role::loader) + l;
    std::string reply;
    if (router_->try_request(r, wire::kStop, std::string(1, '\0'), wire::kReport, &reply))
      reports.push_back(wire::decode_report(reply, r));
    else
      LOG_WARN("loader rank %d did not answer Stop: its process is gone", r);
  }
  wire::Report mine;
  mine.role = int(Role::constructor);
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
    const Role role = w_.layout.role_of(int(f.rank));
    LOG_WARN("faults.inject: the %s on rank %lld from step %lld never fired: %s",
             config::enum_name(f.kind), (long long)f.rank, (long long)f.step,
             role == Role::loader
                 ? "that loader was asked nothing from then on (the source lines at start name who "
                   "serves what; data.rebalance_every: 0 keeps it fixed)"
             : role == Role::trainer
                 ? "the run ended before that step (`meshloom data` runs no trainer faults)"
                 : "faults act on loaders and trainers, and this rank is a constructor");
  }
}

}  // namespace meshloom
