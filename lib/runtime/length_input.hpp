// What `--lengths` of `meshloom simulate` names: a length table on disk
// (data/length_table.hpp) or a named distribution (plan/io/lengths.hpp). The
// choice lives here, not in lib/plan, which reads no length files.
#pragma once

#include <string>

#include "plan/io/lengths.hpp"

namespace meshloom::runtime {

// An existing file is read as a length table, drawn from under its file name;
// anything else must be a distribution name (whose error lists the names).
plan::LengthSampler length_sampler(const std::string& spec);

}  // namespace meshloom::runtime
