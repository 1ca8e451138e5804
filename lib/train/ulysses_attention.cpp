#include "train/ulysses_attention.hpp"

#include <climits>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_util.hpp"
#include "comm/p2p.hpp"
#include "parallel/watchdog.hpp"

namespace meshloom::train {
namespace {

template <class T>
MPI_Datatype elem_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// One row of `width` elements as an MPI type, so that all-to-all counts are
// rows: a long sequence's element counts would pass INT_MAX. Freed right
// after posting; MPI keeps it alive for the pending call.
MPI_Datatype row_type(MPI_Datatype elem, int64_t width) {
  ML_CHECK(width > 0 && width <= INT_MAX, strf("a row of %lld elements", (long long)width));
  MPI_Datatype row;
  MPI_CHECK(MPI_Type_contiguous(int(width), elem, &row));
  MPI_CHECK(MPI_Type_commit(&row));
  return row;
}

// dst row i, columns [0, w) ← src row i (ld ls) columns [0, w), for n rows.
template <class T>
void copy_cols(const T* src, int64_t ls, T* dst, int64_t ld, int64_t n, int64_t w) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ld, src + i * ls, size_t(w) * sizeof(T));
}

// dst row i, columns [0, w) += src row i, for n rows.
template <class T>
void add_cols(const T* src, int64_t ls, T* dst, int64_t ld, int64_t n, int64_t w) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < w; ++c) dst[i * ld + c] += src[i * ls + c];
}

// Local attention on the gathered blocks (plain Ulysses).
template <class T>
class LocalGathered final : public GatheredAttention<T> {
 public:
  explicit LocalGathered(const model::AttnOptions& opt) : opt_(opt) {}
  void forward(int, const model::AttnDims& dims, const model::QueryBlock<T>& q,
               const model::KvBlock<T>& kv, const model::AttnOut<T>& res) override {
    model::attention_block_forward(dims, q, kv, res, opt_);
  }
  void backward(int, const model::AttnDims& dims, const model::QueryBlock<T>& q,
                const model::KvBlock<T>& kv, const model::QueryGrad<T>& g,
                const model::KvGrad<T>& kv_grad) override {
    model::attention_block_backward(dims, q, kv, g, kv_grad, opt_);
  }

 private:
  model::AttnOptions opt_;
};

// "3, 5, 6": the world ranks of the group's members, for error messages.
std::string world_ranks_of(MPI_Comm group) {
  int k = 0;
  MPI_CHECK(MPI_Comm_size(group, &k));
  std::vector<int> mine(static_cast<size_t>(k));
  std::iota(mine.begin(), mine.end(), 0);
  std::vector<std::string> names;
  for (int r : comm::world_ranks(group, mine)) names.push_back(std::to_string(r));
  return join(names, ", ");
}

}  // namespace

CpBytes ulysses_bytes_per_token(const model::AttnDims& dims, int k, size_t elem_bytes) {
  const UlyssesHeads h = ulysses_heads(dims, k);
  const double D = double(dims.head_dim), e = double(elem_bytes), q = double(h.q), v = double(h.v),
               ids = 8, peers = k - 1;
  CpBytes b;
  b.forward = peers * (((q + 2 * v) * D * e + ids) + q * (D + 1) * e);
  b.backward = peers * (((2 * q + 2 * v) * D * e + 2 * q * e + ids) + (q + 2 * v) * D * e);
  return b;
}

template <class T>
UlyssesAttention<T>::UlyssesAttention(MPI_Comm group, int me, const model::AttnOptions& opt,
                                      double timeout_s, std::unique_ptr<GatheredAttention<T>> inner)
    : group_(group),
      me_(me),
      threads_(opt.threads),
      inner_(std::move(inner)),
      timeout_s_(timeout_s) {
  int rank = -1;
  MPI_CHECK(MPI_Comm_size(group_, &k_));
  MPI_CHECK(MPI_Comm_rank(group_, &rank));
  ML_CHECK(rank == me_, strf("Ulysses member %d is rank %d of its group's communicator: the "
                             "communicator's rank order must be the member order",
                             me_, rank));
  if (!inner_) inner_ = std::make_unique<LocalGathered<T>>(opt);
  members_ = world_ranks_of(group_);
}

