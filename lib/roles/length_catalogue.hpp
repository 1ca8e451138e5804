// The lead's length catalogue: per source, each document's token count
// (-1: unknown), its leading image positions (image-text sources), the
// loader that told it, and the order the lengths were learned in (what a
// checkpoint stores). Lengths come from loaders, asked in batches along the
// source's epoch order, or in colocated mode from the lead's own sources.
#pragma once

#include <cstdint>
#include <vector>

#include "base/bytes.hpp"
#include "ckpt/checkpoint.hpp"
#include "dataplane/partition.hpp"
#include "parallel/world.hpp"
#include "roles/loader_router.hpp"
#include "sources/doc_source.hpp"

namespace meshloom::roles {

class LengthCatalogue {
 public:
  static constexpr int64_t kLengthBatch = 256;  // lengths asked per request
  // `docs`: each source's document count; `router` asks the loaders.
  LengthCatalogue(const parallel::World& w, LoaderRouter* router, const std::vector<int64_t>& docs);
  bool known(int source, int64_t doc) const { return length(source, doc) >= 0; }
  int64_t length(int source, int64_t doc) const { return lengths_[size_t(source)][size_t(doc)]; }
  // Leading image positions (0 for text sources and unknown documents).
  int64_t image_positions(int source, int64_t doc) const {
    const std::vector<int64_t>& images = images_[size_t(source)];
    return images.empty() ? 0 : images[size_t(doc)];
  }
  // The rank of the loader that gave the length (-1: none).
  int32_t owner(int source, int64_t doc) const { return owner_[size_t(source)][size_t(doc)]; }
  // The longest length known.
  int64_t longest() const;
  // Colocated: reads the length from the lead's own copy of the source.
  void read_local(int source, int64_t doc, sources::DocSource& from);
  // Asks `loaders` (the source's, indices) for the length of `doc` and of the
  // documents that follow it in the source's `epoch` order (the ones the data
  // plane will ask about next); updates `seconds_per_token` from the replies.
  void fetch(int source, int64_t doc, int64_t epoch, int64_t step, const std::vector<int>& loaders,
             std::vector<double>& seconds_per_token);
  // Asks `loaders` for the lengths of `docs` (the held-out documents of the
  // evaluation set), in batches dealt round-robin over them.
  void fetch_listed(int source, const std::vector<int64_t>& docs, int64_t step,
                    const std::vector<int>& loaders, std::vector<double>& seconds_per_token);
  // The lengths learned since the last call (all of them when `full`).
  void write_learned(ByteWriter& out, bool full);
  // Takes a checkpoint's lengths; returns how many it restored.
  int64_t restore(const std::vector<ckpt::SourceLengths>& lengths);
  // Lengths restored without their loader: any loader serving the source will do.
  void assign_missing_owners(const dataplane::LoaderAssignment& assignment);

 private:
  // Sends the length requests `payloads` to `targets` and takes the replies.
  void ask(int source, const std::vector<int>& targets, const std::vector<std::string>& payloads,
           std::vector<double>& seconds_per_token);

  const parallel::World& w_;
  LoaderRouter* router_;
  std::vector<std::vector<int64_t>> lengths_;
  // Per image-text source: each document's leading image positions (0:
  // unknown or none); empty for text sources.
  std::vector<std::vector<int64_t>> images_;
  std::vector<std::vector<int32_t>> owner_;
  // Per source: permutation of the epoch last asked about, and its inverse.
  std::vector<int64_t> perm_epoch_;
  std::vector<std::vector<int64_t>> perm_, inverse_;
  std::vector<std::vector<int64_t>> learned_;  // per source: documents in the order learned
  std::vector<size_t> logged_;                 // per source: learned_ entries checkpointed
};

}  // namespace meshloom::roles
