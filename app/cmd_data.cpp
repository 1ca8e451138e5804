// `meshloom data`: the data path alone, on the real role layout. Reports
// delivered tokens/s, per-source token shares and each role's peak memory;
// --dump writes the exact global batches to HDF5. Every token that reaches a
// trainer is echoed back to rank 0 and checked against the manifest.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "app/commands.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/h5.hpp"
#include "comm/p2p.hpp"
#include "roles/inbox.hpp"
#include "roles/lead.hpp"
#include "roles/report.hpp"
#include "runtime/run_role.hpp"
#include "roles/data_workers.hpp"

namespace meshloom::app {
namespace {

struct DataArgs {
  std::string file;
  std::vector<std::string> sets;
  int64_t steps = 20;
  std::string dump;
  std::string report;
};

// The global batches as rank 0 reassembles them from what trainers received.
struct Assembled {
  std::vector<int32_t> tokens, length, source;
  std::vector<int64_t> doc, offset, epoch, first_sample{0};
  std::vector<double> source_tokens;
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a over the batches' content
  bool keep_tokens = false;                // only for --dump: rank 0 need not hold every token
  int64_t token_count = 0;
  void mix(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) hash = (hash ^ b[i]) * 1099511628211ULL;
  }
};

// Checks that every token of every sample arrived exactly once, with the right
// positions and targets, and appends the step to `out`.
void assemble(int64_t step, const std::vector<proto::Ack>& acks, Assembled* out) {
  std::vector<proto::Batch> echoes;
  for (const auto& a : acks) echoes.push_back(proto::decode_batch(a.echo));
  ML_CHECK(!echoes.empty(), "no echo for a step");
  // Trainer 0's echo names every sample; the others only those they hold.
  std::vector<proto::Sample> samples = echoes[0].samples;
  for (const auto& b : echoes) {
    ML_CHECK(b.samples.size() == samples.size(), "echoes disagree on the step's sample count");
    for (size_t i = 0; i < samples.size(); ++i)
      if (samples[i].length == 0) samples[i] = b.samples[i];
  }
  std::vector<std::vector<int32_t>> got(samples.size());
  std::vector<std::vector<char>> seen(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    got[i].assign(size_t(samples[i].length), 0);
    seen[i].assign(size_t(samples[i].length), 0);
  }
  for (const auto& b : echoes) {
    ML_CHECK(b.step == step, "echo of another step");
    for (const auto& mb : b.micro) {
      size_t k = 0;
      for (const auto& seg : mb.segments) {
        for (int64_t p = seg.begin; p < seg.begin + seg.length; ++p, ++k) {
          auto& flag = seen[size_t(seg.sample)][size_t(p)];
          if (flag)
            ML_FAIL(strf("step %lld: token %lld of sample %d reached two trainers", (long long)step,
                         (long long)p, seg.sample));
          flag = 1;
          got[size_t(seg.sample)][size_t(p)] = mb.tokens[k];
          ML_CHECK(mb.positions[k] == p, "wrong position id");
        }
      }
      ML_CHECK(k == mb.tokens.size(), "segments do not cover the micro-batch");
    }
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    for (char f : seen[i])
      if (!f) ML_FAIL(strf("step %lld: sample %zu lost tokens on the way", (long long)step, i));
    const auto& s = samples[i];
    if (out->keep_tokens) out->tokens.insert(out->tokens.end(), got[i].begin(), got[i].end());
    out->token_count += int64_t(got[i].size());
    out->length.push_back(int32_t(s.length));
    out->source.push_back(s.source);
    out->doc.push_back(s.doc);
    out->offset.push_back(s.offset);
    out->epoch.push_back(s.epoch);
    if (out->source_tokens.size() <= size_t(s.source)) out->source_tokens.resize(s.source + 1);
    out->source_tokens[size_t(s.source)] += double(s.length);
    int64_t key[4] = {s.source, s.doc, s.offset, s.length};
    out->mix(key, sizeof(key));
    out->mix(got[i].data(), got[i].size() * sizeof(int32_t));
  }
  out->first_sample.push_back(int64_t(out->length.size()));
}

void write_dump(const std::string& path, const World& w, const Assembled& a) {
  H5File f(path, "w");
  f.write("tokens", a.tokens);
  f.write("samples/length", a.length);
  f.write("samples/source", a.source);
  f.write("samples/doc", a.doc);
  f.write("samples/offset", a.offset);
  f.write("samples/epoch", a.epoch);
  f.write("steps/first_sample", a.first_sample);
  f.write_scalar("hash", uint64_t(a.hash));
  f.write_string("config", w.config_text);
}

int run_lead(const World& w, const DataArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  Lead lead(w);
  Assembled all;
  all.keep_tokens = !args.dump.empty();
  int64_t processed = 0;
  Progress progress(STDOUT_FILENO);
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto process_completed = [&] {
    for (; processed < lead.steps_completed(); ++processed)
      assemble(processed, lead.take_acks(processed), &all);
  };
  for (int64_t s = 0; s < args.steps; ++s) {
    lead.dispatch_step(s + 1 == args.steps);
    process_completed();
    if (progress.due(elapsed(), s + 1 == args.steps)) {
      const double done = double(s + 1) / double(args.steps);
      const std::string eta =
          done < 1 ? "ETA " + human_seconds(elapsed() / done * (1 - done)) : "done";
      std::printf("%s[data] step %lld/%lld  %.1fM tokens  %.2fM tokens/s  %s%s", progress.begin(),
                  (long long)s + 1, (long long)args.steps, double(all.token_count) / 1e6,
                  double(all.token_count) / 1e6 / std::max(elapsed(), 1e-9), eta.c_str(),
                  progress.end());
      std::fflush(stdout);
    }
  }
  lead.drain_acks();
  process_completed();
  const double seconds = elapsed();
  if (progress.redraw()) std::printf("\n");
  std::vector<proto::Report> reports = lead.stop();

  const double total = double(all.token_count);
  std::printf(
      "data path: %lld steps, %.0f tokens in %.2f s: %.0f tokens/s delivered to %d "
      "trainer(s)\n",
      (long long)args.steps, total, seconds, total / seconds, w.layout.trainers);
  std::printf(
      "layout: %d constructor(s), %d loader(s), %d trainer(s), mode %s; "
      "%d loader re-partition(s)\n",
      w.layout.constructors, w.layout.loaders, w.layout.trainers, w.config.data.mode.c_str(),
      lead.reassignments());
  dataplane::MixtureSchedule schedule(w.config.data);
  std::vector<double> expected(w.config.data.sources.size(), 0.0);
  for (int64_t s = 0; s < args.steps; ++s) {
    auto wts = schedule.weights(s);
    for (size_t i = 0; i < wts.size(); ++i) expected[i] += wts[i] / double(args.steps);
  }
  std::printf("%-14s %10s %9s %9s\n", "source", "tokens", "share", "schedule");
  for (size_t i = 0; i < w.config.data.sources.size(); ++i) {
    double got = i < all.source_tokens.size() ? all.source_tokens[i] : 0.0;
    std::printf("%-14s %10.0f %8.2f%% %8.2f%%\n", w.config.data.sources[i].name.c_str(), got,
                100.0 * got / total, 100.0 * expected[i]);
  }
  std::printf("%-12s %6s %14s %14s %12s\n", "role", "ranks", "peak RSS max", "peak RSS sum",
              "PSS sum");
  std::string roles_json;
  for (Role role : {Role::constructor, Role::loader, Role::trainer}) {
    int64_t mx = 0, sum = 0, pss = 0, worker_pss = 0, n = 0;
    for (const auto& r : reports)
      if (r.role == int(role)) {
        mx = std::max(mx, r.peak_rss_kib);
        sum += r.peak_rss_kib;
        pss += r.pss_kib;
        worker_pss += r.worker_pss_kib;
        ++n;
      }
    if (!n) continue;
    std::printf("%-12s %6lld %14s %14s %12s\n", role_name(role), (long long)n,
                human_bytes(double(mx) * 1024).c_str(), human_bytes(double(sum) * 1024).c_str(),
                human_bytes(double(pss) * 1024).c_str());
    roles_json += strf(
        "%s\"%s\": {\"ranks\": %lld, \"peak_rss_max_kib\": %lld, "
        "\"peak_rss_sum_kib\": %lld, \"pss_sum_kib\": %lld, \"worker_pss_sum_kib\": %lld}",
        roles_json.empty() ? "" : ", ", role_name(role), (long long)n, (long long)mx,
        (long long)sum, (long long)pss, (long long)worker_pss);
  }
  if (!args.report.empty()) {
    std::FILE* f = std::fopen(args.report.c_str(), "w");
    if (!f) ML_FAIL("cannot write " + args.report);
    std::fprintf(f,
                 "{\"steps\": %lld, \"tokens\": %.0f, \"seconds\": %.6f, \"tokens_per_s\": %.1f, "
                 "\"mode\": \"%s\", \"constructors\": %d, \"loaders\": %d, \"trainers\": %d, "
                 "\"hash\": \"%016llx\", \"roles\": {%s}}\n",
                 (long long)args.steps, total, seconds, total / seconds, w.config.data.mode.c_str(),
                 w.layout.constructors, w.layout.loaders, w.layout.trainers,
                 (unsigned long long)all.hash, roles_json.c_str());
    std::fclose(f);
  }
  std::printf("batch hash: %016llx\n", (unsigned long long)all.hash);
  if (!args.dump.empty()) {
    write_dump(args.dump, w, all);
    std::printf("dump: %s\n", args.dump.c_str());
  }
  return kExitOk;
}

int run_trainer(const World& w) {
  proto::Report report;
  report.role = int(Role::trainer);
  BatchInbox inbox(w);
  while (true) {
    proto::Batch b = inbox.receive();
    proto::Ack ack;
    ack.step = b.step;
    ack.trainer = w.role_index;
    ack.echo = proto::encode(b);
    send_ack(ack);
    for (const auto& mb : b.micro) report.tokens += int64_t(mb.tokens.size());
    if (b.last) break;
  }
  send_final_report(report, inbox.worker_pss_kib());
  return kExitOk;
}

}  // namespace