template <class T>
void UlyssesAttention<T>::wait(MPI_Request* reqs, int count, const char* what) const {
  const std::string text =
      strf("%s in a CP group (world ranks %s; this is member %d)", what, members_.c_str(), me_);
  parallel::WatchScope watch(text);
  comm::wait_requests(reqs, count, timeout_s_, [&] { return text; });
}

template <class T>
void UlyssesAttention<T>::gather_counts(int64_t n, Tokens* t) {
  t->count.assign(size_t(k_), 0);
  MPI_Request req;
  MPI_CHECK(MPI_Iallgather(&n, 1, MPI_INT64_T, t->count.data(), 1, MPI_INT64_T, group_, &req));
  wait(&req, 1, "the Ulysses token counts");
  t->total = 0;
  t->counts.resize(size_t(k_));
  t->displs.resize(size_t(k_));
  for (int d = 0; d < k_; ++d) {
    ML_CHECK(t->total + t->count[size_t(d)] <= INT_MAX, "a CP group of over 2^31 tokens");
    t->displs[size_t(d)] = int(t->total);
    t->counts[size_t(d)] = int(t->count[size_t(d)]);
    t->total += t->count[size_t(d)];
  }
  // This member's k sections of n rows each (the all-to-all's other side).
  t->mine.assign(size_t(k_), int(n));
  t->mine_displs.resize(size_t(k_));
  for (int d = 0; d < k_; ++d) t->mine_displs[size_t(d)] = d * int(n);
  t->sample.resize(size_t(t->total));
  t->pos.resize(size_t(t->total));
}

template <class T>
void UlyssesAttention<T>::post_ids(const int32_t* sample, const int32_t* pos, int64_t n, Tokens* t,
                                   MPI_Request* reqs) {
  MPI_CHECK(MPI_Iallgatherv(sample, int(n), MPI_INT32_T, t->sample.data(), t->counts.data(),
                            t->displs.data(), MPI_INT32_T, group_, &reqs[0]));
  MPI_CHECK(MPI_Iallgatherv(pos, int(n), MPI_INT32_T, t->pos.data(), t->counts.data(),
                            t->displs.data(), MPI_INT32_T, group_, &reqs[1]));
  bytes_sent_ += double(n) * (k_ - 1) * 2 * sizeof(int32_t);
}

template <class T>
void UlyssesAttention<T>::post_rows(const T* send, const Tokens& t, T* recv, int64_t width,
                                    bool back, MPI_Request* req) {
  MPI_Datatype row = row_type(elem_type<T>(), width);
  const std::vector<int>& sc = back ? t.counts : t.mine;
  const std::vector<int>& sd = back ? t.displs : t.mine_displs;
  const std::vector<int>& rc = back ? t.mine : t.counts;
  const std::vector<int>& rd = back ? t.mine_displs : t.displs;
  MPI_CHECK(MPI_Ialltoallv(send, sc.data(), sd.data(), row, recv, rc.data(), rd.data(), row, group_,
                           req));
  MPI_CHECK(MPI_Type_free(&row));
  const int64_t own = sc[size_t(me_)];
  const int64_t rows = std::accumulate(sc.begin(), sc.end(), int64_t(0)) - own;
  bytes_sent_ += double(rows) * double(width) * sizeof(T);
}

