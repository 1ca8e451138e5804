#include "data/report.hpp"

#include <algorithm>
#include <vector>

#include "base/strings.hpp"

namespace meshloom::data {

namespace {
double mb(double bytes) { return bytes / 1e6; }
}  // namespace

std::string prepare_progress_line(const PrepareProgress& p) {
  const bool last = p.input_done >= p.input_total;
  const double rate = p.seconds > 0 ? mb(double(p.input_done)) / p.seconds : 0;
  std::string eta = last ? "done" : "ETA ?";
  if (!last && rate > 0)
    eta = "ETA " + human_seconds(mb(double(p.input_total - p.input_done)) / rate);
  return strf("  %s docs, %.1f / %.1f MB, %.1f MB/s, %s tokens, %s",
              with_commas(p.documents).c_str(), mb(double(p.input_done)), mb(double(p.input_total)),
              rate, with_commas(p.tokens).c_str(), eta.c_str());
}

std::string prepare_report(const PrepareReport& r, const std::string& prefix,
                           const std::string& tokenizer_name, int eot_id) {
  const InputReport& in = r.input;
  const double secs = std::max(r.seconds, 1e-9);
  std::string out =
      strf("meshloom prepare: wrote %s (%s, %s) and %s\n", bin_path(prefix).c_str(),
           human_bytes(double(r.bin_bytes)).c_str(), dtype_name(r.dtype), idx_path(prefix).c_str());
  out += strf("  documents   %s\n", with_commas(in.documents).c_str());
  out += strf("  tokens      %s (%s, %s)\n", with_commas(r.tokens).c_str(), tokenizer_name.c_str(),
              r.eot_appended ? strf("end-of-text %d after each document", eot_id).c_str()
                             : "no end-of-text id");
  out += strf("  input       %.1f MB read, %.1f MB of text\n", mb(double(r.input_bytes)),
              mb(double(r.text_bytes)));
  out += strf(
      "  time        %s, %.1f MB/s of text (%.1f MB/s of input), %.2f M tokens/s, %d thread%s\n",
      human_seconds(r.seconds).c_str(), mb(double(r.text_bytes)) / secs,
      mb(double(r.input_bytes)) / secs, double(r.tokens) / secs / 1e6, r.threads,
      r.threads == 1 ? "" : "s");
  out += strf("  skipped     %s empty, %s unreadable\n", with_commas(in.empty).c_str(),
              with_commas(in.unreadable).c_str());
  out += strf("  invalid     %s documents with invalid UTF-8 (%s sequences replaced by U+FFFD)\n",
              with_commas(in.invalid_utf8_documents).c_str(),
              with_commas(in.invalid_utf8_sequences).c_str());
  if (!in.problems.empty()) {
    out += strf("  problems (first %zu of %s):\n", in.problems.size(),
                with_commas(in.unreadable).c_str());
    for (const std::string& p : in.problems) out += "    " + p + "\n";
  }
  return out;
}

std::string dataset_summary(const IndexedDataset& ds, const std::string& prefix) {
  std::vector<int64_t> lengths(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) lengths[i] = ds.length(i);
  std::sort(lengths.begin(), lengths.end());
  auto pct = [&lengths](double q) {
    return lengths.empty() ? 0LL
                           : static_cast<long long>(
                                 lengths[static_cast<size_t>(q * double(lengths.size() - 1))]);
  };
  return strf("%s: %s, %s sequences, %s documents, %s tokens\n", prefix.c_str(),
              dtype_name(ds.dtype()), with_commas(ds.size()).c_str(),
              with_commas(ds.num_documents()).c_str(), with_commas(ds.num_tokens()).c_str()) +
         strf("  sequence length: min %lld, median %lld, p99 %lld, max %lld, mean %.1f\n", pct(0),
              pct(0.5), pct(0.99), pct(1.0),
              ds.size() ? double(ds.num_tokens()) / double(ds.size()) : 0.0);
}

}  // namespace meshloom::data
