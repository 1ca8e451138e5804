#include "dataplane/schedule.hpp"

#include "base/check.hpp"

namespace meshloom::dataplane {

static std::vector<double> normalized(std::vector<double> w) {
  double total = 0;
  for (double x : w) total += x;
  ML_CHECK(total > 0, "mixture weights must not all be zero");
  for (double& x : w) x /= total;
  return w;
}

MixtureSchedule::MixtureSchedule(const config::DataConfig& data) : n_(data.sources.size()) {
  if (data.schedule.empty()) {
    std::vector<double> w;
    for (const auto& s : data.sources) w.push_back(s.weight);
    steps_.push_back(0);
    points_.push_back(normalized(w));
    return;
  }
  for (const auto& entry : data.schedule) {
    std::vector<double> w(n_, 0.0);
    for (size_t i = 0; i < n_; ++i) {
      auto it = entry.weights.find(data.sources[i].name);
      if (it != entry.weights.end()) w[i] = it->second;
    }
    steps_.push_back(entry.step);
    points_.push_back(normalized(w));
  }
}

std::vector<double> MixtureSchedule::weights(int64_t step) const {
  if (step <= steps_.front()) return points_.front();
  if (step >= steps_.back()) return points_.back();
  size_t k = 1;
  while (steps_[k] < step) ++k;
  const double t = double(step - steps_[k - 1]) / double(steps_[k] - steps_[k - 1]);
  std::vector<double> w(n_);
  for (size_t i = 0; i < n_; ++i) w[i] = (1 - t) * points_[k - 1][i] + t * points_[k][i];
  return w;
}

}  // namespace meshloom::dataplane
