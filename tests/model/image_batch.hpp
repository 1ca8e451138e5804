// Test batches with images: positions of a packed text batch turned into
// image positions (token kImagePosition, target -1, random patch values in
// [-1, 1] as lib/image normalizes them).
#pragma once

#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "model/batch.hpp"

namespace meshloom::test {

// Positions [first, first + count) of `b` become image positions with
// random patches of `patch_dim` values (inserted in position order); the
// position before them, if it predicted one of them, predicts nothing.
inline void add_images(model::Batch& b, int64_t first, int64_t count, int64_t patch_dim,
                       uint32_t seed) {
  int64_t before = 0;  // image positions ahead of `first`: their patches come first
  for (int64_t i = 0; i < first; ++i)
    before += b.tokens[size_t(i)] == model::kImagePosition ? 1 : 0;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> added(size_t(count * patch_dim));
  for (float& v : added) v = value(rng);
  b.patches.insert(b.patches.begin() + before * patch_dim, added.begin(), added.end());
  for (int64_t i = first; i < first + count; ++i) {
    b.tokens[size_t(i)] = model::kImagePosition;
    b.targets[size_t(i)] = -1;
  }
  if (first > 0 && b.samples[size_t(first - 1)] == b.samples[size_t(first)])
    b.targets[size_t(first - 1)] = -1;
}

}  // namespace meshloom::test
