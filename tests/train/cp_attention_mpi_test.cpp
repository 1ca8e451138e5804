// Ulysses and hybrid (Ulysses x ring) attention against full attention on one
// rank. Several documents are packed into one micro-batch, laid out over the
// CP group's members in zigzag chunks (plan::member_chunks), one of them
// shorter than 2k; Q, K and V are column slices of one fused buffer. Each
// member's outputs, lse, dQ, dK and dV must match the same rows of the full
// computation. Runs at 4 ranks: groups of 2 (two side by side), 3 and 4.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/check.hpp"
#include "plan/plan.hpp"
#include "train/hybrid_attention.hpp"
#include "train/ulysses_attention.hpp"

namespace meshloom::train {
namespace {

using model::AttnDims;
using model::AttnOptions;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// This rank's group of k consecutive world ranks (MPI_COMM_NULL for ranks
// left over), freed on destruction.
struct Group {
  explicit Group(int size) : k(size), me(world_rank() % size) {
    const int color = world_rank() / k < world_size() / k ? world_rank() / k : MPI_UNDEFINED;
    MPI_Comm_split(MPI_COMM_WORLD, color, world_rank(), &comm);
  }
  ~Group() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  int k, me;
  MPI_Comm comm = MPI_COMM_NULL;
};

// A packed micro-batch of documents and full attention over it, in double.
struct Problem {
  AttnDims dims;
  std::vector<int64_t> lengths;
  int64_t n = 0;                             // all tokens
  int64_t qw = 0, kw = 0, ld = 0;            // Q and K/V widths; fused row width
  std::vector<double> qkv, dout;             // [n, ld] (Q | K | V), [n, qw]
  std::vector<int32_t> sample, pos;          // per token
  std::vector<double> out, lse, dq, dk, dv;  // the full computation

  Problem(AttnDims d, std::vector<int64_t> lens, unsigned seed) : dims(d), lengths(lens) {
    for (int64_t l : lengths) n += l;
    qw = dims.n_heads * dims.head_dim;
    kw = dims.n_kv_heads * dims.head_dim;
    ld = qw + 2 * kw;
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0, 1);
    qkv.resize(size_t(n * ld));
    dout.resize(size_t(n * qw));
    for (double& x : qkv) x = normal(rng);
    for (double& x : dout) x = normal(rng);
    for (size_t s = 0; s < lengths.size(); ++s)
      for (int64_t p = 0; p < lengths[s]; ++p) {
        sample.push_back(int32_t(s));
        pos.push_back(int32_t(p));
      }
    full();
  }

  void full() {
    model::LocalAttention<double> local(AttnOptions{8, 16, 1});
    const double* b = qkv.data();
    const model::QueryBlock<double> q{b, ld, sample.data(), pos.data(), n};
    const model::KvBlock<double> kv{b + qw, b + qw + kw, ld, ld, sample.data(), pos.data(), n};
    out.resize(size_t(n * qw));
    lse.resize(size_t(n * dims.n_heads));
    local.forward(0, dims, q, kv, {out.data(), qw, lse.data()});
    dq.assign(size_t(n * qw), 0);
    dk.assign(size_t(n * kw), 0);
    dv.assign(size_t(n * kw), 0);
    local.backward(0, dims, q, kv, out.data(), qw, lse.data(), dout.data(), qw, dq.data(), qw,
                   {dk.data(), dv.data(), kw, kw});
  }

