#include "runtime/eval_job.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "dataplane/eval_set.hpp"
#include "parallel/watchdog.hpp"
#include "roles/lead.hpp"
#include "runtime/eval_metrics.hpp"
#include "runtime/model_init.hpp"
#include "runtime/passkey_eval.hpp"
#include "runtime/run_role.hpp"
#include "runtime/step_loops.hpp"
#include "runtime/trainer_wire.hpp"
#include "sources/doc_source.hpp"
#include "train/trainer.hpp"

namespace meshloom::runtime {

namespace {

using Json = nlohmann::ordered_json;

void write_report(const std::string& path, const Json& report) {
  std::ofstream out(path);
  out << report.dump(2) << "\n";
  if (!out) throw Error("--report: cannot write " + path);
  LOG_INFO("report written to %s", path.c_str());
}

int run_eval_lead(const parallel::World& w, const EvalRun& run) {
  LOG_INFO("layout: %d ranks: %d constructor(s), %d loader(s), %d trainer(s); %s", w.size,
           w.layout.constructors, w.layout.loaders, w.layout.trainers, w.mesh.describe().c_str());
  roles::Lead lead(w, roles::Lead::Evaluation::only);
  PasskeyEval passkey(w, *lead.eval_set());
  const size_t held_out = lead.eval_set()->batches.size();
  const size_t batches = held_out + passkey.batches();
  EvalFigures all;
  Progress progress(STDOUT_FILENO);
  const auto start = Clock::now();
  int64_t done = 0;
  auto hand_on_completed = [&] {
    for (; done < lead.steps_completed(); ++done) {
      const std::vector<wire::Ack> acks = lead.take_acks(done);
      if (size_t(done) < held_out) {
        const std::optional<EvalFigures> f = eval_figures(acks);
        ML_CHECK(f.has_value(), "an evaluation ack without its held-out batch");
        all.add(*f);
        all.seconds += f->seconds;  // one batch after the other
      } else {
        passkey.take(size_t(done) - held_out, acks);
      }
      const double t = seconds_since(start), frac = double(done + 1) / double(batches);
      if (progress.due(t, done + 1 == int64_t(batches)))
        std::printf("%s[eval] batch %lld/%zu  held-out loss %.4f  %s%s", progress.begin(),
                    (long long)done + 1, batches, all.loss(),
                    frac < 1 ? ("ETA " + human_seconds(t / frac * (1 - frac))).c_str() : "done",
                    progress.end());
      std::fflush(stdout);
    }
  };
  for (size_t b = 0; b < batches; ++b) {
    if (b < held_out)
      lead.dispatch_eval(b, b + 1 == batches);
    else
      passkey.dispatch(lead, b - held_out, b + 1 == batches);
    hand_on_completed();
  }
  lead.drain_acks();
  hand_on_completed();
  lead.stop();
  if (progress.redraw()) std::printf("\n");
  LOG_INFO("%s", describe_eval(-1, all, w.config).c_str());
  const std::vector<int64_t> edges = dataplane::position_edges(w.config);
  {
    EvalPositionsCsv csv(run.out_dir + "/eval_positions.csv", false, edges, w.config.data.seq_len);
    csv.add(0, all);
  }
  LOG_INFO("loss by position: %s/eval_positions.csv", run.out_dir.c_str());
  Json report = eval_json(all, w.config, edges);
  report["model"] = w.config.model.init;
  report["seq_len"] = w.config.data.seq_len;
  if (passkey.batches() > 0) report["passkey"] = passkey.finish(run.out_dir);
  if (!run.report.empty()) write_report(run.report, report);
  return kExitOk;
}

int run_eval_trainer(const parallel::World& w) {
  const parallel::StepComms comms(w.role_comm, w.mesh);
  train::Trainer trainer(w, comms);
  load_init_weights(trainer, w.config);
  const std::vector<int64_t> edges = dataplane::position_edges(w.config);
  trainer_steps(w, [&](const wire::Batch& b, double wait) {
    wire::Ack ack;
    ack.step = b.step;
    ack.trainer = trainer.index();
    ack.wait_seconds = wait;
    for (const wire::Batch& e : b.eval) add_eval(trainer.evaluate(step_input(e), edges), &ack.eval);
    return ack;
  });
  return kExitOk;
}

}  // namespace

void check_eval_start(const parallel::World& w, const EvalRun& run) {
  if (w.config.model.init.empty())
    throw Error("meshloom eval needs weights: --checkpoint FILE.h5 or --hf DIR (model.init)");
  if (w.config.eval.holdout <= 0)
    throw Error(
        "meshloom eval needs a held-out split: set eval.holdout (the share of each "
        "source's documents held out in training, say 0.01)");
  sources::check_sources(w.config);
  std::error_code ec;
  std::filesystem::create_directories(run.out_dir, ec);
  if (ec) throw Error("cannot create the output folder " + run.out_dir + ": " + ec.message());
}

int run_eval(const parallel::World& w, const EvalRun& run) {
  parallel::start_finished();
  parallel::start_watchdog(w.config.run.timeout);
  return run_role(
      w, [&] { return run_eval_lead(w, run); }, [&] { return run_eval_trainer(w); });
}

}  // namespace meshloom::runtime
