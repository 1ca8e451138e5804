// Plan: one training step laid out on the trainers, as rank 0 computes it
// (the lead then sends each constructor its part: roles/step_placer.cpp). Pure data
// plus the checks and the timing that go with it.
//
// For each sequence of the step: its CP group, an ordered list of k distinct
// trainer ranks (any k in 1..T). For each trainer: its micro-batches in
// execution order; a micro-batch is a list of pieces (sequence, member index),
// concatenated in that order, a document boundary between pieces. Every piece
// of one micro-batch belongs to sequences with the very same group, so a
// micro-batch is one ring: the members of the group run their copies of it
// together (k = 1: whole sequences, packed, no communication).
//
// Zigzag layout (the one non-obvious rule). Member c of a k-way group holds
// chunk c and chunk 2k-1-c of the sequence, so that each member's causal
// attention work is the same. Two rules fix the chunk sizes:
//   kBalanced (HDP): member c holds share_c = floor(L/k) tokens, one more for
//     c < L mod k; its front chunk (chunk c) has floor(share_c / 2) tokens,
//     its back chunk (chunk 2k-1-c) the rest. Chunks 0..k-1 tile the front of
//     the sequence in order, chunks k..2k-1 the back. A sequence shorter than
//     2k tokens gives empty front chunks to members with share 1; HDP never
//     makes k larger than L, so every member holds at least one token, and no
//     member holds more than ceil(L/k) <= C.
//   kPadded (static baseline, as Megatron-LM's THD CP): the sequence is padded
//     to a multiple of 2k and cut into 2k equal chunks of s = ceil(L/2k)
//     tokens; chunk j covers [j*s, (j+1)*s) clipped to L. Each member uses 2s
//     slots of memory and linear compute whatever it really holds; members of
//     a sequence shorter than 2k may hold no real token at all.
//
// Capacity: in every micro-batch, the sum over its pieces of
// slots x (2 + (1-r)(l-2)) / l is at most C, r being the piece's offload ratio
// and l the layer count (ByteScale eq. 3 with activations linear in tokens);
// without offloading (r = 0) that is the plain token count.
//
// CP algorithm. Each split sequence also names how its group runs
// attention: a ring (as above), Ulysses, or the hybrid of both, as a
// Ulysses degree u that divides k (cp_algo below). Member c belongs to
// subgroup c / u (members [j u, (j+1) u), consecutive in the group's order)
// at Ulysses rank c % u; the all-to-alls run inside subgroups, and a ring of
// r = k / u steps links member c to member (c + u) mod k. The chunk layout
// does not change: a subgroup's members hold zigzag chunks that together
// form subgroup j's front and back blocks of a 2r-way zigzag, so after the
// all-to-all each member holds its subgroup's tokens for heads / u heads
// and the ring across subgroups stays balanced. Sequences sharing a
// micro-batch share its algorithm. u must divide the query heads of a TP rank
// (Plan::heads).
//
// Order: the rings on each trainer must appear in one global order, or two
// trainers would each wait for the other; validate() checks that, and
// retime() fills in start and end of every micro-batch (a ring starts when the
// last of its members is ready) with a cost model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/cost/cost_model.hpp"

namespace meshloom::plan {

enum class ChunkRule : uint8_t { kBalanced = 0, kPadded = 1 };

// Token offsets [begin, end) inside one sequence.
struct Span {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Span&) const = default;
};

// What member `c` of a k-way group holds: chunk c (front) and chunk 2k-1-c (back).
struct MemberChunks {
  Span front;
  Span back;
  int64_t tokens() const { return front.size() + back.size(); }
};

MemberChunks member_chunks(int64_t length, int k, int member, ChunkRule rule);
// Memory and linear-compute slots of one member: ceil(L/k) (kBalanced, the
// largest member) or 2 * ceil(L / 2k) (kPadded, every member).
int64_t member_slots(int64_t length, int k, ChunkRule rule);
// Slots of member c exactly (kBalanced: its share).
int64_t member_slots(int64_t length, int k, int member, ChunkRule rule);

