// The flash-attention kernels against the CPU reference (lib/model/attention
// in double) on random inputs: packed documents of odd lengths, GQA (8 query
// heads, 2 KV heads), D = 64 and 128, bf16 (tolerance 1e-2) and fp32 (1e-5)
// inputs, padded (unaligned) leading dimensions, a ring step (a query block
// against another rank's K/V, with rows that see nothing), a block with no
// visible key at all, and forward over split K/V + merge == forward over all.
// bf16 runs every kernel family, forward and backward: the default (wgmma
// forward on an sm_90, else mma.sync; mma.sync backward), the register-tiled
// mma.sync ones (`_mma`), the Hopper wgmma forward (`_wgmma`, skipped on
// other GPUs) and the WMMA ones (`_wmma`, and every padded case).
// Errors are max |gpu - ref| / max |ref|. Every test skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/common/check.cuh"
#include "tests/kernels/attention_test_util.hpp"
#include "tests/kernels/gpu_test.hpp"

namespace meshloom::cuda::test {
namespace {

struct Config {
  bool bf16;     // bf16 inputs (else fp32)
  bool out_f32;  // bf16 inputs with an fp32 forward output
  int head_dim;
  int pad;  // extra columns in the Q and KV leading dimensions (1: unaligned rows)
  FlashKernel kernel = FlashKernel::automatic;
  double tol() const { return bf16 ? 1e-2 : 1e-5; }
  std::string name() const {
    return std::string(bf16 ? (out_f32 ? "bf16_out_f32" : "bf16") : "fp32") + "_D" +
           std::to_string(head_dim) + (pad ? "_padded" : "") + suffix();
  }
  std::string suffix() const {
    switch (kernel) {
      case FlashKernel::wmma:
        return "_wmma";
      case FlashKernel::mma:
        return "_mma";
      case FlashKernel::wgmma:
        return "_wgmma";
      default:
        return "";
    }
  }
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name(); }

constexpr int kHeads = 8, kKvHeads = 2;

FlashDims dims_of(const Config& c) { return {kHeads, kKvHeads, c.head_dim}; }

int64_t q_width(const FlashDims& d) { return int64_t{d.n_heads} * d.head_dim; }
int64_t kv_width(const FlashDims& d) { return int64_t{d.n_kv_heads} * d.head_dim; }

void sync() { CUDA_CHECK(cudaDeviceSynchronize()); }

// GPU forward of q over kv: (out, lse) downloaded as doubles.
template <class T, class TO>
void gpu_forward(const FlashDims& dims, const DeviceBlock<T>& q, const DeviceBlock<T>& kv,
                 DeviceBuf<TO>& out, DeviceBuf<float>& lse) {
  flash_attention_forward<T, TO>(dims, q.query(), kv.keys(), {out.get(), q_width(dims), lse.get()},
                                 nullptr);
  sync();
}

// Increments of a gradient accumulator (after - before).
std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// Backward of the pair (q, kv) on the GPU and the CPU from the same final lse
// and delta (rounded to float) and the same random dq/dk/dv starting values;
// compares what each added.
template <class T>
void check_backward(const Config& c, const Block& qh, const Block& kvh, const DeviceBlock<T>& q,
                    const DeviceBlock<T>& kv, std::vector<double> lse, std::vector<double> delta) {
  const FlashDims dims = dims_of(c);
  for (double& x : lse) x = static_cast<float>(x);
  for (double& x : delta) x = static_cast<float>(x);
  const std::vector<double> dq0 = random_floats(qh.n() * q_width(dims), 0.1, 11);
  const std::vector<double> dk0 = random_floats(kvh.n() * kv_width(dims), 0.1, 12);
  const std::vector<double> dv0 = random_floats(kvh.n() * kv_width(dims), 0.1, 13);
  DeviceBuf<float> d_lse(qh.n() * kHeads), d_delta(qh.n() * kHeads);
  DeviceBuf<float> dq(qh.n() * q_width(dims)), dk(kvh.n() * kv_width(dims)),
      dv(kvh.n() * kv_width(dims));
  upload(d_lse, lse);
  upload(d_delta, delta);
  upload(dq, dq0);
  upload(dk, dk0);
  upload(dv, dv0);
  const FlashQueryGrad<T> g{q.dout.get(),  q.ldq,    d_lse.get(),
                            d_delta.get(), dq.get(), q_width(dims)};
  const FlashKvGrad kg{dk.get(), dv.get(), kv_width(dims), kv_width(dims)};
  flash_attention_backward<T>(dims, q.query(), kv.keys(), g, kg, nullptr);
  sync();
  std::vector<double> rq = dq0, rk = dk0, rv = dv0;
  cpu_backward(dims, qh, kvh, lse, delta, rq, rk, rv);
  EXPECT_LE(rel_error(minus(download(dq), dq0), minus(rq, dq0)), c.tol()) << "dq";
  EXPECT_LE(rel_error(minus(download(dk), dk0), minus(rk, dk0)), c.tol()) << "dk";
  EXPECT_LE(rel_error(minus(download(dv), dv0), minus(rv, dv0)), c.tol()) << "dv";
}

void expect_lse_near(const std::vector<double>& gpu, const std::vector<double>& ref, double tol) {
  int64_t mismatches = 0;
  EXPECT_LE(lse_error(gpu, ref, &mismatches), tol) << "lse";
  EXPECT_EQ(mismatches, 0) << "rows where only one side saw no key";
}

// One block of packed documents attending to itself (the local case).
template <class T, class TO>
void packed_documents(const Config& c) {
  const FlashDims dims = dims_of(c);
  // The 600-token document spans whole 128-query tiles: the forward's unmasked
  // path and its K/V pipeline over many tiles.
  const Block all = make_packed(dims, {1, 37, 130, 257, 600}, 1, c.bf16);
  const int64_t n = all.n();
  const DeviceBlock<T> d(dims, all, c.pad);
  DeviceBuf<TO> out(n * q_width(dims));
  DeviceBuf<float> lse(n * kHeads);
  gpu_forward<T, TO>(dims, d, d, out, lse);
  std::vector<double> ref_out, ref_lse;
  cpu_forward(dims, all, all, ref_out, ref_lse);
  EXPECT_LE(rel_error(download(out), ref_out), c.tol()) << "out";
  expect_lse_near(download(lse), ref_lse, c.tol());

  // delta from the GPU's own output.
  DeviceBuf<float> delta(n * kHeads);
  flash_attention_delta<TO, T>(dims, n, out.get(), q_width(dims), d.dout.get(), d.ldq, delta.get(),
                               nullptr);
  sync();
  const std::vector<double> ref_delta = cpu_delta(dims, all, ref_out);
  EXPECT_LE(rel_error(download(delta), ref_delta), c.tol()) << "delta";

  check_backward<T>(c, all, all, d, d, ref_lse, ref_delta);
}

// Ring step on rank 0 of 2 (zigzag chunks of three packed documents): the
// remote block alone, then local + remote merged == attention over all keys,
// and backward of the remote pair with the final lse and delta.
template <class T, class TO>
void ring_step(const Config& c) {
  const FlashDims dims = dims_of(c);
  const Block all = make_packed(dims, {300, 45, 129}, 2, c.bf16);
  const int64_t n = all.n(), chunk = (n + 3) / 4;
  std::vector<int64_t> rank0, rank1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ch = i / chunk;
    (ch == 0 || ch == 3 ? rank0 : rank1).push_back(i);
  }
  const Block q0 = take_rows(dims, all, rank0), kv1 = take_rows(dims, all, rank1);
  const DeviceBlock<T> d0(dims, q0, c.pad), d1(dims, kv1, c.pad);
  const int64_t nq = q0.n();

