#include "plan/io/plan_io.hpp"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/bytes.hpp"
#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::plan {

namespace {

constexpr char kMagic[6] = {'M', 'L', 'P', 'L', 'A', 'N'};
constexpr uint8_t kVersion = 2;  // 2: heads and CP algorithms; 1 is still read (all rings)

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Plan fields in the file: varints for counts and indices, raw floats.
class Writer {
 public:
  void u8(uint8_t v) { w_.put(v); }
  void var(uint64_t v) { w_.put_varint(v); }
  template <class T>
  void raw(T v) {
    w_.put(v);
  }
  const std::string& bytes() { return w_.bytes(); }

 private:
  ByteWriter w_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : r_(reinterpret_cast<const char*>(p), n, "plan") {}
  uint8_t u8() { return r_.get<uint8_t>(); }
  // A varint that must lie in [lo, hi].
  int64_t var_in(int64_t lo, int64_t hi, const char* what) {
    const uint64_t v = r_.get_varint();
    if (v > uint64_t(INT64_MAX) || int64_t(v) < lo || int64_t(v) > hi)
      throw Error(strf("plan: %s = %llu out of range [%lld, %lld]", what, (unsigned long long)v,
                       (long long)lo, (long long)hi));
    return int64_t(v);
  }
  template <class T>
  T raw() {
    return r_.get<T>();
  }
  void bytes(void* dst, size_t n) { r_.get_raw(dst, n); }
  size_t at() const { return r_.offset(); }

 private:
  ByteReader r_;
};

constexpr int64_t kMaxCount = int64_t(1) << 31;

// Each sequence's Ulysses degree (a divisor of its group size), if any.
void read_cp(Reader& r, Plan& p) {
  const uint8_t has_cp = r.u8();
  if (has_cp > 1) throw Error("plan: bad CP algorithm flag");
  if (!has_cp) return;
  p.cp.resize(size_t(p.sequences()));
  for (int32_t s = 0; s < p.sequences(); ++s) {
    const int k = p.group_size(s);
    const int u = int(r.var_in(1, k, "Ulysses degree"));
    if (k % u != 0)
      throw Error(strf("plan: sequence %d: Ulysses degree %d of a group of %d", s, u, k));
    p.cp[size_t(s)] = cp_algo_of(k, u);
  }
}

}  // namespace

std::vector<uint8_t> serialize(const Plan& p) {
  Writer w;
  for (char c : kMagic) w.u8(uint8_t(c));
  w.u8(kVersion);
  w.u8(uint8_t(p.rule));
  w.var(uint64_t(p.trainers));
  w.var(uint64_t(p.capacity));
  w.var(uint64_t(p.static_cp));
  w.var(uint64_t(p.layers));
  w.raw<double>(p.kv_bytes);
  w.raw<double>(p.passes);
  w.var(uint64_t(p.heads.heads));
  w.var(uint64_t(p.heads.kv_heads));
  w.raw<double>(p.heads.head_bytes);
  w.raw<double>(p.planning_seconds);
  w.var(p.planner.size());
  for (char c : p.planner) w.u8(uint8_t(c));
  const int32_t n = p.sequences();
  w.var(uint64_t(n));
  for (int64_t L : p.lengths) w.var(uint64_t(L));
  for (int32_t s = 0; s < n; ++s) {
    auto g = p.group(s);
    w.var(g.size());
    size_t runs = 0;
    for (size_t i = 0; i < g.size(); ++i)
      if (i == 0 || g[i] != g[i - 1] + 1) ++runs;
    w.var(runs);
    for (size_t i = 0; i < g.size();) {
      size_t j = i + 1;
      while (j < g.size() && g[j] == g[j - 1] + 1) ++j;
      w.var(uint64_t(g[i]));
      w.var(j - i);
      i = j;
    }
  }
  w.u8(p.offload.empty() ? 0 : 1);
  for (float r : p.offload) w.raw<float>(r);
  w.u8(p.cp.empty() ? 0 : 1);
  for (const CpAlgo& a : p.cp) w.var(uint64_t(a.u));
  for (int32_t t = 0; t < p.trainers; ++t) {
    auto mbs = p.micro_batches_of(t);
    w.var(mbs.size());
    for (const MicroBatch& mb : mbs) {
      w.var(uint64_t(mb.piece_end - mb.piece_begin));
      w.raw<float>(mb.start);
      w.raw<float>(mb.end);
      for (const Piece& pc : p.pieces_of(mb)) {
        w.var(uint64_t(pc.seq));
        w.var(uint64_t(pc.member));
      }
    }
  }
  const std::string& b = w.bytes();
  std::vector<uint8_t> out(b.begin(), b.end());
  const uint64_t sum = fnv1a(out.data(), out.size());
  out.insert(out.end(), reinterpret_cast<const uint8_t*>(&sum),
             reinterpret_cast<const uint8_t*>(&sum) + sizeof(sum));
  return out;
}