  // The tokens (indices into the full batch) member c of a k-way group holds:
  // each document's front chunk, then its back chunk.
  std::vector<int64_t> rows_of(int k, int c, plan::ChunkRule rule) const {
    std::vector<int64_t> rows;
    int64_t start = 0;
    for (int64_t l : lengths) {
      const plan::MemberChunks ch = plan::member_chunks(l, k, c, rule);
      for (const plan::Span& s : {ch.front, ch.back})
        for (int64_t p = s.begin; p < s.end; ++p) rows.push_back(start + p);
      start += l;
    }
    return rows;
  }
};

// Largest |a - b| over the largest |b|: relative to the tensor's scale.
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, scale = 1e-300;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

// One member's run of `attn` on its rows, compared with the full computation.
template <class T>
void check_member(model::AttentionBackend<T>* attn, const Problem& p,
                  const std::vector<int64_t>& rows, double tol, const std::string& what) {
  const int64_t n = int64_t(rows.size()), H = p.dims.n_heads;
  std::vector<T> qkv(size_t(std::max<int64_t>(n, 1) * p.ld)), dout(size_t(n * p.qw));
  std::vector<int32_t> sample, pos;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rows[size_t(i)];
    for (int64_t c = 0; c < p.ld; ++c) qkv[size_t(i * p.ld + c)] = T(p.qkv[size_t(r * p.ld + c)]);
    for (int64_t c = 0; c < p.qw; ++c) dout[size_t(i * p.qw + c)] = T(p.dout[size_t(r * p.qw + c)]);
    sample.push_back(p.sample[size_t(r)]);
    pos.push_back(p.pos[size_t(r)]);
  }
  const T* b = qkv.data();
  const model::QueryBlock<T> q{b, p.ld, sample.data(), pos.data(), n};
  const model::KvBlock<T> kv{b + p.qw, b + p.qw + p.kw, p.ld, p.ld, sample.data(), pos.data(), n};
  std::vector<T> out(size_t(n * p.qw)), lse(size_t(n * H)), dq(size_t(n * p.qw), T(0)),
      dk(size_t(n * p.kw), T(0)), dv(size_t(n * p.kw), T(0));
  attn->forward(3, p.dims, q, kv, {out.data(), p.qw, lse.data()});
  attn->backward(3, p.dims, q, kv, out.data(), p.qw, lse.data(), dout.data(), p.qw, dq.data(), p.qw,
                 {dk.data(), dv.data(), p.kw, p.kw});
  // The same rows of the full computation, and ours in double.
  auto pick = [&](const std::vector<double>& full, int64_t w) {
    std::vector<double> v;
    for (int64_t r : rows) v.insert(v.end(), full.begin() + r * w, full.begin() + (r + 1) * w);
    return v;
  };
  auto wide = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  EXPECT_LT(rel_error(wide(out), pick(p.out, p.qw)), tol) << what << ": O";
  EXPECT_LT(rel_error(wide(lse), pick(p.lse, H)), tol) << what << ": lse";
  EXPECT_LT(rel_error(wide(dq), pick(p.dq, p.qw)), tol) << what << ": dQ";
  EXPECT_LT(rel_error(wide(dk), pick(p.dk, p.kw)), tol) << what << ": dK";
  EXPECT_LT(rel_error(wide(dv), pick(p.dv, p.kw)), tol) << what << ": dV";
}

std::string name(const char* algo, int k, const AttnDims& d) {
  return std::string(algo) + " k=" + std::to_string(k) + " H=" + std::to_string(d.n_heads) +
         " Hk=" + std::to_string(d.n_kv_heads);
}

// Small tiles so that the gathered blocks span many of them; two threads.
const AttnOptions kOpt{4, 8, 2};

TEST(UlyssesHeads, TheKvRule) {
  // Hk % k == 0: distinct KV heads per member.
  UlyssesHeads h = ulysses_heads({8, 4, 4}, 2);
  EXPECT_EQ(h.q, 4);
  EXPECT_EQ(h.v, 2);
  EXPECT_EQ(h.kv_head(1, 0), 2);
  EXPECT_EQ(h.kv_head(1, 1), 3);
  // k % Hk == 0: one KV head, replicated to the members whose queries use it.
  h = ulysses_heads({8, 2, 4}, 4);
  EXPECT_EQ(h.v, 1);
  EXPECT_EQ(h.kv_head(0, 0), 0);
  EXPECT_EQ(h.kv_head(1, 0), 0);
  EXPECT_EQ(h.kv_head(3, 0), 1);
  // Straddling: H=24, Hk=6 (g=4), k=4 (q=6): sub-groups of gcd(6,4)=2.
  h = ulysses_heads({24, 6, 4}, 4);
  EXPECT_EQ(h.v, 3);
  EXPECT_EQ(h.kv_head(0, 0), 0);
  EXPECT_EQ(h.kv_head(0, 1), 0);
  EXPECT_EQ(h.kv_head(0, 2), 1);
  EXPECT_EQ(h.kv_head(1, 0), 1);
  EXPECT_EQ(h.kv_head(3, 2), 5);
  EXPECT_TRUE(ulysses_fits({8, 2, 4}, 8));
  EXPECT_FALSE(ulysses_fits({6, 2, 4}, 4));
}

TEST(UlyssesAttention, EqualsFullAttention) {
  // Per k: head shapes (H, Hk) covering Hk % k == 0, k % Hk == 0, MQA and
  // straddling KV groups (k = 3: H=12, Hk=4 and H=6, Hk=2).
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> heads = {
      {}, {}, {{8, 4}, {8, 2}, {8, 8}}, {{12, 4}, {6, 2}, {6, 6}}, {{8, 4}, {8, 2}, {8, 1}}};
  for (int k = 2; k <= std::min(4, world_size()); ++k) {
    Group g(k);
    if (g.comm == MPI_COMM_NULL) continue;
    for (auto [H, Hk] : heads[size_t(k)]) {
      const AttnDims dims{H, Hk, 4};
      // Four documents, one of 3 tokens (< 2k): some members hold none of it.
      const Problem p(dims, {29, 3, 17, 11}, unsigned(100 * k + H + Hk));
      const auto rows = p.rows_of(k, g.me, plan::ChunkRule::kBalanced);
      UlyssesAttention<float> f(g.comm, g.me, kOpt, 60.0);
      check_member(&f, p, rows, 1e-5, name("ulysses float", k, dims));
      UlyssesAttention<double> d(g.comm, g.me, kOpt, 60.0);
      check_member(&d, p, rows, 1e-12, name("ulysses double", k, dims));
    }
  }
}

