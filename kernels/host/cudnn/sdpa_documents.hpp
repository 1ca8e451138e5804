// From meshloom's per-token attention mask (query i sees key j iff
// sample[i] == sample[j] and pos[j] <= pos[i]) to cuDNN's ragged documents.
// The two agree when every sample's tokens are one contiguous run with
// positions 0, 1, 2, ... — what packed micro-batches are. Anything else (a
// sample split in two runs, positions not from 0, a CP rank's zigzag
// chunks) is refused with the reason, and the caller runs the flash kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/host/cudnn/sdpa_graph.hpp"

namespace meshloom::cudnn {

struct PackedDocuments {
  std::vector<int32_t> starts;  // each document's first token, then the token count
  int64_t max_len = 0;
  int64_t count() const { return int64_t(starts.size()) - 1; }
  int64_t tokens() const { return starts.back(); }
};

std::optional<PackedDocuments> packed_documents(std::span<const int32_t> sample,
                                                std::span<const int32_t> pos, std::string* why);

// The plan bucket of a micro-batch: documents and longest length rounded up
// to powers of two (lengths to at least 64), so micro-batches of similar
// shape share one plan. The extra documents are empty.
int64_t bucket_docs(int64_t docs);
int64_t bucket_len(int64_t max_len);

// The int32 tables a graph of `docs_bucket` documents reads: per-document
// lengths (0 for the padding documents), and ragged offsets start · ld
// (the token count · ld for the padding documents).
std::vector<int32_t> sequence_lengths(const PackedDocuments& d, int64_t docs_bucket);
std::vector<int32_t> ragged_offsets(const PackedDocuments& d, int64_t docs_bucket, int64_t ld);

}  // namespace meshloom::cudnn
