// Ulysses attention (context parallelism by all-to-all over heads) across the
// k members of one CP group, and the bytes it sends.
//
// Each member holds some of the group's tokens (its zigzag chunks,
// plan/plan.hpp: member c holds chunks c and 2k-1-c; any split works, even an
// empty share) with their sample ids and positions, and all H query and Hk
// KV heads of this TP rank (with TP, H and Hk are already the TP rank's
// share). Per layer:
//   forward:  1. all-to-all: member d gets every member's tokens' Q for its
//                q = H/k query heads [d·q, (d+1)·q) and K, V for the KV heads
//                those use (the rule below), and all tokens' ids (all-gather);
//             2. attention over ALL the group's tokens for those heads, masked
//                by the ids (document-masked causal: the members' token order
//                does not matter, packed documents stay apart);
//             3. all-to-all back: each token owner gets O and lse of every head.
//   backward: the owners compute delta = rowsum(dO ⊙ O) (they hold O) and
//             send Q, K, V, dO, lse, delta head-sharded (nothing is kept from
//             forward); dQ, dK, dV come back, and each owner adds them up.
//
// KV heads (the rule). k must divide H. With g = H/Hk query heads per KV head,
// member d works in sub-groups of g' = gcd(q, g) query heads; its local KV
// head j is global KV head (d·q + j·g') / g, so it holds v = q / g' KV heads:
//   Hk % k == 0: v = Hk/k distinct heads per member, nothing copied;
//   k % Hk == 0: v = 1, each KV head goes to the k/Hk members whose query
//                heads use it;
//   otherwise:   g' < g: a local KV head serves g' query heads, so a member
//                gets a KV head once per g' of its query heads that use it
//                (H=24, Hk=6, k=4: g=4, q=6, g'=2, v=3; member 0 gets KV heads
//                0, 0, 1 and member 1 gets 1, 2, 2): more bytes than needed,
//                for one uniform attention call per member.
// Replicas' dK/dV are summed at the token owner, in member order, then local
// head order: the result does not depend on timing.
//
// Messages: one MPI_Iallgather of the members' token counts, then
// MPI_Ialltoallv/Iallgatherv on `group`, each waited for under the deadline
// (a member that never answers fails the wait naming the group) and inside a
// WatchScope (the watchdog's record of what this rank waits for).
//
// Memory: scratch buffers, kept between calls at the largest size so far: in
// backward about 2·N·(3q + 4v)·D + 8·N·q elements (N: the group's tokens),
// i.e. 2·n·(3H + 4·k·v)·D + 8·n·H for a member holding n = N/k.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/attention.hpp"
#include "model/ulysses_heads.hpp"

namespace meshloom::train {

// How the heads are cut over k members (the rule above): model/ulysses_heads.hpp.
using model::ulysses_fits;
using model::ulysses_heads;
using model::UlyssesHeads;

// Bytes one member sends per token it holds, per layer, when the k members
// hold equal shares; e = element size (4: float), ids are 8 bytes a token,
// and the 8-byte token count per member and call is left out. With q and v as
// in UlyssesHeads and D = head_dim:
//   forward  = (k-1) · [ (q + 2v)·D·e + 8       (Q, K, V, ids out)
//                      +  q·(D + 1)·e ]          (O, lse back)
//   backward = (k-1) · [ (2q + 2v)·D·e + 2q·e + 8   (Q, K, V, dO; lse, delta; ids)
//                      +  (q + 2v)·D·e ]             (dQ, dK, dV back)
// A member's own share never travels. With unequal shares, a member holding
// n of the group's N tokens sends n·(k-1)·[first line] + (N-n)·[second line]
// of each bracket (it sends its own tokens out, the others' results back).
struct CpBytes {
  double forward = 0;
  double backward = 0;
};
CpBytes ulysses_bytes_per_token(const model::AttnDims& dims, int k, size_t elem_bytes);

// The attention run on the head-sharded, sequence-gathered blocks: local
// attention for Ulysses, a ring across subgroups for HybridAttention. Its
// backward takes delta (g.delta), which the token owners computed from O, so
// that O need not travel.
template <class T>
class GatheredAttention {
 public:
  virtual ~GatheredAttention() = default;
  virtual void forward(int layer, const model::AttnDims& dims, const model::QueryBlock<T>& q,
                       const model::KvBlock<T>& kv, const model::AttnOut<T>& res) = 0;
  virtual void backward(int layer, const model::AttnDims& dims, const model::QueryBlock<T>& q,
                        const model::KvBlock<T>& kv, const model::QueryGrad<T>& g,
                        const model::KvGrad<T>& kv_grad) = 0;
};

// How the trainer builds it for a micro-batch whose group has k members:
//   MPI_Comm group = ...;  // exactly the k members, rank = member index
//                          // (e.g. from the GroupComms cache)
//   train::UlyssesAttention<float> attn(group, member, attn_options, run.timeout);
//   model.forward(batch, &attn);  // batch: this member's zigzag chunks, with
//                                 // global positions and sample ids
// Every member must run the same layers in the same order (the calls are
// collectives over `group`). Nothing but scratch is kept between calls, so
// one object per group serves every micro-batch and step; it neither owns nor
// frees `group`.
template <class T>
class UlyssesAttention final : public model::AttentionBackend<T> {
 public:
  // `group`: exactly the k members, rank = member index (`me` is checked
  // against it). `inner` runs on the gathered blocks; null: local attention
  // with `opt` (whose threads also compute delta).
  UlyssesAttention(MPI_Comm group, int me, const model::AttnOptions& opt, double timeout_s,
                   std::unique_ptr<GatheredAttention<T>> inner = nullptr);