Plan deserialize(const uint8_t* data, size_t size) {
  if (size < sizeof(kMagic) + 2 + 8) throw Error("plan: truncated data");
  uint64_t stored;
  std::memcpy(&stored, data + size - 8, 8);
  if (std::memcmp(data, kMagic, sizeof(kMagic)) != 0) throw Error("plan: not a plan (bad magic)");
  if (fnv1a(data, size - 8) != stored) throw Error("plan: checksum mismatch (corrupt data)");
  Reader r(data, size - 8);
  char magic[sizeof(kMagic)];
  r.bytes(magic, sizeof(magic));
  const uint8_t version = r.u8();
  if (version < 1 || version > kVersion)
    throw Error(strf("plan: version %d, this build reads 1 to %d", version, kVersion));
  Plan p;
  const uint8_t rule = r.u8();
  if (rule > 1) throw Error(strf("plan: unknown chunk rule %d", rule));
  p.rule = ChunkRule(rule);
  p.trainers = int32_t(r.var_in(1, kMaxCount - 1, "trainers"));
  p.capacity = r.var_in(1, INT64_MAX, "capacity");
  p.static_cp = int32_t(r.var_in(0, p.trainers, "static_cp"));
  p.layers = int32_t(r.var_in(1, 1 << 20, "layers"));
  p.kv_bytes = r.raw<double>();
  p.passes = r.raw<double>();
  if (version >= 2) {
    p.heads.heads = int32_t(r.var_in(0, 1 << 20, "heads"));
    p.heads.kv_heads = int32_t(r.var_in(0, 1 << 20, "KV heads"));
    p.heads.head_bytes = r.raw<double>();
  }
  p.planning_seconds = r.raw<double>();
  const int64_t name_len = r.var_in(0, 256, "planner name length");
  p.planner.resize(size_t(name_len));
  r.bytes(p.planner.data(), size_t(name_len));
  const int32_t n = int32_t(r.var_in(0, kMaxCount - 1, "sequences"));
  p.lengths.resize(n);
  for (int32_t s = 0; s < n; ++s) p.lengths[s] = r.var_in(1, int64_t(1) << 50, "length");
  p.group_begin.assign(n + 1, 0);
  for (int32_t s = 0; s < n; ++s) {
    const int64_t k = r.var_in(1, p.trainers, "group size");
    const int64_t runs = r.var_in(1, k, "group runs");
    int64_t got = 0;
    for (int64_t i = 0; i < runs; ++i) {
      const int64_t first = r.var_in(0, p.trainers - 1, "group rank");
      const int64_t len = r.var_in(1, k - got, "group run");
      if (first + len > p.trainers) throw Error("plan: group run past the last trainer");
      for (int64_t j = 0; j < len; ++j) p.members.push_back(int32_t(first + j));
      got += len;
    }
    if (got != k)
      throw Error(strf("plan: sequence %d group holds %lld of %lld ranks", s, (long long)got,
                       (long long)k));
    if (int64_t(p.members.size()) >= kMaxCount) throw Error("plan: too many group members");
    p.group_begin[s + 1] = int32_t(p.members.size());
  }
  const uint8_t has_offload = r.u8();
  if (has_offload > 1) throw Error("plan: bad offload flag");
  if (has_offload) {
    p.offload.resize(n);
    for (int32_t s = 0; s < n; ++s) p.offload[s] = r.raw<float>();
  }
  if (version >= 2) read_cp(r, p);
  p.trainer_begin.assign(p.trainers + 1, 0);
  for (int32_t t = 0; t < p.trainers; ++t) {
    const int64_t count = r.var_in(0, kMaxCount - 1, "micro-batches");
    for (int64_t i = 0; i < count; ++i) {
      MicroBatch mb;
      const int64_t np = r.var_in(1, kMaxCount - 1, "pieces");
      mb.start = r.raw<float>();
      mb.end = r.raw<float>();
      mb.piece_begin = int32_t(p.pieces.size());
      for (int64_t j = 0; j < np; ++j) {
        Piece pc;
        pc.seq = int32_t(r.var_in(0, n - 1, "piece sequence"));
        pc.member = int32_t(r.var_in(0, p.group_size(pc.seq) - 1, "piece member"));
        p.pieces.push_back(pc);
      }
      if (int64_t(p.pieces.size()) >= kMaxCount) throw Error("plan: too many pieces");
      mb.piece_end = int32_t(p.pieces.size());
      p.micro_batches.push_back(mb);
    }
    if (int64_t(p.micro_batches.size()) >= kMaxCount) throw Error("plan: too many micro-batches");
    p.trainer_begin[t + 1] = int32_t(p.micro_batches.size());
  }
  if (r.at() != size - 8) throw Error("plan: trailing bytes after the plan");
  return p;
}

