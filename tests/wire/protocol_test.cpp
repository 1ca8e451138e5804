// The messages between roles survive encoding: every field of a step's work
// and of a trainer's batch comes back equal, and a truncated message is
// refused with the message's name rather than read past its end.
#include "wire/protocol.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <new>

#include "base/check.hpp"

using namespace meshloom;
using namespace meshloom::wire;

namespace {

Sample sample(int32_t source, int64_t length) {
  Sample s;
  s.source = source;
  s.owner = 3;
  s.epoch = 1;
  s.doc = 42 + source;
  s.offset = 7;
  s.length = length;
  return s;
}

}  // namespace

TEST(Protocol, StepWorkRoundTrips) {
  StepWork w;
  w.step = 12;
  w.last = true;
  w.global_predictions = 998;
  w.samples = {sample(0, 600), sample(1, 400)};
  TrainerWork t;
  t.trainer = 2;
  MicroBatchWork mb;
  mb.segments = {{0, 0, 150}, {0, 450, 150}};
  mb.group = {2, 3};
  mb.member = 0;
  mb.offload = 0.5f;
  t.micro = {mb, MicroBatchWork{{{1, 0, 400}}, {}, 0, 0.f}};
  w.trainers = {t};
  w.checkpoint = true;
  w.ckpt_data = std::string("lead\0state", 10);
  const StepWork back = decode_step_work(encode(w));
  EXPECT_EQ(back.step, 12);
  EXPECT_TRUE(back.last);
  EXPECT_EQ(back.global_predictions, 998);
  ASSERT_EQ(back.samples.size(), 2u);
  EXPECT_EQ(back.samples[1].length, 400);
  EXPECT_EQ(back.samples[1].doc, 43);
  ASSERT_EQ(back.trainers.size(), 1u);
  ASSERT_EQ(back.trainers[0].micro.size(), 2u);
  const MicroBatchWork& m = back.trainers[0].micro[0];
  ASSERT_EQ(m.segments.size(), 2u);
  EXPECT_EQ(m.segments[1].begin, 450);
  EXPECT_EQ(m.group, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(m.offload, 0.5f);
  EXPECT_EQ(back.trainers[0].micro[1].offload, 0.f);
  EXPECT_TRUE(back.checkpoint);
  EXPECT_EQ(back.ckpt_data, w.ckpt_data);
}

TEST(Protocol, BatchRoundTripsAndTruncationIsRefused) {
  Batch b;
  b.step = 5;
  b.global_predictions = 3;
  b.samples = {sample(0, 4)};
  MicroBatch mb;
  mb.tokens = {10, 11, 12, 13};
  mb.targets = {11, 12, 13, -1};
  mb.positions = {0, 1, 2, 3};
  mb.segments = {{0, 0, 4}};
  mb.group = {0, 1, 2};
  mb.member = 2;
  mb.offload = 0.25f;
  b.micro = {mb};
  const std::string bytes = encode(b);
  const Batch back = decode_batch(bytes);
  ASSERT_EQ(back.micro.size(), 1u);
  EXPECT_EQ(back.micro[0].tokens, mb.tokens);
  EXPECT_EQ(back.micro[0].targets, mb.targets);
  EXPECT_EQ(back.micro[0].positions, mb.positions);
  EXPECT_EQ(back.micro[0].group, mb.group);
  EXPECT_EQ(back.micro[0].member, 2);
  EXPECT_EQ(back.micro[0].offload, 0.25f);
  try {
    decode_batch(bytes.substr(0, bytes.size() / 2));
    FAIL() << "a truncated batch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer batch"), std::string::npos) << e.what();
  }
}

