#include "runtime/data_job.hpp"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/h5.hpp"
#include "dataplane/schedule.hpp"
#include "roles/lead.hpp"
#include "runtime/run_role.hpp"
#include "runtime/step_loops.hpp"
#include "wire/reassemble.hpp"

namespace meshloom::runtime {

namespace {

// The global batches as rank 0 reassembles them from what trainers received.
struct Assembled {
  std::vector<int32_t> tokens, length, source;
  std::vector<float> patches;  // image positions' patches, in token order (--dump)
  std::vector<int64_t> doc, offset, epoch, first_sample{0};
  std::vector<double> source_tokens, source_samples;
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a over the batches' content
  bool keep_tokens = false;                // only for --dump: rank 0 need not hold every token
  int64_t token_count = 0;
  void mix(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) hash = (hash ^ b[i]) * 1099511628211ULL;
  }
};

// One echo per HDP rank: the first trainer's of each TP group, after checking
// that the group's other trainers received the very same bytes.
std::vector<wire::Batch> group_echoes(int64_t step, const parallel::TrainerMesh& mesh,
                                      const std::vector<wire::Ack>& acks) {
  std::vector<const std::string*> by_trainer(size_t(mesh.trainers), nullptr);
  for (const auto& a : acks) by_trainer.at(size_t(a.trainer)) = &a.echo;
  std::vector<wire::Batch> echoes;
  for (int t = 0; t < mesh.trainers; ++t) {
    ML_CHECK(by_trainer[size_t(t)], strf("step %lld: no echo from trainer %d", (long long)step, t));
    const std::string& first = *by_trainer[size_t(mesh.trainer_at(mesh.hdp_rank_of(t), 0))];
    if (*by_trainer[size_t(t)] != first)
      ML_FAIL(
          strf("step %lld: trainer %d received another batch than the first trainer of its "
               "HDP rank (HDP rank %d)",
               (long long)step, t, mesh.hdp_rank_of(t)));
    if (mesh.member_of(t) == 0) echoes.push_back(wire::decode_batch(first));
  }
  return echoes;
}

// Checks that every token of every sample arrived exactly once (at one HDP
// rank), with the right positions, and appends the step to `out` (the hash
// covers image patches too).
void assemble(int64_t step, const parallel::TrainerMesh& mesh, const std::vector<wire::Ack>& acks,
              Assembled* out) {
  const std::vector<wire::Batch> echoes = group_echoes(step, mesh, acks);
  const std::vector<wire::Sample> samples = wire::merged_manifest(echoes);
  const std::vector<wire::SampleContent> got = wire::reassemble(step, samples, echoes);
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    const std::vector<int32_t>& tokens = got[i].tokens;
    if (out->keep_tokens) {
      out->tokens.insert(out->tokens.end(), tokens.begin(), tokens.end());
      out->patches.insert(out->patches.end(), got[i].patches.begin(), got[i].patches.end());
    }
    out->token_count += int64_t(tokens.size());
    out->length.push_back(int32_t(s.length));
    out->source.push_back(s.source);
    out->doc.push_back(s.doc);
    out->offset.push_back(s.offset);
    out->epoch.push_back(s.epoch);
    if (out->source_tokens.size() <= size_t(s.source)) out->source_tokens.resize(s.source + 1);
    out->source_tokens[size_t(s.source)] += double(s.length);
    if (out->source_samples.size() <= size_t(s.source)) out->source_samples.resize(s.source + 1);
    out->source_samples[size_t(s.source)] += 1;
    int64_t key[4] = {s.source, s.doc, s.offset, s.length};
    out->mix(key, sizeof(key));
    out->mix(tokens.data(), tokens.size() * sizeof(int32_t));
    out->mix(got[i].patches.data(), got[i].patches.size() * sizeof(float));
  }
  out->first_sample.push_back(int64_t(out->length.size()));
}

void write_dump(const std::string& path, const parallel::World& w, const Assembled& a) {
  ckpt::H5File f(path, "w");
  f.write("tokens", a.tokens);
  if (const int64_t P = config::patch_dim(w.config); P > 0)
    f.write("patches", a.patches, {int64_t(a.patches.size()) / P, P});
  f.write("samples/length", a.length);
  f.write("samples/source", a.source);
  f.write("samples/doc", a.doc);
  f.write("samples/offset", a.offset);
  f.write("samples/epoch", a.epoch);
  f.write("steps/first_sample", a.first_sample);
  f.write_scalar("hash", uint64_t(a.hash));
  f.write_string("config", w.config_text);
}