  DeviceBuf<TO> part(nq * q_width(dims)), acc(nq * q_width(dims));
  DeviceBuf<float> part_lse(nq * kHeads), acc_lse(nq * kHeads);
  gpu_forward<T, TO>(dims, d0, d1, part, part_lse);
  std::vector<double> ref_out, ref_lse;
  cpu_forward(dims, q0, kv1, ref_out, ref_lse);
  EXPECT_LE(rel_error(download(part), ref_out), c.tol()) << "remote out";
  expect_lse_near(download(part_lse), ref_lse, c.tol());
  int64_t blind = 0;  // the chunk-0 queries of document 0 see nothing remote
  for (double x : ref_lse) blind += std::isinf(x);
  EXPECT_GT(blind, 0) << "the ring case should include rows with no visible key";

  gpu_forward<T, TO>(dims, d0, d0, acc, acc_lse);
  flash_attention_merge<TO>(dims, nq, {acc.get(), q_width(dims), acc_lse.get()}, part.get(),
                            q_width(dims), part_lse.get(), nullptr);
  sync();
  std::vector<double> full_out, full_lse;
  cpu_forward(dims, q0, all, full_out, full_lse);
  EXPECT_LE(rel_error(download(acc), full_out), c.tol()) << "merged out";
  expect_lse_near(download(acc_lse), full_lse, c.tol());

