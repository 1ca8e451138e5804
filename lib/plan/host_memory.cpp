#include "plan/host_memory.hpp"

#include <algorithm>

#include "base/check.hpp"

namespace meshloom::plan {

namespace {

constexpr int64_t kF32 = 4, kF64 = 8, kI32 = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

HostMemory host_memory(const HostMemoryInput& in) {
  const ModelShape& s = in.shape;
  ML_CHECK(s.experts == 1, "the CPU model is dense: no estimate for experts");
  ML_CHECK(in.tp >= 1 && in.hdp >= 1 && in.tokens >= 0 && in.loss_chunk >= 1,
           "host_memory: bad input");
  const int64_t tp = in.tp, n = in.tokens, d = s.hidden, hd = s.head_dim();
  const int64_t heads = s.heads / tp, qd = heads * hd, kvd = s.kv_heads * hd / tp;
  const int64_t qkvd = qd + 2 * kvd, f = s.ffn / tp, vrows = ceil_div(s.vocab, tp);
  const int64_t P = s.numel(in.tp);

  HostMemory m;
  m.input = in;
  m.weights = P * kF32;
  m.grads = P * kF32;
  m.moments = 2 * kF32 * (in.zero1 ? ceil_div(P, in.hdp) : P);
  // Transformer::ensure_buffers, per layer and token: the layer's input x,
  // xn1, h, xn2 (d), q|k|v after RoPE, the attention output, its log-sum-exp
  // per head, the SwiGLU input a|b, 1/rms twice; then x after the last layer,
  // the final normalized states and their 1/rms.
  const int64_t per_layer = 4 * d + qkvd + qd + heads + 2 * f + 2;
  m.activations = n * (s.layers * per_layer + 2 * d + 1) * kF32;
  // Backward scratch: u (f), dx, dh, dxn (d), d(a|b) (2f, which also holds
  // the loss's chunk of logits), do (q_dim), dqkv, the row-parallel partial
  // sum (d, tp > 1); the per-token losses (fp64), RoPE's cos and sin, and the
  // batch's four int32 ids (tokens, targets, positions, samples).
  const int64_t swiglu = n * 2 * f, chunk = std::min(n, in.loss_chunk) * vrows;
  m.workspace = (n * (f + 3 * d + qd + qkvd + (tp > 1 ? d : 0) + hd) + swiglu) * kF32 + n * kF64 +
                4 * n * kI32;
  m.logits = std::max<int64_t>(0, chunk - swiglu) * kF32;
  return m;
}

std::vector<HostMemory::Term> HostMemory::terms() const {
  return {{"weights", weights},         {"gradients", grads},     {"AdamW moments", moments},
          {"activations", activations}, {"workspace", workspace}, {"logits", logits}};
}

int64_t HostMemory::total() const {
  return weights + grads + moments + activations + workspace + logits;
}

std::string HostMemory::describe(int most) const { return describe_terms(terms(), most); }

HostMemory host_memory_for_run(const config::Config& c, int trainers) {
  HostMemoryInput in;
  in.shape = shape_from_config(c.model);
  in.tokens = largest_micro_batch(c);
  in.tp = int(c.parallel.tp);
  in.hdp = std::max(1, trainers / in.tp);
  in.zero1 = c.optim.zero1;
  in.loss_chunk = c.model.loss_chunk;
  return host_memory(in);
}

int64_t host_logit_tokens(const config::Config& c) {
  return std::min(largest_micro_batch(c), c.model.loss_chunk);
}

int64_t host_memory_floor(const config::Config& c, int trainers) {
  const HostMemory m = host_memory_for_run(c, trainers);
  const int64_t vrows = ceil_div(m.input.shape.vocab, m.input.tp);
  return m.weights + m.grads + m.moments + host_logit_tokens(c) * vrows * kF32;
}

}  // namespace meshloom::plan
