// cuDNN attention graphs built on the CPU: every tensor and operation
// descriptor of the forward and backward SDPA graphs created and finalized
// by cuDNN without a handle or a GPU, for a few shapes; invalid shapes
// refused with a meshloom::Error; the (sample, position) → documents mapping.
// What needs a GPU (heuristics, plans, numbers) is in cudnn_attention_gpu_test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/check.hpp"
#include "kernels/host/cudnn/sdpa_documents.hpp"
#include "kernels/host/cudnn/sdpa_graph.hpp"
#include "kernels/host/cudnn/sdpa_graph_ops.hpp"
#include "kernels/host/cudnn/sdpa_plan.hpp"

namespace meshloom::cudnn {
namespace {

class CudnnGraph : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = set_fatal_handler(throwing_fatal_handler); }
  void TearDown() override { set_fatal_handler(previous_); }
  FatalHandler previous_ = nullptr;
};

// The model's layout: Q, K, V column slices of one fused [n, (H + 2·Hkv)·D] row.
SdpaShape fused_qkv(int64_t docs, int64_t max_len, int64_t heads, int64_t kv_heads, int64_t d) {
  SdpaShape s;
  s.docs = docs;
  s.max_len = max_len;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = d;
  s.ld_q = s.ld_k = s.ld_v = (heads + 2 * kv_heads) * d;
  s.ld_o = s.ld_do = heads * d;
  return s;
}

std::vector<SdpaShape> shapes() {
  return {fused_qkv(1, 64, 4, 4, 64),       // one document, MHA
          fused_qkv(4, 256, 8, 2, 128),     // packed documents, GQA 4:1
          fused_qkv(16, 2048, 16, 8, 128),  // the ~1B model's 16 heads of 128
          fused_qkv(8, 512, 4, 1, 64)};     // MQA
}

TEST_F(CudnnGraph, ForwardDescriptorsFinalizeWithoutAHandle) {
  for (const SdpaShape& s : shapes()) {
    SCOPED_TRACE(s.describe());
    const SdpaGraph g = build_sdpa_forward_graph(s);
    EXPECT_FALSE(g.backward);
    EXPECT_GE(g.operations.size(), 18u);  // 2 products, scale, masks, softmax
    // Q, K, V, O, Stats, the scalars, sequence lengths and ragged offsets.
    EXPECT_EQ(g.bound_uids.size(), 14u);
  }
}

TEST_F(CudnnGraph, BackwardDescriptorsFinalizeWithoutAHandle) {
  for (const SdpaShape& s : shapes()) {
    SCOPED_TRACE(s.describe());
    const SdpaGraph g = build_sdpa_backward_graph(s);
    EXPECT_TRUE(g.backward);
    const bool gqa = s.heads != s.kv_heads;
    EXPECT_GE(g.operations.size(), gqa ? 28u : 26u);
    EXPECT_EQ(g.bound_uids.size(), gqa ? 26u : 24u);
  }
}

TEST_F(CudnnGraph, NonCausalGraphsHaveFewerOperations) {
  SdpaShape s = fused_qkv(2, 128, 4, 2, 64);
  const size_t causal = build_sdpa_forward_graph(s).operations.size();
  s.causal = false;
  EXPECT_EQ(build_sdpa_forward_graph(s).operations.size(), causal - 4);
}

