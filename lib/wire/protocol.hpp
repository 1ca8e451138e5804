// The messages between roles, and their binary encoding.
//
//   lead (rank 0) --Assign-->      loader     --DocCount-->   lead
//   lead          --LengthReq-->   loader     --LengthRep-->  lead
//   lead          --StepWork-->    constructor
//   constructor   --TokenReq-->    loader     --TokenRep-->   constructor
//   constructor   --Batch-->       trainer    --Ack-->        lead
//   trainer       --Echo-->        lead        (data runs: what arrived, for checks and dumps)
//   lead          --Stop-->        loaders, constructors; they answer with a Report
//
// All messages are point-to-point on MPI_COMM_WORLD: after start-up no
// collective includes a loader, so a dead loader cannot block the others.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace meshloom::wire {

enum Tag : int {
  kAssign = 100,
  kDocCount,
  kLengthReq,
  kLengthRep,
  kTokenReq,
  kTokenRep,
  kStepWork,
  kBatch,
  kAck,
  kEcho,
  kStop,
  kReport,
  kMirror,  // loader -> its shadow: the documents it prepared (a delta of its state)
};

// Loader assignment: which sources a loader serves.
struct Assign {
  std::vector<int32_t> sources;
  std::vector<int32_t> shadow_sources;  // of the loaders this one shadows (hot standby)
  int32_t shadow = -1;                  // world rank of this loader's own shadow
};

// Also the mirror message (kMirror): the same documents, for the shadow.
struct LengthRequest {
  int64_t step = 0;  // the step being chosen (fault injection keys on it)
  int32_t source = 0;
  std::vector<int64_t> docs;
};
struct LengthReply {
  int32_t source = 0;
  std::vector<int64_t> docs, lengths;
  // Image-text sources: each document's image positions (its leading
  // patches, which predict nothing); empty for text sources.
  std::vector<int64_t> images;
  double seconds_per_token = 0;
};

// Tokens [offset, offset + length) of a document. The reply: the tokens of
// every range, then the patches of their image positions (token
// model::kImagePosition), data.image's patch_dim floats each, in order, as
// 8-bit pixels (wire/patch_wire.hpp; so are a Batch's).
struct TokenRange {
  int32_t source = 0;
  int64_t doc = 0, offset = 0, length = 0;
};

// One sample of a step's manifest, with the loader that serves it.
struct Sample {
  int32_t source = 0;
  int32_t owner = -1;  // loader world rank; -1 in colocated mode; kInline
  int64_t epoch = 0, doc = 0, offset = 0, length = 0;
};
// A sample whose tokens travel with the work (StepWork::inline_tokens[doc],
// from offset): a prompt the lead made (passkey retrieval), not a loader's.
inline constexpr int32_t kInline = -2;

// A run of tokens [begin, begin + length) of sample `sample`.
struct Segment {
  int32_t sample = 0;
  int64_t begin = 0, length = 0;
};

// A micro-batch: its segments, and for a CP ring the group (HDP ranks in ring
// order) and this member's place in it. One member: no ring.
struct MicroBatchWork {
  std::vector<Segment> segments;
  std::vector<int32_t> group;
  int32_t member = 0;
  float offload = 0;  // the plan's offload ratio (largest of its sequences)
  // Its place in the pipeline's 1F1B order (parallel.pp > 1): a ring has
  // the same slot in every member pipeline (plan/pipeline/pipeline_slots.hpp).
  int32_t slot = 0;
  // A CP group's attention: its Ulysses degree u (plan/plan.hpp CpAlgo): 1
  // ring, the group size Ulysses, else Ulysses of u inside a ring.
  int32_t ulysses = 1;
};

// The work of one HDP rank: with parallel.tp > 1 every trainer of its TP
// group gets the same batch.
struct TrainerWork {
  int32_t trainer = 0;  // HDP rank (the trainer index when tp = 1)
  std::vector<MicroBatchWork> micro;
};