void add_data(CLI::App& app, Runner* run, int* argc, char*** argv) {
  static DataArgs args;
  CLI::App* cmd = app.add_subcommand(
      "data", "Run the data path alone (loaders, constructors, trainers) and report on it");
  cmd->add_option("--config,-c", args.file, "Experiment YAML")->required();
  cmd->add_option("--set", args.sets, "Override a key (repeatable)");
  cmd->add_option("--steps", args.steps, "Steps to deliver")->check(at_least_one());
  cmd->add_option("--dump", args.dump, "Write the global batches to this HDF5 file");
  cmd->add_option("--report", args.report,
                  "Write the summary (tokens/s, memory per role) to this JSON file");
  cmd->callback([run, argc, argv] {
    *run = [argc, argv] {
      mpi_start(argc, argv);
      World w;
      if (!world_from_config(args.file, args.sets, &w)) return mpi_finish(kExitBadInput);
      if (!preflight_on_root(w, [&] { check_sources(w.config); })) return mpi_finish(kExitBadInput);
      start_finished();
      const int code = run_role(
          w, [&] { return run_lead(w, args); }, [&] { return run_trainer(w); });
      return mpi_finish(code);
    };
  });
  // Hidden: a colocated trainer's DataLoader-style worker process
  // (data.colocated_processes), started by the trainer with its socket as fd 3.
  static int worker_rank = 0, worker_index = 0;
  CLI::App* worker = app.add_subcommand("data-worker", "");
  worker->group("");
  worker->add_option("--rank", worker_rank)->required();
  worker->add_option("--index", worker_index)->required();
  worker->callback([run] { *run = [] { return run_data_worker(3, worker_rank, worker_index); }; });
}

}  // namespace meshloom::app
