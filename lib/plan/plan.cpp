#include "plan/plan.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/check.hpp"
#include "base/strings.hpp"

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
  return CpAlgo{u == k ? CpKind::kUlysses : CpKind::kHybrid, u};
}

std::string cp_algo_name(const CpAlgo& algo, int k) {
  switch (algo.kind) {
    case CpKind::kRing:
      return "ring";
    case CpKind::kUlysses:
      return "ulysses";
    case CpKind::kHybrid:
      break;
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

namespace {

using Duration = std::function<double(int32_t trainer, const MicroBatch& mb)>;

// Runs every trainer's micro-batches in order, a ring starting when the last
// of its members reaches it. Writes start/end into `mbs` when given. Returns
// "" or why the orders cannot all run (two trainers wait on each other).
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

}  // namespace

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

namespace {

// Plan::validate's stages, each of which needs the previous ones to hold.
// At most six errors are kept: a broken plan usually breaks everywhere.
struct PlanChecker {
  const Plan& p;
  std::vector<std::string> errs;
  std::vector<int32_t> where;  // micro-batch of each (sequence, member), by members index

  void bad(const std::string& e) {
    if (errs.size() < 6) errs.push_back(e);
  }
  bool ok() const { return errs.empty(); }
  std::string report() const {
    return errs.empty() ? std::string() : "invalid plan (" + p.planner + "): " + join(errs, "; ");
  }

  // The sizes and offsets every later stage indexes with.
  void offsets() {
    const int32_t T = p.trainers;
    const int32_t n = p.sequences();
    if (p.planner.empty()) bad("no planner name");
    if (T < 1) bad(strf("trainers = %d, must be at least 1", T));
    if (p.capacity < 1) bad(strf("capacity = %lld, must be at least 1", (long long)p.capacity));
    if (p.layers < 1) bad(strf("layers = %d", p.layers));
    if (int64_t(p.group_begin.size()) != int64_t(n) + 1 || p.group_begin.empty() ||
        p.group_begin.front() != 0 || size_t(p.group_begin.back()) != p.members.size())
      bad("group offsets do not match the sequences");
    if (!p.offload.empty() && p.offload.size() != p.lengths.size())
      bad("offload ratios do not match");
    if (!p.cp.empty() && p.cp.size() != p.lengths.size()) bad("CP algorithms do not match");
    if (p.heads.heads < 0 || p.heads.kv_heads < 0 || !(p.heads.head_bytes >= 0))
      bad(strf("heads %d, KV heads %d, head bytes %g", p.heads.heads, p.heads.kv_heads,
               p.heads.head_bytes));
    if (T >= 1 &&
        (int64_t(p.trainer_begin.size()) != int64_t(T) + 1 || p.trainer_begin.front() != 0 ||
         size_t(p.trainer_begin.back()) != p.micro_batches.size()))
      bad("trainer offsets do not match the micro-batches");
    if (!ok()) return;
    for (size_t i = 0; i + 1 < p.group_begin.size(); ++i)
      if (p.group_begin[i + 1] <= p.group_begin[i])
        return bad(strf("sequence %zu has an empty group", i));
    for (int32_t t = 0; t < T; ++t)
      if (p.trainer_begin[t + 1] < p.trainer_begin[t]) return bad("trainer offsets decrease");
    int32_t expect = 0;
    for (size_t i = 0; i < p.micro_batches.size(); ++i) {
      const MicroBatch& mb = p.micro_batches[i];
      if (mb.piece_begin != expect || mb.piece_end <= mb.piece_begin)
        return bad(strf("micro-batch %zu: pieces [%d, %d) are empty or not contiguous", i,
                        mb.piece_begin, mb.piece_end));
      expect = mb.piece_end;
    }
    if (size_t(expect) != p.pieces.size()) bad("pieces not all in micro-batches");
  }

  // Each sequence: a length, a group of distinct trainers, a zigzag chunk layout.
  void sequences() {
    std::vector<int32_t> stamp(p.trainers, -1);
    for (int32_t s = 0; s < p.sequences(); ++s) {
      const int64_t L = p.lengths[s];
      const int k = p.group_size(s);
      if (L < 1) bad(strf("sequence %d has length %lld", s, (long long)L));
      if (k > p.trainers) bad(strf("sequence %d: group of %d > %d trainers", s, k, p.trainers));
      if (p.rule == ChunkRule::kBalanced && k > L)
        bad(strf("sequence %d: %d members for %lld tokens (a member would hold none)", s, k,
                 (long long)L));
      if (p.rule == ChunkRule::kPadded && p.static_cp > 0 && k != p.static_cp)
        bad(strf("sequence %d: group of %d in a static grid of CP %d", s, k, p.static_cp));
      const float r = p.offload_ratio(s);
      if (!(r >= 0.f && r <= 1.f)) bad(strf("sequence %d: offload ratio %g", s, double(r)));
      cp_algo(s, k);
      for (int32_t m : p.group(s)) {
        if (m < 0 || m >= p.trainers) {
          bad(strf("sequence %d: member rank %d outside 0..%d", s, m, p.trainers - 1));
          continue;
        }
        if (stamp[m] == s) bad(strf("sequence %d: rank %d twice in its group", s, m));
        stamp[m] = s;
      }
      if (L >= 1 && k >= 1) chunks(s, L, k);
    }
  }

  // The CP algorithm of sequence s: a Ulysses degree that divides k and the
  // heads of a TP rank, and the kind that goes with it.
  void cp_algo(int32_t s, int k) {
    const CpAlgo a = p.cp_algo(s);
    if (a.u < 1 || a.u > k || k % a.u != 0)
      return bad(strf("sequence %d: Ulysses degree %d does not divide its group of %d", s, a.u, k));
    if (!(a == cp_algo_of(k, a.u)))
      return bad(strf("sequence %d: CP algorithm %s with u = %d in a group of %d", s,
                      cp_algo_name(a, k).c_str(), a.u, k));
    if (!ulysses_fits(p.heads, a.u))
      bad(strf("sequence %d: Ulysses degree %d does not divide the %d heads of a TP rank", s, a.u,
               p.heads.heads));
  }

  // The chunk layout of sequence s: a partition of [0, L) in zigzag order.
  void chunks(int32_t s, int64_t L, int k) {
    int64_t total = 0, lo = INT64_MAX, hi = 0, prev_front_end = 0, prev_back_begin = L;
    for (int c = 0; c < k; ++c) {
      const MemberChunks ch = member_chunks(L, k, c, p.rule);
      if (ch.front.size() < 0 || ch.back.size() < 0 || ch.front.begin != prev_front_end ||
          (k > 1 && ch.back.end != prev_back_begin)) {
        bad(strf("sequence %d: chunks of member %d out of zigzag order", s, c));
        break;
      }
      prev_front_end = ch.front.end;
      if (k > 1) prev_back_begin = ch.back.begin;
      total += ch.tokens();
      lo = std::min(lo, ch.tokens());
      hi = std::max(hi, ch.tokens());
    }
    if (k > 1 && prev_front_end != prev_back_begin)
      bad(strf("sequence %d: front and back chunks do not meet", s));
    if (total != L)
      bad(strf("sequence %d: members hold %lld of %lld tokens", s, (long long)total, (long long)L));
    if (p.rule == ChunkRule::kBalanced && k > 1 && hi - lo > 1)
      bad(strf("sequence %d: members hold %lld to %lld tokens", s, (long long)lo, (long long)hi));
  }

  // Pieces: each (sequence, member) exactly once, on that member's trainer,
  // within capacity, in predicted time order; fills `where`.
  void pieces() {
    where.assign(p.members.size(), -1);
    for (int32_t t = 0; t < p.trainers; ++t)
      for (int32_t i = p.trainer_begin[t]; i < p.trainer_begin[t + 1]; ++i) micro_batch(t, i);
    if (!ok()) return;
    for (int32_t s = 0; s < p.sequences(); ++s)
      for (int c = 0; c < p.group_size(s); ++c)
        if (where[p.group_begin[s] + c] < 0)
          bad(strf("sequence %d member %d is on no trainer", s, c));
  }

  void micro_batch(int32_t t, int32_t i) {
    const MicroBatch& mb = p.micro_batches[i];
    const int32_t n = p.sequences();
    const int32_t index = i - p.trainer_begin[t];
    const Piece& first = p.pieces[mb.piece_begin];
    if (first.seq < 0 || first.seq >= n)
      return bad(strf("trainer %d: piece of unknown sequence %d", t, first.seq));
    const int k0 = p.group_size(first.seq);
    double resident = 0;
    for (int32_t j = mb.piece_begin; j < mb.piece_end; ++j) {
      const Piece& pc = p.pieces[j];
      if (pc.seq < 0 || pc.seq >= n || pc.member < 0 || pc.member >= p.group_size(pc.seq)) {
        bad(strf("trainer %d: piece (%d, %d) does not exist", t, pc.seq, pc.member));
        continue;
      }
      if (p.group(pc.seq)[pc.member] != t)
        bad(strf("sequence %d member %d is on trainer %d, its group says %d", pc.seq, pc.member, t,
                 p.group(pc.seq)[pc.member]));
      if (p.group_size(pc.seq) != k0 || pc.member != first.member)
        bad(strf("trainer %d micro-batch %d mixes rings (sequences %d and %d)", t, index, first.seq,
                 pc.seq));
      int32_t& w = where[p.group_begin[pc.seq] + pc.member];
      if (w != -1)
        bad(strf("sequence %d member %d appears twice (tokens on two trainers)", pc.seq,
                 pc.member));
      w = i;
      resident += p.resident_tokens(pc);
    }
    if (resident > double(p.capacity) * (1 + 1e-9) + 1e-6)
      bad(strf("trainer %d micro-batch %d holds %.1f tokens > capacity %lld", t, index, resident,
               (long long)p.capacity));
    if (!(mb.start >= 0 && mb.end >= mb.start && std::isfinite(mb.end)))
      bad(strf("trainer %d micro-batch %d: times [%g, %g]", t, index, double(mb.start),
               double(mb.end)));
    if (i > p.trainer_begin[t] && mb.start < p.micro_batches[i - 1].end * (1 - 1e-6f))
      bad(strf("trainer %d micro-batch %d starts before the previous one ends", t, index));
  }

  // Rings: every member's micro-batch holds the same sequences, with one
  // group, and the same predicted times.
  void rings() {
    const auto& mbs = p.micro_batches;
    auto size = [&](size_t i) { return mbs[i].piece_end - mbs[i].piece_begin; };
    for (size_t i = 0; i < mbs.size() && ok(); ++i) {
      const Piece& first = p.pieces[mbs[i].piece_begin];
      if (p.group_size(first.seq) == 1) continue;
      const int32_t home = where[p.group_begin[first.seq]];  // member 0's micro-batch
      if (size(size_t(home)) != size(i))
        bad(strf("ring of sequence %d: members hold different micro-batches", first.seq));
      for (int32_t j = mbs[i].piece_begin; j < mbs[i].piece_end; ++j) {
        const int32_t s = p.pieces[j].seq;
        if (where[p.group_begin[s]] != home)
          bad(strf("ring of sequence %d: sequence %d is with it on one member, not on another",
                   first.seq, s));
        if (first.member == 0 && s != first.seq &&
            !std::equal(p.group(s).begin(), p.group(s).end(), p.group(first.seq).begin()))
          bad(strf("sequences %d and %d share a micro-batch but not a group", first.seq, s));
        if (first.member == 0 && !(p.cp_algo(s) == p.cp_algo(first.seq)))
          bad(strf("sequences %d and %d share a micro-batch but not a CP algorithm", first.seq, s));
      }
    }
    if (!ok()) return;
    for (const MicroBatch& mb : mbs) {
      const Piece& first = p.pieces[mb.piece_begin];
      if (p.group_size(first.seq) == 1) continue;
      const MicroBatch& home = mbs[where[p.group_begin[first.seq]]];
      if (home.start != mb.start || home.end != mb.end)
        bad(strf("ring of sequence %d: members have different predicted times", first.seq));
    }
  }
};

}  // namespace

std::string Plan::validate() const {
  PlanChecker c{*this, {}, {}};
  for (void (PlanChecker::*stage)() : {&PlanChecker::offsets, &PlanChecker::sequences,
                                       &PlanChecker::pieces, &PlanChecker::rings}) {
    (c.*stage)();
    if (!c.ok()) return c.report();
  }
  const std::string order = run_schedule(*this, nullptr, nullptr);
  if (!order.empty()) c.bad(order);
  return c.report();
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
