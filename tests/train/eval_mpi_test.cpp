// Trainer::evaluate on real trainers (two, beside an idle constructor; the
// CPU backend): its loss is step()'s before the update (sums, per source, per
// position bucket), a ring or Ulysses group over two trainers gives one
// trainer's loss, evaluate leaves the following steps as they were, and
// tp 2 and pp 2 give step()'s loss too.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "parallel/step_comms.hpp"
#include "parallel/world.hpp"
#include "plan/plan.hpp"
#include "tests/common/mpi_test_util.hpp"
#include "train/trainer.hpp"

namespace meshloom::train {
namespace {

// A world of one constructor (rank 0, idle here) and two trainers in the
// layout `tp` x `pp`; rank 0 writes and loads the config. Whether this rank
// is a trainer.
bool world_of(int tp, int pp, parallel::World* w) {
  const std::string path = test::shared_tmp_path("eval_config") + ".yaml";
  if (test::rank_of(MPI_COMM_WORLD) == 0) {
    std::ofstream f(path);
    f << "run: {name: eval, dir: /tmp/meshloom_eval_run, seed: 11, steps: 10, threads: 1}\n"
         "cluster: {roles: {constructors: 1, loaders: 0}}\n"
         "model: {vocab_size: 61, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 2,"
         " ffn_dim: 48, loss_chunk: 16}\n"
         "optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 0}\n"
         "plan: {capacity: 64}\n"
         "data:\n"
         "  mode: colocated\n"
         "  seq_len: 64\n"
         "  tokens_per_step: 256\n"
         "  sources: [{name: a, path: /tmp/meshloom_eval_a}, {name: b, path: "
         "/tmp/meshloom_eval_b}]\n"
         "checkpoint: {every: 0}\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> sets = {"parallel.tp=" + std::to_string(tp),
                                         "parallel.pp=" + std::to_string(pp)};
  const bool ok = parallel::world_from_config(path, sets, w);
  EXPECT_TRUE(ok);
  return ok && w->role == parallel::Role::trainer;
}

struct Doc {
  int32_t source = 0;
  std::vector<int32_t> tokens;
};

std::vector<Doc> docs_of(const std::vector<int64_t>& lengths, uint32_t seed) {
  std::vector<Doc> docs;
  uint32_t x = seed;
  for (size_t i = 0; i < lengths.size(); ++i) {
    Doc d{int32_t(i % 2), {}};
    for (int64_t t = 0; t < lengths[i]; ++t) {
      x = x * 1664525u + 1013904223u;
      d.tokens.push_back(int32_t((x >> 8) % 61));
    }
    docs.push_back(std::move(d));
  }
  return docs;
}

// A piece of a micro-batch: tokens [begin, end) of doc `doc`.
struct Piece {
  int32_t doc = 0;
  int64_t begin = 0, end = 0;
};

// As runtime/trainer_wire.cpp's step_input: global positions, the sample id
// per token, the last token of a chunk predicting the next chunk's first.
MicroInput micro_of(const std::vector<Doc>& docs, const std::vector<Piece>& pieces) {
  MicroInput m;
  for (const Piece& p : pieces) {
    const auto& t = docs[size_t(p.doc)].tokens;
    for (int64_t i = p.begin; i < p.end; ++i) {
      m.batch.tokens.push_back(t[size_t(i)]);
      m.batch.targets.push_back(i + 1 < int64_t(t.size()) ? t[size_t(i) + 1] : -1);
      m.batch.positions.push_back(int32_t(i));
      m.batch.samples.push_back(p.doc);
    }
    m.runs.push_back({p.doc, p.end - p.begin});
  }
  return m;
}

StepInput input_of(const std::vector<Doc>& docs, std::vector<MicroInput> micro, int64_t step) {
  StepInput in;
  in.step = step;
  in.capacity = 64;
  for (const Doc& d : docs) {
    in.samples.push_back({d.source, int64_t(d.tokens.size())});
    in.global_predictions += int64_t(d.tokens.size()) - 1;
  }
  in.micro = std::move(micro);
  return in;
}

double sum_over(MPI_Comm c, double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, c);
  return v;
}

bool near(double a, double b, double rel) { return std::abs(a - b) <= rel * std::abs(b); }

// Two trainers on the data axis, each its own packed documents (docs 0-2 on
// trainer 0, 3-5 on trainer 1), micro-batches of whole documents.
StepInput packed_input(int rank, int64_t step, uint32_t seed, int micro_batches) {
  const std::vector<Doc> docs = docs_of({20, 9, 31, 17, 24, 12}, seed);
  std::vector<MicroInput> micro;
  const int32_t first = rank * 3;
  auto whole = [&](int32_t d) { return Piece{d, 0, int64_t(docs[size_t(d)].tokens.size())}; };
  if (micro_batches == 1)
    micro.push_back(micro_of(docs, {whole(first), whole(first + 1), whole(first + 2)}));
  else
    for (int32_t d = first; d < first + 3; ++d) micro.push_back(micro_of(docs, {whole(d)}));
  return input_of(docs, std::move(micro), step);
}

TEST(Evaluate, MatchesStepLossPerSourceAndPosition) {
  if (test::size_of(MPI_COMM_WORLD) != 3) GTEST_SKIP() << "needs 3 ranks";
  parallel::World w;
  if (!world_of(1, 1, &w)) return;
  const parallel::StepComms comms(w.role_comm, w.mesh);
  Trainer t(w, comms);
  const int rank = comms.rank(parallel::Axis::data);
  const StepInput in = packed_input(rank, 0, 5, 1);
  const std::vector<int64_t> edges = {0, 6, 12, 18};
  const std::vector<float> before(t.model().params().begin(), t.model().params().end());
  const EvalStats e = t.evaluate(in, edges);
  // The buckets from the model's own per-token losses of that micro-batch.
  const auto losses = t.model().token_losses();
  std::vector<double> bucket_loss(edges.size(), 0.0);
  std::vector<int64_t> bucket_count(edges.size(), 0);
  const model::Batch& b = in.micro[0].batch;
  for (size_t k = 0; k < losses.size(); ++k) {
    if (b.targets[k] < 0) continue;
    size_t i = edges.size() - 1;
    while (edges[i] > b.positions[k]) --i;
    bucket_loss[i] += losses[k];
    ++bucket_count[i];
  }
  // Nothing moved: no gradient, the weights as they were.
  for (float g : t.model().grads()) ASSERT_EQ(g, 0.0f);
  ASSERT_EQ(before, std::vector<float>(t.model().params().begin(), t.model().params().end()));
  const StepStats s = t.step(in);
  EXPECT_EQ(e.loss_sum, s.loss_sum);  // the CPU: the same bits
  EXPECT_EQ(e.predictions, s.predictions);
  EXPECT_EQ(e.tokens, s.tokens);
  EXPECT_GT(e.predictions, 0);
  EXPECT_NEAR(e.flops * 3, s.flops, 1e-9 * s.flops);
  ASSERT_EQ(e.source_loss.size(), 2u);
  ASSERT_EQ(s.source_loss.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(e.source_loss[i], s.source_loss[i]);
    EXPECT_EQ(e.source_predictions[i], s.source_predictions[i]);
  }
  ASSERT_EQ(e.position_loss.size(), edges.size());
  double loss = 0;
  int64_t count = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    EXPECT_EQ(e.position_loss[i], bucket_loss[i]);
    EXPECT_EQ(e.position_predictions[i], bucket_count[i]);
    EXPECT_GT(e.position_predictions[i], 0);
    loss += e.position_loss[i];
    count += e.position_predictions[i];
  }
  EXPECT_TRUE(near(loss, e.loss_sum, 1e-12)) << loss << " vs " << e.loss_sum;
  EXPECT_EQ(count, e.predictions);
}

