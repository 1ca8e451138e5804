// Sequence lengths for planning without data: named distributions fitted to
// published figures, draws from a given length table, and drawing a global
// batch.
//
// Named distributions are mixtures of truncated power laws (density ~ L^-alpha
// on [lo, hi)) plus point masses, their weights fitted to the aggregate shares
// that ByteScale (arXiv 2502.21231, sections 3.1 and 8.2) reports:
//   byted   80% of samples <= 4K tokens; the 1% of samples >= 128K carry 44%
//           of the tokens; the 0.05% at exactly 2M (2,097,152) carry 12%; 37%
//           of tokens come from samples > 256K.
//   github  16% of tokens from samples > 128K, 10% from samples > 256K (the
//           paper gives no sample shares; most files are short).
// Only these aggregates are matched; the shape inside each bucket is ours.
// Also: "fixed:N" (every sample N tokens) and "loguniform:A:B".
//
// Nothing here reads files: length tables come from data::read_length_table
// (lib/data/length_table.hpp), and `--lengths` picks a table or a name in
// runtime/length_input.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/random.hpp"

namespace meshloom::plan {

using Rng = SplitMix64;

class LengthSampler {
 public:
  struct Segment {
    int64_t lo = 1, hi = 2;  // [lo, hi); lo == hi: the point lo
    double weight = 1;       // share of samples
    double alpha = 1;        // density ~ L^-alpha
  };
  // "byted", "github", "fixed:N", "loguniform:A:B"; throws meshloom::Error.
  static LengthSampler named(const std::string& spec);
  static std::vector<std::string> names();
  // Uniform draws from the given document lengths.
  static LengthSampler empirical(std::vector<int64_t> lengths, std::string name);
  static LengthSampler mixture(std::vector<Segment> segments, std::string name);

  int64_t draw(Rng& rng) const;
  const std::string& name() const { return name_; }
  // Mean sample length (exact for mixtures, the average for empirical).
  double mean() const;

 private:
  std::string name_;
  std::vector<Segment> segments_;
  std::vector<double> cumulative_;
  std::vector<int64_t> empirical_;
};

// Parses a token count: "32768", "256K", "2M", "1.5G" (K = 1024).
int64_t parse_tokens(const std::string& text);
// "2M", "256K", "8K", "12345".
std::string format_tokens(int64_t tokens);

// One global batch from a length table (each length >= 1): all of it, or
// `batch_tokens` (> 0) drawn from it with `seed`; lengths over `context`
// (> 0) are cut into pieces of at most `context`.
std::vector<int64_t> batch_from_lengths(std::vector<int64_t> lengths, int64_t batch_tokens,
                                        int64_t context, uint64_t seed);

// A global batch of exactly `tokens` tokens: samples drawn one after another,
// a sample longer than `context` cut into pieces of `context` tokens (the
// rest is a sample of its own, as data.seq_len does), the last sample cut to
// fit the budget.
std::vector<int64_t> draw_batch(const LengthSampler& sampler, int64_t tokens, int64_t context,
                                uint64_t seed);

// Share of tokens in samples longer than `threshold` (> threshold when
// strictly, else >=).
double token_share_above(const std::vector<int64_t>& lengths, int64_t threshold, bool strictly);
double sample_share_at_most(const std::vector<int64_t>& lengths, int64_t threshold);

}  // namespace meshloom::plan
