// SplitMix64 (Steele, Lea and Flood, 2014): meshloom's one random mixer.
// Everything random derives from it (parameter initialization, each source's
// document order, sampled lengths), with explicit seeds, so that results are
// the same on every platform and whatever the number of ranks.
#pragma once

#include <cstdint>

namespace meshloom {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio

// The finalizer: a bijective mix of 64 bits.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The generator's output for state x (stateless: a hash of x).
constexpr uint64_t splitmix64(uint64_t x) { return mix64(x + kGoldenGamma); }

// The generator: the state advances by the golden gamma each draw.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += kGoldenGamma); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }

 private:
  uint64_t state_;
};

}  // namespace meshloom