// What a constructor packs for one step: the step's samples and the work of
// the trainers it serves. In colocated mode each trainer gets its own, with
// the samples trimmed as in Batch.
struct StepWork {
  int64_t step = 0;
  bool last = false;
  int64_t global_predictions = 0;  // sum over samples of (length - 1 - image positions)
  int64_t capacity = 0;            // the plan's tokens per trainer (ring block sizes)
  std::vector<Sample> samples;
  std::vector<std::vector<int32_t>> groups;  // as Batch::groups
  std::vector<TrainerWork> trainers;
  bool checkpoint = false;  // trainers checkpoint after this step
  std::string ckpt_data;    // the lead's data state for it (goes to trainer 0)
  // Evaluation after this step (eval.every): the held-out set's batches,
  // planned like steps (their own samples, groups and trainers; `step` is
  // this step's), none nested deeper.
  std::vector<StepWork> eval;
  // The tokens of kInline samples (indexed by Sample::doc), and per sample
  // the first position whose prediction is scored apart (Ack's
  // EvalResult::sample_scores; -1 none); both empty for a step's own data.
  std::vector<std::vector<int32_t>> inline_tokens;
  std::vector<int64_t> scored_from;
};

// One packed micro-batch as a trainer receives it.
struct MicroBatch {
  std::vector<int32_t> tokens;     // -1 (model::kImagePosition): an image patch
  std::vector<int32_t> targets;    // next token in the sample, -1 at its end and at images
  std::vector<int32_t> positions;  // position inside the sample
  std::vector<Segment> segments;   // where each run of tokens comes from
  std::vector<float> patches;      // patch_dim floats per image position, in order
  std::vector<int32_t> group;      // CP ring (trainer indices); empty or one: none
  int32_t member = 0;
  float offload = 0;    // share of the layers' activations kept in host memory (CUDA)
  int32_t slot = 0;     // as MicroBatchWork::slot
  int32_t ulysses = 1;  // as MicroBatchWork::ulysses
};

struct Batch {
  int64_t step = 0;
  bool last = false;
  int64_t global_predictions = 0;
  int64_t capacity = 0;  // the plan's tokens per trainer
  // The step's manifest, indexed by Segment::sample: whole for trainer 0
  // (it writes step dumps), only the samples its segments touch for the others
  // (the rest are default, length 0), so that a step's batches cost
  // O(samples) on the wire and not O(trainers x samples).
  std::vector<Sample> samples;
  // Every CP group of the step (HDP ranks, ring order), each member set
  // once, in plan order: every trainer prepares the same group
  // communicators from it (comm/group_comms.hpp), members or not.
  std::vector<std::vector<int32_t>> groups;
  std::vector<MicroBatch> micro;
  bool checkpoint = false;
  std::string ckpt_data;  // trainer 0 only
  // Held-out batches to evaluate after the step (StepWork::eval), forward only.
  std::vector<Batch> eval;
  std::vector<int64_t> scored_from;  // as StepWork::scored_from
};

// What a trainer measured evaluating a step's held-out batches (Ack::eval):
// sums where it reports (one trainer per HDP rank), as Ack's own.
struct EvalResult {
  int32_t batches = 0;  // held-out batches evaluated (0: no evaluation after this step)
  int64_t tokens = 0, predictions = 0;
  double loss_sum = 0;
  double flops = 0;                 // forward FLOPs of this trainer's share
  double seconds = 0;               // wall time of the evaluation on this trainer
  std::vector<double> source_loss;  // per source, as Ack::source_loss
  std::vector<int64_t> source_predictions;
  // Per loss-by-position bucket (dataplane/eval_set.hpp position_edges).
  std::vector<double> position_loss;
  std::vector<int64_t> position_predictions;
  // Per sample of the batch (StepWork::scored_from): the sum of -log p of
  // its scored predictions, this trainer's share (empty: none scored).
  std::vector<double> sample_scores;
};