  check_backward<T>(c, q0, kv1, d0, d1, full_lse, cpu_delta(dims, q0, full_out));
}

// Forward over K/V split in two blocks, merged, equals forward over all K/V.
template <class T, class TO>
void split_merge(const Config& c) {
  const FlashDims dims = dims_of(c);
  const Block all = make_packed(dims, {1, 37, 130, 257}, 3, c.bf16);
  const int64_t n = all.n();
  std::vector<int64_t> first, second;
  for (int64_t i = 0; i < n; ++i) (i < 200 ? first : second).push_back(i);
  const DeviceBlock<T> d(dims, all, c.pad);
  const DeviceBlock<T> da(dims, take_rows(dims, all, first), c.pad);
  const DeviceBlock<T> db(dims, take_rows(dims, all, second), c.pad);
  DeviceBuf<TO> whole(n * q_width(dims)), acc(n * q_width(dims)), part(n * q_width(dims));
  DeviceBuf<float> whole_lse(n * kHeads), acc_lse(n * kHeads), part_lse(n * kHeads);
  gpu_forward<T, TO>(dims, d, d, whole, whole_lse);
  gpu_forward<T, TO>(dims, d, da, acc, acc_lse);
  gpu_forward<T, TO>(dims, d, db, part, part_lse);
  flash_attention_merge<TO>(dims, n, {acc.get(), q_width(dims), acc_lse.get()}, part.get(),
                            q_width(dims), part_lse.get(), nullptr);
  sync();
  EXPECT_LE(rel_error(download(acc), download(whole)), c.tol()) << "merged vs whole";
  expect_lse_near(download(acc_lse), download(whole_lse), c.tol());
  std::vector<double> ref_out, ref_lse;
  cpu_forward(dims, all, all, ref_out, ref_lse);
  EXPECT_LE(rel_error(download(acc), ref_out), c.tol()) << "merged vs CPU";
}

// Queries that see no key of the block: zero rows, lse = -inf, and backward
// adds exactly nothing. Also an empty K/V block.
template <class T, class TO>
void no_visible_keys(const Config& c) {
  const FlashDims dims = dims_of(c);
  const Block doc = make_packed(dims, {100}, 4, c.bf16);
  std::vector<int64_t> early, late;
  for (int64_t i = 0; i < 40; ++i) early.push_back(i);
  for (int64_t i = 60; i < 100; ++i) late.push_back(i);
  const Block qh = take_rows(dims, doc, early), kvh = take_rows(dims, doc, late);
  const DeviceBlock<T> q(dims, qh, c.pad), kv(dims, kvh, c.pad);
  const Block none = take_rows(dims, doc, {});
  const DeviceBlock<T> empty(dims, none, c.pad);
  for (const DeviceBlock<T>* keys : {&kv, &empty}) {
    DeviceBuf<TO> out(qh.n() * q_width(dims));
    DeviceBuf<float> lse(qh.n() * kHeads);
    upload(out, std::vector<double>(static_cast<size_t>(out.size()), 7.0));  // must be overwritten
    gpu_forward<T, TO>(dims, q, *keys, out, lse);
    for (double x : download(out)) ASSERT_EQ(x, 0.0);
    for (double x : download(lse)) ASSERT_TRUE(std::isinf(x) && x < 0);
  }
  // Backward with a finite (made-up) lse: every P is masked, nothing is added.
  const std::vector<double> dq0 = random_floats(qh.n() * q_width(dims), 1.0, 21);
  const std::vector<double> dk0 = random_floats(kvh.n() * kv_width(dims), 1.0, 22);
  DeviceBuf<float> lse(qh.n() * kHeads), delta(qh.n() * kHeads);
  DeviceBuf<float> dq(qh.n() * q_width(dims)), dk(kvh.n() * kv_width(dims)),
      dv(kvh.n() * kv_width(dims));
  upload(lse, std::vector<double>(static_cast<size_t>(lse.size()), 1.0));
  upload(delta, std::vector<double>(static_cast<size_t>(delta.size()), 0.5));
  upload(dq, dq0);
  upload(dk, dk0);
  upload(dv, dk0);
  flash_attention_backward<T>(
      dims, q.query(), kv.keys(),
      {q.dout.get(), q.ldq, lse.get(), delta.get(), dq.get(), q_width(dims)},
      {dk.get(), dv.get(), kv_width(dims), kv_width(dims)}, nullptr);
  sync();
  EXPECT_EQ(download(dq), dq0);
  EXPECT_EQ(download(dk), dk0);
  EXPECT_EQ(download(dv), dk0);
}

class FlashAttention : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override { set_flash_kernel(GetParam().kernel); }
  void TearDown() override { set_flash_kernel(FlashKernel::automatic); }
};

#define ML_FOR_TYPES(c, FN)        \
  do {                             \
    if ((c).bf16 && (c).out_f32) { \
      FN<bf16, float>(c);          \
    } else if ((c).bf16) {         \
      FN<bf16, bf16>(c);           \
    } else {                       \
      FN<float, float>(c);         \
    }                              \
  } while (0)

