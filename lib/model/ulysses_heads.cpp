#include "model/ulysses_heads.hpp"

#include <numeric>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::model {

bool ulysses_fits(const AttnDims& dims, int k) {
  return k >= 1 && dims.n_heads > 0 && dims.n_heads % k == 0;
}

UlyssesHeads ulysses_heads(const AttnDims& dims, int k) {
  ML_CHECK(dims.n_kv_heads > 0 && dims.n_heads % dims.n_kv_heads == 0,
           strf("%lld query heads do not share %lld KV heads evenly", (long long)dims.n_heads,
                (long long)dims.n_kv_heads));
  if (!ulysses_fits(dims, k))
    ML_FAIL(
        strf("Ulysses attention cannot split %lld query heads (%lld KV heads; with tensor "
             "parallelism, one TP rank's share) over %d context-parallel members: the member "
             "count must divide the query heads (use ring attention, or a hybrid whose "
             "Ulysses size divides them)",
             (long long)dims.n_heads, (long long)dims.n_kv_heads, k));
  UlyssesHeads h;
  h.q = dims.n_heads / k;
  h.group = dims.n_heads / dims.n_kv_heads;
  h.q_per_v = std::gcd(h.q, h.group);
  h.v = h.q / h.q_per_v;
  return h;
}

}  // namespace meshloom::model
