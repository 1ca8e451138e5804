#include "runtime/length_input.hpp"

#include <filesystem>

#include "data/length_table.hpp"

namespace meshloom::runtime {

plan::LengthSampler length_sampler(const std::string& spec) {
  if (!std::filesystem::exists(spec)) return plan::LengthSampler::named(spec);
  return plan::LengthSampler::empirical(data::read_length_table(spec),
                                        std::filesystem::path(spec).filename());
}

}  // namespace meshloom::runtime
