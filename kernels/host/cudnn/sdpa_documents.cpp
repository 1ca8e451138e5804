#include "kernels/host/cudnn/sdpa_documents.hpp"

#include <algorithm>
#include <unordered_set>

#include "base/strings.hpp"

namespace meshloom::cudnn {

std::optional<PackedDocuments> packed_documents(std::span<const int32_t> sample,
                                                std::span<const int32_t> pos, std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::optional<PackedDocuments> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (sample.size() != pos.size()) return refuse("sample and position counts differ");
  if (sample.empty()) return refuse("no tokens");
  PackedDocuments d;
  std::unordered_set<int32_t> seen;
  int64_t start = 0;
  for (size_t i = 0; i < sample.size(); ++i) {
    if (i == 0 || sample[i] != sample[i - 1]) {
      if (!seen.insert(sample[i]).second)
        return refuse(
            strf("sample %d comes back at token %zu: its tokens are not one run", sample[i], i));
      start = int64_t(i);
      d.starts.push_back(int32_t(i));
    }
    if (pos[i] != int64_t(i) - start)
      return refuse(
          strf("token %zu has position %d, not %lld: positions must count from 0 in "
               "each document",
               i, pos[i], (long long)(int64_t(i) - start)));
  }
  d.starts.push_back(int32_t(sample.size()));
  for (size_t b = 0; b + 1 < d.starts.size(); ++b)
    d.max_len = std::max<int64_t>(d.max_len, d.starts[b + 1] - d.starts[b]);
  return d;
}

namespace {
int64_t next_power_of_two(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}
}  // namespace

int64_t bucket_docs(int64_t docs) { return next_power_of_two(std::max<int64_t>(docs, 1)); }
int64_t bucket_len(int64_t max_len) { return next_power_of_two(std::max<int64_t>(max_len, 64)); }

std::vector<int32_t> sequence_lengths(const PackedDocuments& d, int64_t docs_bucket) {
  std::vector<int32_t> lengths(size_t(docs_bucket), 0);
  for (int64_t b = 0; b < d.count(); ++b) lengths[size_t(b)] = d.starts[b + 1] - d.starts[b];
  return lengths;
}

std::vector<int32_t> ragged_offsets(const PackedDocuments& d, int64_t docs_bucket, int64_t ld) {
  std::vector<int32_t> offsets(size_t(docs_bucket + 1), int32_t(d.tokens() * ld));
  for (int64_t b = 0; b < d.count(); ++b) offsets[size_t(b)] = int32_t(d.starts[b] * ld);
  return offsets;
}

}  // namespace meshloom::cudnn
