#include "plan/plan.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/plan_schedule.hpp"

namespace meshloom::plan {

namespace {

// Sum over members j < c of floor(share_j / 2), share_j = q + (j < r).
int64_t prefix_front(int64_t q, int64_t r, int64_t c) {
  return std::min(c, r) * ((q + 1) / 2) + std::max<int64_t>(0, c - r) * (q / 2);
}
int64_t prefix_share(int64_t q, int64_t r, int64_t c) { return c * q + std::min(c, r); }

}  // namespace

MemberChunks member_chunks(int64_t length, int k, int member, ChunkRule rule) {
  MemberChunks m;
  if (k <= 1) {
    m.front = {0, length};
    m.back = {length, length};
    return m;
  }
  if (rule == ChunkRule::kPadded) {
    const int64_t s = (length + 2 * k - 1) / (2 * k);
    auto chunk = [&](int64_t j) {
      return Span{std::min(j * s, length), std::min((j + 1) * s, length)};
    };
    m.front = chunk(member);
    m.back = chunk(2 * int64_t(k) - 1 - member);
    return m;
  }
  const int64_t q = length / k, r = length % k, c = member;
  const int64_t share = q + (c < r ? 1 : 0);
  const int64_t front = share / 2;
  const int64_t f0 = prefix_front(q, r, c);
  m.front = {f0, f0 + front};
  const int64_t back_end = length - (prefix_share(q, r, c) - f0);
  m.back = {back_end - (share - front), back_end};
  return m;
}

int64_t member_slots(int64_t length, int k, ChunkRule rule) {
  if (k <= 1) return length;
  if (rule == ChunkRule::kPadded) return 2 * ((length + 2 * k - 1) / (2 * k));
  return (length + k - 1) / k;
}

int64_t member_slots(int64_t length, int k, int member, ChunkRule rule) {
  if (k <= 1) return length;
  if (rule == ChunkRule::kPadded) return 2 * ((length + 2 * k - 1) / (2 * k));
  return length / k + (member < length % k ? 1 : 0);
}

CpAlgo cp_algo_of(int k, int u) {
  if (k <= 1 || u <= 1) return CpAlgo{};
  return CpAlgo{u == k ? config::CpAlgorithm::ulysses : config::CpAlgorithm::hybrid, u};
}

std::string cp_algo_name(const CpAlgo& algo, int k) {
  switch (algo.kind) {
    case config::CpAlgorithm::ring:
      return "ring";
    case config::CpAlgorithm::ulysses:
      return "ulysses";
    case config::CpAlgorithm::hybrid:
      break;
    case config::CpAlgorithm::automatic:
      ML_CHECK(false, "a plan's CP algorithm is never automatic");
  }
  return strf("hybrid(%dx%d)", algo.u, algo.u > 0 ? k / algo.u : 0);
}

double Plan::resident_tokens(const Piece& p) const {
  const double s = double(slots(p));
  const double r = offload_ratio(p.seq);
  if (r <= 0 || layers <= 2) return s;
  return s * (2.0 + (1.0 - r) * (layers - 2)) / layers;
}

std::vector<PieceLayout> Plan::layout(int32_t trainer, size_t index) const {
  const MicroBatch& mb = micro_batches_of(trainer)[index];
  std::vector<PieceLayout> out;
  for (const Piece& p : pieces_of(mb)) {
    PieceLayout l;
    l.seq = p.seq;
    l.length = lengths[p.seq];
    l.k = group_size(p.seq);
    l.member = p.member;
    l.chunks = chunks(p);
    auto g = group(p.seq);
    l.prev_rank = g[(p.member + l.k - 1) % l.k];
    l.next_rank = g[(p.member + 1) % l.k];
    l.offload = offload_ratio(p.seq);
    out.push_back(l);
  }
  return out;
}

double Plan::makespan() const {
  double m = 0;
  for (int32_t t = 0; t < trainers; ++t) m = std::max(m, trainer_time(t));
  return m;
}

double Plan::mean_time() const {
  if (trainers <= 0) return 0;
  double s = 0;
  for (int32_t t = 0; t < trainers; ++t) s += trainer_time(t);
  return s / trainers;
}

double Plan::imbalance() const {
  const double mean = mean_time();
  return mean > 0 ? makespan() / mean : 1.0;
}

std::string run_schedule(const Plan& p, const Duration& duration, std::vector<MicroBatch>* mbs) {
  const int32_t T = p.trainers;
  const int32_t n = p.sequences();
  std::vector<int32_t> pos(T, 0), arrived(n, 0);
  std::vector<double> ready(T, 0.0), ring_ready(n, 0.0), ring_dur(n, 0.0);
  std::vector<int32_t> queue(T);
  for (int32_t t = 0; t < T; ++t) queue[t] = T - 1 - t;  // popped from the back: 0 first
  auto count = [&](int32_t t) { return p.trainer_begin[t + 1] - p.trainer_begin[t]; };
  while (!queue.empty()) {
    const int32_t t = queue.back();
    queue.pop_back();
    while (pos[t] < count(t)) {
      const int32_t at = p.trainer_begin[t] + pos[t];
      const MicroBatch& mb = p.micro_batches[at];
      const int32_t s = p.pieces[mb.piece_begin].seq;
      const int k = p.group_size(s);
      const double d = duration ? duration(t, mb) : 0.0;
      if (k == 1) {
        if (mbs) {
          (*mbs)[at].start = float(ready[t]);
          (*mbs)[at].end = float(ready[t] + d);
        }
        ready[t] += d;
        ++pos[t];
        continue;
      }
      ++arrived[s];
      ring_ready[s] = std::max(ring_ready[s], ready[t]);
      ring_dur[s] = std::max(ring_dur[s], d);
      if (arrived[s] < k) break;  // wait for the other members
      const double start = ring_ready[s], end = start + ring_dur[s];
      for (int32_t m : p.group(s)) {
        const int32_t mat = p.trainer_begin[m] + pos[m];
        if (pos[m] >= count(m) || p.pieces[p.micro_batches[mat].piece_begin].seq != s)
          return strf("trainer %d is counted at the ring of sequence %d but is not there", m, s);
        if (mbs) {
          (*mbs)[mat].start = float(start);
          (*mbs)[mat].end = float(end);
        }
        ready[m] = end;
        ++pos[m];
        if (m != t) queue.push_back(m);
      }
    }
  }
  for (int32_t t = 0; t < T; ++t)
    if (pos[t] < count(t)) {
      const MicroBatch& mb = p.micro_batches[p.trainer_begin[t] + pos[t]];
      const int32_t s = p.pieces[mb.piece_begin].seq;
      std::string missing;
      for (int32_t m : p.group(s))
        if (m != t) {
          missing = strf("%d", m);
          break;
        }
      return strf(
          "micro-batch orders deadlock: trainer %d waits at its micro-batch %d for the ring of "
          "sequence %d (%d of %d members there; e.g. trainer %s is elsewhere)",
          t, pos[t], s, arrived[s], p.group_size(s), missing.c_str());
    }
  return "";
}

double Plan::member_seconds(const MicroBatch& mb, const CostModel& cost, int u,
                            const CpLinks& links) const {
  const double act = cost.act_bytes * cost.layers;
  double tokens = 0, l2 = 0, off = 0;
  const int k = group_size(pieces[mb.piece_begin].seq);
  for (const Piece& pc : pieces_of(mb)) {
    const double sl = double(slots(pc));
    const double L = double(lengths[pc.seq]);
    tokens += sl;
    l2 += L * L / k;
    off += offload_ratio(pc.seq) * sl * act;
  }
  return cost.cp_micro_batch(tokens, l2, k, u, links, off);
}

void Plan::retime(const CostModel& cost) {
  const int32_t n = sequences();
  std::vector<CpLinks> links(n);
  for (int32_t s = 0; s < n; ++s)
    if (group_size(s) > 1) links[s] = cost.cp_links(group(s), cp_algo(s).u);
  Duration d = [&](int32_t, const MicroBatch& mb) {
    const int32_t s = pieces[mb.piece_begin].seq;
    return member_seconds(mb, cost, cp_algo(s).u, links[s]);
  };
  const std::string err = run_schedule(*this, d, &micro_batches);
  ML_CHECK(err.empty(), "retime of an invalid plan: " + err);
}

std::vector<Transfer> Plan::transfers() const {
  std::vector<Transfer> out;
  // member-0 micro-batches of rings; a subgroup's tokens = sum of its
  // members' slots. Member c passes on every block but its successor's own.
  for (const MicroBatch& mb : micro_batches) {
    const Piece& first = pieces[mb.piece_begin];
    const int k = group_size(first.seq);
    const int u = cp_algo(first.seq).u;
    if (k == 1 || first.member != 0 || u == k) continue;
    std::vector<int64_t> held(k / u, 0);
    int64_t total = 0;
    for (const Piece& p : pieces_of(mb))
      for (int c = 0; c < k; ++c) {
        const int64_t sl = member_slots(lengths[p.seq], k, c, rule);
        held[c / u] += sl;
        total += sl;
      }
    const double per_token = cp_ring_block_bytes(heads, kv_bytes, u) / u;
    auto g = group(first.seq);
    for (int c = 0; c < k; ++c) {
      Transfer x;
      x.seq = first.seq;
      x.from = g[c];
      x.to = g[(c + u) % k];
      x.bytes_per_layer =
          int64_t(std::llround(double(total - held[((c + u) % k) / u]) * per_token));
      out.push_back(x);
    }
  }
  return out;
}

double Plan::a2a_bytes() const {
  double per_layer = 0;
  for (const MicroBatch& mb : micro_batches) {
    const int32_t s = pieces[mb.piece_begin].seq;
    const int u = cp_algo(s).u;
    if (u <= 1) continue;
    int64_t held = 0;
    for (const Piece& p : pieces_of(mb)) held += slots(p);
    per_layer += double(held) * ulysses_bytes(heads, u);
  }
  return per_layer * layers * kUlyssesPasses;
}

double Plan::comm_bytes() const {
  double per_layer = 0;
  for (const Transfer& x : transfers()) per_layer += double(x.bytes_per_layer);
  return per_layer * layers * passes + a2a_bytes();
}

PlanStats plan_stats(const Plan& plan) {
  PlanStats st;
  st.makespan = plan.makespan();
  st.mean = plan.mean_time();
  st.imbalance = plan.imbalance();
  st.comm_bytes = plan.comm_bytes();
  st.a2a_bytes = plan.a2a_bytes();
  double busy = 0, largest = 0;
  st.min_micro_batches = INT32_MAX;
  for (int32_t t = 0; t < plan.trainers; ++t) {
    auto mbs = plan.micro_batches_of(t);
    st.min_micro_batches = std::min(st.min_micro_batches, int32_t(mbs.size()));
    st.max_micro_batches = std::max(st.max_micro_batches, int32_t(mbs.size()));
    for (const MicroBatch& mb : mbs) {
      busy += double(mb.end - mb.start);
      largest = std::max(largest, double(mb.end - mb.start));
    }
  }
  if (plan.trainers == 0) st.min_micro_batches = 0;
  st.micro_batches = int64_t(plan.micro_batches.size());
  st.lower_bound = std::max(plan.trainers > 0 ? busy / plan.trainers : 0.0, largest);
  for (int32_t s = 0; s < plan.sequences(); ++s) {
    const int k = plan.group_size(s);
    if (k > 1) ++st.split_sequences;
    st.max_group = std::max(st.max_group, int32_t(k));
  }
  st.idle_fraction = st.makespan > 0 ? 1.0 - busy / (st.makespan * plan.trainers) : 0.0;
  return st;
}

PlanBuilder::PlanBuilder(std::string planner, int32_t trainers, int64_t capacity, ChunkRule rule,
                         const std::vector<int64_t>& lengths, const CostModel& cost) {
  plan_.planner = std::move(planner);
  plan_.trainers = trainers;
  plan_.capacity = capacity;
  plan_.rule = rule;
  plan_.layers = cost.layers;
  plan_.kv_bytes = cost.kv_bytes;
  plan_.passes = cost.passes;
  plan_.heads = cost.heads;
  plan_.lengths = lengths;
  group_k_.assign(lengths.size(), 0);
  group_at_.assign(lengths.size(), -1);
  plan_.offload.assign(lengths.size(), 0.f);
}

void PlanBuilder::set_group(int32_t seq, std::span<const int32_t> ranks) {
  ML_CHECK(group_at_[seq] < 0, strf("group of sequence %d set twice", seq));
  group_at_[seq] = int64_t(group_pool_.size());
  group_k_[seq] = int32_t(ranks.size());
  group_pool_.insert(group_pool_.end(), ranks.begin(), ranks.end());
}

void PlanBuilder::set_offload(int32_t seq, float ratio) {
  plan_.offload[seq] = ratio;
  if (ratio > 0) any_offload_ = true;
}

void PlanBuilder::add_micro_batch(int32_t trainer, double key, std::span<const Piece> pieces) {
  ML_CHECK(!pieces.empty(), "empty micro-batch");
  Draft d{trainer, key, int32_t(piece_pool_.size()), 0};
  piece_pool_.insert(piece_pool_.end(), pieces.begin(), pieces.end());
  d.end = int32_t(piece_pool_.size());
  drafts_.push_back(d);
}

void PlanBuilder::add_ring(double key, std::span<const int32_t> seqs) {
  ML_CHECK(!seqs.empty(), "empty ring");
  const int32_t s0 = seqs[0];
  const int k = group_k_[s0];
  for (int m = 0; m < k; ++m) {
    Draft d{group_pool_[group_at_[s0] + m], key, int32_t(piece_pool_.size()), 0};
    for (int32_t s : seqs) piece_pool_.push_back(Piece{s, m});
    d.end = int32_t(piece_pool_.size());
    drafts_.push_back(d);
  }
}

Plan PlanBuilder::finish(const CostModel& cost, int32_t static_cp) {
  Plan& p = plan_;
  p.static_cp = static_cp;
  const int32_t n = p.sequences();
  p.group_begin.assign(n + 1, 0);
  for (int32_t s = 0; s < n; ++s) {
    ML_CHECK(group_at_[s] >= 0, strf("sequence %d has no group", s));
    p.group_begin[s + 1] = p.group_begin[s] + group_k_[s];
  }
  p.members.resize(p.group_begin[n]);
  for (int32_t s = 0; s < n; ++s)
    std::copy_n(group_pool_.begin() + group_at_[s], group_k_[s],
                p.members.begin() + p.group_begin[s]);
  if (!any_offload_) p.offload.clear();

  std::stable_sort(drafts_.begin(), drafts_.end(), [](const Draft& x, const Draft& y) {
    return x.trainer != y.trainer ? x.trainer < y.trainer : x.key < y.key;
  });
  p.trainer_begin.assign(p.trainers + 1, 0);
  p.micro_batches.clear();
  p.micro_batches.reserve(drafts_.size());
  p.pieces.clear();
  p.pieces.reserve(piece_pool_.size());
  for (const Draft& d : drafts_) {
    ML_CHECK(d.trainer >= 0 && d.trainer < p.trainers, strf("trainer %d out of range", d.trainer));
    ++p.trainer_begin[d.trainer + 1];
    MicroBatch mb;
    mb.piece_begin = int32_t(p.pieces.size());
    p.pieces.insert(p.pieces.end(), piece_pool_.begin() + d.begin, piece_pool_.begin() + d.end);
    mb.piece_end = int32_t(p.pieces.size());
    p.micro_batches.push_back(mb);
  }
  for (int32_t t = 0; t < p.trainers; ++t) p.trainer_begin[t + 1] += p.trainer_begin[t];
  p.retime(cost);
  return std::move(plan_);
}

}  // namespace meshloom::plan
