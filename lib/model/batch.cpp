#include "model/batch.hpp"

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::model {

int64_t Batch::predictions() const {
  int64_t count = 0;
  for (int32_t t : targets) count += t >= 0 ? 1 : 0;
  return count;
}

int64_t Batch::images() const {
  int64_t count = 0;
  for (int32_t t : tokens) count += t == kImagePosition ? 1 : 0;
  return count;
}

void Batch::validate(int64_t vocab, int64_t patch_dim) const {
  const size_t n = tokens.size();
  ML_CHECK(targets.size() == n && positions.size() == n && samples.size() == n,
           "batch arrays differ in length");
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] == kImagePosition && patch_dim > 0) {
      ML_CHECK(targets[i] == -1, strf("image position %zu has a target (%d)", i, targets[i]));
    } else {
      ML_CHECK(tokens[i] >= 0 && tokens[i] < vocab,
               strf("token %d at %zu is outside the vocabulary", tokens[i], i));
    }
    ML_CHECK(targets[i] >= -1 && targets[i] < vocab,
             strf("target %d at %zu is outside the vocabulary", targets[i], i));
    ML_CHECK(positions[i] >= 0, strf("negative position at %zu", i));
  }
  const auto want = static_cast<size_t>(images() * patch_dim);
  ML_CHECK(patches.size() == want,
           strf("%zu patch values for %lld image positions of %lld values", patches.size(),
                static_cast<long long>(images()), static_cast<long long>(patch_dim)));
}

Batch Batch::pack(std::span<const int32_t> tokens, std::span<const int32_t> sample_lengths,
                  int32_t first_id) {
  int64_t total = 0;
  for (int32_t len : sample_lengths) {
    ML_CHECK(len > 0, "sample lengths must be positive");
    total += len;
  }
  ML_CHECK(total == static_cast<int64_t>(tokens.size()),
           strf("sample lengths add up to %lld, not to the %zu tokens",
                static_cast<long long>(total), tokens.size()));
  Batch b;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.targets.resize(tokens.size());
  b.positions.resize(tokens.size());
  b.samples.resize(tokens.size());
  size_t at = 0;
  for (size_t k = 0; k < sample_lengths.size(); ++k) {
    const int32_t len = sample_lengths[k];
    for (int32_t t = 0; t < len; ++t, ++at) {
      b.positions[at] = t;
      b.samples[at] = first_id + static_cast<int32_t>(k);
      b.targets[at] = t + 1 < len ? tokens[at + 1] : -1;
    }
  }
  return b;
}

}  // namespace meshloom::model