TEST(Evaluate, LeavesTheFollowingStepsAsTheyWere) {
  if (test::size_of(MPI_COMM_WORLD) != 3) GTEST_SKIP() << "needs 3 ranks";
  parallel::World w;
  if (!world_of(1, 1, &w)) return;
  const parallel::StepComms comms(w.role_comm, w.mesh);
  const int rank = comms.rank(parallel::Axis::data);
  const StepInput in0 = packed_input(rank, 0, 7, 3), in1 = packed_input(rank, 1, 8, 3);
  const StepInput held_out = packed_input(rank, 0, 9, 3);
  std::vector<StepStats> with, without;
  std::vector<float> params_with, params_without;
  {
    Trainer t(w, comms);
    t.evaluate(held_out, std::vector<int64_t>{0});
    with.push_back(t.step(in0));
    t.evaluate(held_out, std::vector<int64_t>{0, 10});
    with.push_back(t.step(in1));
    params_with.assign(t.params().begin(), t.params().end());
  }
  {
    Trainer t(w, comms);
    without.push_back(t.step(in0));
    without.push_back(t.step(in1));
    params_without.assign(t.params().begin(), t.params().end());
  }
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(with[i].loss_sum, without[i].loss_sum);
    EXPECT_EQ(with[i].grad_norm, without[i].grad_norm);
  }
  EXPECT_EQ(params_with, params_without);
}