// Per source: tokens and samples delivered, the tokens' share, and the
// schedule's mean weight. Returns the samples per source, as JSON.
nlohmann::ordered_json print_source_shares(const parallel::World& w, const DataRun& run,
                                           const Assembled& all) {
  dataplane::MixtureSchedule schedule(w.config.data);
  std::vector<double> expected(w.config.data.sources.size(), 0.0);
  for (int64_t s = 0; s < run.steps; ++s) {
    const auto weights = schedule.weights(s);
    for (size_t i = 0; i < weights.size(); ++i) expected[i] += weights[i] / double(run.steps);
  }
  const double total = double(all.token_count);
  std::printf("%-14s %10s %9s %9s %9s\n", "source", "tokens", "share", "schedule", "samples");
  nlohmann::ordered_json samples = nlohmann::ordered_json::object();
  bool images = false;
  for (size_t i = 0; i < w.config.data.sources.size(); ++i) {
    const config::SourceConfig& source = w.config.data.sources[i];
    const bool image = source.format == config::SourceFormat::webdataset;
    images |= image;
    const double got = i < all.source_tokens.size() ? all.source_tokens[i] : 0.0;
    const double n = i < all.source_samples.size() ? all.source_samples[i] : 0.0;
    std::printf("%-14s %10.0f %8.2f%% %8.2f%% %9.0f\n", (source.name + (image ? " *" : "")).c_str(),
                got, 100.0 * got / total, 100.0 * expected[i], n);
    samples[source.name] = int64_t(n);
  }
  if (images)
    std::printf(
        "* image-text source: its tokens are image patches and caption tokens, which the "
        "mixture weighs alike\n");
  return samples;
}

// Per role: ranks, peak RSS (max and sum) and PSS, printed; returned as JSON.
nlohmann::ordered_json memory_by_role(const std::vector<wire::Report>& reports) {
  std::printf("%-12s %6s %14s %14s %12s %12s\n", "role", "ranks", "peak RSS max", "peak RSS sum",
              "PSS sum", "busy s max");
  nlohmann::ordered_json roles = nlohmann::ordered_json::object();
  for (parallel::Role role :
       {parallel::Role::constructor, parallel::Role::loader, parallel::Role::trainer}) {
    int64_t mx = 0, sum = 0, pss = 0, worker_pss = 0, n = 0;
    int64_t decodes = 0, decoded_docs = 0, at_read = 0, replies = 0, reply_bytes = 0, tokens = 0;
    double decode_seconds = 0;
    double busy = 0, busy_max = 0;  // loaders: serving requests; trainers: 0 in data runs
    for (const auto& r : reports)
      if (r.role == int(role)) {
        busy += r.busy_seconds;
        decodes += r.decodes;
        decoded_docs += r.decoded_docs;
        at_read += r.decodes_at_read;
        decode_seconds += r.decode_seconds;
        replies += r.replies;
        reply_bytes += r.reply_bytes;
        tokens += r.tokens;
        busy_max = std::max(busy_max, r.busy_seconds);
        mx = std::max(mx, r.peak_rss_kib);
        sum += r.peak_rss_kib;
        pss += r.pss_kib;
        worker_pss += r.worker_pss_kib;
        ++n;
      }
    if (!n) continue;
    std::printf("%-12s %6lld %14s %14s %12s %12.2f\n", parallel::role_name(role), (long long)n,
                human_bytes(double(mx) * 1024).c_str(), human_bytes(double(sum) * 1024).c_str(),
                human_bytes(double(pss) * 1024).c_str(), busy_max);
    roles[parallel::role_name(role)] = {{"ranks", n},
                                        {"peak_rss_max_kib", mx},
                                        {"peak_rss_sum_kib", sum},
                                        {"pss_sum_kib", pss},
                                        {"worker_pss_sum_kib", worker_pss},
                                        {"busy_seconds_sum", busy},
                                        {"busy_seconds_max", busy_max}};
    if (replies > 0) {
      roles[parallel::role_name(role)]["replies"] = replies;
      roles[parallel::role_name(role)]["reply_bytes"] = reply_bytes;
      roles[parallel::role_name(role)]["tokens"] = tokens;
      std::printf("  %s token replies: %lld, %s for %lld tokens (%.1f bytes a token)\n",
                  parallel::role_name(role), (long long)replies,
                  human_bytes(double(reply_bytes)).c_str(), (long long)tokens,
                  double(reply_bytes) / double(std::max<int64_t>(tokens, 1)));
    }
    if (decodes > 0) {
      roles[parallel::role_name(role)]["decodes"] = decodes;
      roles[parallel::role_name(role)]["decoded_samples"] = decoded_docs;
      roles[parallel::role_name(role)]["decodes_at_read"] = at_read;
      roles[parallel::role_name(role)]["decode_seconds"] = decode_seconds;
      std::printf(
          "  %s image decoding: %lld decodes of %lld samples (%lld at read: not prepared "
          "ahead, or dropped by the decoded cache), %.2f s\n",
          parallel::role_name(role), (long long)decodes, (long long)decoded_docs,
          (long long)at_read, decode_seconds);
    }
  }
  return roles;
}

