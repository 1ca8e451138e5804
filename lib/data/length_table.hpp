// Length tables: one document length (in tokens) per entry, for planning and
// simulating without the token data (`meshloom plan --lengths`, `meshloom
// simulate --lengths`). Three formats, told apart by the name:
//   PATH.idx  a Megatron index (indexed_dataset.hpp): each document's length
//   a TSV     whose first line is a header naming a `gpt2_tokens` (or
//             `tokens`, `length`) column, as bench/data/linux_c_h.tsv.xz
//   else      one length per line; `#` starts a comment line
// Text tables may be compressed (.xz, .gz, ...: documents.hpp's names).
// Empty documents are dropped: they carry no tokens and a plan cannot hold them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshloom::data {

// The table's lengths, every one >= 1, in file order. Throws meshloom::Error
// naming the file (and the line, for text) when it cannot be read, a cell is
// no token count, or it holds no lengths.
std::vector<int64_t> read_length_table(const std::string& path);

}  // namespace meshloom::data
