// Checkpoints: the whole state gathered on trainer 0 (format 1, load and
// snapshot), or every trainer's own part in one file written and read by
// all of them (format 2, save_state and load_state: train/state_file.hpp).
#include <map>

#include "base/bytes.hpp"
#include "base/check.hpp"
#include "comm/mpi_check.hpp"
#include "train/tp_comm.hpp"
#include "train/trainer.hpp"

namespace meshloom::train {

void Trainer::load(const ckpt::Checkpoint& c) {
  // The checkpoint lists tensors by name (in HDF5's order): place each by name.
  std::map<std::string, const model::TensorInfo*> by_name;
  for (const auto& t : whole_layout_.tensors()) by_name[t.name] = &t;
  bool same = c.tensors.size() == by_name.size();
  for (const auto& t : c.tensors)
    same = same && by_name.count(t.name) && by_name[t.name]->numel == t.numel;
  if (!same)
    throw Error("the checkpoint's model (" + std::to_string(c.tensors.size()) +
                " tensors) does not match the model config: same model section needed");
  // The checkpoint is unsharded (any tp wrote it): the whole model in this
  // build's order, then this TP rank's shard of it.
  const size_t whole_n = size_t(whole_layout_.numel());
  std::vector<float> params(whole_n), m(whole_n), v(whole_n);
  for (const auto& t : c.tensors) {
    const model::TensorInfo& info = *by_name[t.name];
    std::copy(c.params.begin() + t.offset, c.params.begin() + t.offset + t.numel,
              params.begin() + info.offset);
    std::copy(c.m.begin() + t.offset, c.m.begin() + t.offset + t.numel, m.begin() + info.offset);
    std::copy(c.v.begin() + t.offset, c.v.begin() + t.offset + t.numel, v.begin() + info.offset);
  }
  if (tp_ > 1 || pp_ > 1) {
    params = shard_of_whole(model_->layout(), params);
    m = shard_of_whole(model_->layout(), m);
    v = shard_of_whole(model_->layout(), v);
  }
  std::copy(params.begin(), params.end(), model_->params().begin());
  std::copy(m.begin() + shard_begin_, m.begin() + shard_end_, adam_->m().begin());
  std::copy(v.begin() + shard_begin_, v.begin() + shard_end_, adam_->v().begin());
  adam_->set_step(c.adam_step);
  step_ = c.step + 1;
  backend_->load_state(model_->params(), adam_->m(), adam_->v(), c.adam_step);
  params_stale_ = moments_stale_ = false;
}

ckpt::Checkpoint Trainer::snapshot(int64_t step, const std::string& lead_data) {
  sync_host_state();
  ckpt::Checkpoint c;
  std::vector<float> m(adam_->m()), v(adam_->v());
  if (w_.config.optim.zero1) {
    // Gather the moment shards (padded to equal size) on trainer 0.
    auto gather = [&](std::vector<float>& part) {
      std::vector<float> padded(size_t(shard_size_), 0.0f);
      std::copy(part.begin(), part.end(), padded.begin());
      std::vector<float> all(rank_ == 0 ? size_t(shard_size_ * size_) : 0);
      MPI_CHECK(MPI_Gather(padded.data(), int(shard_size_), MPI_FLOAT, all.data(), int(shard_size_),
                           MPI_FLOAT, 0, comm_));
      all.resize(rank_ == 0 ? size_t(model_->layout().numel()) : 0);
      part = std::move(all);
    };
    gather(m);
    gather(v);
  }
  // The trainers of HDP rank 0 (data rank 0) put their shards together on
  // trainer 0: the file holds the whole model, whatever tp and pp wrote it.
  if (rank_ == 0 && (tp_ > 1 || pp_ > 1)) {
    m = whole(m);
    v = whole(v);
  }
  std::vector<float> params;
  if (rank_ == 0) params = whole(model_->params());
  if (trainer_ != 0) return c;
  c = checkpoint_rest(step, lead_data);
  for (const auto& t : whole_layout_.tensors())
    c.tensors.push_back({t.name, t.shape, t.offset, t.numel});
  c.params = std::move(params);
  c.m = std::move(m);
  c.v = std::move(v);
  return c;
}

ckpt::Checkpoint Trainer::checkpoint_rest(int64_t step, const std::string& lead_data) const {
  ckpt::Checkpoint c;
  c.step = step;
  c.trainers = size_;
  c.seed = w_.config.run.seed;
  c.config = w_.config_text;
  c.adam_step = backend_->optimizer_steps();
  ByteReader r(lead_data, "checkpoint data from the lead");
  c.plane = r.get_string();
  c.lengths_full = r.get<uint8_t>() != 0;
  c.lengths_base = r.get_string();
  const uint64_t sources = r.get<uint64_t>();
  for (uint64_t i = 0; i < sources; ++i) {
    ckpt::SourceLengths sl;
    sl.source = r.get_string();
    sl.docs = r.get_vector<int64_t>();
    sl.lengths = r.get_vector<int64_t>();
    sl.images = r.get_vector<int64_t>();
    c.lengths.push_back(std::move(sl));
  }
  const uint64_t sets = r.get<uint64_t>();
  for (uint64_t i = 0; i < sets; ++i) c.group_sets.push_back(r.get_vector<int32_t>());
  return c;
}

StateOwner Trainer::state_owner() const {
  return StateOwner{&model_->layout(), rank_, size_, shard_begin_, shard_end_};
}

StateChecksums Trainer::save_state(const std::string& path, const BytesWritten& wrote) {
  sync_host_state();
  return write_state(path, comms_.comm(parallel::Axis::trainers), whole_layout_, state_owner(),
                     model_->params(), adam_->m(), adam_->v(), wrote);
}

OwnedState Trainer::owned_state() {
  sync_host_state();
  return copy_owned_state(state_owner(), model_->params(), adam_->m(), adam_->v());
}

void Trainer::load_state(const std::string& path, const ckpt::Checkpoint& meta) {
  read_state(path, comms_.comm(parallel::Axis::trainers), whole_layout_, state_owner(),
             meta.tensor_sums, model_->params(), adam_->m(), adam_->v());
  adam_->set_step(meta.adam_step);
  step_ = meta.step + 1;
  backend_->load_state(model_->params(), adam_->m(), adam_->v(), meta.adam_step);
  params_stale_ = moments_stale_ = false;
}

void Trainer::load_weights(const std::string& path, const StateChecksums& sums) {
  set_weights([&](const model::ParamLayout&, std::span<float> params) {
    read_params(path, comms_.comm(parallel::Axis::trainers), whole_layout_, state_owner(), sums,
                params);
  });
}

void Trainer::set_weights(const WeightsFill& fill) {
  fill(model_->layout(), model_->params());
  backend_->load_state(model_->params(), adam_->m(), adam_->v(), 0);
  params_stale_ = moments_stale_ = false;
}

}  // namespace meshloom::train