TEST_F(CudnnGraph, InvalidShapesAreRefusedWithTheReason) {
  auto refused = [](SdpaShape s, const std::string& expect) {
    try {
      build_sdpa_forward_graph(s);
      ADD_FAILURE() << "accepted: " << s.describe();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
    EXPECT_THROW(build_sdpa_backward_graph(s), Error);
  };
  SdpaShape s = fused_qkv(2, 128, 8, 2, 96);
  refused(s, "head_dim must be 64 or 128");
  s = fused_qkv(2, 128, 6, 4, 64);
  refused(s, "multiple of the KV heads");
  s = fused_qkv(2, 128, 8, 2, 64);
  s.ld_k = 64;
  refused(s, "shorter than Hkv·D");
  s = fused_qkv(2, 128, 8, 2, 64);
  s.ld_o = 8 * 64 + 4;
  refused(s, "multiples of 8");
  s = fused_qkv(0, 128, 8, 2, 64);
  refused(s, "must be positive");
  s = fused_qkv(64, 1 << 16, 16, 8, 128);
  refused(s, "int32 ragged offsets");
}

TEST_F(CudnnGraph, BackwardScratchCoversTheFp32Accumulators) {
  const SdpaShape mha = fused_qkv(4, 256, 8, 8, 64);
  const BackwardScratch w = backward_scratch(mha, 1000);
  EXPECT_EQ(w.dk_full, -1);
  EXPECT_GE(w.dq_accum - w.softmax_sum, 1000 * 8 * 4);
  EXPECT_GE(w.bytes - w.dq_accum, 1000 * 8 * 64 * 4);
  const BackwardScratch g = backward_scratch(fused_qkv(4, 256, 8, 2, 64), 1000);
  EXPECT_GT(g.dv_full, g.dk_full);
  EXPECT_GE(g.bytes - g.dv_full, 1000 * 8 * 64 * 4);
  EXPECT_EQ(g.bytes % 256, 0);
}

TEST(CudnnDocuments, PackedSamplesBecomeRaggedDocuments) {
  const std::vector<int32_t> sample{7, 7, 7, 3, 3, 9};
  const std::vector<int32_t> pos{0, 1, 2, 0, 1, 0};
  std::string why;
  const auto d = packed_documents(sample, pos, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->starts, (std::vector<int32_t>{0, 3, 5, 6}));
  EXPECT_EQ(d->count(), 3);
  EXPECT_EQ(d->max_len, 3);
  EXPECT_EQ(bucket_docs(d->count()), 4);
  EXPECT_EQ(bucket_len(d->max_len), 64);
  EXPECT_EQ(bucket_len(1000), 1024);
  EXPECT_EQ(sequence_lengths(*d, 4), (std::vector<int32_t>{3, 2, 1, 0}));
  EXPECT_EQ(ragged_offsets(*d, 4, 10), (std::vector<int32_t>{0, 30, 50, 60, 60}));
}

TEST(CudnnDocuments, MasksThatAreNotDocumentsFromZeroAreRefused) {
  std::string why;
  // A sample in two runs (a CP rank's zigzag chunks look like this).
  EXPECT_FALSE(
      packed_documents(std::vector<int32_t>{1, 1, 2, 1}, std::vector<int32_t>{0, 1, 0, 2}, &why));
  EXPECT_NE(why.find("not one run"), std::string::npos) << why;
  // Positions not from 0 (a later chunk of a document).
  EXPECT_FALSE(packed_documents(std::vector<int32_t>{1, 1}, std::vector<int32_t>{4, 5}, &why));
  EXPECT_NE(why.find("count from 0"), std::string::npos) << why;
}

}  // namespace
}  // namespace meshloom::cudnn

namespace meshloom::cudnn {
namespace {

// Finalization checks something: cuDNN refuses a product whose inner
// dimensions disagree, and the failure arrives as a meshloom::Error naming cuDNN.
TEST_F(CudnnGraph, CudnnRefusalsArriveAsErrors) {
  SdpaGraph g;
  GraphOps ops(g);
  const Descriptor& a = ops.bound(1, CUDNN_DATA_BFLOAT16, {1, 1, 64, 32}, {2048, 2048, 32, 1});
  const Descriptor& b = ops.bound(2, CUDNN_DATA_BFLOAT16, {1, 1, 48, 64}, {3072, 3072, 64, 1});
  const Descriptor& c = ops.bound(3, CUDNN_DATA_FLOAT, {1, 1, 64, 64}, {4096, 4096, 64, 1});
  try {
    ops.matmul(a, b, c, {});
    ADD_FAILURE() << "cuDNN accepted a 64x32 by 48x64 product";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuDNN"), std::string::npos) << e.what();
  }
}

// cuDNN 9.x (9.19 here) finalizes the operation graph itself without a
// handle: the whole graph's wiring (every operation's inputs produced or
// bound) is checked here, not only each descriptor.
TEST_F(CudnnGraph, OperationGraphsFinalizeWithoutAHandle) {
  for (const SdpaShape& s : shapes()) {
    SCOPED_TRACE(s.describe());
    EXPECT_NO_THROW(finalize_operation_graph(build_sdpa_forward_graph(s), nullptr));
    EXPECT_NO_THROW(finalize_operation_graph(build_sdpa_backward_graph(s), nullptr));
  }
}

}  // namespace
}  // namespace meshloom::cudnn
