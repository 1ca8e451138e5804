#include "train/hybrid_attention.hpp"

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "parallel/watchdog.hpp"
#include "train/ring_attention.hpp"

namespace meshloom::train {

// RingAttention as the attention on Ulysses' gathered blocks.
class HybridAttention::Ring final : public GatheredAttention<float> {
 public:
  Ring(MPI_Comm comm, std::vector<int> members, int me, int64_t max_tokens,
       const model::AttnOptions& opt, double timeout_s)
      : ring_(comm, std::move(members), me, max_tokens, opt, timeout_s) {}
  void forward(int layer, const model::AttnDims& dims, const model::QueryBlock<float>& q,
               const model::KvBlock<float>& kv, const model::AttnOut<float>& res) override {
    ring_.forward(layer, dims, q, kv, res);
  }
  void backward(int, const model::AttnDims& dims, const model::QueryBlock<float>& q,
                const model::KvBlock<float>& kv, const model::QueryGrad<float>& g,
                const model::KvGrad<float>& kv_grad) override {
    ring_.backward(dims, q, kv, g, kv_grad);
  }
  double bytes_sent() const { return ring_.bytes_sent(); }

 private:
  RingAttention ring_;
};

HybridBytes hybrid_bytes_per_token(const model::AttnDims& dims, int u, int r, size_t elem_bytes) {
  const UlyssesHeads h = ulysses_heads(dims, u);
  const double kv = 2 * double(h.v * dims.head_dim) * double(elem_bytes), ids = 8;
  HybridBytes b;
  b.all_to_all = ulysses_bytes_per_token(dims, u, elem_bytes);
  b.ring.forward = double(r - 1) * u * (kv + ids);
  b.ring.backward = double(r) * u * (2 * kv + ids);
  return b;
}

HybridAttention::HybridAttention(MPI_Comm group, int me, int u, int64_t max_tokens,
                                 const model::AttnOptions& opt, double timeout_s, MPI_Comm subgroup)
    : subgroup_(subgroup) {
  int k = 0;
  MPI_CHECK(MPI_Comm_size(group, &k));
  ML_CHECK(
      u >= 1 && k % u == 0,
      strf("a hybrid CP group of %d members cannot be cut into Ulysses subgroups of %d", k, u));
  ML_CHECK(me >= 0 && me < k, "hybrid attention: member index out of range");
  // The ring of member me: the members at the same place in every subgroup.
  std::vector<int> ring;
  for (int m = me % u; m < k; m += u) ring.push_back(m);
  if (subgroup_ == MPI_COMM_NULL) {
    parallel::WatchScope watch(
        strf("the split of a hybrid CP group of %d into subgroups of %d", k, u));
    MPI_CHECK(MPI_Comm_split(group, me / u, me, &subgroup_));
    own_subgroup_ = true;
  }
  int sub = 0;
  MPI_CHECK(MPI_Comm_size(subgroup_, &sub));
  ML_CHECK(sub == u, strf("hybrid attention: a subgroup of %d members, not %d", sub, u));
  auto inner =
      std::make_unique<Ring>(group, std::move(ring), me / u, u * max_tokens, opt, timeout_s);
  ring_ = inner.get();
  ulysses_ = std::make_unique<UlyssesAttention<float>>(subgroup_, me % u, opt, timeout_s,
                                                       std::move(inner));
}

HybridAttention::~HybridAttention() {
  ulysses_.reset();
  if (own_subgroup_) MPI_Comm_free(&subgroup_);
}

double HybridAttention::ring_bytes_sent() const { return ring_->bytes_sent(); }

void HybridAttention::forward(int layer, const model::AttnDims& dims,
                              const model::QueryBlock<float>& q, const model::KvBlock<float>& kv,
                              const model::AttnOut<float>& res) {
  ulysses_->forward(layer, dims, q, kv, res);
}

void HybridAttention::backward(int layer, const model::AttnDims& dims,
                               const model::QueryBlock<float>& q, const model::KvBlock<float>& kv,
                               const float* out, int64_t ldo, const float* lse, const float* dout,
                               int64_t lddo, float* dq, int64_t lddq,
                               const model::KvGrad<float>& kv_grad) {
  ulysses_->backward(layer, dims, q, kv, out, ldo, lse, dout, lddo, dq, lddq, kv_grad);
}

}  // namespace meshloom::train
