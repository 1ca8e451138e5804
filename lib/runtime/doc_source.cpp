#include "runtime/doc_source.hpp"

#include "base/check.hpp"
#include "data/indexed_dataset.hpp"

namespace meshloom {
namespace {

class IndexedDocSource final : public DocSource {
 public:
  explicit IndexedDocSource(const std::string& prefix) : ds_(prefix) {
    if (ds_.size() == 0) throw Error("indexed dataset '" + prefix + "' has no documents");
  }
  int64_t docs() const override { return int64_t(ds_.size()); }
  int64_t length(int64_t doc) override { return ds_.length(size_t(doc)); }
  void read(int64_t doc, int64_t offset, int64_t n, std::vector<int32_t>* out) override {
    data::TokenView v = ds_.tokens(size_t(doc));
    ML_CHECK(offset >= 0 && offset + n <= int64_t(v.size), "token range past the document");
    out->reserve(out->size() + size_t(n));
    for (int64_t k = 0; k < n; ++k) out->push_back(int32_t(v[size_t(offset + k)]));
  }

 private:
  data::IndexedDataset ds_;
};

}  // namespace

std::unique_ptr<DocSource> open_doc_source(const config::SourceConfig& source) {
  try {
    if (source.format == "indexed") return std::make_unique<IndexedDocSource>(source.path);
  } catch (const Error& e) {
    throw Error("source '" + source.name + "': " + e.what());
  }
  throw Error("source '" + source.name + "': format '" + source.format +
              "' is not served by loaders yet; prepare it first with `meshloom prepare`");
}

void check_sources(const config::Config& config) {
  for (const auto& s : config.data.sources) open_doc_source(s);
}

}  // namespace meshloom
