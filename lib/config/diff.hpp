// What differs between two configs, key by key: used to check that a resume
// continues the run its checkpoint came from.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace meshloom::config {

struct KeyChange {
  std::string key;            // "model.n_heads", "data.sources[1].path"
  std::string before, after;  // values as YAML scalars; "(none)" where a list is shorter
};

// Every leaf key whose value differs, in schema order.
std::vector<KeyChange> changed_keys(const Config& before, const Config& after);

}  // namespace meshloom::config
