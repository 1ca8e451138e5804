// The CUDA backend's device-memory estimate: a small shape worked by hand,
// and the properties the start-up check relies on.
#include "plan/cost/device_memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "model/params.hpp"
#include "plan/model_shape.hpp"

using namespace meshloom;
using namespace meshloom::plan;

namespace {

// 2 layers, 2 query heads and 1 KV head of size 4 (d = 8), ffn 12, V = 10, tied.
model::Shape tiny() {
  model::Shape s;
  s.n_layers = 2;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.d_model = 8;
  s.head_dim = 4;
  s.ffn_dim = 12;
  s.vocab = 10;
  s.tied = true;
  return s;
}

DeviceMemoryInput tiny_input(int64_t tokens) {
  DeviceMemoryInput in;
  in.shape = tiny();
  in.tokens = tokens;
  return in;
}

// A llama-7b-sized config model (kv_dim 8 x 128 = 1024), C = 32K, 128K samples.
config::Config big_config(const std::vector<std::string>& sets = {}) {
  return config::parse_config(
      "model: {vocab_size: 32000, d_model: 4096, n_layers: 32, n_heads: 32, n_kv_heads: 8, "
      "ffn_dim: 11008, tied_embeddings: false}\n"
      "data: {seq_len: 131072, tokens_per_step: 1048576, sources: [{name: a, path: x}]}\n"
      "plan: {capacity: 32768}\n",
      "big.yaml", sets);
}

}  // namespace

TEST(DeviceMemory, SmallShapeByHand) {
  // Parameters: embed 10x8 = 80; per layer 2 norms 16, wq|wk|wv 16x8 = 128,
  // wo 8x8 = 64, w1, w3, w2 3x8x12 = 288 (496); final norm 8: 80 + 992 + 8.
  EXPECT_EQ(tiny().numel(), 1080);
  DeviceMemoryInput in = tiny_input(5);  // bf16, one trainer, no offloading
  const DeviceMemory m = device_memory(in);
  EXPECT_EQ(m.weights, 1080 * 2);
  EXPECT_EQ(m.grads, 1080 * 4);
  EXPECT_EQ(m.master, 1080 * 4);
  EXPECT_EQ(m.moments, 1080 * 9);  // m and v fp32, the decay mask 1 byte
  EXPECT_EQ(m.cublas, 32 << 20);
  // Per layer and token: (4 x 8 + 16 + 8 + 2 x 12) bf16 = 160 B, (2 + 2 heads) fp32 = 16 B.
  EXPECT_EQ(m.resident_layers, 2);
  EXPECT_EQ(m.activations, 176 * 5 * 2);
  // (5 x 8 + 4 x 12 + 8) bf16 x 5 = 960, dqkv fp32 5 x 16 x 4 = 320 and its bf16 copy 160,
  // 1/rms 20, loss and count 16, four ids 80, embedding groups (5 + 1 + 5 + 5) x 4 = 64,
  // delta 5 x 2 x 4 = 40.
  EXPECT_EQ(m.workspace, 960 + 320 + 160 + 20 + 16 + 80 + 64 + 40);
  // The fused loss: one chunk (all 5 tokens) of logits 5 x 10 bf16 = 100 and its
  // statistics 3 x 5 fp64 = 120, d(final states) 5 x 8 bf16 = 80, d(head)
  // 10 x 8 fp32 = 320; row losses 5 fp64 = 40.
  EXPECT_EQ(m.logits, 100 + 120 + 80 + 320 + 40);
  EXPECT_EQ(m.ring_buffers, 0);
  EXPECT_EQ(m.ring_attention, 0);
  // The RoPE table: 1000 positions take 1024 rows of cos and sin, fp32.
  DeviceMemoryInput rope = in;
  rope.positions = 1000;
  EXPECT_EQ(device_memory(rope).workspace - m.workspace, 1024 * tiny().head_dim * 4);

  // A ring over NCCL: two blocks of K|V (5 x 4 x 2 bf16 x 2 = 80) and ids (40), padded
  // to 256, then fp32 dK|dV (160); the accumulators 5 x (2 x 8 + 2 x 2) x 4.
  in.trainers = 2;
  in.rings = true;
  in.nccl = true;
  const DeviceMemory r = device_memory(in);
  EXPECT_EQ(r.ring_buffers, 2 * (256 + 160));
  EXPECT_EQ(r.ring_attention, 400);
  // fp32 drops the bf16 copy of dqkv and doubles every T buffer.
  in = tiny_input(5);
  in.elem_bytes = 4;
  const DeviceMemory f = device_memory(in);
  EXPECT_EQ(f.weights, 1080 * 4);
  EXPECT_EQ(f.activations, (80 * 4 + 16) * 5 * 2);
  EXPECT_EQ(f.workspace, 1920 + 320 + 20 + 16 + 80 + 64 + 40);
}