// Section d of `out` (n rows): Q of member d's query heads, then K and V of
// its local KV heads.
template <class T>
void UlyssesAttention<T>::pack_qkv(const model::AttnDims& dims, const UlyssesHeads& h,
                                   const model::QueryBlock<T>& q, const model::KvBlock<T>& kv,
                                   T* out, int64_t width) const {
  const int64_t D = dims.head_dim, n = q.n;
  for (int d = 0; d < k_; ++d) {
    T* sec = out + d * n * width;
    copy_cols(q.q + d * h.q * D, q.ld, sec, width, n, h.q * D);
    for (int64_t j = 0; j < h.v; ++j) {
      const int64_t col = h.kv_head(d, j) * D;
      copy_cols(kv.k + col, kv.ldk, sec + (h.q + j) * D, width, n, D);
      copy_cols(kv.v + col, kv.ldv, sec + (h.q + h.v + j) * D, width, n, D);
    }
  }
}

template <class T>
void UlyssesAttention<T>::forward(int layer, const model::AttnDims& dims,
                                  const model::QueryBlock<T>& q, const model::KvBlock<T>& kv,
                                  const model::AttnOut<T>& res) {
  const UlyssesHeads h = ulysses_heads(dims, k_);  // before any message: all fail alike
  ML_CHECK(q.n == kv.n, "Ulysses attention: queries and keys are the same tokens");
  const int64_t D = dims.head_dim, n = q.n, qw = h.q * D, width = qw + 2 * h.v * D;
  Tokens t;
  gather_counts(n, &t);
  const int64_t N = t.total;
  out_.resize(size_t(k_ * n * width));
  pack_qkv(dims, h, q, kv, out_.data(), width);
  sharded_.resize(size_t(N * width));
  MPI_Request reqs[3];
  post_ids(q.sample, q.pos, n, &t, reqs);
  post_rows(out_.data(), t, sharded_.data(), width, false, &reqs[2]);
  wait(reqs, 3, "the Ulysses all-to-all of Q, K, V");

  // Attention over all the group's tokens for this member's heads.
  const model::AttnDims local{h.q, h.v, D};
  result_.resize(size_t(N * qw));
  lse_.resize(size_t(N * h.q));
  const T* s = sharded_.data();
  inner_->forward(layer, local, {s, width, t.sample.data(), t.pos.data(), N},
                  {s + qw, s + qw + h.v * D, width, width, t.sample.data(), t.pos.data(), N},
                  {result_.data(), qw, lse_.data()});

  // Back to the owners: section d of back_ holds member d's heads.
  back_.resize(size_t(k_ * n * qw));
  back_lse_.resize(size_t(k_ * n * h.q));
  post_rows(result_.data(), t, back_.data(), qw, true, &reqs[0]);
  post_rows(lse_.data(), t, back_lse_.data(), h.q, true, &reqs[1]);
  wait(reqs, 2, "the Ulysses all-to-all of the attention outputs");
  for (int d = 0; d < k_; ++d) {
    copy_cols(back_.data() + d * n * qw, qw, res.out + d * qw, res.ld, n, qw);
    copy_cols(back_lse_.data() + d * n * h.q, h.q, res.lse + d * h.q, dims.n_heads, n, h.q);
  }
}

// Section d of `out` (n rows), after Q, K, V: dO of member d's heads, then
// their lse and delta (from the owner's [n, H] arrays).
template <class T>
void UlyssesAttention<T>::pack_grads(const UlyssesHeads& h, const model::AttnDims& dims, int64_t n,
                                     const T* dout, int64_t lddo, const T* lse, const T* delta,
                                     T* out, int64_t width) const {
  const int64_t D = dims.head_dim, H = dims.n_heads, at = (h.q + 2 * h.v) * D;
  for (int d = 0; d < k_; ++d) {
    T* sec = out + d * n * width + at;
    copy_cols(dout + d * h.q * D, lddo, sec, width, n, h.q * D);
    copy_cols(lse + d * h.q, H, sec + h.q * D, width, n, h.q);
    copy_cols(delta + d * h.q, H, sec + h.q * D + h.q, width, n, h.q);
  }
}

