// Arithmetic the planner, the layout checks and the metrics share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace meshloom {

// ceil(a / b) for a >= 0, b > 0: e.g. the fewest trainers of capacity C that
// hold a sequence of L tokens, ceil_div(L, C).
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// sum += part, element by element, `sum` grown with zeros to part's size:
// per-source and per-bucket sums over trainers whose lists may be empty.
template <class T>
void add_elementwise(std::vector<T>& sum, const std::vector<T>& part) {
  sum.resize(std::max(sum.size(), part.size()), T(0));
  for (size_t i = 0; i < part.size(); ++i) sum[i] += part[i];
}

}  // namespace meshloom
