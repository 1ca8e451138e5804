#include "wire/reassemble.hpp"

#include <algorithm>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "model/batch.hpp"

namespace meshloom::wire {

std::vector<Sample> merged_manifest(const std::vector<Batch>& batches) {
  ML_CHECK(!batches.empty(), "no batch for a step");
  std::vector<Sample> samples = batches[0].samples;
  for (const auto& b : batches) {
    ML_CHECK(b.samples.size() == samples.size(), "batches disagree on the step's sample count");
    for (size_t i = 0; i < samples.size(); ++i)
      if (samples[i].length == 0) samples[i] = b.samples[i];
  }
  return samples;
}

std::vector<SampleContent> reassemble(int64_t step, const std::vector<Sample>& samples,
                                      const std::vector<Batch>& batches) {
  std::vector<SampleContent> out(samples.size());
  std::vector<std::vector<char>> seen(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    out[i].tokens.assign(size_t(samples[i].length), 0);
    seen[i].assign(size_t(samples[i].length), 0);
  }
  size_t patch_dim = 0;  // from the first micro-batch with images
  for (const auto& b : batches) {
    ML_CHECK(b.step == step, "a batch of another step");
    for (const auto& mb : b.micro) {
      const auto images =
          size_t(std::count(mb.tokens.begin(), mb.tokens.end(), model::kImagePosition));
      if (images > 0 && patch_dim == 0) patch_dim = mb.patches.size() / images;
      if (mb.patches.size() != images * patch_dim)
        ML_FAIL(strf("step %lld: a micro-batch has %zu image positions and %zu patch values",
                     (long long)step, images, mb.patches.size()));
      size_t k = 0, image = 0;
      for (const auto& seg : mb.segments) {
        ML_CHECK(seg.sample >= 0 && size_t(seg.sample) < samples.size() && seg.begin >= 0 &&
                     seg.begin + seg.length <= samples[size_t(seg.sample)].length,
                 strf("step %lld: a segment outside its sample", (long long)step));
        SampleContent& s = out[size_t(seg.sample)];
        for (int64_t p = seg.begin; p < seg.begin + seg.length; ++p, ++k) {
          ML_CHECK(k < mb.tokens.size(), "segments longer than the micro-batch");
          char& flag = seen[size_t(seg.sample)][size_t(p)];
          if (flag)
            ML_FAIL(strf("step %lld: token %lld of sample %d reached two HDP ranks",
                         (long long)step, (long long)p, seg.sample));
          flag = 1;
          s.tokens[size_t(p)] = mb.tokens[k];
          ML_CHECK(mb.positions[k] == p, "wrong position id");
          if (mb.tokens[k] != model::kImagePosition) continue;
          // Images lead their sample: position p holds the sample's p-th patch.
          if (s.patches.size() < size_t(p + 1) * patch_dim)
            s.patches.resize(size_t(p + 1) * patch_dim);
          std::copy_n(mb.patches.begin() + int64_t(image * patch_dim), patch_dim,
                      s.patches.begin() + p * int64_t(patch_dim));
          ++image;
        }
      }
      ML_CHECK(k == mb.tokens.size(), "segments do not cover the micro-batch");
    }
  }
  for (size_t i = 0; i < samples.size(); ++i)
    for (char f : seen[i])
      if (!f) ML_FAIL(strf("step %lld: sample %zu lost tokens on the way", (long long)step, i));
  return out;
}

}  // namespace meshloom::wire
