// Integer arithmetic the planner and the layout checks share.
#pragma once

#include <cstdint>

namespace meshloom {

// ceil(a / b) for a >= 0, b > 0: e.g. the fewest trainers of capacity C that
// hold a sequence of L tokens, ceil_div(L, C).
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace meshloom