TEST(DeviceMemory, CudnnAttentionScratchByHandOnlyInBf16) {
  // tiny, 5 tokens, GQA 2:1 (q_dim 8, kv_dim 4): dQ|dK|dV 5 x 16 bf16 = 160,
  // softmax_sum 5 x 2 heads fp32 = 40, the dQ accumulator 5 x 8 fp32 = 160,
  // full-head dK and dV 2 x 160, and the 64 MiB plan allowance.
  DeviceMemoryInput in = tiny_input(5);
  EXPECT_EQ(device_memory(in).cudnn, 0);  // not counted unless asked
  in.cudnn_attention = true;
  const int64_t backward = 160 + 40 + 160 + 320;
  const DeviceMemory m = device_memory(in);
  EXPECT_EQ(m.cudnn, backward + (int64_t(64) << 20));
  // Rings add a block attention's own: the same scratch, a pass's O in bf16
  // and fp32 (5 x 8 x 6 = 240), its lse (40) and Ulysses' accumulator (160).
  in.trainers = 2;
  in.rings = true;
  EXPECT_EQ(device_memory(in).cudnn - m.cudnn, backward + 240 + 40 + 160);
  in.cudnn_attention = false;
  EXPECT_EQ(device_memory(in).cudnn, 0);
  in = tiny_input(5);
  in.cudnn_attention = true;
  in.elem_bytes = 4;  // fp32 always runs the flash kernels
  EXPECT_EQ(device_memory(in).cudnn, 0);
}

TEST(DeviceMemory, NumelIsTheParamLayouts) {
  for (bool images : {false, true})
    for (bool tied : {true, false}) {
      config::Config c;
      config::ModelConfig& mc = c.model;
      mc.n_kv_heads = 2;
      mc.tied_embeddings = tied;
      if (images) {  // patch_embed [d, 3 p^2] joins the layout
        c.data.sources.push_back({});
        c.data.sources.back().format = config::SourceFormat::webdataset;
      }
      const int64_t P = config::patch_dim(c);
      EXPECT_EQ(shape_from_config(c).numel(),
                model::ParamLayout(model::Shape::from_config(mc, P)).numel())
          << tied << " images " << images;
      // TP rank 0's shard (the largest vocabulary block: V = 50257 splits
      // unevenly).
      for (int tp : {2, 4}) {
        mc.n_kv_heads = 4;
        EXPECT_EQ(shape_from_config(c).numel(tp),
                  model::ParamLayout(model::Shape::from_config(mc, P), {tp, 0}).numel())
            << tied << " tp " << tp << " images " << images;
      }
    }
}

TEST(DeviceMemory, TotalIsTheSumOfTheTerms) {
  for (bool rings : {false, true})
    for (bool zero1 : {false, true}) {
      DeviceMemoryInput in = tiny_input(777);
      in.rings = rings;
      in.nccl = rings;
      in.ulysses = rings;
      in.group_cache = 12345;
      in.zero1 = zero1;
      in.trainers = 3;
      in.offload = 0.5;
      in.cudnn_attention = true;
      const DeviceMemory m = device_memory(in);
      int64_t sum = 0;
      std::set<std::string> names;
      for (const DeviceMemory::Term& t : m.terms()) {
        sum += t.bytes;
        names.insert(t.name);
      }
      EXPECT_EQ(m.total(), sum);
      EXPECT_EQ(names.size(), 13u);  // every term once
    }
}

TEST(DeviceMemory, RingBuffersOnlyWhereRingsCanRun) {
  DeviceMemoryInput in = tiny_input(64);
  in.trainers = 4;
  in.nccl = true;
  EXPECT_EQ(device_memory(in).ring_buffers, 0);  // no ring: nothing, NCCL or not
  in.rings = true;
  const int64_t nccl = device_memory(in).ring_buffers;
  in.nccl = false;
  const int64_t mpi = device_memory(in).ring_buffers;
  EXPECT_GT(mpi, 0);  // MPI stages through one device block
  EXPECT_EQ(nccl, 2 * mpi);

  // The run: rings need a second trainer and a sequence longer than C.
  const config::Config c = big_config();
  EXPECT_EQ(device_memory_for_run(c, 1, true).ring_buffers, 0);
  const DeviceMemory m = device_memory_for_run(c, 8, true);
  // ring_link_nccl.cpp's two blocks at kv_dim 1024 and 32K tokens: ~768 MiB.
  EXPECT_NEAR(double(m.ring_buffers) / double(1 << 20), 768.0, 1.0);
  EXPECT_EQ(device_memory_for_run(c, 8, false).ring_buffers, m.ring_buffers / 2);
  const config::Config fits = big_config({"data.seq_len=32768"});
  EXPECT_EQ(device_memory_for_run(fits, 8, true).ring_buffers, 0);
}

