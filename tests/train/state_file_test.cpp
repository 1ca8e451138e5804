// train/state_file.hpp on 4 ranks: the trainers of one layout write the
// whole state together, the serial reader finds every whole tensor exactly
// as the model holds it, and the trainers of another layout (tp, pp, data
// ranks, ZeRO-1) read their shards of it back bit for bit. A flipped byte
// is refused on every rank, naming the dataset.
#include "train/state_file.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/check.hpp"
#include "ckpt/h5.hpp"
#include "model/params.hpp"
#include "tests/common/mpi_test_util.hpp"
#include "tests/model/tiny_shape.hpp"
#include "train/state_blocks.hpp"

namespace meshloom::train {
namespace {

int world_rank() { return test::rank_of(MPI_COMM_WORLD); }
int world_size() { return test::size_of(MPI_COMM_WORLD); }
std::string shared_path(const char* name) { return test::shared_tmp_path(name); }

// The whole state's values: parameters, first and second moments differ.
float value(const model::TensorInfo& t, int64_t e, int which) {
  return float(which * 1000000 + t.index * 1000 + e) * 0.5f;
}

struct Layout {
  int tp, pp, data;
  bool zero1;
};

// This rank's place in a layout, its buffers cut from the whole state, and
// its AdamW range.
struct Trainer {
  model::ParamLayout layout;
  StateOwner owner;
  std::vector<float> params, m, v;
};

std::vector<model::StageLayers> stages(int pp) {
  if (pp == 1) return {{0, 3}};
  return {{0, 2}, {2, 3}};
}

Trainer trainer_of(const model::Shape& s, const Layout& l) {
  const int r = world_rank();
  const int tp_rank = r % l.tp, stage = (r / l.tp) % l.pp, data = r / (l.tp * l.pp);
  Trainer t{model::ParamLayout(s, model::TpShard{l.tp, tp_rank}, stages(l.pp)[size_t(stage)]),
            {},
            {},
            {},
            {}};
  const model::ParamLayout whole(s);
  const int64_t n = t.layout.numel();
  t.owner = {&t.layout, data, l.data, 0, n};
  if (l.zero1) std::tie(t.owner.moment_begin, t.owner.moment_end) = zero_range(n, data, l.data);
  std::vector<float> all[3];
  for (int which = 0; which < 3; ++which) {
    all[which].resize(size_t(n));
    for (const model::TensorInfo& info : t.layout.tensors()) {
      const model::TensorInfo& w = whole.find(info.name);
      std::vector<float> full(size_t(w.numel));
      for (int64_t e = 0; e < w.numel; ++e) full[size_t(e)] = value(w, e, which);
      model::take_shard(info, full.data(), all[which].data() + info.offset);
    }
  }
  t.params = all[0];
  t.m.assign(all[1].begin() + t.owner.moment_begin, all[1].begin() + t.owner.moment_end);
  t.v.assign(all[2].begin() + t.owner.moment_begin, all[2].begin() + t.owner.moment_end);
  return t;
}

void write_then_read(const Layout& wrote, const Layout& reads, bool tied) {
  ASSERT_EQ(wrote.tp * wrote.pp * wrote.data, world_size());
  ASSERT_EQ(reads.tp * reads.pp * reads.data, world_size());
  const model::Shape s = model::tp4_shape(tied);
  const model::ParamLayout whole(s);
  const std::string path = shared_path("reshard");
  Trainer writer = trainer_of(s, wrote);
  writer.owner.layout = &writer.layout;  // the copy's own layout
  const StateChecksums sums =
      write_state(path, MPI_COMM_WORLD, whole, writer.owner, writer.params, writer.m, writer.v);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    ckpt::H5File serial(path, "r");
    for (const model::TensorInfo& t : whole.tensors()) {
      const char* prefix[3] = {"model/", "optim/m/", "optim/v/"};
      for (int which = 0; which < 3; ++which) {
        const std::vector<float> got = serial.read<float>(prefix[which] + t.name);
        ASSERT_EQ(int64_t(got.size()), t.numel) << t.name;
        for (int64_t e = 0; e < t.numel; ++e)
          ASSERT_EQ(got[size_t(e)], value(t, e, which)) << prefix[which] << t.name << " " << e;
      }
    }
  }
  Trainer reader = trainer_of(s, reads);
  reader.owner.layout = &reader.layout;
  const Trainer expected = trainer_of(s, reads);
  std::fill(reader.params.begin(), reader.params.end(), 0.0f);
  std::fill(reader.m.begin(), reader.m.end(), 0.0f);
  std::fill(reader.v.begin(), reader.v.end(), 0.0f);
  read_state(path, MPI_COMM_WORLD, whole, reader.owner, sums, reader.params, reader.m, reader.v);
  EXPECT_EQ(reader.params, expected.params);
  EXPECT_EQ(reader.m, expected.m);
  EXPECT_EQ(reader.v, expected.v);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

TEST(StateFile, TpAndZeroWrittenReadAsPipelines) {
  if (world_size() != 4) GTEST_SKIP() << "layouts of 4 trainers";
  write_then_read({2, 1, 2, true}, {1, 2, 2, false}, false);
}

TEST(StateFile, TiedPipelinesWrittenReadAsTp4) {
  if (world_size() != 4) GTEST_SKIP() << "layouts of 4 trainers";
  write_then_read({1, 2, 2, true}, {4, 1, 1, false}, true);
}

TEST(StateFile, DataParallelZeroWrittenReadAsTpTimesPp) {
  if (world_size() != 4) GTEST_SKIP() << "layouts of 4 trainers";
  write_then_read({1, 1, 4, true}, {2, 2, 1, true}, true);
}

// A background checkpoint copies only what its trainer owns, then writes
// it: the same file as write_state from the live buffers (which change
// meanwhile), each element once over the trainers, each rank's bytes told.
TEST(StateFile, OwnedCopyWritesTheSameStateEachElementOnce) {
  if (world_size() != 4) GTEST_SKIP() << "layouts of 4 trainers";
  const model::Shape s = model::tp4_shape(true);
  const model::ParamLayout whole(s);
  const Layout l{2, 1, 2, false};
  Trainer t = trainer_of(s, l);
  t.owner.layout = &t.layout;
  const std::string direct = shared_path("direct"), copied = shared_path("copied");
  const StateChecksums want =
      write_state(direct, MPI_COMM_WORLD, whole, t.owner, t.params, t.m, t.v);
  const OwnedState own = copy_owned_state(t.owner, t.params, t.m, t.v);
  std::fill(t.params.begin(), t.params.end(), -1.0f);  // training goes on
  std::fill(t.m.begin(), t.m.end(), -1.0f);
  int64_t bytes = 0;
  const StateChecksums got =
      write_owned_state(copied, MPI_COMM_WORLD, whole, own, [&](int64_t b) { bytes += b; });
  EXPECT_EQ(got, want);
  // Without ZeRO-1 each rank holds every moment of its shard, but copies 1/2.
  int64_t held[3] = {int64_t(own.params.size()), int64_t(own.m.size()), bytes};
  EXPECT_EQ(own.m.size(), own.v.size());
  EXPECT_LT(own.params.size(), t.params.size());
  MPI_Allreduce(MPI_IN_PLACE, held, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(held[0], whole.numel());
  EXPECT_EQ(held[1], whole.numel());
  EXPECT_EQ(held[2], 3 * whole.numel() * int64_t(sizeof(float)));
  Trainer reader = trainer_of(s, {1, 2, 2, true});
  reader.owner.layout = &reader.layout;
  const Trainer expected = trainer_of(s, {1, 2, 2, true});
  read_state(copied, MPI_COMM_WORLD, whole, reader.owner, got, reader.params, reader.m, reader.v);
  EXPECT_EQ(reader.params, expected.params);
  EXPECT_EQ(reader.v, expected.v);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(direct.c_str()), std::remove(copied.c_str());
}

TEST(StateFile, AFlippedByteIsRefusedOnEveryRankNamingTheDataset) {
  if (world_size() != 4) GTEST_SKIP() << "layouts of 4 trainers";
  const model::Shape s = model::tp4_shape(false);
  const model::ParamLayout whole(s);
  const std::string path = shared_path("flipped");
  Trainer t = trainer_of(s, {2, 1, 2, true});
  t.owner.layout = &t.layout;
  const StateChecksums sums = write_state(path, MPI_COMM_WORLD, whole, t.owner, t.params, t.m, t.v);
  const std::string victim = "optim/v/layers.1.w2";
  if (world_rank() == 0) {
    haddr_t at = 0;
    {
      ckpt::H5File serial(path, "r");
      const ckpt::H5Id ds(H5Dopen2(serial.id(), victim.c_str(), H5P_DEFAULT), H5Dclose);
      at = H5Dget_offset(ds.get());
    }
    ASSERT_NE(at, HADDR_UNDEF);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(at + 5));
    char byte = 0;
    f.read(&byte, 1);
    byte = char(byte ^ 0x10);
    f.seekp(std::streamoff(at + 5));
    f.write(&byte, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    read_state(path, MPI_COMM_WORLD, whole, t.owner, sums, t.params, t.m, t.v);
    ADD_FAILURE() << "read a flipped byte";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::remove(path.c_str());
}

}  // namespace
}  // namespace meshloom::train
