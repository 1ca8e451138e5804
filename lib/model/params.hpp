// The model's shape and its parameters as one flat buffer.
//
// Every parameter tensor is a named view into one contiguous buffer, in this
// order (shapes row-major [out, in], as docs/design.md "The model" names them):
//
//   embed [V, d]
//   for each layer i: layers.i.attn_norm [d], layers.i.wq [H·D, d],
//     layers.i.wk [Hkv·D, d], layers.i.wv [Hkv·D, d], layers.i.wo [d, H·D],
//     layers.i.mlp_norm [d], layers.i.w1 [F, d], layers.i.w3 [F, d],
//     layers.i.w2 [d, F]
//   final_norm [d]
//   lm_head [V, d]            (untied only)
//   patch_embed [d, P]        (only with images: Shape::patch_dim P > 0)
//
// with no gaps. patch_embed comes last so that adding it moves no other
// tensor's offset or index (which keys its initialization): with P = 0 the
// layout and every initial value are those of a text-only model. Gradients live in a buffer of the
// same layout, so a trainer all-reduces one buffer and the optimizer walks one buffer. The order is
// chosen so that wq|wk|wv and w1|w3 are adjacent: the model multiplies by
// each pair (triple) as one matrix ([(H+2·Hkv)·D, d] and [2F, d]) in one GEMM.
//
// Initialization (init_params) is a pure function of (seed, tensor index,
// element index), so it does not depend on threads, ranks or the scalar type:
// element e of tensor t (its index in the order above) is
//   u1 = ((hash(seed, t, 2e) >> 11) + 1) · 2^-53     in (0, 1]
//   u2 = (hash(seed, t, 2e+1) >> 11) · 2^-53         in [0, 1)
//   z  = sqrt(-2 ln u1) · cos(2π u2)                  (Box–Muller, in double)
//   value = std · z, rounded to the scalar type
// with hash(s, t, c) = f(f(f(s + γ) ⊕ (t + γ)) ⊕ (c + γ)) in 64-bit unsigned
// arithmetic, f the splitmix64 finalizer (z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
// z ^= z >> 27; z *= 0x94d049bb133111eb; z ^= z >> 31) and
// γ = 0x9e3779b97f4a7c15. std is init_std (0.02 by default) for the embedding,
// the matrices, lm_head and patch_embed, init_std / sqrt(2·layers) for wo and w2; norm
// gains are 1. (Five lines of Python reproduce it.)
//
// Tensor parallelism (parallel.tp): a TP rank's layout holds its shard of
// each tensor under the same names, in the same order (Megatron's split):
//   wq, wk, wv, w1, w3   rows: its heads, KV heads, FFN columns (column-parallel)
//   wo, w2               columns: the same heads, FFN columns (row-parallel)
//   embed, lm_head       rows: its block of the vocabulary (vocab-parallel)
//   norm gains           whole (replicated)
//   patch_embed          whole (replicated)
// Heads, KV heads and FFN columns split into `size` equal contiguous blocks;
// the vocabulary into blocks of ceil(V / size) rows, the last ones shorter.
// A shard's element e is initialized as the full tensor's element it is, so
// every tp gives the same model.
//
// Pipeline parallelism (parallel.pp): a stage's layout holds, in the same
// order and under the same names, only the tensors of its layers
// [first, end); stage 0 adds the embedding (and patch_embed), the last
// stage final_norm and
// the LM head: lm_head, or with tied embeddings the embedding again (so
// stages 0 and pp - 1 both hold `embed`, and their gradients are summed).
// A tensor keeps its index in the whole model's order, which keys its
// initialization, so every pp gives the same model too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/shape.hpp"

