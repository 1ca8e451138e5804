#include "kernels/host/cudnn/sdpa_block_documents.hpp"

#include <algorithm>

#include "base/strings.hpp"

namespace meshloom::cudnn {

namespace {

struct Run {
  int32_t sample = 0, first_pos = 0, row = 0, len = 0;
};

// Maximal runs of adjacent rows with one sample and consecutive positions.
std::vector<Run> runs_of(std::span<const int32_t> sample, std::span<const int32_t> pos) {
  std::vector<Run> runs;
  for (size_t i = 0; i < sample.size(); ++i) {
    const bool extends = !runs.empty() && runs.back().sample == sample[i] &&
                         runs.back().first_pos + runs.back().len == pos[i];
    if (extends)
      ++runs.back().len;
    else
      runs.push_back({sample[i], pos[i], int32_t(i), 1});
  }
  return runs;
}

bool overlaps(int32_t a, int32_t alen, int32_t b, int32_t blen) {
  return a < b + blen && b < a + alen;
}

bool fits(const SdpaPass& p, const DocumentPair& d) {
  for (const DocumentPair& o : p.docs)
    if (overlaps(o.q_start, o.q_len, d.q_start, d.q_len) ||
        overlaps(o.kv_start, o.kv_len, d.kv_start, d.kv_len))
      return false;
  return true;
}

// First pass of the same kind that takes d, else a new one.
void place(std::vector<SdpaPass>& passes, bool causal, const DocumentPair& d) {
  for (SdpaPass& p : passes)
    if (p.causal == causal && fits(p, d)) {
      p.docs.push_back(d);
      return;
    }
  passes.push_back({causal, {d}});
}

// One query run's full documents whose key rows follow each other in the
// block (a zigzag block's two chunks of one sample) as one: fewer passes.
std::vector<DocumentPair> merge_adjacent(std::vector<DocumentPair> full) {
  std::sort(full.begin(), full.end(),
            [](const DocumentPair& x, const DocumentPair& y) { return x.kv_start < y.kv_start; });
  std::vector<DocumentPair> merged;
  for (const DocumentPair& d : full) {
    if (!merged.empty() && merged.back().kv_start + merged.back().kv_len == d.kv_start)
      merged.back().kv_len += d.kv_len;
    else
      merged.push_back(d);
  }
  return merged;
}

}  // namespace

int64_t SdpaPass::max_len() const {
  int64_t m = 0;
  for (const DocumentPair& d : docs) m = std::max<int64_t>({m, d.q_len, d.kv_len});
  return m;
}

std::optional<std::vector<SdpaPass>> block_documents(std::span<const int32_t> q_sample,
                                                     std::span<const int32_t> q_pos,
                                                     std::span<const int32_t> kv_sample,
                                                     std::span<const int32_t> kv_pos,
                                                     std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::optional<std::vector<SdpaPass>> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (q_sample.size() != q_pos.size() || kv_sample.size() != kv_pos.size())
    return refuse("sample and position counts differ");
  std::vector<SdpaPass> passes;
  const std::vector<Run> kv_runs = runs_of(kv_sample, kv_pos);
  for (const Run& q : runs_of(q_sample, q_pos)) {
    const int32_t a = q.first_pos, m = q.len;
    std::vector<DocumentPair> full;
    for (const Run& k : kv_runs) {
      if (k.sample != q.sample) continue;
      const int32_t b = k.first_pos, l = k.len;
      // Keys before the query run's first position: all of them visible.
      const int32_t full_len = std::min(a, b + l) - b;
      if (full_len > 0) full.push_back({q.row, m, k.row, full_len});
      // From c on, both sides start at c: top-left causal. Keys past the
      // last query are never seen, so the key side stops there.
      const int32_t c = std::max(a, b);
      const int32_t q_len = a + m - c, kv_len = std::min(b + l, a + m) - c;
      if (q_len > 0 && kv_len > 0)
        place(passes, true, {q.row + (c - a), q_len, k.row + (c - b), kv_len});
    }
    for (const DocumentPair& d : merge_adjacent(std::move(full))) place(passes, false, d);
  }
  if (int(passes.size()) > kMaxSdpaPasses)
    return refuse(
        strf("the step needs %zu cuDNN passes (at most %d)", passes.size(), kMaxSdpaPasses));
  return passes;
}

std::vector<int32_t> pass_q_lengths(const SdpaPass& p, int64_t docs_bucket) {
  std::vector<int32_t> lengths(size_t(docs_bucket), 0);
  for (size_t b = 0; b < p.docs.size(); ++b) lengths[b] = p.docs[b].q_len;
  return lengths;
}

std::vector<int32_t> pass_kv_lengths(const SdpaPass& p, int64_t docs_bucket) {
  std::vector<int32_t> lengths(size_t(docs_bucket), 0);
  for (size_t b = 0; b < p.docs.size(); ++b) lengths[b] = p.docs[b].kv_len;
  return lengths;
}

std::vector<int32_t> pass_q_offsets(const SdpaPass& p, int64_t docs_bucket, int64_t q_tokens,
                                    int64_t ld) {
  std::vector<int32_t> offsets(size_t(docs_bucket + 1), int32_t(q_tokens * ld));
  for (size_t b = 0; b < p.docs.size(); ++b) offsets[b] = int32_t(p.docs[b].q_start * ld);
  return offsets;
}

std::vector<int32_t> pass_kv_offsets(const SdpaPass& p, int64_t docs_bucket, int64_t kv_tokens,
                                     int64_t ld) {
  std::vector<int32_t> offsets(size_t(docs_bucket + 1), int32_t(kv_tokens * ld));
  for (size_t b = 0; b < p.docs.size(); ++b) offsets[b] = int32_t(p.docs[b].kv_start * ld);
  return offsets;
}

}  // namespace meshloom::cudnn