// The tests on one group of 4 ranks (world ranks 0-3).
class FourMembers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (world_size() < 4) GTEST_SKIP() << "needs 4 ranks";
    group_ = std::make_unique<Group>(4);
  }
  MPI_Comm comm() const { return group_->comm; }
  int me() const { return group_->me; }
  std::vector<int64_t> rows(const Problem& p,
                            plan::ChunkRule rule = plan::ChunkRule::kBalanced) const {
    return p.rows_of(4, me(), rule);
  }

 private:
  std::unique_ptr<Group> group_;
};

// The padded rule leaves member 3 of 4 without a single token here.
TEST_F(FourMembers, UlyssesWithAnEmptyMember) {
  const Problem p({8, 2, 4}, {3, 2, 3}, 7);
  if (me() == 3) {
    EXPECT_TRUE(rows(p, plan::ChunkRule::kPadded).empty());
  }
  UlyssesAttention<double> d(comm(), me(), kOpt, 60.0);
  check_member(&d, p, rows(p, plan::ChunkRule::kPadded), 1e-12, "padded, an empty member");
}

TEST_F(FourMembers, HybridEqualsFullAttention) {
  // u = 2, r = 2 is the hybrid proper; u = 1 is a plain ring, u = 4 plain Ulysses.
  for (int u : {2, 1, 4}) {
    for (auto [H, Hk] : std::vector<std::pair<int64_t, int64_t>>{{8, 4}, {8, 2}, {8, 1}}) {
      const AttnDims dims{H, Hk, 4};
      const Problem p(dims, {29, 3, 17, 11}, unsigned(7 * u + H + Hk));
      HybridAttention hybrid(comm(), me(), u, 64, kOpt, 60.0);
      check_member(&hybrid, p, rows(p), 1e-5, name("hybrid", 4, dims) + " u=" + std::to_string(u));
    }
  }
}

// With equal shares (every length a multiple of k), the bytes sent are the
// documented formulas exactly.
TEST_F(FourMembers, BytesMatchTheFormulas) {
  const AttnDims dims{8, 2, 4};
  const Problem p(dims, {16, 8, 12}, 3);
  const double n = double(rows(p).size());
  ASSERT_EQ(n, 9);
  UlyssesAttention<float> ulysses(comm(), me(), kOpt, 60.0);
  check_member(&ulysses, p, rows(p), 1e-5, "ulysses (bytes)");
  const CpBytes ub = ulysses_bytes_per_token(dims, 4, sizeof(float));
  EXPECT_EQ(ulysses.bytes_sent(), n * (ub.forward + ub.backward));

  HybridAttention hybrid(comm(), me(), 2, 64, kOpt, 60.0);
  check_member(&hybrid, p, rows(p), 1e-5, "hybrid (bytes)");
  const HybridBytes hb = hybrid_bytes_per_token(dims, 2, 2, sizeof(float));
  EXPECT_EQ(hybrid.all_to_all_bytes_sent(), n * (hb.all_to_all.forward + hb.all_to_all.backward));
  // Plus RingAttention's 8-byte header on each of the 2r - 1 shifts.
  EXPECT_EQ(hybrid.ring_bytes_sent(), n * (hb.ring.forward + hb.ring.backward) + 8 * 3);
}

// The error a trainer would see for heads that do not split: one message,
// the same on every member, before anything is sent.
TEST_F(FourMembers, HeadsThatDoNotSplit) {
  const Problem p({6, 2, 4}, {9}, 5);
  auto message_of = [&](model::AttentionBackend<float>* attn) {
    try {
      check_member(attn, p, rows(p), 1e-5, "");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  UlyssesAttention<float> ulysses(comm(), me(), kOpt, 60.0);
  const std::string m = message_of(&ulysses);
  EXPECT_NE(m.find("cannot split 6 query heads (2 KV heads"), std::string::npos) << m;
  EXPECT_NE(m.find("over 4 context-parallel members"), std::string::npos) << m;
  HybridAttention hybrid(comm(), me(), 4, 64, kOpt, 60.0);
  EXPECT_NE(message_of(&hybrid).find("over 4 context-parallel members"), std::string::npos);
  EXPECT_THROW(HybridAttention(comm(), me(), 3, 64, kOpt, 60.0), Error);
  // A communicator whose rank order is not the member order.
  EXPECT_THROW(UlyssesAttention<float>(comm(), (me() + 1) % 4, kOpt, 60.0), Error);
}

}  // namespace
}  // namespace meshloom::train