template <class T>
void UlyssesAttention<T>::backward(int layer, const model::AttnDims& dims,
                                   const model::QueryBlock<T>& q, const model::KvBlock<T>& kv,
                                   const T* out, int64_t ldo, const T* lse, const T* dout,
                                   int64_t lddo, T* dq, int64_t lddq,
                                   const model::KvGrad<T>& kv_grad) {
  const UlyssesHeads h = ulysses_heads(dims, k_);
  ML_CHECK(q.n == kv.n, "Ulysses attention: queries and keys are the same tokens");
  const int64_t D = dims.head_dim, n = q.n, qw = h.q * D, vw = h.v * D;
  const int64_t width = 2 * qw + 2 * vw + 2 * h.q;  // Q, K, V, dO, lse, delta
  Tokens t;
  gather_counts(n, &t);
  const int64_t N = t.total;
  // The owner computes delta: O stays home.
  delta_.resize(size_t(n * dims.n_heads));
  model::attention_delta(dims, n, out, ldo, dout, lddo, delta_.data(), threads_);
  out_.resize(size_t(k_ * n * width));
  pack_qkv(dims, h, q, kv, out_.data(), width);
  pack_grads(h, dims, n, dout, lddo, lse, delta_.data(), out_.data(), width);
  sharded_.resize(size_t(N * width));
  MPI_Request reqs[3];
  post_ids(q.sample, q.pos, n, &t, reqs);
  post_rows(out_.data(), t, sharded_.data(), width, false, &reqs[2]);
  wait(reqs, 3, "the Ulysses all-to-all of Q, K, V and dO");

  // lse and delta as the block functions want them: [N, q], contiguous.
  const T* s = sharded_.data();
  const int64_t at = 2 * qw + 2 * vw;
  lse_.resize(size_t(N * h.q));
  gathered_delta_.resize(size_t(N * h.q));
  copy_cols(s + at, width, lse_.data(), h.q, N, h.q);
  copy_cols(s + at + h.q, width, gathered_delta_.data(), h.q, N, h.q);
  const int64_t gw = qw + 2 * vw;  // dQ, dK, dV
  result_.assign(size_t(N * gw), T(0));
  T* g = result_.data();
  const model::AttnDims local{h.q, h.v, D};
  inner_->backward(layer, local, {s, width, t.sample.data(), t.pos.data(), N},
                   {s + qw, s + qw + vw, width, width, t.sample.data(), t.pos.data(), N},
                   {s + qw + 2 * vw, width, lse_.data(), gathered_delta_.data(), g, gw},
                   {g + qw, g + qw + vw, gw, gw});

  back_.resize(size_t(k_ * n * gw));
  post_rows(result_.data(), t, back_.data(), gw, true, &reqs[0]);
  wait(reqs, 1, "the Ulysses all-to-all of dQ, dK, dV");
  add_grads(h, D, n, dq, lddq, kv_grad);
}

// Adds the returned sections to dq, dk, dv: member order, then local KV head
// order, so replicated heads sum the same way every time.
template <class T>
void UlyssesAttention<T>::add_grads(const UlyssesHeads& h, int64_t D, int64_t n, T* dq,
                                    int64_t lddq, const model::KvGrad<T>& kv_grad) const {
  const int64_t qw = h.q * D, gw = qw + 2 * h.v * D;
  for (int d = 0; d < k_; ++d) {
    const T* sec = back_.data() + d * n * gw;
    add_cols(sec, gw, dq + d * qw, lddq, n, qw);
    for (int64_t j = 0; j < h.v; ++j) {
      const int64_t col = h.kv_head(d, j) * D;
      add_cols(sec + qw + j * D, gw, kv_grad.dk + col, kv_grad.lddk, n, D);
      add_cols(sec + qw + (h.v + j) * D, gw, kv_grad.dv + col, kv_grad.lddv, n, D);
    }
  }
}

template class UlyssesAttention<float>;
template class UlyssesAttention<double>;

}  // namespace meshloom::train
