#include "roles/length_catalogue.hpp"

#include <algorithm>
#include <string>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "dataplane/stream.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

LengthCatalogue::LengthCatalogue(const parallel::World& w, LoaderRouter* router,
                                 const std::vector<int64_t>& docs)
    : w_(w), router_(router) {
  const size_t n = docs.size();
  lengths_.resize(n);
  images_.resize(n);
  owner_.resize(n);
  learned_.resize(n);
  logged_.assign(n, 0);
  perm_epoch_.assign(n, -1);
  perm_.resize(n);
  inverse_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    lengths_[i].assign(size_t(docs[i]), -1);
    if (w.config.data.sources[i].format == config::SourceFormat::webdataset)
      images_[i].assign(size_t(docs[i]), 0);
    owner_[i].assign(size_t(docs[i]), -1);
  }
}

int64_t LengthCatalogue::longest() const {
  int64_t longest = 0;
  for (const auto& source : lengths_)
    for (int64_t n : source) longest = std::max(longest, n);
  return longest;
}

void LengthCatalogue::read_local(int source, int64_t doc, sources::DocSource& from) {
  const size_t s = size_t(source);
  lengths_[s][size_t(doc)] = from.length(doc);
  if (!images_[s].empty()) images_[s][size_t(doc)] = from.image_positions(doc);
  learned_[s].push_back(doc);
}

void LengthCatalogue::fetch(int source, int64_t doc, int64_t epoch, int64_t step,
                            const std::vector<int>& loaders,
                            std::vector<double>& seconds_per_token) {
  const size_t s = size_t(source);
  const int64_t n = int64_t(lengths_[s].size());
  if (perm_epoch_[s] != epoch) {
    perm_[s] = dataplane::permutation(uint64_t(w_.config.run.seed), source, epoch, n);
    inverse_[s].assign(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) inverse_[s][size_t(perm_[s][size_t(i)])] = i;
    perm_epoch_[s] = epoch;
  }
  // The batch holding `doc`, and as many following batches as the source has
  // loaders, each to its own loader: they tokenize in parallel.
  const int64_t pos = inverse_[s][size_t(doc)];
  std::vector<int> targets;
  std::vector<std::string> payloads;
  for (size_t j = 0; j < loaders.size(); ++j) {
    wire::LengthRequest req;
    req.step = step;
    req.source = source;
    const int64_t from = pos + int64_t(j) * kLengthBatch;
    for (int64_t p = from; p < n && p < from + kLengthBatch; ++p) {
      const int64_t d = perm_[s][size_t(p)];
      if (lengths_[s][size_t(d)] < 0) req.docs.push_back(d);
    }
    if (req.docs.empty()) continue;
    // Batches of positions are dealt round-robin over the source's loaders.
    const int loader = loaders[size_t((pos / kLengthBatch + int64_t(j)) % int64_t(loaders.size()))];
    targets.push_back(w_.layout.first_rank(parallel::Role::loader) + loader);
    payloads.push_back(wire::encode(req));
  }
  ask(source, targets, payloads, seconds_per_token);
}

void LengthCatalogue::fetch_listed(int source, const std::vector<int64_t>& docs, int64_t step,
                                   const std::vector<int>& loaders,
                                   std::vector<double>& seconds_per_token) {
  std::vector<int> targets;
  std::vector<std::string> payloads;
  const size_t batch = size_t(kLengthBatch);
  for (size_t from = 0, j = 0; from < docs.size(); from += batch, ++j) {
    wire::LengthRequest req;
    req.step = step;
    req.source = source;
    for (size_t i = from; i < docs.size() && i < from + batch; ++i)
      if (!known(source, docs[i])) req.docs.push_back(docs[i]);
    if (req.docs.empty()) continue;
    targets.push_back(w_.layout.first_rank(parallel::Role::loader) + loaders[j % loaders.size()]);
    payloads.push_back(wire::encode(req));
  }
  ask(source, targets, payloads, seconds_per_token);
}

