// `meshloom train`: the whole system under mpirun/srun.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "app/commands.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/writer.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_util.hpp"
#include "plan/device_memory.hpp"
#include "roles/inbox.hpp"
#include "roles/lead.hpp"
#include "roles/report.hpp"
#include "runtime/run_role.hpp"
#include "roles/faults.hpp"
#include "runtime/gemm_peak.hpp"
#include "ckpt/resume.hpp"
#include "train/step_dump.hpp"
#include "train/trainer.hpp"
#include "parallel/watchdog.hpp"
#include "parallel/world.hpp"

namespace meshloom::app {
namespace {

struct TrainArgs {
  std::string file;
  std::vector<std::string> sets;
  bool dry_run = false;
  int64_t dump_step = -1;
  std::string dump_file;
  std::string resume;       // "", "auto" or a checkpoint path
  std::string resume_from;  // the checkpoint chosen by rank 0 ("" : fresh start)
  int64_t stop_at = -1;     // stop before this step, as a preempted job would

  // The step this attempt stops before: run.steps, or --stop-at if earlier.
  int64_t end(const config::Config& c) const {
    return stop_at >= 0 ? std::min(c.run.steps, stop_at) : c.run.steps;
  }
};

// Writes the effective config into the run folder, so a run can be repeated.
void save_effective_config(const World& w) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(w.config.run.dir, ec);
  const std::string path = w.config.run.dir + "/config.yaml";
  std::ofstream out(path);
  out << w.config_text;
  if (ec || !out)
    ML_FAIL("cannot write the effective config to '" + path +
            "': " + (ec ? ec.message() : std::string(std::strerror(errno))));
  LOG_INFO("effective config saved to %s", path.c_str());
}

// A folder the run writes into, named by its key: made now and probed, so
// that a bad one is found before start-up ends rather than mid-run.
void require_writable_dir(const std::string& dir, const std::string& key) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(key + ": cannot create the folder '" + dir + "': " + ec.message());
  const std::string probe = dir + "/.meshloom-write-probe-" + std::to_string(::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) throw Error(key + ": cannot write into '" + dir + "': " + std::strerror(errno));
  std::fclose(f);
  fs::remove(probe, ec);
}