TEST(Protocol, TrainersOtherThanTheFirstGetOnlyTheirSamplesAndTheListStaysSparse) {
  std::vector<Sample> all;
  for (int i = 0; i < 1000; ++i) all.push_back(sample(i % 3, 100 + i));
  TrainerWork t;
  t.trainer = 5;
  t.micro = {MicroBatchWork{{{7, 0, 50}, {912, 10, 40}}, {}, 0, 0.f}};
  const std::vector<Sample> mine = samples_for(all, t);
  ASSERT_EQ(mine.size(), all.size()) << "indices are the manifest's";
  int present = 0;
  for (size_t i = 0; i < mine.size(); ++i) present += mine[i].length > 0;
  EXPECT_EQ(present, 2);
  EXPECT_EQ(mine[912].length, all[912].length);
  EXPECT_EQ(mine[912].doc, all[912].doc);
  EXPECT_EQ(mine[8].length, 0);

  Batch b;
  b.samples = mine;
  const std::string sparse = encode(b);
  const Batch back = decode_batch(sparse);
  ASSERT_EQ(back.samples.size(), all.size());
  EXPECT_EQ(back.samples[7].length, all[7].length);
  EXPECT_EQ(back.samples[7].owner, all[7].owner);
  EXPECT_EQ(back.samples[500].length, 0);
  t.trainer = 0;  // trainer 0 writes step dumps: it gets every sample
  b.samples = samples_for(all, t);
  const std::string whole = encode(b);
  EXPECT_EQ(decode_batch(whole).samples[500].length, all[500].length);
  EXPECT_LT(sparse.size() * 100, whole.size()) << "two samples cost a hundredth of a thousand";
}

TEST(Protocol, ConstructorsGetTheSamplesOfTheirTrainers) {
  std::vector<Sample> all;
  for (int i = 0; i < 100; ++i) all.push_back(sample(i % 3, 100 + i));
  TrainerWork a, b;
  a.trainer = 3;
  a.micro = {MicroBatchWork{{{7, 0, 50}}, {}, 0, 0.f}};
  b.trainer = 5;
  b.micro = {MicroBatchWork{{{7, 50, 50}, {42, 0, 10}}, {3, 5}, 1, 0.f}};
  const std::vector<Sample> mine = samples_for(all, std::vector<TrainerWork>{a, b});
  ASSERT_EQ(mine.size(), all.size());
  int present = 0;
  for (const Sample& s : mine) present += s.length > 0;
  EXPECT_EQ(present, 2) << "samples 7 and 42, 7 once";
  EXPECT_EQ(mine[42].doc, all[42].doc);
  EXPECT_TRUE(samples_for(all, std::vector<TrainerWork>{}).at(7).length == 0);
  TrainerWork first;  // the constructor of trainer 0 (its step dumps need all)
  first.trainer = 0;
  const std::vector<Sample> with_first = samples_for(all, std::vector<TrainerWork>{a, first});
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(with_first[i].length, all[i].length);
}

// A step's held-out parts (eval.every) travel inside its work and its
// batches, each with its own samples and trainers; work_for cuts every part
// down to the trainers kept.
TEST(Protocol, HeldOutPartsTravelWithTheStepAndAreCutPerTrainer) {
  StepWork w;
  w.step = 9;
  w.samples = {sample(0, 100)};
  TrainerWork t0, t1;
  t0.trainer = 0;
  t0.micro = {MicroBatchWork{{{0, 0, 100}}, {}, 0, 0.f}};
  t1.trainer = 1;
  w.trainers = {t0, t1};
  StepWork e;
  e.step = 9;
  e.global_predictions = 77;
  e.samples = {sample(0, 30), sample(1, 50)};
  TrainerWork e0, e1;
  e0.trainer = 0;
  e0.micro = {MicroBatchWork{{{0, 0, 30}}, {}, 0, 0.f}};
  e1.trainer = 1;
  e1.micro = {MicroBatchWork{{{1, 0, 50}}, {}, 0, 0.f}};
  e.trainers = {e0, e1};
  w.eval = {e, e};
  const StepWork back = decode_step_work(encode(w));
  ASSERT_EQ(back.eval.size(), 2u);
  EXPECT_EQ(back.eval[1].global_predictions, 77);
  ASSERT_EQ(back.eval[1].trainers.size(), 2u);
  EXPECT_EQ(back.eval[1].trainers[1].micro[0].segments[0].length, 50);

  const StepWork mine = work_for(w, [](int32_t t) { return t == 1; });
  ASSERT_EQ(mine.trainers.size(), 1u);
  EXPECT_EQ(mine.trainers[0].trainer, 1);
  ASSERT_EQ(mine.eval.size(), 2u);
  ASSERT_EQ(mine.eval[0].trainers.size(), 1u);
  EXPECT_EQ(mine.eval[0].trainers[0].trainer, 1);
  EXPECT_EQ(mine.eval[0].samples[0].length, 0) << "trainer 1 touches only sample 1";
  EXPECT_EQ(mine.eval[0].samples[1].length, 50);
  EXPECT_EQ(mine.eval[0].global_predictions, 77);

  Batch b;
  b.step = 9;
  Batch be;
  be.samples = {sample(1, 4)};
  MicroBatch mb;
  mb.tokens = {1, 2, 3, 4};
  mb.targets = {2, 3, 4, -1};
  mb.positions = {0, 1, 2, 3};
  mb.segments = {{0, 0, 4}};
  be.micro = {mb};
  b.eval = {be};
  const std::string bytes = encode(b);
  const Batch bb = decode_batch(bytes);
  ASSERT_EQ(bb.eval.size(), 1u);
  EXPECT_EQ(bb.eval[0].micro[0].targets, mb.targets);
  EXPECT_THROW(decode_batch(bytes.substr(0, bytes.size() - 3)), Error);

  Ack a;
  a.eval.batches = 2;
  a.eval.loss_sum = 12.5;
  a.eval.position_predictions = {3, 4};
  const Ack ab = decode_ack(encode(a));
  EXPECT_EQ(ab.eval.batches, 2);
  EXPECT_EQ(ab.eval.loss_sum, 12.5);
  EXPECT_EQ(ab.eval.position_predictions, (std::vector<int64_t>{3, 4}));
}

