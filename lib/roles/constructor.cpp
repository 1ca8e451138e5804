#include "roles/constructor.hpp"

#include <algorithm>
#include <map>

#include "base/bytes.hpp"
#include "base/clock.hpp"
#include "base/strings.hpp"
#include "model/batch.hpp"
#include "roles/report.hpp"
#include "wire/patch_wire.hpp"

namespace meshloom::roles {

namespace {

// A sample's piece as a loader serves it: its tokens, and a patch for each of
// its image positions (model::kImagePosition), which lead it.
struct SampleData {
  std::vector<int32_t> tokens;
  std::vector<float> patches;
};

size_t image_positions(const std::vector<int32_t>& tokens) {
  return size_t(std::count(tokens.begin(), tokens.end(), model::kImagePosition));
}

// Splits a token reply (wire/protocol.hpp, TokenRange) into the samples asked.
void split_token_reply(const std::string& msg, int served, const wire::StepWork& work,
                       const std::vector<int32_t>& idxs, size_t patch_dim,
                       std::map<int32_t, SampleData>* data) {
  ByteReader r(msg, "token reply", served);
  const std::vector<int32_t> tokens = r.get_vector<int32_t>();
  const std::vector<float> patches = wire::get_patches(r);
  size_t at = 0, patch_at = 0;
  for (int32_t idx : idxs) {
    const int64_t n = work.samples[size_t(idx)].length;
    if (n < 0 || at + size_t(n) > tokens.size()) r.fail_corrupt("fewer tokens than asked");
    SampleData& d = (*data)[idx];
    d.tokens.assign(tokens.begin() + int64_t(at), tokens.begin() + int64_t(at) + n);
    at += size_t(n);
    const size_t floats = image_positions(d.tokens) * patch_dim;
    if (patch_at + floats > patches.size()) r.fail_corrupt("fewer patches than image positions");
    d.patches.assign(patches.begin() + int64_t(patch_at),
                     patches.begin() + int64_t(patch_at + floats));
    patch_at += floats;
  }
  if (at != tokens.size()) r.fail_corrupt("more tokens than asked");
  if (patch_at != patches.size()) r.fail_corrupt("more patches than image positions");
  if (!r.done()) r.fail_corrupt("bytes after the patches");
}

// The whole piece of every sample that `trainers` touch.
std::map<int32_t, SampleData> fetch_samples(const config::Config& config,
                                            const wire::StepWork& work,
                                            std::vector<std::unique_ptr<sources::DocSource>>* local,
                                            LoaderRouter* router) {
  std::map<int32_t, SampleData> data;
  std::map<int32_t, std::vector<int32_t>> by_owner;  // owner rank -> sample indices
  for (const auto& t : work.trainers)
    for (const auto& mb : t.micro)
      for (const auto& seg : mb.segments) data[seg.sample];
  for (auto& [idx, d] : data) {
    const wire::Sample& s = work.samples[size_t(idx)];
    if (s.owner == wire::kInline) {  // a prompt of the lead's: its tokens came with the work
      const std::vector<int32_t>& t = work.inline_tokens.at(size_t(s.doc));
      ML_CHECK(s.offset >= 0 && s.offset + s.length <= int64_t(t.size()),
               strf("step %lld: inline sample %d outside its %zu tokens", (long long)work.step, idx,
                    t.size()));
      d.tokens.assign(t.begin() + s.offset, t.begin() + s.offset + s.length);
    } else if (local) {
      auto& src = (*local)[size_t(s.source)];
      if (!src) src = sources::open_doc_source(config, size_t(s.source));
      src->read(s.doc, s.offset, s.length, &d.tokens);
      src->read_patches(s.doc, s.offset, s.length, &d.patches);
    } else {
      by_owner[s.owner].push_back(idx);
    }
  }
  for (auto& [owner, idxs] : by_owner) {
    wire::TokenRequest req;
    req.step = work.step;
    for (int32_t idx : idxs) {
      const wire::Sample& s = work.samples[size_t(idx)];
      req.ranges.push_back({s.source, s.doc, s.offset, s.length});
    }
    int served = owner;
    std::string msg = router->request(owner, wire::kTokenReq, wire::encode(req), wire::kTokenRep,
                                      "a token request", &served);
    split_token_reply(msg, served, work, idxs, size_t(config::patch_dim(config)), &data);
  }
  return data;
}

// A segment's tokens into the micro-batch: each predicts the next token of
// its sample, except the piece's last and image positions, which predict
// nothing; an image position brings its patch. Images lead their sample, so
// the k-th image position holds the k-th patch.
void append_segment(const SampleData& d, const wire::Segment& seg, size_t patch_dim,
                    wire::MicroBatch* mb) {
  const std::vector<int32_t>& s = d.tokens;
  for (int64_t p = seg.begin; p < seg.begin + seg.length; ++p) {
    const int32_t token = s[size_t(p)];
    const bool image = token == model::kImagePosition;
    mb->tokens.push_back(token);
    mb->targets.push_back(!image && p + 1 < int64_t(s.size()) ? s[size_t(p) + 1] : -1);
    mb->positions.push_back(int32_t(p));
    if (image)
      mb->patches.insert(mb->patches.end(), d.patches.begin() + p * int64_t(patch_dim),
                         d.patches.begin() + (p + 1) * int64_t(patch_dim));
  }
  mb->segments.push_back(seg);
}

wire::Batch pack(const wire::StepWork& work, const wire::TrainerWork& t,
                 const std::map<int32_t, SampleData>& data, size_t patch_dim) {
  wire::Batch b;
  b.step = work.step;
  b.last = work.last;
  b.global_predictions = work.global_predictions;
  b.capacity = work.capacity;
  b.samples = wire::samples_for(work.samples, t);
  b.groups = work.groups;
  b.checkpoint = work.checkpoint;
  if (t.trainer == 0) b.ckpt_data = work.ckpt_data;
  b.scored_from = work.scored_from;
  for (const auto& mbw : t.micro) {
    wire::MicroBatch mb;
    for (const auto& seg : mbw.segments) append_segment(data.at(seg.sample), seg, patch_dim, &mb);
    mb.group = mbw.group;
    mb.member = mbw.member;
    mb.offload = mbw.offload;
    mb.slot = mbw.slot;
    mb.ulysses = mbw.ulysses;
    b.micro.push_back(std::move(mb));
  }
  return b;
}

// The held-out parts' tokens, one map per part.
using PartData = std::vector<std::map<int32_t, SampleData>>;
PartData fetch_eval_samples(const config::Config& config, const wire::StepWork& work,
                            std::vector<std::unique_ptr<sources::DocSource>>* local,
                            LoaderRouter* router) {
  PartData data;
  for (const wire::StepWork& e : work.eval) data.push_back(fetch_samples(config, e, local, router));
  return data;
}

// Trainer t's batch of `work`, with its batches of the held-out parts.
wire::Batch pack_with_eval(const wire::StepWork& work, const wire::TrainerWork& t,
                           const std::map<int32_t, SampleData>& data, const PartData& eval_data,
                           size_t patch_dim) {
  wire::Batch b = pack(work, t, data, patch_dim);
  for (size_t i = 0; i < work.eval.size(); ++i) {
    const auto& trainers = work.eval[i].trainers;
    const auto mine =
        std::find_if(trainers.begin(), trainers.end(),
                     [&](const wire::TrainerWork& e) { return e.trainer == t.trainer; });
    ML_CHECK(mine != trainers.end(),
             strf("step %lld: held-out batch %zu has no work for trainer %d", (long long)work.step,
                  i, t.trainer));
    b.eval.push_back(pack(work.eval[i], *mine, eval_data[i], patch_dim));
  }
  return b;
}

}  // namespace

Constructor::Constructor(const parallel::World& w, LoaderRouter* router)
    : w_(w), own_router_(w), router_(router ? router : &own_router_) {}

wire::Batch local_batch(const config::Config& config, const wire::StepWork& work,
                        std::vector<std::unique_ptr<sources::DocSource>>* local) {
  ML_CHECK(work.trainers.size() == 1, "colocated step work is for one trainer");
  if (local->empty()) local->resize(config.data.sources.size());
  return pack_with_eval(work, work.trainers[0], fetch_samples(config, work, local, nullptr),
                        fetch_eval_samples(config, work, local, nullptr),
                        size_t(config::patch_dim(config)));
}

int64_t Constructor::construct(const wire::StepWork& work) {
  const auto data = fetch_samples(w_.config, work, nullptr, router_);
  const PartData eval_data = fetch_eval_samples(w_.config, work, nullptr, router_);
  int64_t packed = 0;
  const int first_trainer = w_.layout.first_rank(parallel::Role::trainer);
  const size_t patch_dim = size_t(config::patch_dim(w_.config));
  for (const auto& t : work.trainers) {
    wire::Batch b = pack_with_eval(work, t, data, eval_data, patch_dim);
    for (const auto& mb : b.micro) packed += int64_t(mb.tokens.size());
    for (const auto& e : b.eval)
      for (const auto& mb : e.micro) packed += int64_t(mb.tokens.size());
    // Packed once, sent to every trainer of the HDP rank (TP group, stages).
    const std::string bytes = wire::encode(b);
    for (int j = 0; j < w_.mesh.group_size(); ++j)
      in_flight_.emplace_back(bytes, first_trainer + w_.mesh.trainer_at(t.trainer, j), wire::kBatch,
                              MPI_COMM_WORLD);
  }
  // Keep the list short: completed sends are dropped.
  std::vector<comm::PendingSend> still;
  for (auto& s : in_flight_)
    if (!s.done()) still.push_back(std::move(s));
  in_flight_ = std::move(still);
  return packed;
}

void Constructor::drain() { in_flight_.clear(); }

void run_constructor(const parallel::World& w) {
  Constructor c(w);
  wire::Report report;
  report.role = int(parallel::Role::constructor);
  while (true) {
    int from = -1;
    int tag = -1;
    int idle = 0;
    while (!comm::poll_message(0, MPI_ANY_TAG, MPI_COMM_WORLD, &from, &tag)) comm::backoff(&idle);
    std::string msg = comm::recv_bytes(0, tag, MPI_COMM_WORLD, w.config.run.timeout, "step work");
    if (tag == wire::kStop) break;
    ML_CHECK(tag == wire::kStepWork, strf("constructor got tag %d", tag));
    const auto busy = Clock::now();
    report.tokens += c.construct(wire::decode_step_work(msg, 0));
    report.busy_seconds += seconds_since(busy);
  }
  c.drain();
  send_final_report(report);
}

}  // namespace meshloom::roles