TEST(DeviceMemory, UlyssesBuffersOnlyWithUlyssesOrHybrid) {
  const config::Config ring = big_config();
  EXPECT_EQ(device_memory_for_run(ring, 8, true).ulysses, 0);
  for (const char* algo : {"ulysses", "hybrid", "auto"}) {
    const config::Config c = big_config({std::string("plan.cp_algorithm=") + algo});
    const DeviceMemory m = device_memory_for_run(c, 8, true);
    EXPECT_GT(m.ulysses, 0) << algo;
    // At least the gathered Q, K, V, dO rows of the member's tokens.
    EXPECT_GE(m.ulysses, 2 * m.input.tokens * 4096 * m.input.elem_bytes) << algo;
    EXPECT_EQ(device_memory_for_run(c, 1, true).ulysses, 0) << algo;  // no group
  }
}

TEST(DeviceMemory, GroupCommunicatorsCountAtTheirBoundOnlyOverNccl) {
  const config::Config c = big_config({"run.gpu_group_cache_mib=300"});
  EXPECT_EQ(device_memory_for_run(c, 8, true).group_comms, int64_t(300) << 20);
  EXPECT_EQ(device_memory_for_run(c, 8, false).group_comms, 0);  // MPI rings
  EXPECT_EQ(device_memory_for_run(c, 1, true).group_comms, 0);   // no group
  const config::Config fits = big_config({"data.seq_len=32768"});
  EXPECT_EQ(device_memory_for_run(fits, 8, true).group_comms, 0);  // nothing split
}

TEST(DeviceMemory, PipelineStagesHoldTheirLayersAndMicroBatchesInFlight) {
  const DeviceMemoryInput whole = tiny_input(64);
  DeviceMemoryInput first = whole;
  first.stage_layers = 1;
  first.last_stage = false;
  first.in_flight = 2;
  DeviceMemoryInput last = whole;
  last.stage_layers = 1;
  last.first_stage = false;
  const DeviceMemory w = device_memory(whole), f = device_memory(first), l = device_memory(last);
  EXPECT_EQ(f.weights, whole.shape.stage_numel(1, 1, true, false) * 2);
  EXPECT_EQ(l.weights, whole.shape.stage_numel(1, 1, false, true) * 2);
  EXPECT_LT(f.weights, w.weights);
  EXPECT_EQ(f.activations, w.activations);  // half the layers, twice the micro-batches
  EXPECT_EQ(l.activations, w.activations / 2);
  EXPECT_EQ(f.logits, 0);  // the loss runs on the last stage
  EXPECT_EQ(l.logits, w.logits);
  EXPECT_GT(f.workspace, w.workspace);  // the stage transfers' buffers

  // The run: each stage's, or the one that needs the most.
  const config::Config c = big_config({"parallel.pp=2"});
  const DeviceMemory s0 = device_memory_for_run(c, 8, true, 0);
  const DeviceMemory s1 = device_memory_for_run(c, 8, true, 1);
  EXPECT_EQ(s0.input.in_flight, 2);
  EXPECT_EQ(s1.input.in_flight, 1);
  EXPECT_EQ(device_memory_for_run(c, 8, true).total(), std::max(s0.total(), s1.total()));
  EXPECT_LT(s1.total(), device_memory_for_run(big_config(), 8, true).total());
}

TEST(DeviceMemory, Zero1ShardsTheMomentsAsDeviceAdamWPads) {
  DeviceMemoryInput in = tiny_input(16);
  const int64_t P = in.shape.numel();  // 1080
  in.trainers = 7;
  const DeviceMemory full = device_memory(in);
  in.zero1 = true;
  const DeviceMemory z = device_memory(in);
  const int64_t shard = (P + 6) / 7;  // 155: the last trainer's slice is shorter
  EXPECT_EQ(z.moments, shard * 9);
  EXPECT_LT(z.moments * 7 - full.moments, 7 * 9);  // only the padding more
  EXPECT_EQ(z.master, shard * 7 * 4);              // padded to equal shards
  EXPECT_GE(z.master, full.master);
  EXPECT_EQ(z.weights, full.weights);
  EXPECT_EQ(z.grads, full.grads);  // gradients stay whole
  in.trainers = 1;                 // one trainer: one shard, no padding
  EXPECT_EQ(device_memory(in).total(), full.total());
}

