#include "plan/cost/device_memory.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/model_shape.hpp"
#include "plan/pipeline/pipeline.hpp"
#include "plan/planner.hpp"

namespace meshloom::plan {

namespace {

constexpr int64_t kF32 = 4, kI32 = 4, kF64 = 8;
constexpr int64_t kCublasWorkspace = int64_t(32) << 20;  // kernels/host/blas/gemm.cpp
constexpr int64_t kBlockGradsAlign = 256;                // kernels/host/model/ring_link.cpp
// cuDNN's fused-attention plans ask for their workspace only once built on a
// GPU (kernels/host/cudnn/sdpa_plan.hpp); the backward's large fp32 scratch is
// counted apart, so this allowance is for the engine's own.
constexpr int64_t kCudnnPlanWorkspace = int64_t(64) << 20;

// BlockLayout(n, kv_dim, t).bytes(true) of kernels/host/model/ring_link.cpp: K and
// V rows and two int32 ids per row, then fp32 dK and dV on a fresh boundary.
int64_t ring_block_bytes(int64_t n, int64_t kv_dim, int64_t t) {
  const int64_t rows = 2 * n * kv_dim * t + 2 * n * kI32;
  const int64_t aligned = (rows + kBlockGradsAlign - 1) / kBlockGradsAlign * kBlockGradsAlign;
  return aligned + 2 * n * kv_dim * kF32;
}

}  // namespace

int resident_layers(int layers, double offload) {
  // CudaBackend::forward_backward offloads the first `offloaded` layers; the
  // store keeps the rest, plus two slots those layers take turns in.
  const int offloaded =
      offload > 0 ? std::min(layers, 2 + int(std::lround(offload * double(layers - 2)))) : 0;
  return layers - offloaded + (offloaded > 0 ? 2 : 0);
}

DeviceMemory device_memory(const DeviceMemoryInput& in) {
  const model::Shape& s = in.shape;
  ML_CHECK(s.experts == 1, "the CUDA backend's model is dense: no estimate for experts");
  ML_CHECK(in.trainers >= 1 && in.tokens >= 0 && (in.elem_bytes == 2 || in.elem_bytes == 4),
           "device_memory: bad input");
  ML_CHECK(in.tp >= 1 && in.in_flight >= 1, "device_memory: tp and in_flight must be >= 1");
  // TP rank 0's share: heads, KV heads, FFN columns and vocabulary rows
  // split tp ways (rounded up), the model dimension d whole.
  const model::Shape::TpShare my = s.tp_share(in.tp);
  const bool stage = in.stage_layers >= 0;
  const int64_t layers = stage ? in.stage_layers : s.n_layers;
  const int64_t t = in.elem_bytes, n = in.tokens;
  const int64_t P = s.stage_numel(in.tp, layers, in.first_stage, in.last_stage);
  const int64_t d = s.d_model, f = my.ffn, V = my.vocab_rows, H = my.heads;
  const int64_t qd = H * s.head_dim, kvd = my.kv_heads * s.head_dim;
  const int64_t qkvd = qd + 2 * kvd;

  DeviceMemory m;
  m.input = in;
  // cuda::Transformer's params_ (T) and grads_ (fp32), and its Blas's workspace.
  m.weights = P * t;
  m.grads = P * kF32;
  m.cublas = kCublasWorkspace;
  // DeviceAdamW, as CudaBackend::start_optimizer makes it: the master buffer
  // padded to T shards of ceil(P / T) (Trainer's shard_size), m, v and the
  // decay mask (1 byte) of the largest slice (trainer 0's).
  const int64_t shard = in.zero1 ? (P + in.trainers - 1) / in.trainers : P;
  m.master = (in.zero1 ? shard * in.trainers : P) * kF32;
  m.moments = shard * (2 * kF32 + 1);
  // ActivationStore::resize, per layer and token: x, xn1, h, xn2, q|k|v, o,
  // the SwiGLU input a|b (T); 1/rms twice and the log-sum-exp per head (fp32).
  m.resident_layers = resident_layers(int(layers), in.offload);
  const int64_t per_layer = (4 * d + qkvd + qd + 2 * f) * t + (2 + H) * kF32;
  m.activations = n * per_layer * m.resident_layers * in.in_flight;
  // cuda::Transformer::ensure_buffers: x_final, xf, dx, dh, dxn (T x d), u, du
  // (T x f), dab (T x 2f), do (T x q_dim), dqkv (fp32) and, in bf16, its
  // T copy; 1/rms of the final norm, the loss and count. Then the batch's
  // four int32 ids per token and its embedding groups (ids, offsets, order:
  // at most min(n, V) groups), and LocalDeviceAttention's delta (fp32 per head).
  const int64_t groups = std::min(n, V);
  m.workspace = n * (5 * d + 4 * f + qd) * t + n * qkvd * kF32 + (t == kF32 ? 0 : n * qkvd * t) +
                n * kF32 + 2 * kF64 + 4 * n * kI32 + (2 * groups + 1 + n) * kI32 + n * H * kF32;
  // The RoPE table (kernels/host/model/device_rope_table.hpp): cos and sin (fp32,
  // head_dim / 2 each) per position, rows rounded up to a power of two.
  if (in.positions > 0)
    m.workspace += int64_t(std::bit_ceil(uint64_t(in.positions))) * in.shape.head_dim * kF32;
  // A stage's transfers (cuda_backend.cpp): the received values and the ones
  // on their way (T), the fp32 host staging.
  if (stage) m.workspace += n * d * (2 * t + kF32);
  // The fused loss (kernels/host/model/device_lm_loss.hpp): one chunk's logits (T,
  // min(n, loss_chunk) x V/tp) and its per-token statistics (fp64 x 3), the
  // unscaled d(final states) (T, n x d) and d(head) (fp32, V/tp x d); the
  // model's row_loss_ (fp64 per token).
  const int64_t chunk = std::min(n, in.loss_chunk);
  if (in.last_stage)
    m.logits = chunk * V * t + 3 * chunk * kF64 + n * d * t + V * d * kF32 + n * kF64;
  if (in.rings) {
    // ring_link_nccl.cpp keeps a current and a next block; ring_link_mpi.cpp
    // one device block that it stages through host memory.
    m.ring_buffers = (in.nccl ? 2 : 1) * ring_block_bytes(n, kvd, t);
    // DeviceRingAttention: acc_ and part_ (fp32 x q_dim), part_lse_ and
    // delta_ (fp32 per head).
    m.ring_attention = n * (2 * qd + 2 * H) * kF32;
    // (A hybrid's ring runs on u members' tokens for H/u heads: the same bound.)
    // kernels/host/comm/group_comms.hpp: the groups' communicators, at most this.
    if (in.nccl) m.group_comms = in.group_cache;
  }
  if (in.rings && in.ulysses) {
    // DeviceUlyssesAttention over k members of n tokens each: per member
    // v <= H/k KV heads, so k·n rows of Q, K, V, dO are at most 4·n·q_dim
    // whatever k. Backward's packed and gathered rows (T, 2 x 4·n·q_dim),
    // forward's result and returned O (T, 2 x n·q_dim), the fp32 dQ, dK, dV
    // gathered and returned (2 x 3·n·q_dim), lse, delta and their sections
    // (fp32, 7 per token and head), and the group's ids (k <= trainers).
    m.ulysses = 10 * n * qd * t + 6 * n * qd * kF32 + 7 * n * H * kF32 + 2 * n * in.trainers * kI32;
  }
  if (in.cudnn_attention && t == 2) {
    // CudnnDeviceAttention's backward: bf16 dQ, dK, dV (n x (q_dim + 2
    // kv_dim)), the graph's fp32 softmax_sum (per head) and dQ accumulator,
    // with GQA fp32 full-head dK and dV (n x q_dim each); the plan's workspace.
    const int64_t backward =
        n * (qd + 2 * kvd) * t + n * H * kF32 + n * qd * kF32 + (kvd < qd ? 2 * n * qd * kF32 : 0);
    m.cudnn = backward + kCudnnPlanWorkspace;
    // A ring's or Ulysses' CudnnBlockAttention holds its own: the same
    // backward scratch, a pass's O (bf16 and fp32) and lse, Ulysses' fp32
    // accumulator (k·n rows of H/k heads: n·q_dim).
    if (in.rings) m.cudnn += backward + n * qd * (t + kF32) + n * H * kF32 + n * qd * kF32;
  }
  return m;
}

std::vector<DeviceMemory::Term> DeviceMemory::terms() const {
  return {{"weights", weights},           {"master weights", master},
          {"AdamW moments", moments},     {"gradients", grads},
          {"cuBLAS workspace", cublas},   {"activations", activations},
          {"workspace", workspace},       {"logits", logits},
          {"ring buffers", ring_buffers}, {"ring attention", ring_attention},
          {"Ulysses buffers", ulysses},   {"group communicators", group_comms},
          {"cuDNN attention", cudnn}};
}

int64_t DeviceMemory::total() const {
  return weights + master + moments + grads + cublas + activations + workspace + logits +
         ring_buffers + ring_attention + ulysses + group_comms + cudnn;
}

std::string DeviceMemory::describe(int most) const { return describe_terms(terms(), most); }

std::string describe_terms(std::vector<DeviceMemory::Term> t, int most) {
  int64_t total = 0;
  for (const auto& term : t) total += term.bytes;
  std::stable_sort(t.begin(), t.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::vector<std::string> parts;
  for (size_t i = 0; i < t.size() && int(i) < most && t[i].bytes > 0; ++i)
    parts.push_back(strf("%s %s", t[i].name, human_bytes(double(t[i].bytes)).c_str()));
  return human_bytes(double(total)) + " (" + join(parts, ", ") + ")";
}

int64_t capacity_for_memory(DeviceMemoryInput in, double bytes) {
  // Every term grows with the tokens: bisect on the largest n that fits.
  auto fits = [&](int64_t n) {
    in.tokens = n;
    return double(device_memory(in).total()) <= bytes;
  };
  if (!fits(0)) return 0;
  int64_t lo = 0, hi = 1;
  while (fits(hi) && hi < (int64_t(1) << 40)) lo = hi, hi *= 2;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

DeviceMemory device_memory_for_run(const config::Config& c, int trainers, bool nccl, int stage) {
  DeviceMemoryInput in;
  in.shape = shape_from_config(c);
  in.elem_bytes = c.run.precision == config::Precision::fp32 ? 4 : 2;
  in.tp = int(c.parallel.tp);
  in.trainers = std::max(1, trainers / in.tp);  // the HDP ranks
  in.zero1 = c.optim.zero1;
  in.nccl = nccl;
  in.loss_chunk = c.model.loss_chunk;
  in.positions = c.data.seq_len;
  const int64_t C = c.plan.capacity, L = c.data.seq_len, step = c.data.tokens_per_step;
  // Every planner splits a sequence only when it exceeds C (the static grid
  // after padding it to an even length).
  in.rings = in.trainers > 1 && 2 * ((L + 1) / 2) > C;
  in.ulysses = c.plan.cp_algorithm != config::CpAlgorithm::ring;
  in.group_cache = c.run.gpu_group_cache_mib << 20;
  in.tokens = largest_micro_batch(c);
  const int pp = int(c.parallel.pp);
  if (pp > 1) {
    // Stage s keeps pp - s micro-batches under 1F1B (none is offloaded).
    const std::vector<int> layers = stage_layers_for_run(c);
    DeviceMemory worst;
    for (int s = 0; s < pp; ++s) {
      if (stage >= 0 && s != stage) continue;
      DeviceMemoryInput st = in;
      st.stage_layers = layers[size_t(s)];
      st.first_stage = s == 0;
      st.last_stage = s == pp - 1;
      st.in_flight = pp - s;
      const DeviceMemory m = device_memory(st);
      if (m.total() > worst.total()) worst = m;
    }
    return worst;
  }
  DeviceMemory best = device_memory(in);
  const int layers = in.shape.n_layers;
  if (c.plan.offload && layers > 2) {
    // The largest offloaded micro-batch: one piece of at most data.seq_len
    // tokens, with the ratio the planner gives it (planner.hpp).
    const int64_t n = std::min({C * layers / 2, L, step});
    if (n > in.tokens) {
      CostModel cost;
      cost.layers = layers;
      in.tokens = n;
      in.offload = offload_ratio_for(n, 1, C, cost);
      const DeviceMemory m = device_memory(in);
      if (m.total() > best.total()) best = m;
    }
  }
  return best;
}

int64_t largest_micro_batch(const config::Config& c) {
  return std::min(c.plan.capacity, c.data.tokens_per_step);
}

std::string device_memory_error(const config::Config& c, const DeviceMemory& m, double free_bytes,
                                int sharers) {
  const DeviceMemoryInput& in = m.input;
  std::string msg = strf(
      "the model and its largest micro-batch (%lld tokens%s) need about %s, but %s of GPU "
      "memory is free",
      (long long)in.tokens, in.offload > 0 ? strf(", offload ratio %.2f", in.offload).c_str() : "",
      m.describe(3).c_str(), human_bytes(free_bytes).c_str());
  if (sharers > 1) msg += strf(" for the %d trainers that share this GPU", sharers);
  msg +=
      strf(". To fit: lower plan.capacity (%lld; activations, logits and workspace grow with it)",
           (long long)c.plan.capacity);
  if (!in.zero1 && in.trainers > 1)
    msg += strf(", set optim.zero1: true (shards the %s of AdamW state over the %d trainers)",
                human_bytes(double(m.master + m.moments)).c_str(), in.trainers);
  if (c.plan.offload)
    msg +=
        ", set plan.offload: false (an offloaded micro-batch holds up to model.n_layers / 2 "
        "x plan.capacity tokens)";
  if (in.elem_bytes == 4) msg += ", set run.precision: bf16";
  if (sharers > 1) msg += ", give each trainer a GPU of its own";
  return msg + ", or use a smaller model";
}

}  // namespace meshloom::plan
