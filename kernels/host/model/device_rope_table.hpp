// The RoPE cos/sin table on the device (kernels/device/ops/rope.hpp), one row
// per position. Filled on the host in double (lib/model/rope_angles.hpp) and
// uploaded once; it grows, to a power of two, only when a batch reaches past
// it, so a run's steps after the first never rebuild or allocate it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>

#include "base/check.hpp"
#include "kernels/device/ops/rope.hpp"
#include "kernels/host/device_buffer.hpp"
#include "model/rope_angles.hpp"

namespace meshloom::cuda {

class DeviceRopeTable {
 public:
  DeviceRopeTable(int64_t head_dim, double theta, const config::RopeScalingConfig& scaling = {})
      : head_dim_(head_dim), theta_(theta), scaling_(scaling) {}

  // Covers every position of `positions` (host values, all ≥ 0).
  void cover(std::span<const int32_t> positions) {
    const int32_t last =
        positions.empty() ? 0 : *std::max_element(positions.begin(), positions.end());
    if (int64_t(last) < positions_) return;
    positions_ = int64_t(std::bit_ceil(uint64_t(last) + 1));
    const model::RopeTable table = model::rope_table(positions_, head_dim_, theta_, scaling_);
    cos_.upload(table.cos);
    sin_.upload(table.sin);
  }

  RopeAngles angles() const { return {cos_.data(), sin_.data(), positions_, head_dim_ / 2}; }

 private:
  int64_t head_dim_;
  double theta_;
  config::RopeScalingConfig scaling_;
  int64_t positions_ = 0;
  DeviceBuffer<float> cos_, sin_;
};

}  // namespace meshloom::cuda
