#include "ckpt/checkpoint.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/strings.hpp"
#include "ckpt/resume.hpp"
#include "config/config.hpp"
#include "tests/common/test_util.hpp"

using namespace meshloom;

namespace {
ckpt::Checkpoint sample(int64_t step, bool full) {
  ckpt::Checkpoint c;
  c.step = step;
  c.trainers = 3;
  c.seed = 7;
  c.config = "run: {steps: 9}\n";
  c.tensors = {{"embed", {4, 3}, 0, 12}, {"final_norm", {3}, 12, 3}};
  for (int i = 0; i < 15; ++i) {
    c.params.push_back(0.5f * float(i));
    c.m.push_back(0.01f * float(i));
    c.v.push_back(0.001f * float(i));
  }
  c.adam_step = step + 1;
  c.plane = std::string("\x01\x02\x00\x03", 4);
  c.lengths_full = full;
  c.lengths_base = full ? "" : "step_00000001.h5";
  c.lengths = {{"docs", {5, 2}, {100, 7}, {}}, {"photos", {3}, {290}, {256}}};
  return c;
}
}  // namespace

TEST(Checkpoint, RoundTripsEverything) {
  test::TempDir dir;
  const std::string path = ckpt::checkpoint_path(dir.path(), 4);
  ckpt::write_checkpoint(path, sample(4, false));
  ckpt::Checkpoint c = ckpt::read_checkpoint(path);
  EXPECT_EQ(c.step, 4);
  EXPECT_EQ(c.trainers, 3);
  EXPECT_EQ(c.config, "run: {steps: 9}\n");
  EXPECT_EQ(c.plane, std::string("\x01\x02\x00\x03", 4));
  EXPECT_FALSE(c.lengths_full);
  EXPECT_EQ(c.lengths_base, "step_00000001.h5");
  ASSERT_EQ(c.lengths.size(), 2u);
  EXPECT_EQ(c.lengths[0].lengths, (std::vector<int64_t>{100, 7}));
  EXPECT_TRUE(c.lengths[0].images.empty());  // a text source has none
  EXPECT_EQ(c.lengths[1].images, (std::vector<int64_t>{256}));
  ASSERT_EQ(c.tensors.size(), 2u);
  // Tensors come back by name; values follow their tensor.
  for (const auto& t : c.tensors) {
    const auto& ref = sample(4, false);
    const auto& r = t.name == "embed" ? ref.tensors[0] : ref.tensors[1];
    for (int64_t i = 0; i < t.numel; ++i) {
      EXPECT_EQ(c.params[size_t(t.offset + i)], ref.params[size_t(r.offset + i)]);
      EXPECT_EQ(c.v[size_t(t.offset + i)], ref.v[size_t(r.offset + i)]);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Checkpoint, TornFilesAreRefusedWithTheirName) {
  test::TempDir dir;
  const std::string path = ckpt::checkpoint_path(dir.path(), 1);
  ckpt::write_checkpoint(path, sample(1, true));
  EXPECT_EQ(ckpt::verify_checkpoint(path), "");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  std::string problem = ckpt::verify_checkpoint(path);
  EXPECT_NE(problem.find(path), std::string::npos) << problem;
  EXPECT_NE(ckpt::verify_checkpoint(dir.file("nothing.h5")).find("does not exist"),
            std::string::npos);
}

TEST(Checkpoint, PruneKeepsTheNewestAndTheirBase) {
  test::TempDir dir;
  ckpt::write_checkpoint(ckpt::checkpoint_path(dir.path(), 1), sample(1, true));
  for (int s : {2, 3, 4})
    ckpt::write_checkpoint(ckpt::checkpoint_path(dir.path(), s), sample(s, false));
  ckpt::prune_checkpoints(dir.path(), 2, [](const std::string&) { return true; });
  auto left = ckpt::list_checkpoints(dir.path());
  ASSERT_EQ(left.size(), 3u);  // 4 and 3, and 1: the base they need
  EXPECT_EQ(left[0], ckpt::checkpoint_path(dir.path(), 4));
  EXPECT_EQ(left[2], ckpt::checkpoint_path(dir.path(), 1));
}

// Another run's checkpoints (another seed) at higher steps neither push this
// run's newest out nor get removed; a torn file is nobody's.
TEST(Checkpoint, PruneCountsOnlyThisRunsCheckpoints) {
  test::TempDir dir;
  auto of_seed = [](int64_t step, int seed) {
    ckpt::Checkpoint c = sample(step, true);
    c.config = strf("run: {seed: %d, steps: 9}\ndata: {sources: [{name: a, path: a}]}\n", seed);
    return c;
  };
  for (int s : {4, 5, 6}) ckpt::write_checkpoint(ckpt::checkpoint_path(dir.path(), s), of_seed(s, 2));
  for (int s : {0, 1, 2}) ckpt::write_checkpoint(ckpt::checkpoint_path(dir.path(), s), of_seed(s, 1));
  const std::string torn = ckpt::checkpoint_path(dir.path(), 7);
  std::ofstream(torn) << "not hdf5";
  const config::Config now = config::parse_config(
      "run: {seed: 1, steps: 20}\ndata: {sources: [{name: a, path: b}]}\n", "now.yaml");
  EXPECT_TRUE(ckpt::written_by_this_run(ckpt::checkpoint_path(dir.path(), 1), now));
  EXPECT_FALSE(ckpt::written_by_this_run(ckpt::checkpoint_path(dir.path(), 4), now));
  EXPECT_FALSE(ckpt::written_by_this_run(torn, now));
  ckpt::prune_checkpoints(dir.path(), 2,
                          [&](const std::string& p) { return ckpt::written_by_this_run(p, now); });
  std::vector<int64_t> left;
  for (const auto& p : ckpt::list_checkpoints(dir.path())) left.push_back(ckpt::checkpoint_step(p));
  EXPECT_EQ(left, (std::vector<int64_t>{7, 6, 5, 4, 2, 1}));
}

TEST(Checkpoint, StepFromTheFileName) {
  EXPECT_EQ(ckpt::checkpoint_step("/a/step_00000042.h5"), 42);
  EXPECT_EQ(ckpt::checkpoint_step(ckpt::checkpoint_path("d", 123456789)), 123456789);
  EXPECT_EQ(ckpt::checkpoint_step("/a/step_00000042.h5.tmp"), -1);
  EXPECT_EQ(ckpt::checkpoint_step("/a/step_.h5"), -1);
  EXPECT_EQ(ckpt::checkpoint_step("/a/step_4x.h5"), -1);
  EXPECT_EQ(ckpt::checkpoint_step("/a/config.yaml"), -1);
}