namespace meshloom::model {

// Which share of the model a tensor-parallel rank holds (see above).
struct TpShard {
  int64_t size = 1;
  int64_t rank = 0;
  int64_t part(int64_t n) const { return n / size; }  // heads, KV heads, FFN columns
  int64_t vocab_begin(int64_t vocab) const;
  int64_t vocab_rows(int64_t vocab) const;
};

// What a TP rank computes with (the whole model's sizes at tp = 1): its
// query heads, KV heads and FFN columns, the row widths they make (q, k|v,
// q|k|v), and its vocabulary rows [vocab_first, vocab_first + vocab_rows).
struct ShardSizes {
  ShardSizes(const Shape& s, TpShard shard)
      : heads(shard.part(s.n_heads)),
        kv_heads(shard.part(s.n_kv_heads)),
        ffn(shard.part(s.ffn_dim)),
        q_dim(heads * s.head_dim),
        kv_dim(kv_heads * s.head_dim),
        qkv_dim(q_dim + 2 * kv_dim),
        vocab_first(shard.vocab_begin(s.vocab)),
        vocab_rows(shard.vocab_rows(s.vocab)) {}
  int64_t heads, kv_heads, ffn, q_dim, kv_dim, qkv_dim, vocab_first, vocab_rows;
};

// The layers [first, end) of one pipeline stage (end -1: to the last
// layer). The default is the whole model.
struct StageLayers {
  int64_t first = 0;
  int64_t end = -1;
  bool operator==(const StageLayers&) const = default;
};

enum class TensorKind { embed, norm, matrix };

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in elements, into the flat buffer
  int64_t numel = 0;
  TensorKind kind = TensorKind::matrix;
  int index = 0;  // position in the whole model's tensors(); keys the initialization
  // Tensor parallelism: the whole tensor's shape, the dimension this shard
  // cuts (-1: none, 0: rows, 1: columns) and where its block begins there.
  std::vector<int64_t> full_shape;
  int split_dim = -1;
  int64_t split_begin = 0;
  // The index in the whole tensor of this shard's element `e`.
  int64_t full_element(int64_t e) const;
};

// A tensor's shard out of the whole tensor (`full`: full_shape), and back.
template <class T>
void take_shard(const TensorInfo& t, const T* full, T* shard);
template <class T>
void put_shard(const TensorInfo& t, const T* shard, T* full);

// Offsets of one layer's tensors in the flat buffer.
struct LayerOffsets {
  int64_t attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2;
};

class ParamLayout {
 public:
  // The whole model, or a tensor-parallel rank's shard of it, or of the
  // layers of one pipeline stage.
  explicit ParamLayout(const Shape& shape, TpShard shard = {}, StageLayers stage = {});

  // The whole model's shape (a shard's sizes: the tensors, and shard()).
  const Shape& shape() const { return shape_; }
  const TpShard& shard() const { return shard_; }
  // The stage's layers (end resolved: the whole model is {0, n_layers}).
  const StageLayers& stage() const { return stage_; }
  // Stage 0 embeds the tokens; the last stage runs the final norm, the head
  // and the loss. Both hold for the whole model.
  bool first_stage() const { return stage_.first == 0; }
  bool last_stage() const { return stage_.end == shape_.n_layers; }
  bool holds_layer(int64_t i) const { return i >= stage_.first && i < stage_.end; }
  int64_t numel() const { return numel_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Fails on an unknown name.
  const TensorInfo& find(const std::string& name) const;

  // Offsets of the stage's tensors (layer i by its index in the whole
  // model; -1 for what the stage does not hold).
  int64_t embed() const { return embed_; }
  // patch_embed's offset; -1 without images or off stage 0.
  int64_t patch_embed() const { return patch_embed_; }
  const LayerOffsets& layer(int64_t i) const {
    return layers_[static_cast<size_t>(i - stage_.first)];
  }
  int64_t final_norm() const { return final_norm_; }
  // The LM head's matrix: lm_head when untied, embed when tied.
  int64_t head() const { return head_; }

  // [first, last) ranges of the matrices and the embedding (what weight
  // decay applies to; patch_embed is a matrix like wq); norm gains are left out.
  std::vector<std::pair<int64_t, int64_t>> decay_ranges() const;

 private:
  // Adds the tensor when `held` (else only counts its index); its offset, or -1.
  int64_t add(bool held, const std::string& name, std::vector<int64_t> full_shape, TensorKind kind,
              int split_dim = -1, int64_t begin = 0, int64_t count = 0);

  Shape shape_;
  TpShard shard_;
  StageLayers stage_;
  int next_index_ = 0;  // the next tensor's index in the whole model
  std::vector<TensorInfo> tensors_;
  std::vector<LayerOffsets> layers_;
  int64_t embed_ = -1, final_norm_ = -1, head_ = -1, patch_embed_ = -1, numel_ = 0;
};

// The standard deviation tensor `t` is drawn with (0 for norm gains).
double init_std(const Shape& shape, const TensorInfo& t);

// Fills `params` (layout.numel() elements) as documented above.
template <class T>
void init_params(const ParamLayout& layout, uint64_t seed, std::span<T> params, int threads = 1);

// The counter-based generator behind init_params, exposed for tests.
uint64_t init_hash(uint64_t seed, uint64_t tensor, uint64_t counter);
double init_normal(uint64_t seed, uint64_t tensor, uint64_t element);

}  // namespace meshloom::model
