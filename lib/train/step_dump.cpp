#include "train/step_dump.hpp"

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "ckpt/h5.hpp"
#include "comm/mpi_check.hpp"

namespace meshloom {

void write_step_dump(const std::string& path, MPI_Comm trainers, const proto::Batch& batch,
                     const model::ParamLayout& layout, const std::vector<float>& params,
                     const std::vector<float>& grads, double loss_sum) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(trainers, &rank));
  MPI_CHECK(MPI_Comm_size(trainers, &size));
  double total = 0;
  MPI_CHECK(MPI_Allreduce(&loss_sum, &total, 1, MPI_DOUBLE, MPI_SUM, trainers));
  // Every trainer's tokens, with where they belong.
  std::string mine = proto::encode(batch);
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
  const auto& samples = batch.samples;
  std::vector<std::vector<int32_t>> tokens(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) tokens[i].assign(size_t(samples[i].length), -1);
  for (int r = 0; r < size; ++r) {
    proto::Batch b =
        proto::decode_batch(all.substr(size_t(displs[size_t(r)]), size_t(counts[size_t(r)])));
    for (const auto& mb : b.micro) {
      size_t k = 0;
      for (const auto& seg : mb.segments)
        for (int64_t p = seg.begin; p < seg.begin + seg.length; ++p)
          tokens[size_t(seg.sample)][size_t(p)] = mb.tokens[k++];
    }
  }
  std::vector<int32_t> flat, lengths, source;
  for (size_t i = 0; i < samples.size(); ++i) {
    for (int32_t t : tokens[i]) ML_CHECK(t >= 0, "step dump: a token of the batch is missing");
    flat.insert(flat.end(), tokens[i].begin(), tokens[i].end());
    lengths.push_back(int32_t(samples[i].length));
    source.push_back(samples[i].source);
  }
  H5File f(path, "w");
  f.write("batch/tokens", flat);
  f.write("batch/sample_lengths", lengths);
  f.write("batch/source", source);
  f.write_scalar("loss", batch.global_predictions ? total / double(batch.global_predictions) : 0.0);
  for (const auto& t : layout.tensors()) {
    std::vector<float> p(params.begin() + t.offset, params.begin() + t.offset + t.numel);
    std::vector<float> g(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    f.write("params/" + t.name, p, t.shape);
    f.write("grads/" + t.name, g, t.shape);
  }
  LOG_INFO("step %lld dumped to %s", (long long)batch.step, path.c_str());
}

}  // namespace meshloom
