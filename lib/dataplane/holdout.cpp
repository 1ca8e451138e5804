#include "dataplane/holdout.hpp"

#include <algorithm>
#include <cmath>

#include "base/check.hpp"
#include "base/random.hpp"

namespace meshloom::dataplane {

namespace {

uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace

Holdout::Holdout(const std::string& source, double share) : key_(fnv1a64(source)), share_(share) {
  ML_CHECK(share >= 0 && share < 1, "a held-out share in [0, 1)");
  below_ = uint64_t(std::ldexp(share, 64));  // share < 1: fits
}

Holdout Holdout::everything() {
  Holdout h;
  h.all_ = true;
  h.share_ = 1;
  return h;
}

bool Holdout::operator()(int64_t doc) const {
  return all_ || (below_ > 0 && splitmix64(key_ ^ uint64_t(doc)) < below_);
}

bool evaluation_only(const config::Config& config, size_t index) {
  const auto& names = config.eval.sources;
  return std::find(names.begin(), names.end(), config.data.sources.at(index).name) != names.end();
}

Holdout holdout_of(const config::Config& config, size_t index) {
  if (evaluation_only(config, index)) return Holdout::everything();
  return Holdout(config.data.sources.at(index).name, config.eval.holdout);
}

}  // namespace meshloom::dataplane
