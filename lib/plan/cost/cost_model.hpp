// The cost model every planner and the simulator share: predicted seconds of
// one trainer's micro-batch, from the model's shape and the machine's rates.
//
// A micro-batch on one trainer holds pieces of sequences that all use the same
// CP group of k trainers (k = 1: whole sequences, packed). With `tokens` the
// tokens this trainer holds and `attn_l2` = sum over its sequences of L^2 / k
// (its share of the causal attention work, in token^2):
//
//   k = 1:  t = b * tokens + a * attn_l2 + g
//   k > 1:  t = b * tokens + g + s + (k - 1) * max(s, layers * c)
//           s = a * attn_l2 / k              attention of one ring step
//           c = passes * (tokens * kv_bytes / bandwidth + latency)
//                                            K/V of one block, one layer
//
// i.e. ring attention runs k steps per layer; in each, the K/V block of the
// previous member arrives while the current block is computed, so a step costs
// the larger of the two (the first step needs nothing from the ring). `passes`
// = 3: K/V once forward; K/V again and dK/dV backward. a (s per token^2) is
// causal attention, forward + backward (3.5 x forward: flash attention's
// backward recomputes the scores), b (s per token) the linear layers (3 x
// forward), g a fixed cost per micro-batch. Rings whose members all sit on one
// node use the intra-node bandwidth.
//
// Nodes. The cost model knows which node each HDP rank sits on in one of two
// forms: set_nodes(), an explicit node per HDP rank (a run's, from its
// trainers' host names; `meshloom plan --trainers-per-node`), or
// `trainers_per_node`, the uniform layout of an idealized cluster (rank /
// trainers_per_node; `meshloom simulate`). Both decide links alike; only the
// explicit form of more than one node also makes the HDP planner place rings
// inside nodes (hdp_planner.hpp), so the simulator's published figures keep
// their rank-order placement. Neither: no node is known and every link is
// `bandwidth`.
//
// A trainer may be a tensor-parallel group of tp GPUs (Hardware::tp): its
// FLOP rate and links are the group's, and b carries the group's collectives:
// every layer all-reduces its attention and MLP outputs forward and their
// gradients backward (bf16, [tokens, d]; with sequence parallelism a
// reduce-scatter and an all-gather, the same bytes), a ring all-reduce moving
// 2 (tp - 1) / tp of them over each GPU's own link, in the critical path:
//   b += layers * 4 * 2 (tp - 1) / tp * 2 d / tp_link_bandwidth
//
// Selective offloading (ByteScale section 5.2) moves a share r of a piece's
// activations to host memory while it computes; it costs time only where the
// copy (r x activation bytes over the host link) outlasts the compute, and
// the offloaded bytes of one trainer must fit in its pinned host memory.
//
// Ulysses and hybrid CP (docs/plan.md "CP algorithms"). A k-way
// group may instead run Ulysses of degree u (u divides k and the query heads
// of a TP rank) inside each of r = k / u subgroups of consecutive members,
// and a ring across the subgroups (u = 1: the ring above; u = k: pure
// Ulysses). Per layer, forward: an all-to-all turns the member's Q, K, V
// from token-sharded to head-sharded (each member then holds its subgroup's
// tokens for heads/u query heads), attention runs over them, and an
// all-to-all turns O back; backward moves dO in and dQ, dK, dV back, the
// same bytes (the head-sharded Q, K, V, O and lse of forward are kept, as
// flash attention keeps its inputs). Per token a member holds, one layer,
// forward (head_bytes = bytes of one head of one token):
//   A(u) = (u - 1) * head_bytes * (2 * heads / u + 2 * e(u))
// (Q out and O back: (u-1)/u of the query heads each; K and V: e(u) KV heads
// to each of the u - 1 others), e(u) = the KV heads one member needs, more
// than kv_heads / u when u > kv_heads (a KV head is then replicated to every
// member whose query heads share it). The ring across subgroups moves, per
// token of the member, u * 2 * e(u) * head_bytes (kv_bytes when u = 1) and
// runs r steps of a * attn_l2 / r. Ulysses' all-to-alls sit on the critical
// path (attention needs all of Q, K, V; the next layer needs O), so
//   t = b * tokens + g + layers * 2 * (tokens * A(u) / bw_a + 4 * latency)
//       + ring over r steps as above (its K/V overlapping compute),
// bw_a = the intra-node bandwidth when every subgroup sits in one node,
// else `bandwidth`.
//
// a, b and g can be fitted to measurements: `calibrate()` takes (tokens,
// sum L^2, seconds) of whole-sequence (k = 1) micro-batches and solves the
// least-squares problem with a, b, g >= 0. The CSV it reads has one header
// line `tokens,sum_l2,seconds` and one micro-batch per line; `#` starts a
// comment line.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/shape.hpp"

