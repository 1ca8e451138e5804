#include "plan/cost/host_memory.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pipeline.hpp"

namespace meshloom::plan {

namespace {

constexpr int64_t kF32 = 4, kF64 = 8, kI32 = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

HostMemory host_memory(const HostMemoryInput& in) {
  const model::Shape& s = in.shape;
  ML_CHECK(s.experts == 1, "the CPU model is dense: no estimate for experts");
  ML_CHECK(in.tp >= 1 && in.hdp >= 1 && in.tokens >= 0 && in.loss_chunk >= 1,
           "host_memory: bad input");
  const model::Shape::TpShare my = s.tp_share(in.tp);
  const int64_t tp = in.tp, n = in.tokens, d = s.d_model, hd = s.head_dim;
  const int64_t heads = my.heads, qd = heads * hd, kvd = my.kv_heads * hd;
  const int64_t qkvd = qd + 2 * kvd, f = my.ffn, vrows = my.vocab_rows;
  const int64_t layers = in.stage_layers > 0 ? in.stage_layers : s.n_layers;
  const bool last = in.last_stage;
  const int64_t P = s.stage_numel(in.tp, layers, in.first_stage, last);

  HostMemory m;
  m.input = in;
  m.weights = P * kF32;
  m.grads = P * kF32;
  m.moments = 2 * kF32 * (in.zero1 ? ceil_div(P, in.hdp) : P);
  // Transformer::ensure_buffers. Per layer: the layer's input x, xn1, h, xn2
  // (d) and 1/rms twice for r rows (this rank's rows: all n, or ceil(n / tp)
  // with sequence parallelism); for every token q|k|v after RoPE, the
  // attention output, its log-sum-exp per head and the SwiGLU input a|b.
  // Then x after the last layer and, on the last stage, the final normalized
  // states and 1/rms (r rows). A parked set also holds its RoPE angles and
  // the micro-batch's four int32 ids.
  const bool sp = in.sequence_parallel && tp > 1;
  const int64_t r = sp ? ceil_div(n, tp) : n;
  const int64_t per_layer = r * (4 * d + 2) + n * (qkvd + qd + heads + 2 * f);
  const int64_t one_set = (layers * per_layer + r * d + (last ? r * (d + 1) : 0)) * kF32;
  m.activations = one_set + in.parked * (one_set + n * hd * kF32 + 4 * n * kI32);
  // Backward scratch: dx (which also holds d(h)) and dxn (d, r rows); u (f), d(a|b) (2f, which also
  // holds the loss's chunk of logits), do (q_dim), dqkv, the row-parallel
  // partial sum (d, tp > 1) for every token; with sequence parallelism the
  // gathered [n, d] and the norm gains' partial gradients; the per-token
  // losses (fp64), RoPE's cos and sin, and the batch's four int32 ids.
  const int64_t swiglu = n * 2 * f, chunk = last ? std::min(n, in.loss_chunk) * vrows : 0;
  const int64_t gather = sp ? n * d + (2 * s.n_layers + 1) * d : 0;
  m.workspace = (2 * r * d + n * (f + qd + qkvd + (tp > 1 ? d : 0) + hd) + swiglu + gather) * kF32 +
                n * kF64 + 4 * n * kI32;
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
  in.shape = shape_from_config(c);
  in.tokens = largest_micro_batch(c);
  in.tp = int(c.parallel.tp);
  const int pp = int(c.parallel.pp);
  in.hdp = std::max(1, trainers / (in.tp * pp));
  in.zero1 = c.optim.zero1;
  in.loss_chunk = c.model.loss_chunk;
  in.sequence_parallel = c.parallel.sequence_parallel;
  if (pp == 1) return host_memory(in);
  HostMemory most;
  const std::vector<int> stages = stage_layers_for_run(c);
  for (int st = 0; st < pp; ++st) {
    in.stage_layers = stages[size_t(st)];
    in.first_stage = st == 0;
    in.last_stage = st == pp - 1;
    in.parked = in.last_stage ? 0 : pp - st;
    const HostMemory m = host_memory(in);
    if (m.total() > most.total()) most = m;
  }
  return most;
}

int64_t host_logit_tokens(const config::Config& c) {
  return std::min(largest_micro_batch(c), c.model.loss_chunk);
}

int64_t host_memory_floor(const config::Config& c, int trainers) {
  const HostMemory m = host_memory_for_run(c, trainers);
  const int64_t vrows = m.input.shape.tp_share(m.input.tp).vocab_rows;
  return m.weights + m.grads + m.moments + host_logit_tokens(c) * vrows * kF32;
}

}  // namespace meshloom::plan