TEST(DeviceMemory, ActivationsLinearInTokensAndShrinkWithOffloading) {
  DeviceMemoryInput in = tiny_input(1000);
  in.shape.n_layers = 10;
  const DeviceMemory a = device_memory(in);
  in.tokens = 3000;
  const DeviceMemory b = device_memory(in);
  EXPECT_EQ(b.activations, 3 * a.activations);
  // The loss's chunk stays (512 tokens); d(final states) and the row losses
  // grow with the tokens.
  EXPECT_EQ(b.logits - a.logits, 2000 * (8 * 2 + 8));
  EXPECT_EQ(b.weights, a.weights);  // the model's state does not depend on C
  int64_t last = b.activations;
  for (double r : {0.1, 0.3, 0.5, 0.8, 1.0}) {
    in.offload = r;
    const DeviceMemory o = device_memory(in);
    EXPECT_LE(o.activations, last) << r;
    EXPECT_EQ(o.workspace, b.workspace) << r;  // the scratch is per token, not per layer
    last = o.activations;
  }
  EXPECT_EQ(last * 5, b.activations);  // r = 1: the two slots of 10 layers
}

TEST(DeviceMemory, ResidentLayersFollowThePlannersCount) {
  // The planner counts 2 + (1 - r)(l - 2) resident layers (plan/plan.hpp); the
  // store rounds the offloaded ones to whole layers.
  for (int l : {3, 4, 7, 32, 80})
    for (double r = 0.01; r <= 1.0; r += 0.01)
      EXPECT_LE(std::abs(resident_layers(l, r) - (2 + (1 - r) * (l - 2))), 0.5 + 1e-9)
          << l << " " << r;
  EXPECT_EQ(resident_layers(32, 0), 32);
  EXPECT_EQ(resident_layers(32, 1), 2);
}

TEST(DeviceMemory, OffloadingPacksMoreTokensIntoTheLargestMicroBatch) {
  const config::Config plain = big_config();
  const config::Config off = big_config({"plan.offload=true"});
  const DeviceMemory p = device_memory_for_run(plain, 8, true);
  const DeviceMemory o = device_memory_for_run(off, 8, true);
  EXPECT_EQ(p.input.tokens, 32768);
  EXPECT_EQ(o.input.tokens, 131072);  // data.seq_len caps C x 32 / 2
  EXPECT_GT(o.input.offload, 0.0);
  // As many layer-tokens of activations (what the planner's capacity keeps),
  // within the store's rounding to whole layers, but the loss's per-token
  // buffers (d(final states) bf16, row losses fp64) for 4x the tokens.
  EXPECT_NEAR(double(o.activations) / double(p.activations), 1.0, 0.5 / 5.0);
  EXPECT_EQ(o.logits - p.logits, (131072 - 32768) * (4096 * 2 + 8));
  EXPECT_GT(o.total(), p.total());
}

TEST(DeviceMemory, TheErrorNamesTheKeysToChange) {
  const config::Config c = big_config();
  const DeviceMemory m = device_memory_for_run(c, 8, true);
  const std::string msg = device_memory_error(c, m, 10e9, 1), terms = m.describe(3);
  for (const std::string& want :
       {std::string("plan.capacity (32768"), std::string("optim.zero1: true"),
        std::string("9.3 GiB of GPU memory is free"), terms})
    EXPECT_NE(msg.find(want), std::string::npos) << want << "\n" << msg;
  EXPECT_EQ(msg.find("plan.offload"), std::string::npos) << msg;
  const config::Config z = big_config({"optim.zero1=true", "plan.offload=true"});
  const std::string zmsg = device_memory_error(z, device_memory_for_run(z, 8, true), 10e9, 2);
  EXPECT_EQ(zmsg.find("optim.zero1"), std::string::npos) << zmsg;
  EXPECT_NE(zmsg.find("plan.offload: false"), std::string::npos) << zmsg;
  EXPECT_NE(zmsg.find("2 trainers that share this GPU"), std::string::npos) << zmsg;
}
