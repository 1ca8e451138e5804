// From the mask of a query block against a key block (query i sees key j
// iff sample[i] == sample[j] and pos[j] <= pos[i]) to cuDNN passes: what a
// context-parallel ring step (local zigzag chunks × a visiting block) or
// Ulysses' gathered tokens run on cuDNN, as Transformer Engine does for its
// rings.
//
// Each block is cut into runs (same sample, consecutive positions, adjacent
// rows). A query run at positions [a, a+m) against a key run of its sample at
// [b, b+l) sees
//   - every key before a (a "full" document: no causal mask), and
//   - from c = max(a, b) on, the keys up to itself: a causal document whose
//     query and key rows both start at position c (cuDNN's top-left causal
//     mask is right when both sides start at the same position).
// A pass is one graph call, causal or not, whose documents' query rows and
// key rows are disjoint (forward writes O per query row, backward dK/dV per
// key row). Every allowed (query, key) pair lies in exactly one document of
// one pass, so merging the passes' partial results through lse is exact.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace meshloom::cudnn {

// Rows [q_start, q_start + q_len) of the query block against rows
// [kv_start, kv_start + kv_len) of the key block.
struct DocumentPair {
  int32_t q_start = 0, q_len = 0, kv_start = 0, kv_len = 0;
  bool operator==(const DocumentPair&) const = default;
};

struct SdpaPass {
  bool causal = false;
  std::vector<DocumentPair> docs;
  int64_t max_len() const;  // the longest query or key side
};

// A step runs at most this many passes on cuDNN; more falls back.
constexpr int kMaxSdpaPasses = 4;

// The passes of a query block (q_sample, q_pos) against a key block
// (kv_sample, kv_pos); empty where no query sees any key. nullopt (with
// `why`) where the ids are inconsistent or more than kMaxSdpaPasses passes
// would be needed: the caller runs the flash kernels.
std::optional<std::vector<SdpaPass>> block_documents(std::span<const int32_t> q_sample,
                                                     std::span<const int32_t> q_pos,
                                                     std::span<const int32_t> kv_sample,
                                                     std::span<const int32_t> kv_pos,
                                                     std::string* why);

// The int32 tables of one pass for a graph of `docs_bucket` documents:
// per-document query and key lengths (0 for padding documents), and ragged
// offsets start · ld on the query side (q_tokens · ld for padding) or the key
// side (kv_tokens · ld for padding).
std::vector<int32_t> pass_q_lengths(const SdpaPass& p, int64_t docs_bucket);
std::vector<int32_t> pass_kv_lengths(const SdpaPass& p, int64_t docs_bucket);
std::vector<int32_t> pass_q_offsets(const SdpaPass& p, int64_t docs_bucket, int64_t q_tokens,
                                    int64_t ld);
std::vector<int32_t> pass_kv_offsets(const SdpaPass& p, int64_t docs_bucket, int64_t kv_tokens,
                                     int64_t ld);

}  // namespace meshloom::cudnn
