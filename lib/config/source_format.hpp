// The formats of a data source (data.sources[].format), in a header of their
// own, free of the config's YAML: lib/data's document reader takes the same
// enum for the raw formats it reads (text, jsonl, tar).
#pragma once

#include <array>

namespace meshloom::config {

enum class SourceFormat { indexed, jsonl, text, tar, webdataset };
// The names in YAML and on the command line, in the enum's order.
inline constexpr std::array<const char*, 5> kSourceFormatNames{"indexed", "jsonl", "text", "tar",
                                                               "webdataset"};

}  // namespace meshloom::config
