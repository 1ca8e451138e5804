#include "train/ring_attention.hpp"

#include <cstring>

#include "base/check.hpp"
#include "comm/ring_shift.hpp"

namespace meshloom::train {
namespace {
constexpr int kTagForward = 300;
constexpr int kTagBackward = 301;

size_t block_bytes(int64_t n, int64_t kv_dim, bool with_grads) {
  const size_t rows = size_t(n) * size_t(kv_dim) * sizeof(float);
  return sizeof(int64_t) + (with_grads ? 4 : 2) * rows + 2 * size_t(n) * sizeof(int32_t);
}
}  // namespace

RingAttention::RingAttention(MPI_Comm comm, std::vector<int> group, int me, int64_t max_tokens,
                             const model::AttnOptions& opt, double timeout_s)
    : comm_(comm),
      group_(std::move(group)),
      me_(me),
      max_tokens_(max_tokens),
      opt_(opt),
      timeout_s_(timeout_s) {
  ML_CHECK(me_ >= 0 && me_ < int(group_.size()), "ring member index out of range");
}

void RingAttention::pack(const model::KvBlock<float>& kv, int64_t kv_dim, bool with_grads,
                         Block* b) const {
  b->n = kv.n;
  b->bytes.assign(block_bytes(kv.n, kv_dim, with_grads), 0);
  char* p = b->bytes.data();
  std::memcpy(p, &kv.n, sizeof(int64_t));
  float* k = reinterpret_cast<float*>(p + sizeof(int64_t));
  float* v = k + kv.n * kv_dim;
  for (int64_t i = 0; i < kv.n; ++i) {
    std::memcpy(k + i * kv_dim, kv.k + i * kv.ldk, size_t(kv_dim) * sizeof(float));
    std::memcpy(v + i * kv_dim, kv.v + i * kv.ldv, size_t(kv_dim) * sizeof(float));
  }
  int32_t* ids = reinterpret_cast<int32_t*>(v + kv.n * kv_dim);
  std::memcpy(ids, kv.sample, size_t(kv.n) * sizeof(int32_t));
  std::memcpy(ids + kv.n, kv.pos, size_t(kv.n) * sizeof(int32_t));
  // dK/dV (when present) start at zero: assign() above zeroed them.
}

model::KvBlock<float> RingAttention::view(const Block& b, int64_t kv_dim) const {
  const char* p = b.bytes.data();
  const float* k = reinterpret_cast<const float*>(p + sizeof(int64_t));
  const float* v = k + b.n * kv_dim;
  const int32_t* ids = reinterpret_cast<const int32_t*>(v + b.n * kv_dim);
  model::KvBlock<float> kv;
  kv.k = k;
  kv.v = v;
  kv.ldk = kv.ldv = kv_dim;
  kv.sample = ids;
  kv.pos = ids + b.n;
  kv.n = b.n;
  return kv;
}

model::KvGrad<float> RingAttention::grad_view(Block& b, int64_t kv_dim) const {
  char* p = b.bytes.data() + block_bytes(b.n, kv_dim, false);
  float* dk = reinterpret_cast<float*>(p);
  model::KvGrad<float> g;
  g.dk = dk;
  g.dv = dk + b.n * kv_dim;
  g.lddk = g.lddv = kv_dim;
  return g;
}

template <class F>
void RingAttention::shift(const Block& out, Block* in, int tag, size_t cap, F&& compute) {
  const int k = int(group_.size());
  const int next = group_[size_t((me_ + 1) % k)], prev = group_[size_t((me_ + k - 1) % k)];
  comm::RingShift transfer(comm_, next, prev, tag, out.bytes, cap);
  bytes_sent_ += double(out.bytes.size());
  compute();
  transfer.wait(&in->bytes, timeout_s_);
  std::memcpy(&in->n, in->bytes.data(), sizeof(int64_t));
}

void RingAttention::forward(int layer, const model::AttnDims& dims,
                            const model::QueryBlock<float>& q, const model::KvBlock<float>& kv,
                            const model::AttnOut<float>& res) {
  (void)layer;
  const int k = int(group_.size());
  const int64_t kv_dim = dims.n_kv_heads * dims.head_dim;
  const int64_t qw = dims.n_heads * dims.head_dim;
  Block cur, next;
  pack(kv, kv_dim, false, &cur);
  std::vector<float> part(size_t(q.n * qw)), part_lse(size_t(q.n * dims.n_heads));
  model::AttnOut<float> tmp{part.data(), qw, part_lse.data()};
  for (int step = 0; step < k; ++step) {
    auto compute = [&] {
      model::KvBlock<float> block = step == 0 ? kv : view(cur, kv_dim);
      if (step == 0) {
        model::attention_block_forward(dims, q, block, res, opt_);
      } else {
        model::attention_block_forward(dims, q, block, tmp, opt_);
        model::attention_merge(dims, q.n, res, part.data(), qw, part_lse.data(), opt_.threads);
      }
    };
    if (step + 1 < k) {
      shift(cur, &next, kTagForward, block_bytes(max_tokens_, kv_dim, false), compute);
      std::swap(cur, next);
    } else {
      compute();
    }
  }
}

void RingAttention::backward(int layer, const model::AttnDims& dims,
                             const model::QueryBlock<float>& q, const model::KvBlock<float>& kv,
                             const float* out, int64_t ldo, const float* lse, const float* dout,
                             int64_t lddo, float* dq, int64_t lddq,
                             const model::KvGrad<float>& kv_grad) {
  (void)layer;
  std::vector<float> delta(size_t(q.n * dims.n_heads));
  model::attention_delta(dims, q.n, out, ldo, dout, lddo, delta.data(), opt_.threads);
  backward(dims, q, kv, model::QueryGrad<float>{dout, lddo, lse, delta.data(), dq, lddq}, kv_grad);
}

void RingAttention::backward(const model::AttnDims& dims, const model::QueryBlock<float>& q,
                             const model::KvBlock<float>& kv, const model::QueryGrad<float>& g,
                             const model::KvGrad<float>& kv_grad) {
  const int k = int(group_.size());
  const int64_t kv_dim = dims.n_kv_heads * dims.head_dim;
  Block cur, next;
  pack(kv, kv_dim, true, &cur);  // own block with zeroed dK/dV travels
  for (int step = 0; step < k; ++step) {
    auto compute = [&] {
      model::attention_block_backward(dims, q, view(cur, kv_dim), g, grad_view(cur, kv_dim), opt_);
    };
    compute();
    // Pass the block on with what this member added (k passes bring it home).
    shift(cur, &next, kTagBackward, block_bytes(max_tokens_, kv_dim, true), [] {});
    std::swap(cur, next);
  }
  // After k shifts the block in hand is this member's own, with every
  // member's contribution to its dK/dV.
  ML_CHECK(cur.n == kv.n, "ring attention: the returning block is not this member's");
  model::KvGrad<float> home = grad_view(cur, kv_dim);
  for (int64_t i = 0; i < kv.n; ++i)
    for (int64_t c = 0; c < kv_dim; ++c) {
      kv_grad.dk[i * kv_grad.lddk + c] += home.dk[i * kv_dim + c];
      kv_grad.dv[i * kv_grad.lddv + c] += home.dv[i * kv_dim + c];
    }
}

}  // namespace meshloom::train