// A trainer's answer for one step: what it measured, and in data runs the
// batch it received (echo), so rank 0 can check and dump it.
struct Ack {
  int64_t step = 0;
  int32_t trainer = 0;
  double loss_sum = 0;  // sum of -log p over this trainer's predictions
  int64_t predictions = 0;
  int64_t tokens = 0;
  double flops = 0;            // model FLOPs of this trainer's step
  double step_seconds = 0;     // wall time of the step on this trainer
  double wait_seconds = 0;     // of which waiting for data
  double compute_seconds = 0;  // forward + backward
  double grad_norm = 0;        // global, before clipping (same on every trainer)
  double peak_flops = 0;       // this trainer's measured sgemm FLOP/s
  std::string echo;            // encoded Batch, or empty
  std::string note;            // a line for rank 0 to log (e.g. a checkpoint written)
  // Per micro-batch, 4 numbers: tokens held, sum over its sequences of L^2/k
  // (its share of attention work), the ring size k, seconds (forward + backward):
  // what the planner's cost model predicts, measured (plan --calibrate fits it).
  std::vector<double> micro;
  // The step's group communicators on this trainer (MpiGroupComms::prepare):
  // member sets found in the cache, split, and the seconds splitting took.
  int64_t group_hits = 0, group_misses = 0;
  double group_split_seconds = 0;
  // The CUDA backend's NCCL communicators of those groups: the device memory
  // they hold after the step's splits, and how many it evicted.
  int64_t group_device_bytes = 0, group_device_evictions = 0;
  // Per source (index in data.sources): Σ −log p and predictions of this
  // trainer's tokens; empty when its backend gives no per-token losses.
  std::vector<double> source_loss;
  std::vector<int64_t> source_predictions;
  EvalResult eval;  // the held-out evaluation after the step, if any
};
constexpr size_t kMicroColumns = 4;  // numbers per micro-batch in Ack::micro

struct Report {
  int32_t rank = 0;
  int32_t role = 0;
  int64_t peak_rss_kib = 0;
  int64_t pss_kib = 0;  // proportional set size at the end (shared pages counted once overall)
  int64_t worker_pss_kib = 0;  // of that, the data worker processes (colocated trainers)
  double busy_seconds = 0;
  int64_t tokens = 0;
  int32_t faults_fired = 0;  // faults.inject entries of this rank that fired
  // Loaders: image decoding over their sources (DocSource::decode_stats).
  int64_t decodes = 0, decoded_docs = 0, decodes_at_read = 0;
  double decode_seconds = 0;
  // Loaders: the token replies sent (tokens and patches), and their bytes.
  int64_t replies = 0, reply_bytes = 0;
  // Trainers: checkpoints saved; the state's bytes this rank wrote into them;
  // seconds training stood still for them; seconds from each save's start to
  // its file complete (trainer 0); the peak RSS before the first save began.
  int32_t checkpoints = 0;
  int64_t checkpoint_bytes = 0;
  double checkpoint_stall_seconds = 0, checkpoint_save_seconds = 0;
  int64_t peak_rss_before_checkpoints_kib = 0;
};

// `all` with only the samples `work`'s segments touch kept (the others
// default, length 0); trainer 0 keeps all of them.
std::vector<Sample> samples_for(const std::vector<Sample>& all, const TrainerWork& work);
// The same for the trainers a constructor serves: what any of them touches
// (all of it when trainer 0 is among them).
std::vector<Sample> samples_for(const std::vector<Sample>& all,
                                std::span<const TrainerWork> trainers);

// `work` (and its held-out parts) for the trainers `keep` selects, with
// only the samples they touch (samples_for).
StepWork work_for(const StepWork& work, const std::function<bool(int32_t trainer)>& keep);

std::string encode(const Assign& m);
std::string encode(const LengthRequest& m);
std::string encode(const LengthReply& m);
// Token requests carry the step they are for.
struct TokenRequest {
  int64_t step = 0;
  std::vector<TokenRange> ranges;
};

std::string encode(const TokenRequest& m);
std::string encode(const StepWork& m);
std::string encode(const Batch& m);
std::string encode(const Report& m);
std::string encode(const Ack& m);

// Decoders trust nothing: a truncated or corrupt message (a count its bytes
// cannot hold, a sample index outside the list, bytes left over) throws
// meshloom::Error naming the message, the peer rank `from` (-1: unknown, not
// named) and the byte offset; nothing is allocated beyond what the message's
// own bytes can describe (a sparse sample list: at most kMaxSamples).
inline constexpr uint64_t kMaxSamples = uint64_t(1) << 20;

Assign decode_assign(const std::string& b, int from = -1);
LengthRequest decode_length_request(const std::string& b, int from = -1);
LengthReply decode_length_reply(const std::string& b, int from = -1);
TokenRequest decode_token_request(const std::string& b, int from = -1);
StepWork decode_step_work(const std::string& b, int from = -1);
Batch decode_batch(const std::string& b, int from = -1);
Report decode_report(const std::string& b, int from = -1);
Ack decode_ack(const std::string& b, int from = -1);

}  // namespace meshloom::wire
