// How Ulysses attention cuts the heads over the k members of a CP group: the
// rule that lib/train/ulysses_attention.hpp describes, shared by the CPU
// path and the CUDA backend (kernels/host/model/device_ulysses_attention), which
// must send the same heads to give the same numbers.
#pragma once

#include <cstdint>

#include "model/attention.hpp"

namespace meshloom::model {

// kv_head(d, j) is the global KV head of member d's local KV head j.
struct UlyssesHeads {
  int64_t q = 0;        // query heads per member: H / k
  int64_t v = 0;        // local KV heads per member: q / gcd(q, H / Hk)
  int64_t q_per_v = 0;  // query heads per local KV head: gcd(q, H / Hk)
  int64_t group = 0;    // H / Hk
  int64_t kv_head(int d, int64_t j) const { return (d * q + j * q_per_v) / group; }
};

// Whether k members can share these heads (k divides H).
bool ulysses_fits(const AttnDims& dims, int k);
// The cut, or one clear error naming the heads and k when it does not fit.
UlyssesHeads ulysses_heads(const AttnDims& dims, int k);

}  // namespace meshloom::model