  void forward(int layer, const model::AttnDims& dims, const model::QueryBlock<T>& q,
               const model::KvBlock<T>& kv, const model::AttnOut<T>& res) override;
  void backward(int layer, const model::AttnDims& dims, const model::QueryBlock<T>& q,
                const model::KvBlock<T>& kv, const T* out, int64_t ldo, const T* lse, const T* dout,
                int64_t lddo, T* dq, int64_t lddq, const model::KvGrad<T>& kv_grad) override;

  // Bytes this member sent to the others so far (its own share not counted).
  double bytes_sent() const { return bytes_sent_; }

 private:
  // The group's tokens for one call: counts and ids of all members (member
  // order), and the all-to-all's counts in rows: `counts`/`displs` for all
  // tokens, `mine`/`mine_displs` for k sections of this member's n rows.
  struct Tokens {
    std::vector<int64_t> count;
    std::vector<int> counts, displs, mine, mine_displs;
    std::vector<int32_t> sample, pos;
    int64_t total = 0;
  };
  void gather_counts(int64_t n, Tokens* t);
  // Posts the all-gathers of the ids (two requests).
  void post_ids(const int32_t* sample, const int32_t* pos, int64_t n, Tokens* t, MPI_Request* reqs);
  // Posts an all-to-all of rows `width` elements wide: out (back = false),
  // from k sections of this member's rows to every member's rows in member
  // order; back (true), the reverse.
  void post_rows(const T* send, const Tokens& t, T* recv, int64_t width, bool back,
                 MPI_Request* req);
  void wait(MPI_Request* reqs, int count, const char* what) const;
  void pack_qkv(const model::AttnDims& dims, const UlyssesHeads& h, const model::QueryBlock<T>& q,
                const model::KvBlock<T>& kv, T* out, int64_t width) const;
  void pack_grads(const UlyssesHeads& h, const model::AttnDims& dims, int64_t n, const T* dout,
                  int64_t lddo, const T* lse, const T* delta, T* out, int64_t width) const;
  void add_grads(const UlyssesHeads& h, int64_t D, int64_t n, T* dq, int64_t lddq,
                 const model::KvGrad<T>& kv_grad) const;

  MPI_Comm group_;
  int me_ = 0;
  int k_ = 1;
  int threads_ = 1;
  std::unique_ptr<GatheredAttention<T>> inner_;
  double timeout_s_;
  std::string members_;  // the members' world ranks, for messages
  double bytes_sent_ = 0;
  // out_: k sections of this member's rows; sharded_: all tokens' rows of
  // this member's heads; result_: what attention made of them; back_: k
  // sections of results for this member's rows.
  std::vector<T> out_, sharded_, result_, lse_, back_, back_lse_, delta_, gathered_delta_;
};

}  // namespace meshloom::train