// A corrupt message from a peer is one Error naming the message, the peer's
// rank and the byte offset; a count of 2^60 fails before allocating
// (fuzz/regressions/protocol holds the inputs the fuzzer replays).
TEST(Protocol, ACorruptMessageNamesThePeerRankAndAllocatesNothing) {
  auto error_of = [](auto decode, const std::string& bytes) -> std::string {
    try {
      decode(bytes, 7);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  // step, last, predictions, capacity
  const std::string head = u64(12) + std::string(1, '\0') + u64(0) + u64(4096);
  const std::string empty_samples = u64(0) + u64(0) + u64(0);

  const std::string trainers = error_of(decode_step_work, head + empty_samples + u64(1ULL << 60));
  EXPECT_NE(trainers.find("step work from rank 7 is truncated or corrupt"), std::string::npos)
      << trainers;
  const std::string micro = error_of(decode_batch, head + empty_samples + u64(1ULL << 60));
  EXPECT_NE(micro.find("trainer batch from rank 7"), std::string::npos) << micro;
  const std::string samples =
      error_of(decode_batch, head + u64(INT32_MAX) + u64(0) + u64(0) + u64(0) + "\0" + u64(0));
  EXPECT_NE(samples.find("from rank 7 is corrupt at byte"), std::string::npos) << samples;

  Batch b;
  b.samples = {sample(0, 5)};
  MicroBatch mb;
  mb.segments = {{3, 0, 5}};  // sample 3 of a list of 1
  b.micro = {mb};
  const std::string segment = error_of(decode_batch, encode(b));
  EXPECT_NE(segment.find("a segment of sample 3 outside a list of 1"), std::string::npos)
      << segment;
  EXPECT_NE(error_of(decode_ack, encode(Ack{}) + "x").find("bytes left over"), std::string::npos);
}

// Structs with padding (segments, token ranges) travel field by field: what
// was in their padding never reaches the wire, so equal messages encode to
// equal bytes.
TEST(Protocol, EqualMessagesEncodeToEqualBytesWhateverThePaddingHeld) {
  auto encoded = [](unsigned char fill) {
    alignas(Segment) unsigned char seg_bytes[sizeof(Segment)];
    alignas(TokenRange) unsigned char range_bytes[sizeof(TokenRange)];
    std::memset(seg_bytes, fill, sizeof(seg_bytes));
    std::memset(range_bytes, fill, sizeof(range_bytes));
    Segment* seg = new (seg_bytes) Segment;  // default-initialised: padding keeps `fill`
    seg->sample = 0;
    seg->begin = 2;
    seg->length = 3;
    TokenRange* range = new (range_bytes) TokenRange;
    range->source = 1;
    range->doc = 4;
    range->offset = 5;
    range->length = 6;
    Batch b;
    b.samples = {sample(0, 5)};
    MicroBatch mb;
    mb.segments = {*seg};
    b.micro = {mb};
    TokenRequest req;
    req.ranges = {*range};
    return encode(b) + encode(req);
  };
  EXPECT_EQ(encoded(0x00), encoded(0xAB));
}