std::string to_json(const Plan& p, int indent) {
  using json = nlohmann::ordered_json;
  json j;
  const PlanStats st = plan_stats(p);
  j["planner"] = p.planner;
  j["trainers"] = p.trainers;
  j["capacity"] = p.capacity;
  j["chunk_rule"] = p.rule == ChunkRule::kBalanced ? "balanced" : "padded";
  if (p.static_cp > 0) {
    j["static_cp"] = p.static_cp;
    j["static_dp"] = p.trainers / p.static_cp;
  }
  if (p.static_fallback()) j["fallback"] = "static";
  j["layers"] = p.layers;
  j["kv_bytes_per_token_layer"] = p.kv_bytes;
  j["heads"] = {
      {"heads", p.heads.heads}, {"kv_heads", p.heads.kv_heads}, {"head_bytes", p.heads.head_bytes}};
  j["makespan_s"] = st.makespan;
  j["mean_s"] = st.mean;
  j["imbalance"] = st.imbalance;
  j["lower_bound_s"] = st.lower_bound;
  j["comm_bytes"] = st.comm_bytes;
  j["a2a_bytes"] = st.a2a_bytes;
  j["planning_s"] = p.planning_seconds;
  j["tokens"] = [&] {
    int64_t s = 0;
    for (int64_t L : p.lengths) s += L;
    return s;
  }();
  json seqs = json::array();
  for (int32_t s = 0; s < p.sequences(); ++s) {
    json q;
    q["id"] = s;
    q["length"] = p.lengths[s];
    auto g = p.group(s);
    q["group"] = std::vector<int32_t>(g.begin(), g.end());
    if (p.offload_ratio(s) > 0) q["offload"] = p.offload_ratio(s);
    if (g.size() > 1) {
      const CpAlgo a = p.cp_algo(s);
      q["cp"] = cp_algo_name(a, int(g.size()));
      q["ulysses_degree"] = a.u;
      json ch = json::array();
      for (int c = 0; c < int(g.size()); ++c) {
        const MemberChunks m = member_chunks(p.lengths[s], int(g.size()), c, p.rule);
        ch.push_back({{m.front.begin, m.front.end}, {m.back.begin, m.back.end}});
      }
      q["chunks"] = std::move(ch);
    }
    seqs.push_back(std::move(q));
  }
  j["sequences"] = std::move(seqs);
  json trainers = json::array();
  for (int32_t t = 0; t < p.trainers; ++t) {
    json tr;
    tr["rank"] = t;
    tr["time_s"] = p.trainer_time(t);
    json mbs = json::array();
    for (const MicroBatch& mb : p.micro_batches_of(t)) {
      json m;
      m["start"] = mb.start;
      m["end"] = mb.end;
      const Piece& first = p.pieces[mb.piece_begin];
      m["k"] = p.group_size(first.seq);
      int64_t tokens = 0;
      json pcs = json::array();
      for (const Piece& pc : p.pieces_of(mb)) {
        const int64_t sl = p.slots(pc);
        tokens += sl;
        pcs.push_back({pc.seq, pc.member, sl});
      }
      m["tokens"] = tokens;
      m["pieces"] = std::move(pcs);  // [sequence, member, tokens]
      mbs.push_back(std::move(m));
    }
    tr["micro_batches"] = std::move(mbs);
    trainers.push_back(std::move(tr));
  }
  j["trainer_plans"] = std::move(trainers);
  return j.dump(indent);
}

void write_json(const Plan& plan, const std::string& path) {
  std::ofstream out(path);
  out << to_json(plan) << "\n";
  if (!out) throw Error("cannot write '" + path + "'");
}

}  // namespace meshloom::plan
