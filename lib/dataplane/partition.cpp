#include "dataplane/partition.hpp"

#include <algorithm>
#include <numeric>

#include "base/check.hpp"

namespace meshloom::dataplane {

LoaderAssignment assign_loaders(int loaders, const std::vector<double>& weights,
                                const std::vector<double>& costs) {
  const int n = int(weights.size());
  ML_CHECK(loaders >= 1 && n >= 1 && int(costs.size()) == n, "bad loader partition input");
  std::vector<double> load(n);
  for (int i = 0; i < n; ++i) load[i] = std::max(weights[i], 1e-9) * std::max(costs[i], 1e-12);
  LoaderAssignment a;
  a.loaders_of_source.resize(n);
  a.sources_of_loader.resize(loaders);
  // Heaviest first; ties by index so the result is deterministic.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return load[x] > load[y]; });
  if (loaders >= n) {
    std::vector<int> count(n, 1);
    for (int extra = loaders - n; extra > 0; --extra) {
      int best = order[0];
      for (int i : order)
        if (load[i] / count[i] > load[best] / count[best]) best = i;
      ++count[best];
    }
    int next = 0;
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < count[i]; ++k) {
        a.loaders_of_source[i].push_back(next);
        a.sources_of_loader[next].push_back(i);
        ++next;
      }
  } else {
    std::vector<double> given(loaders, 0.0);
    for (int i : order) {
      int l = int(std::min_element(given.begin(), given.end()) - given.begin());
      given[l] += load[i];
      a.loaders_of_source[i].push_back(l);
      a.sources_of_loader[l].push_back(i);
    }
  }
  return a;
}

}  // namespace meshloom::dataplane