namespace meshloom::plan {

// What one trainer (a GPU, or a TP group of GPUs) can do.
struct Hardware {
  double flops = 989e12 * 0.45;       // effective FLOP/s of one trainer (peak x MFU)
  double bandwidth = 25e9;            // bytes/s one trainer sends to another node
  double intra_bandwidth = 150e9;     // bytes/s inside a node (NVLink)
  int trainers_per_node = 8;          // uniform layout; 0: every ring uses `bandwidth`
  double latency = 10e-6;             // seconds per ring message (one block, one layer)
  double host_bandwidth = 20e9;       // bytes/s device <-> host, for offloading
  double host_memory = 256e9;         // pinned host bytes one trainer may offload to
  double micro_batch_overhead = 0.0;  // seconds per micro-batch (g)
  int tp = 1;                         // GPUs (ranks) per trainer, tensor-parallel
  double tp_link_bandwidth = 150e9;   // bytes/s of one GPU's link inside its TP group
};

// The heads of one TP rank, as Ulysses sees them (0 heads: unknown, so a
// group can only run a ring). model::Shape::tp_share splits them.
struct HeadShape {
  int32_t heads = 0;      // query heads of one TP rank
  int32_t kv_heads = 0;   // K/V heads of one TP rank
  double head_bytes = 0;  // one head of one token, bf16, summed over the trainer's TP ranks
  bool operator==(const HeadShape&) const = default;
};

HeadShape head_shape(const model::Shape& shape, int tp);
// u = 1, or u > 1 dividing the query heads (DeepSpeed-Ulysses' rule: every
// member gets heads / u whole heads).
bool ulysses_fits(const HeadShape& h, int u);
// KV heads the member with the most needs at Ulysses degree u (ulysses_fits):
// member j holds query heads [j h/u, (j+1) h/u), and query head q uses KV head
// q / (heads / kv_heads) (GQA).
int ulysses_kv_heads(const HeadShape& h, int u);
// A(u): all-to-all bytes one member sends per token it holds, one layer,
// forward (backward the same); 0 at u = 1.
double ulysses_bytes(const HeadShape& h, int u);
// K/V bytes per token held that a ring step carries at Ulysses degree u
// (kv_bytes at u = 1).
double cp_ring_block_bytes(const HeadShape& h, double kv_bytes, int u);

// Ulysses' all-to-all passes per layer: forward (Q, K, V in; O back) and
// backward (dO in; dQ, dK, dV back), four collectives each.
constexpr double kUlyssesPasses = 2;
constexpr double kUlyssesCollectives = 4;

// Which links a group's collectives use: the all-to-alls inside subgroups,
// and the ring (across subgroups, or the whole group at u = 1).
struct CpLinks {
  bool a2a_intra = false;   // every subgroup sits in one node
  bool ring_intra = false;  // the whole group sits in one node
};

// The hardware of one HDP rank of a run: a TP group of `tp` trainers, each
// with plan.flops, plan.bandwidth and plan.intra_bandwidth (0: plan.bandwidth),
// so the group has tp times each and plan.bandwidth per GPU inside it. No
// node layout: the lead sets CostModel::set_nodes from its trainers' hosts.
Hardware hardware_from_config(const config::PlanConfig& plan, int tp);

// Node of each of `ranks` HDP ranks, `per_node` consecutive ranks a node (the
// last node may hold fewer).
std::vector<int32_t> uniform_nodes(int32_t ranks, int32_t per_node);

class CostModel {
 public:
  double a = 0;  // seconds per token^2 of causal attention (all layers, fwd + bwd)
  double b = 0;  // seconds per token (linear layers and LM head, fwd + bwd)
  double g = 0;  // seconds per micro-batch
  int layers = 1;
  double kv_bytes = 0;   // K/V bytes per token per layer
  double act_bytes = 0;  // activation bytes per token per layer
  double passes = 3;
  double bandwidth = 25e9;
  double intra_bandwidth = 150e9;
  int trainers_per_node = 0;  // uniform layout (see the file comment); 0: none
  double latency = 0;
  double host_bandwidth = 20e9;
  double host_memory = 256e9;
  int tp = 1;
  double tp_seconds_per_token = 0;  // of b: the TP group's collectives
  HeadShape heads;                  // of one TP rank: Ulysses' limit and volume

