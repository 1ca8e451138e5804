#include "plan/planners/sequence_work.hpp"

#include <algorithm>
#include <map>

namespace meshloom::plan {

// Best fit decreasing by resident tokens into micro-batches of capacity C.
std::vector<std::vector<int32_t>> pack_best_fit(std::vector<int32_t> items, const SequenceWork& w) {
  std::sort(items.begin(), items.end(), [&](int32_t x, int32_t y) {
    const double a = w.resident(x), b = w.resident(y);
    return a != b ? a > b : x < y;
  });
  std::vector<std::vector<int32_t>> bins;
  std::multimap<double, int32_t> left;  // room -> bin
  const double cap = double(w.o.capacity) * (1 + 1e-12);
  for (int32_t i : items) {
    const double need = w.resident(i);
    auto it = left.lower_bound(need);
    if (it == left.end()) {
      bins.push_back({i});
      left.emplace(cap - need, int32_t(bins.size() - 1));
    } else {
      const int32_t b = it->second;
      const double room = it->first - need;
      left.erase(it);
      bins[b].push_back(i);
      left.emplace(room, b);
    }
  }
  return bins;
}

}  // namespace meshloom::plan
