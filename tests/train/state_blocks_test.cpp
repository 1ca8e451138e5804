// train/state_blocks.hpp against the whole model (with a patch embedding,
// which TP does not split): for every layout (tp 1, 2
// and 4; 1, 2 and 3 stages; tied and untied; with and without ZeRO-1 over 1
// and 3 data ranks), the pieces every trainer owns cover every element of
// every whole tensor exactly once, and putting each trainer's own values
// (cut from the whole model as model::take_shard cuts them) into their blocks
// gives the whole model back.
#include "train/state_blocks.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ckpt/block_checksum.hpp"
#include "model/params.hpp"
#include "tests/model/tiny_shape.hpp"

namespace meshloom::train {
namespace {

std::vector<model::StageLayers> stages(int pp) {
  if (pp == 1) return {{0, 3}};
  if (pp == 2) return {{0, 2}, {2, 3}};
  return {{0, 1}, {1, 2}, {2, 3}};
}

// A distinct value per element of each whole tensor.
float value(const model::TensorInfo& whole, int64_t e) { return float(whole.index * 100000 + e); }

struct Layout {
  int tp, pp, data;
  bool tied, zero1;
};

// Each trainer's buffer as the model holds it, then its pieces put back
// into whole tensors; counts how often each element is written.
void check_layout(const Layout& l) {
  const model::Shape s = model::tp4_shape(l.tied, 6);
  const model::ParamLayout whole(s);
  std::map<std::string, std::vector<float>> params, moments;
  std::map<std::string, std::vector<int>> params_hits, moment_hits;
  for (const model::TensorInfo& t : whole.tensors()) {
    params[t.name].assign(size_t(t.numel), -1.0f);
    moments[t.name].assign(size_t(t.numel), -1.0f);
    params_hits[t.name].assign(size_t(t.numel), 0);
    moment_hits[t.name].assign(size_t(t.numel), 0);
  }
  auto put = [&](const std::vector<StatePiece>& pieces, const std::vector<float>& buffer,
                 std::map<std::string, std::vector<float>>& into,
                 std::map<std::string, std::vector<int>>& hits) {
    for (const StatePiece& p : pieces) {
      ASSERT_EQ(p.dims, whole.find(p.name).full_shape) << p.name;
      int64_t at = p.offset, moved = 0;
      for (const ckpt::Block& b : p.blocks)
        ckpt::for_each_run(p.dims, b, [&](int64_t flat, int64_t, int64_t n) {
          for (int64_t i = 0; i < n; ++i) {
            into[p.name][size_t(flat + i)] = buffer[size_t(at++)];
            ++hits[p.name][size_t(flat + i)];
          }
          moved += n;
        });
      EXPECT_EQ(moved, p.numel) << p.name;
    }
  };
  for (int stage = 0; stage < l.pp; ++stage)
    for (int tp_rank = 0; tp_rank < l.tp; ++tp_rank) {
      const model::ParamLayout mine(s, model::TpShard{l.tp, tp_rank}, stages(l.pp)[size_t(stage)]);
      std::vector<float> buffer(size_t(mine.numel()));
      for (const model::TensorInfo& t : mine.tensors()) {
        const model::TensorInfo& w = whole.find(t.name);
        std::vector<float> full(size_t(w.numel));
        for (int64_t e = 0; e < w.numel; ++e) full[size_t(e)] = value(w, e);
        model::take_shard(t, full.data(), buffer.data() + t.offset);
      }
      const int64_t n = mine.numel();
      for (int data = 0; data < l.data; ++data) {
        int64_t begin = 0, end = n;
        if (l.zero1) std::tie(begin, end) = zero_range(n, data, l.data);
        const StateShare share = state_share(mine, data, l.data, begin, end);
        put(share.params, buffer, params, params_hits);
        const std::vector<float> range(buffer.begin() + begin, buffer.begin() + end);
        put(share.moments, range, moments, moment_hits);
      }
    }
  for (const model::TensorInfo& t : whole.tensors())
    for (int64_t e = 0; e < t.numel; ++e) {
      ASSERT_EQ(params_hits[t.name][size_t(e)], 1) << t.name << " element " << e;
      ASSERT_EQ(moment_hits[t.name][size_t(e)], 1) << t.name << " element " << e;
      ASSERT_EQ(params[t.name][size_t(e)], value(t, e)) << t.name << " element " << e;
      ASSERT_EQ(moments[t.name][size_t(e)], value(t, e)) << t.name << " element " << e;
    }
}

TEST(StateBlocks, EveryElementHasOneOwnerAndItsValueInEveryLayout) {
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 3})
      for (int data : {1, 3})
        for (bool tied : {false, true})
          for (bool zero1 : {false, true}) {
            SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp << " data " << data
                                            << " tied " << tied << " zero1 " << zero1);
            check_layout({tp, pp, data, tied, zero1});
            if (testing::Test::HasFatalFailure()) return;
          }
}

TEST(StateBlocks, DataRanksWriteEqualShares) {
  // Untied, tp 1, one stage: nothing is a copy, so each of 3 data ranks owns
  // its zero_range of the weights and of the moments, whatever ZeRO-1.
  const model::ParamLayout layout(model::tp4_shape(false, 6));
  const int64_t n = layout.numel();
  for (int data = 0; data < 3; ++data) {
    const auto [first, end] = zero_range(n, data, 3);
    const StateShare share = state_share(layout, data, 3, 0, n);
    int64_t params = 0, moments = 0;
    for (const StatePiece& p : share.params) params += p.numel;
    for (const StatePiece& p : share.moments) moments += p.numel;
    EXPECT_EQ(params, end - first);
    EXPECT_EQ(moments, end - first);
    EXPECT_EQ(share.params.front().offset, first);  // offsets into the whole buffer
  }
}

TEST(StateBlocks, ATiedCopyOffTheFirstStageIsReadButNotOwned) {
  const model::Shape s = model::tp4_shape(true, 6);
  const model::ParamLayout last(s, {}, model::StageLayers{2, 3});
  bool owned = false, read = false;
  for (const StatePiece& p : pieces_of_range(last, 0, last.numel(), 0)) owned |= p.name == "embed";
  for (const StatePiece& p : pieces_of_range(last, 0, last.numel(), 0, true))
    read |= p.name == "embed";
  EXPECT_FALSE(owned);
  EXPECT_TRUE(read);
}

}  // namespace
}  // namespace meshloom::train