void LengthCatalogue::ask(int source, const std::vector<int>& targets,
                          const std::vector<std::string>& payloads,
                          std::vector<double>& seconds_per_token) {
  const size_t s = size_t(source);
  std::vector<int> served;
  std::vector<std::string> replies = router_->request_many(
      targets, payloads, wire::kLengthReq, wire::kLengthRep, "a length request", &served);
  for (size_t j = 0; j < replies.size(); ++j) {
    wire::LengthReply rep = wire::decode_length_reply(replies[j], served[j]);
    ML_CHECK(
        rep.docs.size() == rep.lengths.size() &&
            (rep.images.empty() || (!images_[s].empty() && rep.images.size() == rep.docs.size())),
        strf("the length reply from rank %d has %zu documents, %zu lengths and %zu image "
             "counts for source %d (%s)",
             served[j], rep.docs.size(), rep.lengths.size(), rep.images.size(), source,
             images_[s].empty() ? "text" : "image-text"));
    for (size_t i = 0; i < rep.docs.size(); ++i) {
      ML_CHECK(rep.docs[i] >= 0 && size_t(rep.docs[i]) < lengths_[s].size(),
               strf("the length reply from rank %d names document %lld of source %d, which has "
                    "%zu",
                    served[j], (long long)rep.docs[i], source, lengths_[s].size()));
      if (lengths_[s][size_t(rep.docs[i])] < 0) learned_[s].push_back(rep.docs[i]);
      lengths_[s][size_t(rep.docs[i])] = rep.lengths[i];
      if (!rep.images.empty()) images_[s][size_t(rep.docs[i])] = rep.images[i];
      owner_[s][size_t(rep.docs[i])] = served[j];
    }
    if (rep.seconds_per_token > 0) seconds_per_token[s] = rep.seconds_per_token;
  }
}

void LengthCatalogue::write_learned(ByteWriter& out, bool full) {
  out.put(uint64_t(learned_.size()));
  for (size_t s = 0; s < learned_.size(); ++s) {
    const size_t from = full ? 0 : logged_[s];
    std::vector<int64_t> docs(learned_[s].begin() + int64_t(from), learned_[s].end()), lengths,
        images;
    for (int64_t d : docs) lengths.push_back(lengths_[s][size_t(d)]);
    if (!images_[s].empty())
      for (int64_t d : docs) images.push_back(images_[s][size_t(d)]);
    out.put_string(w_.config.data.sources[s].name);
    out.put_vector(docs);
    out.put_vector(lengths);
    out.put_vector(images);
    logged_[s] = learned_[s].size();
  }
}

int64_t LengthCatalogue::restore(const std::vector<ckpt::SourceLengths>& lengths) {
  int64_t known = 0;
  for (const auto& sl : lengths) {
    size_t s = 0;
    while (s < w_.config.data.sources.size() && w_.config.data.sources[s].name != sl.source) ++s;
    if (s == w_.config.data.sources.size()) continue;  // a source no longer in the config
    // An image-text source needs its image counts too: without them, ask again.
    if (!images_[s].empty() && sl.images.size() != sl.docs.size()) continue;
    for (size_t i = 0; i < sl.docs.size(); ++i) {
      const int64_t d = sl.docs[i];
      if (d < 0 || d >= int64_t(lengths_[s].size())) continue;  // the source changed size
      if (lengths_[s][size_t(d)] < 0) learned_[s].push_back(d);
      lengths_[s][size_t(d)] = sl.lengths[i];
      if (!images_[s].empty()) images_[s][size_t(d)] = sl.images[i];
      ++known;
    }
  }
  return known;
}

void LengthCatalogue::assign_missing_owners(const dataplane::LoaderAssignment& assignment) {
  for (size_t s = 0; s < owner_.size(); ++s) {
    const int rank =
        w_.layout.first_rank(parallel::Role::loader) + assignment.loaders_of_source[s].at(0);
    for (size_t d = 0; d < owner_[s].size(); ++d)
      if (lengths_[s][d] >= 0 && owner_[s][d] < 0) owner_[s][d] = rank;
  }
}

}  // namespace meshloom::roles
