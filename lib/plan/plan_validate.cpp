// Plan::validate: the invariants every plan must hold, checked in stages.
#include <algorithm>
#include <string>
#include <vector>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/plan.hpp"
#include "plan/plan_schedule.hpp"

namespace meshloom::plan {

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

}  // namespace meshloom::plan
