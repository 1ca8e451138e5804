#include <algorithm>
#include <limits>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "kernels/host/cudnn/sdpa_graph.hpp"

namespace meshloom::cudnn {

namespace {
void refuse(const SdpaShape& s, const std::string& why) {
  throw Error("cuDNN attention: " + why + " (" + s.describe() + ")");
}
}  // namespace

std::string SdpaShape::describe() const {
  return strf(
      "docs %lld, max_len %lld, heads %lld/%lld, D %lld, ld q/k/v/o/do %lld/%lld/%lld/%lld/%lld%s",
      (long long)docs, (long long)max_len, (long long)heads, (long long)kv_heads,
      (long long)head_dim, (long long)ld_q, (long long)ld_k, (long long)ld_v, (long long)ld_o,
      (long long)ld_do, causal ? ", causal" : "");
}

void SdpaShape::validate() const {
  if (docs <= 0 || max_len <= 0) refuse(*this, "documents and their length must be positive");
  if (heads <= 0 || kv_heads <= 0) refuse(*this, "head counts must be positive");
  if (heads % kv_heads != 0) refuse(*this, "query heads must be a multiple of the KV heads");
  if (head_dim != 64 && head_dim != 128) refuse(*this, "head_dim must be 64 or 128");
  const int64_t q_cols = heads * head_dim, kv_cols = kv_heads * head_dim;
  if (ld_q < q_cols || ld_o < q_cols || ld_do < q_cols)
    refuse(*this, "a Q/O/dO leading dimension is shorter than H·D");
  if (ld_k < kv_cols || ld_v < kv_cols)
    refuse(*this, "a K/V leading dimension is shorter than Hkv·D");
  for (int64_t ld : {ld_q, ld_k, ld_v, ld_o, ld_do})
    if (ld % 8 != 0) refuse(*this, "leading dimensions must be multiples of 8 (16-byte bf16 rows)");
  // Ragged offsets are int32 element offsets: the packed tokens times the
  // widest row must fit.
  const int64_t widest = std::max({ld_q, ld_k, ld_v, ld_o, ld_do});
  if (docs * max_len * widest > std::numeric_limits<int32_t>::max())
    refuse(*this, "tokens × leading dimension overflow cuDNN's int32 ragged offsets");
}

}  // namespace meshloom::cudnn
