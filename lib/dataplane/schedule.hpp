// The mixture schedule: each source's weight as a function of the step.
//
// data.schedule lists (step, weights) points; between two points weights are
// linear in the step, before the first and after the last they hold constant.
// A source that a point does not name has weight 0 at that point. With no
// schedule, every step uses the sources' own `weight`. weights(step) is
// normalized to sum to 1.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"

namespace meshloom::dataplane {

class MixtureSchedule {
 public:
  explicit MixtureSchedule(const config::DataConfig& data);
  std::vector<double> weights(int64_t step) const;
  size_t sources() const { return n_; }

 private:
  size_t n_ = 0;
  std::vector<int64_t> steps_;
  std::vector<std::vector<double>> points_;  // one normalized weight vector per point
};

}  // namespace meshloom::dataplane