// A named wgmma case needs an sm_90 (elsewhere it would test mma.sync twice).
#define ML_REQUIRE_KERNEL()                                                  \
  do {                                                                       \
    ML_REQUIRE_GPU();                                                        \
    if (GetParam().kernel == FlashKernel::wgmma && !flash_wgmma_available()) \
      GTEST_SKIP() << "the wgmma kernel needs a compute capability 9.0 GPU"; \
  } while (0)

TEST_P(FlashAttention, PackedDocumentsMatchCpu) {
  ML_REQUIRE_KERNEL();
  ML_FOR_TYPES(GetParam(), packed_documents);
}

TEST_P(FlashAttention, RingStepMatchesCpu) {
  ML_REQUIRE_KERNEL();
  ML_FOR_TYPES(GetParam(), ring_step);
}

TEST_P(FlashAttention, SplitKvMergedEqualsWhole) {
  ML_REQUIRE_KERNEL();
  ML_FOR_TYPES(GetParam(), split_merge);
}

TEST_P(FlashAttention, NoVisibleKeyGivesZerosAndNoGradient) {
  ML_REQUIRE_KERNEL();
  ML_FOR_TYPES(GetParam(), no_visible_keys);
}

INSTANTIATE_TEST_SUITE_P(Types, FlashAttention,
                         ::testing::Values(Config{true, false, 64, 0}, Config{true, false, 128, 0},
                                           Config{true, false, 128, 1}, Config{true, true, 128, 0},
                                           Config{true, false, 64, 0, FlashKernel::mma},
                                           Config{true, false, 128, 0, FlashKernel::mma},
                                           Config{true, true, 128, 0, FlashKernel::mma},
                                           Config{true, false, 64, 0, FlashKernel::wgmma},
                                           Config{true, false, 128, 0, FlashKernel::wgmma},
                                           Config{true, true, 128, 0, FlashKernel::wgmma},
                                           Config{true, false, 64, 0, FlashKernel::wmma},
                                           Config{true, false, 128, 0, FlashKernel::wmma},
                                           Config{true, true, 128, 0, FlashKernel::wmma},
                                           Config{false, false, 64, 0},
                                           Config{false, false, 128, 0},
                                           Config{false, false, 64, 1}),
                         [](const ::testing::TestParamInfo<Config>& p) { return p.param.name(); });

TEST(FlashAttentionApi, HeadDims) {
  EXPECT_TRUE(flash_attention_supports_head_dim(64));
  EXPECT_TRUE(flash_attention_supports_head_dim(128));
  EXPECT_FALSE(flash_attention_supports_head_dim(96));
}

// The host harness itself (runs without a GPU): bf16 rounding and the
// reference's view of the ring case the GPU tests rely on.
TEST(FlashAttentionHarness, Bf16RoundingAndReference) {
  EXPECT_EQ(Elem<bf16>::encode(1.0), 0x3f80);
  EXPECT_EQ(Elem<bf16>::decode(Elem<bf16>::encode(1.0 + 1.0 / 256)), 1.0);  // a tie: to even
  EXPECT_EQ(Elem<bf16>::decode(Elem<bf16>::encode(-3.0 / 1024)), -3.0 / 1024);
  const FlashDims dims{kHeads, kKvHeads, 64};
  const Block all = make_packed(dims, {1, 37}, 5, true);
  std::vector<double> out, lse;
  cpu_forward(dims, all, all, out, lse);
  EXPECT_EQ(out.size(), static_cast<size_t>(38 * q_width(dims)));
  for (double x : lse) EXPECT_TRUE(std::isfinite(x));  // every query sees itself
  EXPECT_EQ(rel_error({1.0, 2.0}, {1.0, 2.0}), 0.0);
  EXPECT_NEAR(rel_error({1.0, 2.02}, {1.0, 2.0}), 0.01, 1e-12);
  // A NaN anywhere (exp(-inf - -inf) in a kernel) must fail, not be skipped.
  EXPECT_TRUE(std::isinf(rel_error({std::nan(""), 2.0}, {1.0, 2.0})));
  EXPECT_TRUE(std::isinf(rel_error({1.0, std::nan("")}, {1.0, 2.0})));
  int64_t mismatches = 0;
  EXPECT_TRUE(std::isinf(lse_error({std::nan(""), 2.0}, {1.0, 2.0}, &mismatches)));
  EXPECT_EQ(lse_error({-INFINITY, 2.0}, {-INFINITY, 2.0}, &mismatches), 0.0);
  EXPECT_EQ(mismatches, 0);
  lse_error({std::nan(""), 2.0}, {-INFINITY, 2.0}, &mismatches);
  EXPECT_EQ(mismatches, 1);
}

}  // namespace
}  // namespace meshloom::cuda::test