// One sequence of 48 tokens: whole on trainer 0, or split over both as a
// ring (zigzag chunks, plan::member_chunks) or Ulysses.
TEST(Evaluate, SplitSequenceGivesOneTrainersLoss) {
  if (test::size_of(MPI_COMM_WORLD) != 3) GTEST_SKIP() << "needs 3 ranks";
  parallel::World w;
  if (!world_of(1, 1, &w)) return;
  const parallel::StepComms comms(w.role_comm, w.mesh);
  Trainer t(w, comms);
  const int rank = comms.rank(parallel::Axis::data);
  const std::vector<Doc> docs = docs_of({48}, 3);
  const std::vector<int64_t> edges = {0, 24};
  StepInput whole = input_of(docs, {}, 0);
  if (rank == 0) whole.micro.push_back(micro_of(docs, {{0, 0, 48}}));
  const EvalStats one = t.evaluate(whole, edges);
  const double loss = sum_over(comms.comm(parallel::Axis::data), one.loss_sum);
  for (int ulysses : {1, 2}) {
    const plan::MemberChunks c = plan::member_chunks(48, 2, rank, plan::ChunkRule::kBalanced);
    MicroInput m = micro_of(docs, {{0, c.front.begin, c.front.end}, {0, c.back.begin, c.back.end}});
    m.group = {0, 1};
    m.member = rank;
    m.ulysses = ulysses;
    StepInput split = input_of(docs, {m}, 0);
    split.groups = {{0, 1}};
    const EvalStats e = t.evaluate(split, edges);
    const MPI_Comm data = comms.comm(parallel::Axis::data);
    EXPECT_TRUE(near(sum_over(data, e.loss_sum), loss, 1e-5))
        << "ulysses " << ulysses << ": " << sum_over(data, e.loss_sum) << " vs " << loss;
    EXPECT_EQ(sum_over(data, double(e.predictions)), 47.0);
    for (size_t i = 0; i < edges.size(); ++i)
      EXPECT_TRUE(
          near(sum_over(data, e.position_loss[i]), sum_over(data, one.position_loss[i]), 1e-5));
  }
}

// tp 2 or pp 2 (one HDP rank of two trainers): the same micro-batches on
// both; evaluate's loss is step()'s, reported once, and a step after it is
// a fresh trainer's (pp: nothing parked is left behind).
void check_model_parallel(int tp, int pp) {
  parallel::World w;
  if (!world_of(tp, pp, &w)) return;
  const parallel::StepComms comms(w.role_comm, w.mesh);
  const bool reports =
      comms.rank(parallel::Axis::tensor) == 0 && comms.rank(parallel::Axis::pipeline) == pp - 1;
  StepInput in = packed_input(0, 0, 4, 3);
  for (size_t i = 0; i < in.micro.size(); ++i) in.micro[i].slot = int32_t(i);
  const std::vector<int64_t> edges = {0, 16};
  StepStats after;
  EvalStats e;
  {
    Trainer t(w, comms);
    e = t.evaluate(in, edges);
    after = t.step(in);
  }
  Trainer fresh(w, comms);
  const StepStats s = fresh.step(in);
  EXPECT_EQ(after.loss_sum, s.loss_sum);
  EXPECT_EQ(after.grad_norm, s.grad_norm);
  EXPECT_TRUE(near(e.loss_sum, s.loss_sum, 1e-6)) << e.loss_sum << " vs " << s.loss_sum;
  EXPECT_EQ(e.predictions, s.predictions);
  EXPECT_NEAR(e.flops * 3, s.flops, 1e-9 * s.flops);
  if (reports) {
    EXPECT_EQ(e.predictions, 20 + 9 + 31 - 3);
    ASSERT_EQ(e.position_loss.size(), 2u);
    EXPECT_TRUE(near(e.position_loss[0] + e.position_loss[1], e.loss_sum, 1e-12));
  } else {
    EXPECT_EQ(e.predictions, 0);
    EXPECT_TRUE(e.source_loss.empty());
    EXPECT_TRUE(e.position_loss.empty());
  }
}

TEST(Evaluate, TensorParallel) {
  if (test::size_of(MPI_COMM_WORLD) != 3) GTEST_SKIP() << "needs 3 ranks";
  check_model_parallel(2, 1);
}

TEST(Evaluate, PipelineParallel) {
  if (test::size_of(MPI_COMM_WORLD) != 3) GTEST_SKIP() << "needs 3 ranks";
  check_model_parallel(1, 2);
}

}  // namespace
}  // namespace meshloom::train