int run_data_lead(const parallel::World& w, const DataRun& run) {
  const auto start = Clock::now();
  roles::Lead lead(w);
  Assembled all;
  all.keep_tokens = !run.dump.empty();
  Progress progress(STDOUT_FILENO);
  const std::vector<wire::Report> reports =
      lead_steps(lead, 0, run.steps, [&](int64_t s, std::vector<wire::Ack> acks) {
        assemble(s, w.mesh, acks, &all);
        const double t = seconds_since(start), done = double(s + 1) / double(run.steps);
        if (!progress.due(t, s + 1 == run.steps)) return;
        const std::string eta = done < 1 ? "ETA " + human_seconds(t / done * (1 - done)) : "done";
        std::printf("%s[data] step %lld/%lld  %.1fM tokens  %.2fM tokens/s  %s%s", progress.begin(),
                    (long long)s + 1, (long long)run.steps, double(all.token_count) / 1e6,
                    double(all.token_count) / 1e6 / std::max(t, 1e-9), eta.c_str(), progress.end());
        std::fflush(stdout);
      });
  const double seconds = seconds_since(start), total = double(all.token_count);
  const double samples = double(all.length.size());  // (pieces of) documents delivered
  if (progress.redraw()) std::printf("\n");
  std::printf(
      "data path: %lld steps, %.0f tokens in %.2f s: %.0f tokens/s delivered to %d trainer(s)\n",
      (long long)run.steps, total, seconds, total / seconds, w.layout.trainers);
  std::printf("samples: %.0f delivered, %.1f samples/s\n", samples, samples / seconds);
  std::printf(
      "layout: %d constructor(s), %d loader(s), %d trainer(s), mode %s; %d loader "
      "re-partition(s)\n",
      w.layout.constructors, w.layout.loaders, w.layout.trainers,
      config::enum_name(w.config.data.mode), lead.reassignments());
  const nlohmann::ordered_json source_samples = print_source_shares(w, run, all);
  const nlohmann::ordered_json roles = memory_by_role(reports);
  if (!run.report.empty()) {
    std::FILE* f = std::fopen(run.report.c_str(), "w");
    if (!f) throw Error("cannot write " + run.report);
    const nlohmann::ordered_json summary = {{"steps", run.steps},
                                            {"tokens", all.token_count},
                                            {"seconds", seconds},
                                            {"tokens_per_s", total / seconds},
                                            {"samples", int64_t(samples)},
                                            {"samples_per_s", samples / seconds},
                                            {"mode", config::enum_name(w.config.data.mode)},
                                            {"constructors", w.layout.constructors},
                                            {"loaders", w.layout.loaders},
                                            {"trainers", w.layout.trainers},
                                            {"hash", strf("%016llx", (unsigned long long)all.hash)},
                                            {"source_samples", source_samples},
                                            {"roles", roles}};
    std::fprintf(f, "%s\n", summary.dump().c_str());
    std::fclose(f);
  }
  std::printf("batch hash: %016llx\n", (unsigned long long)all.hash);
  if (!run.dump.empty()) {
    write_dump(run.dump, w, all);
    std::printf("dump: %s\n", run.dump.c_str());
  }
  return kExitOk;
}

// A trainer echoes what it received, for rank 0 to check.
int run_data_trainer(const parallel::World& w) {
  trainer_steps(w, [&](const wire::Batch& b, double) {
    wire::Ack ack;
    ack.step = b.step;
    ack.trainer = w.role_index;
    ack.echo = wire::encode(b);
    return ack;
  });
  return kExitOk;
}

}  // namespace

int run_data(const parallel::World& w, const DataRun& run) {
  return run_role(
      w, [&] { return run_data_lead(w, run); }, [&] { return run_data_trainer(w); });
}

}  // namespace meshloom::runtime
