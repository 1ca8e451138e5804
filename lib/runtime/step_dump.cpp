#include "runtime/step_dump.hpp"

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "ckpt/h5.hpp"
#include "comm/mpi_check.hpp"
#include "wire/reassemble.hpp"

namespace meshloom::runtime {

void write_step_dump(const std::string& path, MPI_Comm trainers, const wire::Batch& batch,
                     bool holds_batch, const model::ParamLayout& layout,
                     const std::vector<float>& params, const std::vector<float>& grads,
                     double loss_sum) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(trainers, &rank));
  MPI_CHECK(MPI_Comm_size(trainers, &size));
  double total = 0;
  MPI_CHECK(MPI_Allreduce(&loss_sum, &total, 1, MPI_DOUBLE, MPI_SUM, trainers));
  // Every trainer's tokens, with where they belong.
  const std::string mine = holds_batch ? wire::encode(batch) : std::string();
  int n = int(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, trainers));
  std::string all;
  if (rank == 0) {
    int at = 0;
    for (int r = 0; r < size; ++r) {
      displs[size_t(r)] = at;
      at += counts[size_t(r)];
    }
    all.resize(size_t(at));
  }
  MPI_CHECK(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(),
                        MPI_BYTE, 0, trainers));
  if (rank != 0) return;
  std::vector<wire::Batch> batches;
  for (int r = 0; r < size; ++r)
    if (counts[size_t(r)] > 0)
      batches.push_back(
          wire::decode_batch(all.substr(size_t(displs[size_t(r)]), size_t(counts[size_t(r)]))));
  const std::vector<wire::Sample>& samples = batch.samples;  // trainer 0's: all of them
  const std::vector<wire::SampleContent> got = wire::reassemble(batch.step, samples, batches);
  std::vector<int32_t> flat, lengths, source;
  std::vector<float> patches;
  for (size_t i = 0; i < samples.size(); ++i) {
    flat.insert(flat.end(), got[i].tokens.begin(), got[i].tokens.end());
    patches.insert(patches.end(), got[i].patches.begin(), got[i].patches.end());
    lengths.push_back(int32_t(samples[i].length));
    source.push_back(samples[i].source);
  }
  ckpt::H5File f(path, "w");
  f.write("batch/tokens", flat);
  const model::Shape& shape = layout.shape();
  if (shape.patch_dim > 0)
    f.write("batch/patches", patches, {int64_t(patches.size()) / shape.patch_dim, shape.patch_dim});
  f.write("batch/sample_lengths", lengths);
  f.write("batch/source", source);
  // What the parameters' shapes leave open, for an independent reimplementation.
  f.write_scalar("model/n_heads", int64_t(shape.n_heads));
  f.write_scalar("model/n_kv_heads", int64_t(shape.n_kv_heads));
  f.write_scalar("model/rope_theta", double(shape.rope_theta));
  f.write_scalar("model/norm_eps", shape.norm_eps);
  const config::RopeScalingConfig& rs = shape.rope_scaling;
  f.write_string("model/rope_scaling/type", config::enum_name(rs.type));
  f.write_scalar("model/rope_scaling/factor", rs.factor);
  f.write_scalar("model/rope_scaling/low_freq_factor", rs.low_freq_factor);
  f.write_scalar("model/rope_scaling/high_freq_factor", rs.high_freq_factor);
  f.write_scalar("model/rope_scaling/original_max_position_embeddings",
                 rs.original_max_position_embeddings);
  f.write_scalar("loss", batch.global_predictions ? total / double(batch.global_predictions) : 0.0);
  for (const auto& t : layout.tensors()) {
    std::vector<float> p(params.begin() + t.offset, params.begin() + t.offset + t.numel);
    std::vector<float> g(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    f.write("params/" + t.name, p, t.shape);
    f.write("grads/" + t.name, g, t.shape);
  }
  LOG_INFO("step %lld dumped to %s", (long long)batch.step, path.c_str());
}

}  // namespace meshloom::runtime
