// Auto-partitioning: which loader ranks serve which source.
//
// A source's load is its mixture weight times its measured preparation cost
// per token (a pre-tokenized .bin costs little, raw JSONL tokenized on the fly
// costs much more). With at least as many loaders as sources, every source gets
// one loader and the rest go, one at a time, to the source with the highest
// load per loader. With fewer loaders than sources, sources are dealt heaviest
// first to the least-loaded loader. Pure and deterministic; the lead recomputes
// it while running and reassigns when the answer changes.
#pragma once

#include <cstdint>
#include <vector>

namespace meshloom::dataplane {

struct LoaderAssignment {
  std::vector<std::vector<int>> loaders_of_source;  // loader indices per source
  std::vector<std::vector<int>> sources_of_loader;  // source indices per loader
  bool operator==(const LoaderAssignment& o) const {
    return loaders_of_source == o.loaders_of_source;
  }
};

// weights[i] >= 0; costs[i] > 0 (seconds per token, or 1 when unknown).
LoaderAssignment assign_loaders(int loaders, const std::vector<double>& weights,
                                const std::vector<double>& costs);

}  // namespace meshloom::dataplane