// How a split sequence's group runs attention; u is the Ulysses degree. The
// kind is plan.cp_algorithm's enum: a plan holds ring, ulysses or hybrid,
// never automatic (choose_cp_algorithms resolves it). Only u is serialized
// (io/plan_io.cpp); the kind follows from u and the group's size.
struct CpAlgo {
  config::CpAlgorithm kind = config::CpAlgorithm::ring;
  int32_t u = 1;  // 1: ring; k: Ulysses; else hybrid, Ulysses of u x ring of k / u
  bool operator==(const CpAlgo&) const = default;
};
// The algorithm of a k-way group at Ulysses degree u (u divides k).
CpAlgo cp_algo_of(int k, int u);
// "ring", "ulysses", or "hybrid(UxR)" (u, then the ring's k / u).
std::string cp_algo_name(const CpAlgo& algo, int k);

struct Piece {
  int32_t seq = 0;
  int32_t member = 0;
  bool operator==(const Piece&) const = default;
};

struct MicroBatch {
  int32_t piece_begin = 0;  // into Plan::pieces
  int32_t piece_end = 0;
  float start = 0;  // predicted seconds from the step's start
  float end = 0;
  bool operator==(const MicroBatch&) const = default;
};

// One edge of a CP ring: what `from` sends to `to` per layer in the forward
// pass (backward moves twice as much again: K/V plus dK/dV).
struct Transfer {
  int32_t seq = 0;  // first sequence of the ring's micro-batch
  int32_t from = 0;
  int32_t to = 0;
  int64_t bytes_per_layer = 0;
};

// What a trainer needs to build one piece of a micro-batch.
struct PieceLayout {
  int32_t seq = 0;
  int64_t length = 0;
  int32_t k = 1;
  int32_t member = 0;
  MemberChunks chunks;    // token offsets in the sequence (= position ids)
  int32_t prev_rank = 0;  // ring neighbours (itself when k = 1)
  int32_t next_rank = 0;
  float offload = 0;
};

struct Plan {
  // The planner's name (config::Planner's, or "pp-balance"): a label the plan
  // file and the JSON dump carry, so kept as text.
  std::string planner;
  int32_t trainers = 0;
  int64_t capacity = 0;
  ChunkRule rule = ChunkRule::kBalanced;
  int32_t static_cp = 0;  // the static grid's CP degree (0: not a static plan)
  int32_t layers = 1;     // for capacity with offloading and for ring volume
  double kv_bytes = 0;    // K/V bytes per token per layer
  double passes = 3;      // ring passes per layer (forward + backward)
  HeadShape heads;        // of one TP rank: Ulysses' degrees and volume
  double planning_seconds = 0;

  std::vector<int64_t> lengths;
  std::vector<int32_t> group_begin;  // sequences + 1 offsets into members
  std::vector<int32_t> members;
  std::vector<float> offload;          // per sequence ratio r; empty: none
  std::vector<CpAlgo> cp;              // per sequence; empty: every group a ring
  std::vector<int32_t> trainer_begin;  // trainers + 1 offsets into micro_batches
  std::vector<MicroBatch> micro_batches;
  std::vector<Piece> pieces;

  bool operator==(const Plan&) const = default;

  // HDP's static fallback (PlannerOptions::static_fallback): the hdp planner
  // returned the static grid's plan, as it was faster. Carried by the wire
  // format as planner "hdp" with static_cp > 0.
  bool static_fallback() const {
    return planner == config::enum_name(config::Planner::hdp) && static_cp > 0;
  }
  int32_t sequences() const { return int32_t(lengths.size()); }
  int group_size(int32_t seq) const { return group_begin[seq + 1] - group_begin[seq]; }
  std::span<const int32_t> group(int32_t seq) const {
    return {members.data() + group_begin[seq], size_t(group_size(seq))};
  }
  std::span<const MicroBatch> micro_batches_of(int32_t trainer) const {
    return {micro_batches.data() + trainer_begin[trainer],
            size_t(trainer_begin[trainer + 1] - trainer_begin[trainer])};
  }
  std::span<const Piece> pieces_of(const MicroBatch& mb) const {
    return {pieces.data() + mb.piece_begin, size_t(mb.piece_end - mb.piece_begin)};
  }
  float offload_ratio(int32_t seq) const { return offload.empty() ? 0.f : offload[seq]; }
  CpAlgo cp_algo(int32_t seq) const { return cp.empty() ? CpAlgo{} : cp[seq]; }
  MemberChunks chunks(const Piece& p) const {
    return member_chunks(lengths[p.seq], group_size(p.seq), p.member, rule);
  }
  // Slots a piece uses (tokens, padding included).
  int64_t slots(const Piece& p) const {
    return member_slots(lengths[p.seq], group_size(p.seq), p.member, rule);
  }
  // Tokens' worth of activation memory the piece keeps on the device.
  double resident_tokens(const Piece& p) const;
  // The pieces of micro-batch `index` of `trainer`, ready to build buffers.
  std::vector<PieceLayout> layout(int32_t trainer, size_t index) const;