  static CostModel from_shape(const model::Shape& shape, const Hardware& hw);

  // One member's micro-batch time (see the file comment). `offload_bytes`:
  // activation bytes this member copies to the host during it.
  double micro_batch(double tokens, double attn_l2, int k, bool intra = false,
                     double offload_bytes = 0) const;
  // The same with Ulysses of degree u inside subgroups and a ring of k / u
  // across them (u = 1: micro_batch above). u must divide k and fit the heads.
  double cp_micro_batch(double tokens, double attn_l2, int k, int u, CpLinks links,
                        double offload_bytes = 0) const;
  // The links of `group` (ranks, member order) at Ulysses degree u: subgroup
  // j is members [j u, (j+1) u).
  CpLinks cp_links(std::span<const int32_t> group, int u) const;
  // Time of a whole sequence of L tokens on one trainer, without g.
  double whole(int64_t length) const {
    return a * double(length) * double(length) + b * double(length);
  }
  // Time of one member of a k-way ring over one sequence of L tokens, with g
  // (inter-node ring, the member holding ceil(L / k) tokens).
  double piece(int64_t length, int k) const;
  // Compute only (no ring, no g) of that member: what can hide offloading.
  double piece_compute(int64_t length, int k) const;

  // The explicit node layout: node indices 0.. of each HDP rank (empty: none;
  // then trainers_per_node decides). Throws Error on a negative index.
  void set_nodes(std::vector<int32_t> node_of_rank);
  const std::vector<int32_t>& nodes() const { return nodes_; }
  bool knows_nodes() const { return !nodes_.empty() || trainers_per_node > 0; }
  // The node of HDP rank `rank`; -1 when no node is known.
  int32_t node_of(int32_t rank) const;
  // True when every one of `ranks` sits on one known node (a single rank: true).
  bool one_node(std::span<const int32_t> ranks) const;
  // Distinct nodes `ranks` sit on (0 when no node is known).
  int32_t nodes_spanned(std::span<const int32_t> ranks) const;
  // The most HDP ranks one node holds (0 when no node is known).
  int32_t largest_node() const;
  // Whether the HDP planner places rings by node: an explicit layout of more
  // than one node.
  bool places_by_node() const;

  std::string describe() const;

 private:
  std::vector<int32_t> nodes_;  // node of each HDP rank
  int32_t node_count_ = 0;      // of nodes_
  int32_t largest_node_ = 0;    // of nodes_
};

struct CalibrationSample {
  double tokens = 0;
  double sum_l2 = 0;
  double seconds = 0;
};

struct Calibration {
  double a = 0, b = 0, g = 0;
  double rms = 0;  // root mean square residual, seconds
  double r2 = 0;   // coefficient of determination
  size_t samples = 0;
  std::string describe() const;
};

// Least squares fit of seconds = a * sum_l2 + b * tokens + g with a, b, g >= 0
// (the best of the fits over every subset of the three terms that comes out
// non-negative). Needs at least one sample.
Calibration calibrate(const std::vector<CalibrationSample>& samples);
// Reads the CSV described above; throws meshloom::Error naming file:line.
std::vector<CalibrationSample> read_calibration_csv(const std::string& path);
// The model with a, b, g replaced by the fit.
CostModel calibrated(CostModel model, const Calibration& fit);

}  // namespace meshloom::plan
