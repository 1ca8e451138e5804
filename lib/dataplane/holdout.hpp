// The held-out split (eval.holdout): each source gives a fixed share of its
// documents to evaluation, and its training stream never delivers them.
//
// Document `doc` of the source named NAME is held out when
//   splitmix64(fnv1a64(NAME) ^ doc) < share · 2^64
// (fnv1a64 over NAME's UTF-8 bytes; splitmix64 as base/random.hpp). It depends
// on the source's name and the document alone: the split is the same whatever
// the loaders, the layout, a restart, or the other sources of the mixture,
// and a script can recompute it (tests/dataplane/holdout_test.sh).
// eval.sources names sources held out whole: evaluation only, never trained
// on (their mixture weight must be 0). Pure: no MPI, no file.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace meshloom::dataplane {

class Holdout {
 public:
  Holdout() = default;  // nothing held out
  Holdout(const std::string& source, double share);
  // Every document: an evaluation-only source (eval.sources).
  static Holdout everything();

  bool operator()(int64_t doc) const;
  double share() const { return share_; }

 private:
  uint64_t key_ = 0;
  uint64_t below_ = 0;  // held out: hash < below_
  double share_ = 0;
  bool all_ = false;
};

// Source `index`'s split: everything for a source eval.sources names, else
// eval.holdout's share.
Holdout holdout_of(const config::Config& config, size_t index);
// Whether eval.sources names source `index` (evaluation only, weight 0).
bool evaluation_only(const config::Config& config, size_t index);

}  // namespace meshloom::dataplane