// The CPU backend's trainers against the node's memory: a model that cannot
// fit would otherwise meet the OOM killer mid-start, which says nothing. Only
// rank 0's node is read (nodes assumed alike), and only the floor is counted,
// so a run refused here could never have run.
void check_host_memory(const World& w) {
  if (w.config.run.backend != "cpu") return;
  std::map<std::string, int> per_host;
  for (int t = 0; t < w.layout.trainers; ++t)
    ++per_host[w.hosts[size_t(w.layout.first_rank(Role::trainer) + t)]];
  const auto busiest =
      std::max_element(per_host.begin(), per_host.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  const double node = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  const double need = double(plan::host_memory_floor(w.config, w.layout.trainers));
  if (busiest == per_host.end() || node <= 0 || need * busiest->second <= node) return;
  throw Error(strf(
      "a trainer needs at least %s of memory (fp32 weights and gradients, AdamW moments%s, the "
      "logits of %lld tokens), so the %d trainers on %s need %s, more than the node's %s: lower "
      "model.vocab_size, model.d_model, model.n_layers or model.ffn_dim, set optim.zero1, or "
      "launch on more nodes",
      human_bytes(need).c_str(), w.config.optim.zero1 ? " (a ZeRO-1 shard)" : "",
      (long long)std::min(w.config.plan.capacity, w.config.data.tokens_per_step), busiest->second,
      busiest->first.c_str(), human_bytes(need * busiest->second).c_str(),
      human_bytes(node).c_str()));
}

// What the run will write, and the step options against run.steps.
void check_outputs(const config::Config& c, const TrainArgs& a) {
  require_writable_dir(c.run.dir, "run.dir");
  if (c.checkpoint.every > 0)
    require_writable_dir(checkpoint_dir(c), c.checkpoint.dir.empty()
                                                ? "run.dir (checkpoints go to run.dir/checkpoints)"
                                                : "checkpoint.dir");
  if (a.dump_step >= c.run.steps)
    throw Error(strf("--dump-step %lld: run.steps is %lld, so that step never runs",
                     (long long)a.dump_step, (long long)c.run.steps));
  if (!a.dump_file.empty()) {  // made and removed again: only trying tells (root, /proc)
    const bool existed = std::filesystem::exists(a.dump_file);
    std::FILE* f = std::fopen(a.dump_file.c_str(), "a");
    if (!f) throw Error("--dump-step: cannot write '" + a.dump_file + "': " + std::strerror(errno));
    std::fclose(f);
    if (!existed) std::filesystem::remove(a.dump_file);
  }
}

int dry_run(const World& w) {
  if (w.rank != 0) return kExitOk;
  std::printf("# meshloom dry run: effective config\n%s", w.config_text.c_str());
  std::printf("# layout: %d ranks\n%s", w.size, w.layout.describe(w.hosts).c_str());
  std::printf("# backend: %s", w.config.run.backend.c_str());
#ifdef MESHLOOM_HAVE_CUDA
  std::printf(" (built with CUDA: %s)\n", cuda_backend_summary().c_str());
#else
  std::printf(" (CPU-only build)\n");
#endif
  save_effective_config(w);
  std::printf(
      "# dry run OK: config valid, roles fit, sources open, outputs writable; nothing trained\n");
  return kExitOk;
}

// [[tokens, attn_l2, k, seconds], ...] for metrics.jsonl.
std::string micro_json(const std::vector<double>& m) {
  std::string out;
  for (size_t i = 0; i + 3 < m.size(); i += 4)
    out += strf("%s[%.0f, %.6g, %.0f, %.6f]", i ? ", " : "", m[i], m[i + 1], m[i + 2], m[i + 3]);
  return out;
}

// Rank 0: the data path's lead, plus one line per step and metrics.jsonl.
int run_lead(const World& w, const TrainArgs& args) {
  const auto& run = w.config.run;
  const int64_t steps = run.steps;
  LOG_INFO("layout: %d ranks: %d constructor(s), %d loader(s), %d trainer(s), data %s, backend %s",
           w.size, w.layout.constructors, w.layout.loaders, w.layout.trainers,
           w.config.data.mode.c_str(), run.backend.c_str());
  Lead lead(w);
  if (!args.resume_from.empty()) {
    ckpt::Checkpoint c = ckpt::read_checkpoint(args.resume_from, /*only_meta=*/true);
    std::vector<ckpt::SourceLengths> lengths;
    if (!c.lengths_full) {
      // A delta: the full lengths are in its base (a cache: lose it, lose nothing).
      const std::string base =
          std::filesystem::path(args.resume_from).parent_path().string() + "/" + c.lengths_base;
      try {
        lengths = ckpt::read_checkpoint(base, true).lengths;
      } catch (const Error& e) {
        LOG_WARN("document lengths of %s not restored (%s): loaders will recompute them",
                 base.c_str(), e.what());
      }
    }
    lengths.insert(lengths.end(), c.lengths.begin(), c.lengths.end());
    lead.resume(c, lengths);
  }
  const int64_t first = lead.first_step();
  std::FILE* metrics = nullptr;
  if (w.config.log.metrics) {
    std::filesystem::create_directories(run.dir);
    const std::string path = run.dir + "/metrics.jsonl";
    metrics = std::fopen(path.c_str(), first > 0 ? "a" : "w");
    if (!metrics) ML_FAIL("cannot write " + path);
  }
  Progress progress(STDOUT_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto now = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double first_loss = 0, last_loss = 0;
  bool warned_mfu = false;
  int64_t done = first;
  // Straggler detection: a trainer whose compute time exceeds the median by
  // faults.straggler_factor for faults.straggler_steps steps in a row is named.
  std::vector<int64_t> slow_streak(size_t(w.layout.trainers), 0);
  auto report = [&](int64_t s) {
    std::vector<proto::Ack> acks = lead.take_acks(s);
    double loss = 0, flops = 0, max_step = 0, mean_step = 0, max_wait = 0, grad_norm = 0, peak = 0;
    double wall = 0;  // the step on the slowest trainer, data wait included
    int64_t predictions = 0, tokens = 0;
    for (const auto& a : acks) {
      if (!a.note.empty()) LOG_INFO("%s", a.note.c_str());
      loss += a.loss_sum;
      predictions += a.predictions;
      tokens += a.tokens;
      flops += a.flops;
      max_step = std::max(max_step, a.compute_seconds);
      mean_step += a.compute_seconds / double(acks.size());
      max_wait = std::max(max_wait, a.wait_seconds);
      wall = std::max(wall, a.step_seconds + a.wait_seconds);
      grad_norm = a.grad_norm;
      peak += a.peak_flops;
    }
    loss /= double(std::max<int64_t>(predictions, 1));
    std::vector<double> times;
    for (const auto& a : acks) times.push_back(a.compute_seconds);
    std::sort(times.begin(), times.end());
    const double median = times.empty() ? 0 : times[times.size() / 2];
    std::string stragglers;
    for (const auto& a : acks) {
      int64_t& streak = slow_streak[size_t(a.trainer)];
      streak = a.compute_seconds > w.config.faults.straggler_factor * median ? streak + 1 : 0;
      if (streak >= w.config.faults.straggler_steps) {
        const int rank = w.layout.first_rank(Role::trainer) + a.trainer;
        stragglers += strf("%s%d", stragglers.empty() ? "" : ", ", rank);
        if (streak == w.config.faults.straggler_steps)
          LOG_WARN(
              "straggler: trainer %d (rank %d on %s) has been %.1fx slower than the median "
              "trainer for %lld steps (%s vs %s)",
              a.trainer, rank, w.hosts[size_t(rank)].c_str(), a.compute_seconds / median,
              (long long)streak, human_seconds(a.compute_seconds).c_str(),
              human_seconds(median).c_str());
      }
    }
    if (s == first) first_loss = loss;
    last_loss = loss;
    const double t = now(), dt = wall;
    const double imbalance = mean_step > 0 ? max_step / mean_step : 1.0;
    // Useful FLOPs over what the nodes' measured sgemm peak allows in the
    // step's compute time (the slowest trainer sets it).
    const double mfu = peak > 0 ? flops / (std::max(max_step, 1e-9) * peak) : 0;
    if (s == first && peak > 0)
      LOG_INFO("MFU is against %.1f GFLOP/s, the trainers' %s %s peak%s", peak / 1e9,
               w.config.run.peak_gflops > 0 ? "configured" : "measured",
               w.config.run.backend == "cuda" ? "GPU product" : "sgemm",
               w.config.run.peak_gflops > 0 ? "" : " (run.peak_gflops sets a known one)");
    if (mfu > 1 && !warned_mfu) {
      warned_mfu = true;
      if (w.config.run.peak_gflops > 0)
        LOG_WARN("MFU %.0f%% is above 100%%: run.peak_gflops %g is below what the trainers reach",
                 100 * mfu, w.config.run.peak_gflops);
      else
        LOG_WARN(
            "MFU %.0f%% is above 100%%: the sgemm peak was measured too low (other ranks "
            "busy at start?); set run.peak_gflops to the nodes' real peak",
            100 * mfu);
    }
    const double lr = train::learning_rate(w.config.optim, s, steps);
    if (progress.redraw()) std::printf("\r\033[K");
    if (s % w.config.log.every == 0 || s + 1 == steps)
      LOG_INFO(
          "step %5lld  loss %.4f  lr %.2e  |g| %.3f  %7.0f tok/s  MFU %4.1f%%  imbalance %.2f  "
          "data wait %s",
          (long long)s, loss, lr, grad_norm, double(tokens) / std::max(dt, 1e-9), 100 * mfu,
          imbalance, human_seconds(max_wait).c_str());
    // Redrawn, the bar follows every step's log line; as lines, one now and then.
    if (progress.redraw() || progress.due(t, s + 1 == steps)) {
      const double frac = double(s + 1 - first) / double(steps - first);
      const std::string eta = frac < 1 ? "ETA " + human_seconds(t / frac * (1 - frac)) : "done";
      if (progress.redraw()) {
        const int bar = int(30 * frac);
        std::printf("[%s%s] %lld/%lld  %s", std::string(size_t(bar), '#').c_str(),
                    std::string(size_t(30 - bar), '.').c_str(), (long long)s + 1, (long long)steps,
                    eta.c_str());
      } else {
        std::printf("[train] step %lld/%lld  %s\n", (long long)s + 1, (long long)steps,
                    eta.c_str());
      }
      std::fflush(stdout);
    }
    if (metrics) {
      std::fprintf(metrics, "{\"data_hash\": \"%016llx\", ",
                   (unsigned long long)lead.manifest_hash(s));
      std::fprintf(metrics,
                   "\"step\": %lld, \"loss\": %.17g, \"lr\": %.6g, \"grad_norm\": %.6g, "
                   "\"tokens\": %lld, \"seconds\": %.6f, \"tokens_per_s\": %.1f, \"mfu\": %.4f, "
                   "\"imbalance\": %.4f, \"data_wait_max\": %.6f, \"stragglers\": [%s], "
                   "\"trainers\": [",
                   (long long)s, loss, lr, grad_norm, (long long)tokens, dt,
                   double(tokens) / std::max(dt, 1e-9), mfu, imbalance, max_wait,
                   stragglers.c_str());
      for (size_t i = 0; i < acks.size(); ++i)
        std::fprintf(metrics,
                     "%s{\"trainer\": %d, \"tokens\": %lld, \"flops\": %.4g, \"compute\": %.6f, "
                     "\"wait\": %.6f, \"step\": %.6f, \"predicted\": %.6f, \"micro\": [%s]}",
                     i ? ", " : "", acks[i].trainer, (long long)acks[i].tokens, acks[i].flops,
                     acks[i].compute_seconds, acks[i].wait_seconds, acks[i].step_seconds,
                     lead.predicted_time(s, acks[i].trainer), micro_json(acks[i].micro).c_str());
      std::fprintf(metrics, "]}\n");
      std::fflush(metrics);
    }
  };
  const int64_t end = args.end(w.config);
  for (int64_t s = first; s < end; ++s) {
    lead.dispatch_step(s + 1 == end);
    for (; done < lead.steps_completed(); ++done) report(done);
  }
  lead.drain_acks();
  for (; done < lead.steps_completed(); ++done) report(done);
  if (progress.redraw()) std::printf("\n");
  std::vector<proto::Report> reports = lead.stop();
  if (metrics) {
    // The last line: every rank's busy time and memory (loaders and
    // constructors report only at the end).
    std::fprintf(metrics, "{\"final\": true, \"ranks\": [");
    std::sort(reports.begin(), reports.end(),
              [](const proto::Report& a, const proto::Report& b) { return a.rank < b.rank; });
    for (size_t i = 0; i < reports.size(); ++i)
      std::fprintf(metrics,
                   "%s{\"rank\": %d, \"role\": \"%s\", \"busy_seconds\": %.3f, \"tokens\": %lld, "
                   "\"peak_rss_kib\": %lld, \"pss_kib\": %lld}",
                   i ? ", " : "", reports[i].rank, role_name(Role(reports[i].role)),
                   reports[i].busy_seconds, (long long)reports[i].tokens,
                   (long long)reports[i].peak_rss_kib, (long long)reports[i].pss_kib);
    std::fprintf(metrics, "]}\n");
    std::fclose(metrics);
  }
  LOG_INFO(
      "trained steps %lld-%lld in %s: loss %.4f -> %.4f%s", (long long)first, (long long)end - 1,
      human_seconds(now()).c_str(), first_loss, last_loss,
      end < steps ? strf("; stopped before step %lld (--stop-at)", (long long)end).c_str() : "");
  return kExitOk;
}

int run_trainer(const World& w, const TrainArgs& args) {
  Trainer trainer(w, w.role_comm);
  const InjectedFaults faults(w.config, w.rank);
  if (!args.resume_from.empty()) trainer.load(ckpt::read_checkpoint(args.resume_from));
  // Trainer 0 writes checkpoints, in the background; what it wrote is told
  // to rank 0 in the next acknowledgement.
  std::unique_ptr<ckpt::BackgroundWriter> writer;
  std::mutex note_mutex;
  std::string note;
  if (w.role_index == 0 && w.config.checkpoint.every > 0) {
    const std::string dir = checkpoint_dir(w.config);
    writer = std::make_unique<ckpt::BackgroundWriter>(
        dir, w.config.checkpoint.keep, w.config.checkpoint.background,
        [&, dir](const std::string& path, int64_t bytes, double seconds) {
          reset_resume_attempts(dir);
          std::lock_guard<std::mutex> lock(note_mutex);
          note = strf("checkpoint %s written: %s in %s", path.c_str(),
                      human_bytes(double(bytes)).c_str(), human_seconds(seconds).c_str());
        });
  }
  // The roofline for MFU: one trainer per node measures the node's sgemm
  // peak with the threads the node's trainers use together (capped at its
  // cores), while the others wait, so the measurement is not contended.
  double peak = 0;
  {
    const int first = w.layout.first_rank(Role::trainer);
    int on_node = 0, before_me = 0;
    for (int r = first; r < w.size; ++r)
      if (w.hosts[size_t(r)] == w.hosts[size_t(w.rank)]) {
        ++on_node;
        if (r < w.rank) ++before_me;
      }
    MPI_Barrier(w.role_comm);
    if (w.config.run.backend == "cuda") {  // every trainer has its own GPU
      peak = w.config.run.peak_gflops > 0 ? w.config.run.peak_gflops * 1e9
                                          : trainer.device_peak_flops();
    } else if (before_me == 0 && w.config.run.peak_gflops > 0) {
      peak = w.config.run.peak_gflops * 1e9;
    } else if (before_me == 0) {
      const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
      peak = measure_sgemm_peak(std::min(cores, on_node * trainer.model().threads()));
    }
    MPI_Barrier(w.role_comm);
  }
  proto::Report report;
  report.role = int(Role::trainer);
  BatchInbox inbox(w);
  while (true) {
    double wait = 0;
    proto::Batch b = inbox.receive(&wait);
    if (faults.crash_at(b.step)) {
      std::fprintf(stderr, "meshloom: fault injected: trainer rank %d crashes at step %lld\n",
                   w.rank, (long long)b.step);
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
    if (faults.hang_at(b.step)) {
      std::fprintf(stderr, "meshloom: fault injected: trainer rank %d hangs at step %lld\n", w.rank,
                   (long long)b.step);
      std::fflush(stderr);
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }

    const bool dump = b.step == args.dump_step;
    std::vector<float> before;
    if (dump) {
      const std::span<const float> params = trainer.params();
      before.assign(params.begin(), params.end());
    }
    if (faults.slow_at(b.step) > 0 && report.faults_fired == 0) report.faults_fired = 1;
    proto::Ack ack = trainer.step(b, faults.slow_at(b.step));
    ack.wait_seconds = wait;
    ack.peak_flops = peak;
    if (dump) {
      if (writer) writer->wait();  // one HDF5 user at a time: the library is not thread-safe
      write_step_dump(args.dump_file, w.role_comm, b, trainer.model().layout(), before,
                      trainer.full_grads(), ack.loss_sum);
      if (w.role_index == 0)
        ack.note = strf("step %lld dumped to %s", (long long)b.step, args.dump_file.c_str());
    }
    if (b.checkpoint) {
      ckpt::Checkpoint c = trainer.snapshot(b.step, b.ckpt_data);
      if (writer) writer->write(std::move(c));
    }
    if (b.last && writer) writer->wait();  // so that the last ack tells of the last checkpoint
    if (writer) {
      std::string failed = writer->error();
      if (!failed.empty()) ML_FAIL("checkpoint write failed: " + failed);
      std::lock_guard<std::mutex> lock(note_mutex);
      if (!note.empty()) ack.note += (ack.note.empty() ? "" : "; ") + note;
      note.clear();
    }
    send_ack(ack);
    for (const auto& mb : b.micro) report.tokens += int64_t(mb.tokens.size());
    report.busy_seconds += ack.step_seconds;  // the step, data wait excluded
    if (b.last) break;                        // the writer was waited for above
  }
  send_final_report(report, inbox.worker_pss_kib());
  return kExitOk;
}

}  // namespace

void add_train(CLI::App& app, Runner* run, int* argc, char*** argv) {
  static TrainArgs args;
  CLI::App* cmd = app.add_subcommand("train", "Train under mpirun/srun (one process per rank)");
  cmd->add_option("--config,-c", args.file, "Experiment YAML")->required();
  cmd->add_option("--set", args.sets, "Override a key: --set optim.lr=1e-3 (repeatable)");
  cmd->add_flag(
      "--dry-run", args.dry_run,
      "Check the config, the rank/role layout, the sources and the output folders; print the "
      "config and the layout, and exit");
  cmd->add_option("--resume", args.resume,
                  "Continue from a checkpoint: auto (the newest good one in the checkpoint "
                  "folder, or a fresh start) or a checkpoint file");
  cmd->add_option("--stop-at", args.stop_at,
                  "Stop cleanly before this step (as a preempted job would); checkpoints and "
                  "the schedule still follow run.steps");
  static std::vector<std::string> dump;
  cmd->add_option("--dump-step", dump,
                  "Write step N's batch, loss, parameters and gradients to HDF5 FILE")
      ->expected(2)
      ->type_name("N FILE");
  cmd->callback([cmd, run, argc, argv] {
    *run = [cmd, argc, argv] {
      if (!dump.empty()) {
        char* end = nullptr;
        args.dump_step = std::strtoll(dump[0].c_str(), &end, 10);
        if (*end != '\0' || args.dump_step < 0)
          throw Error("--dump-step: '" + dump[0] + "' is not a step number");
        args.dump_file = dump[1];
      }
      if (cmd->count("--stop-at") > 0 && args.stop_at < 0)
        throw Error(strf("--stop-at %lld: give a step, 0 or more", (long long)args.stop_at));
      mpi_start(argc, argv);
      World w;
      if (!world_from_config(args.file, args.sets, &w)) return mpi_finish(kExitBadInput);
      if (!preflight_on_root(w, [&] {
            check_host_memory(w);
            check_sources(w.config);
            check_outputs(w.config, args);
          }))
        return mpi_finish(kExitBadInput);
      if (args.dry_run) return mpi_finish(dry_run(w));
      // Rank 0 picks the checkpoint (skipping torn ones); every rank learns
      // which, and the step training continues at.
      int64_t first = 0;
      if (!run_on_root(
              MPI_COMM_WORLD,
              [&] {
                ResumePoint p = choose_checkpoint(w.config, args.resume);
                first = p.first_step;
                return p.path;
              },
              &args.resume_from)) {
        if (w.rank == 0) std::fprintf(stderr, "meshloom: error: %s\n", args.resume_from.c_str());
        return mpi_finish(kExitBadInput);
      }
      MPI_CHECK(MPI_Bcast(&first, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
      if (args.dump_step >= 0 && args.dump_step < first) {
        if (w.rank == 0)
          std::fprintf(stderr, "meshloom: error: --dump-step %lld: the run resumes at step %lld\n",
                       (long long)args.dump_step, (long long)first);
        return mpi_finish(kExitBadInput);
      }
      const int64_t end = args.end(w.config);
      if (first >= end) {  // a finished run requeued, or --stop-at at or before the start
        if (w.rank == 0)
          LOG_INFO("nothing to train: %s, and the run stops before step %lld (%s)",
                   args.resume_from.empty()
                       ? "a fresh run starts at step 0"
                       : strf("%s ends step %lld", args.resume_from.c_str(), (long long)first - 1)
                             .c_str(),
                   (long long)end, end < w.config.run.steps ? "--stop-at" : "run.steps");
        return mpi_finish(kExitOk);
      }
      start_finished();
      if (w.rank == 0) save_effective_config(w);
      start_watchdog(w.config.run.timeout);
      const int code = run_role(
          w, [&] { return run_lead(w, args); }, [&] { return run_trainer(w, args); });
      return mpi_finish(code);
    };
  });
}

}  // namespace meshloom::app
