#include "train/state_file.hpp"

#include <vector>

#include "base/check.hpp"
#include "ckpt/block_checksum.hpp"
#include "ckpt/h5_parallel.hpp"
#include "comm/mpi_check.hpp"
#include "train/state_blocks.hpp"

namespace meshloom::train {

namespace {

// The three datasets of each whole tensor, in the order every rank moves them.
struct Dataset {
  std::string path, tensor;
  bool moment;  // /optim/m or /optim/v: the AdamW range's buffer
  bool second;  // /optim/v
};
std::vector<Dataset> datasets_of(const model::ParamLayout& whole) {
  std::vector<Dataset> out;
  for (const model::TensorInfo& t : whole.tensors()) {
    out.push_back({"model/" + t.name, t.name, false, false});
    out.push_back({"optim/m/" + t.name, t.name, true, false});
    out.push_back({"optim/v/" + t.name, t.name, true, true});
  }
  return out;
}

const StatePiece* piece_named(const std::vector<StatePiece>& pieces, const std::string& name) {
  for (const StatePiece& p : pieces)
    if (p.name == name) return &p;
  return nullptr;
}

int64_t block_bytes(const std::vector<ckpt::Block>& blocks) {
  int64_t n = 0;
  for (const ckpt::Block& b : blocks) n += b.numel();
  return n * int64_t(sizeof(float));
}

std::vector<uint64_t> summed(std::vector<uint64_t> mine, MPI_Comm comm) {
  MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, mine.data(), int(mine.size()), MPI_UINT64_T, MPI_SUM, comm));
  return mine;
}

StateChecksums write_share(const std::string& path, MPI_Comm trainers,
                           const model::ParamLayout& whole, const StateShare& share,
                           const float* params, const float* m, const float* v,
                           const BytesWritten& wrote) {
  const std::vector<Dataset> sets = datasets_of(whole);
  ckpt::H5ParallelFile file(path, "w", trainers);
  for (const Dataset& d : sets) file.create<float>(d.path, whole.find(d.tensor).full_shape);
  std::vector<uint64_t> sums;
  for (const Dataset& d : sets) {
    const StatePiece* p = piece_named(d.moment ? share.moments : share.params, d.tensor);
    const float* data = d.moment ? (d.second ? v : m) : params;
    const std::vector<ckpt::Block> none;
    file.write_blocks(d.path, p ? p->blocks : none, p ? data + p->offset : data);
    sums.push_back(p ? ckpt::block_checksum(p->dims, p->blocks, data + p->offset) : 0);
    if (wrote) wrote(p ? block_bytes(p->blocks) : 0);
  }
  file.close();
  sums = summed(std::move(sums), trainers);
  StateChecksums out;
  for (size_t i = 0; i < sets.size(); ++i) out[sets[i].path] = sums[i];
  return out;
}

}  // namespace

StateChecksums write_state(const std::string& path, MPI_Comm trainers,
                           const model::ParamLayout& whole, const StateOwner& me,
                           std::span<const float> params, std::span<const float> m,
                           std::span<const float> v, const BytesWritten& wrote) {
  const StateShare share =
      state_share(*me.layout, me.data_rank, me.data_ranks, me.moment_begin, me.moment_end);
  return write_share(path, trainers, whole, share, params.data(), m.data(), v.data(), wrote);
}

OwnedState copy_owned_state(const StateOwner& me, std::span<const float> params,
                            std::span<const float> m, std::span<const float> v) {
  OwnedState out;
  out.share = state_share(*me.layout, me.data_rank, me.data_ranks, me.moment_begin, me.moment_end);
  for (StatePiece& p : out.share.params) {
    const auto from = params.begin() + p.offset;
    p.offset = int64_t(out.params.size());
    out.params.insert(out.params.end(), from, from + p.numel);
  }
  for (StatePiece& p : out.share.moments) {
    const int64_t at = p.offset;
    p.offset = int64_t(out.m.size());
    out.m.insert(out.m.end(), m.begin() + at, m.begin() + at + p.numel);
    out.v.insert(out.v.end(), v.begin() + at, v.begin() + at + p.numel);
  }
  return out;
}

StateChecksums write_owned_state(const std::string& path, MPI_Comm trainers,
                                 const model::ParamLayout& whole, const OwnedState& state,
                                 const BytesWritten& wrote) {
  return write_share(path, trainers, whole, state.share, state.params.data(), state.m.data(),
                     state.v.data(), wrote);
}

namespace {

// read_state, or with !with_moments read_params (m and v empty).
void read_sets(const std::string& path, MPI_Comm trainers, const model::ParamLayout& whole,
               const StateOwner& me, const StateChecksums& expected, std::span<float> params,
               std::span<float> m, std::span<float> v, bool with_moments) {
  const model::ParamLayout& layout = *me.layout;
  ML_CHECK(int64_t(params.size()) == layout.numel() &&
               (!with_moments || int64_t(m.size()) == me.moment_end - me.moment_begin) &&
               m.size() == v.size(),
           "read_state: buffers of another size than the layout's");
  // What this trainer holds (copies included), and what it owns (checksums).
  const std::vector<StatePiece> held_params = pieces_of_range(layout, 0, layout.numel(), 0, true);
  const std::vector<StatePiece> held_moments =
      pieces_of_range(layout, me.moment_begin, me.moment_end, me.moment_begin, true);
  const StateShare owned =
      state_share(layout, me.data_rank, me.data_ranks, me.moment_begin, me.moment_end);
  std::vector<Dataset> sets = datasets_of(whole);
  if (!with_moments) std::erase_if(sets, [](const Dataset& d) { return d.moment; });
  ckpt::H5ParallelFile file(path, "r", trainers);
  for (const Dataset& d : sets)
    if (file.dims(d.path) != whole.find(d.tensor).full_shape)
      throw Error("'" + path + "': dataset '" + d.path + "' is not shaped as the model's '" +
                  d.tensor + "'");
  std::vector<uint64_t> sums;
  for (const Dataset& d : sets) {
    const StatePiece* p = piece_named(d.moment ? held_moments : held_params, d.tensor);
    float* data = (d.moment ? (d.second ? v : m) : params).data();
    const std::vector<ckpt::Block> none;
    file.read_blocks(d.path, p ? p->blocks : none, p ? data + p->offset : data);
    const StatePiece* own = piece_named(d.moment ? owned.moments : owned.params, d.tensor);
    sums.push_back(own ? ckpt::block_checksum(own->dims, own->blocks, data + own->offset) : 0);
  }
  file.close();
  sums = summed(std::move(sums), trainers);
  for (size_t i = 0; i < sets.size(); ++i) {
    const auto it = expected.find(sets[i].path);
    if (it == expected.end())
      throw Error("'" + path + "': no checksum for dataset '" + sets[i].path + "'");
    if (it->second != sums[i])
      throw Error("'" + path + "': dataset '" + sets[i].path +
                  "' does not match its checksum (a corrupt or torn checkpoint)");
  }
}

}  // namespace

void read_state(const std::string& path, MPI_Comm trainers, const model::ParamLayout& whole,
                const StateOwner& me, const StateChecksums& expected, std::span<float> params,
                std::span<float> m, std::span<float> v) {
  read_sets(path, trainers, whole, me, expected, params, m, v, true);
}

void read_params(const std::string& path, MPI_Comm trainers, const model::ParamLayout& whole,
                 const StateOwner& me, const StateChecksums& expected, std::span<float> params) {
  read_sets(path, trainers, whole, me, expected, params, {}, {}, false);
}

}  // namespace meshloom::train