  double trainer_time(int32_t t) const {
    auto mbs = micro_batches_of(t);
    return mbs.empty() ? 0.0 : double(mbs.back().end);
  }
  double makespan() const;
  double mean_time() const;
  double imbalance() const;  // makespan / mean trainer time (1 when all idle)

  // "" when every invariant holds, else the problems found (at most a few).
  std::string validate() const;
  // Recomputes start and end of every micro-batch with `cost`, each group
  // with its CP algorithm.
  void retime(const CostModel& cost);
  // One member's predicted seconds of `mb` if its group ran Ulysses of
  // degree u (1: ring); the same as retime for the group's own u.
  double member_seconds(const MicroBatch& mb, const CostModel& cost, int u,
                        const CpLinks& links) const;
  // Ring edges (hybrid: across subgroups, member c to c + u; Ulysses: none).
  std::vector<Transfer> transfers() const;
  // Bytes the all-to-alls of Ulysses and hybrid groups move in one step.
  double a2a_bytes() const;
  // Bytes all CP collectives move in one step: every layer, every pass.
  double comm_bytes() const;
};

// Summary numbers of a plan, for reports.
struct PlanStats {
  double makespan = 0;
  double mean = 0;
  double imbalance = 0;
  double lower_bound = 0;  // max(total busy time / T, largest single micro-batch)
  double comm_bytes = 0;
  double a2a_bytes = 0;  // of comm_bytes: Ulysses' all-to-alls
  int64_t split_sequences = 0;
  int32_t max_group = 0;
  int32_t min_micro_batches = 0;
  int32_t max_micro_batches = 0;
  int64_t micro_batches = 0;
  double idle_fraction = 0;  // waiting for ring partners, over makespan x T
};
PlanStats plan_stats(const Plan& plan);

// Turns per-trainer lists of micro-batches into a Plan (the planners' common
// last step). Micro-batches are added with an order key; each trainer runs
// its micro-batches in increasing key order (ties: the order added).
class PlanBuilder {
 public:
  PlanBuilder(std::string planner, int32_t trainers, int64_t capacity, ChunkRule rule,
              const std::vector<int64_t>& lengths, const CostModel& cost);
  // The group of `seq`: k trainer ranks, member c = ranks[c].
  void set_group(int32_t seq, std::span<const int32_t> ranks);
  void set_group(int32_t seq, int32_t rank) { set_group(seq, std::span<const int32_t>(&rank, 1)); }
  void set_offload(int32_t seq, float ratio);
  void add_micro_batch(int32_t trainer, double key, std::span<const Piece> pieces);
  // One ring micro-batch on every member of the group of pieces[0].seq, each
  // member m holding pieces (seq, m) of the listed sequences.
  void add_ring(double key, std::span<const int32_t> seqs);
  Plan finish(const CostModel& cost, int32_t static_cp = 0);

 private:
  struct Draft {
    int32_t trainer;
    double key;
    int32_t begin, end;
  };
  Plan plan_;
  std::vector<int32_t> group_k_;
  std::vector<int64_t> group_at_;  // offset into group_pool_ (-1: unset)
  std::vector<int32_t> group_pool_;
  std::vector<Draft> drafts_;
  std::vector<Piece> piece_pool_;
  bool any_offload_ = false;
};

}  // namespace meshloom::plan
