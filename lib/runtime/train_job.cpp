#include "runtime/train_job.hpp"

#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/resume.hpp"
#include "comm/mpi_check.hpp"
#include "comm/mpi_util.hpp"
#include "dataplane/eval_set.hpp"
#include "parallel/mesh.hpp"
#include "parallel/nodes.hpp"
#include "parallel/watchdog.hpp"
#include "parallel/world.hpp"
#include "roles/faults.hpp"
#include "roles/lead.hpp"
#include "runtime/checkpoint_writer.hpp"
#include "runtime/gemm_peak.hpp"
#include "runtime/metrics.hpp"
#include "runtime/model_init.hpp"
#include "runtime/preflight.hpp"
#include "runtime/run_role.hpp"
#include "runtime/step_dump.hpp"
#include "runtime/step_loops.hpp"
#include "runtime/trainer_wire.hpp"
#include "train/optimizer.hpp"
#include "train/trainer.hpp"

namespace meshloom::runtime {

namespace {

// The lead continues from a checkpoint: its data state, and the document
// lengths known then (in the checkpoint, or in its base when it holds a delta).
void resume_lead(roles::Lead* lead, const std::string& path) {
  ckpt::Checkpoint c = ckpt::read_checkpoint(path, /*only_meta=*/true);
  std::vector<ckpt::SourceLengths> lengths;
  if (!c.lengths_full) {
    // A delta: the full lengths are in its base (a cache: lose it, lose nothing).
    const std::string base =
        std::filesystem::path(path).parent_path().string() + "/" + c.lengths_base;
    try {
      lengths = ckpt::read_checkpoint(base, true).lengths;
    } catch (const Error& e) {
      LOG_WARN("document lengths of %s not restored (%s): loaders will recompute them",
               base.c_str(), e.what());
    }
  }
  lengths.insert(lengths.end(), c.lengths.begin(), c.lengths.end());
  lead->resume(c, lengths);
}

int run_train_lead(const parallel::World& w, const TrainRun& run, const std::string& resume_from) {
  LOG_INFO("layout: %d ranks: %d constructor(s), %d loader(s), %d trainer(s), data %s, backend %s",
           w.size, w.layout.constructors, w.layout.loaders, w.layout.trainers,
           config::enum_name(w.config.data.mode), config::enum_name(w.config.run.backend));
  LOG_INFO("layout: %s", w.mesh.describe().c_str());
  for (const std::string& line : parallel::describe_nodes(w.layout, w.mesh, w.hosts))
    LOG_INFO("layout: %s", line.c_str());
  roles::Lead lead(w, roles::Lead::Evaluation::after_steps);
  if (!resume_from.empty()) resume_lead(&lead, resume_from);
  const int64_t end = run.end(w.config);
  TrainMetrics metrics(w, lead, lead.first_step(), end);
  metrics.finish(
      lead_steps(lead, lead.first_step(), end,
                 [&](int64_t s, std::vector<wire::Ack> acks) { metrics.step(s, acks); }));
  return kExitOk;
}

// A resume that changes run.steps moves the learning rate mid-run: say so.
void warn_schedule_change(const config::Config& config, const ckpt::ResumePoint& p) {
  const std::string change =
      train::schedule_change(config.optim, p.first_step, p.saved_steps, config.run.steps);
  if (!change.empty()) LOG_WARN("%s", change.c_str());
}

// The roofline for MFU, FLOP/s of this trainer's share: on the CPU one trainer
// per node holds the node's peak, measured at start (node_sgemm_peak); a GPU
// trainer has its own device's peak.
double trainer_peak_flops(const parallel::World& w, train::Trainer& trainer, double node_peak) {
  if (w.config.run.backend != config::Backend::cuda) return node_peak;
  const double configured = w.config.run.peak_gflops * 1e9;
  MPI_CHECK(MPI_Barrier(w.role_comm));
  const double peak = configured > 0 ? configured : trainer.device_peak_flops();
  MPI_CHECK(MPI_Barrier(w.role_comm));
  return peak;
}

// Continues from a checkpoint: each trainer reads its own part of a format 2
// file; a format 1 file is read whole by every trainer.
void load_checkpoint(train::Trainer& trainer, const std::string& path) {
  const ckpt::Checkpoint meta = ckpt::read_checkpoint_meta(path);
  if (meta.format == 2)
    trainer.load_state(path, meta);
  else
    trainer.load(ckpt::read_checkpoint(path));
}

// Drills (faults.inject): a real death, or a trainer that stops taking part
// (the watchdog ends the job).
void inject_trainer_fault(const roles::InjectedFaults& faults, int rank, int64_t step) {
  const char* what = faults.crash_at(step) ? "crashes" : faults.hang_at(step) ? "hangs" : nullptr;
  if (!what) return;
  std::fprintf(stderr, "meshloom: fault injected: trainer rank %d %s at step %lld\n", rank, what,
               (long long)step);
  std::fflush(stderr);
  if (faults.crash_at(step)) std::raise(SIGKILL);
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

int run_train_trainer(const parallel::World& w, const TrainRun& run, const std::string& resume_from,
                      double node_peak) {
  const parallel::StepComms comms(w.role_comm, w.mesh);
  train::Trainer trainer(w, comms);
  const roles::InjectedFaults faults(w.config, w.rank);
  if (!resume_from.empty())
    load_checkpoint(trainer, resume_from);
  else
    load_init_weights(trainer, w.config);
  CheckpointWriter writer(w, comms.comm(parallel::Axis::trainers), faults);
  const double peak = trainer_peak_flops(w, trainer, node_peak);
  int faults_fired = 0;
  const std::vector<int64_t> edges = dataplane::position_edges(w.config);
  trainer_steps(
      w,
      [&](const wire::Batch& b, double wait) {
        inject_trainer_fault(faults, w.rank, b.step);
        const bool dump = b.step == run.dump_step;
        std::vector<float> before;
        if (dump) before.assign(trainer.params().begin(), trainer.params().end());
        if (faults.slow_at(b.step) > 0) faults_fired = 1;
        wire::Ack ack = to_ack(trainer.step(step_input(b), faults.slow_at(b.step)));
        ack.wait_seconds = wait;
        ack.peak_flops = peak;
        if (dump) {
          writer.wait();  // one HDF5 user at a time
          // Unsharded, whatever parallel.tp: the whole model on trainer 0.
          write_step_dump(run.dump_file, w.role_comm, b, w.mesh.member_of(w.role_index) == 0,
                          trainer.whole_layout(), trainer.whole(before),
                          trainer.whole(trainer.full_grads()), ack.loss_sum);
          if (w.role_index == 0)  // after the trainer's own note (its backend, at step 0)
            ack.note += std::string(ack.note.empty() ? "" : "; ") +
                        strf("step %lld dumped to %s", (long long)b.step, run.dump_file.c_str());
        }
        for (const wire::Batch& e : b.eval)
          add_eval(trainer.evaluate(step_input(e), edges), &ack.eval);
        if (b.checkpoint) writer.save(trainer, b.step, b.ckpt_data);
        if (b.last) writer.wait();
        writer.add_note(&ack.note);
        return ack;
      },
      [&](wire::Report* report) {
        report->faults_fired = faults_fired;
        writer.add_totals(report);
      });
  return kExitOk;
}

}  // namespace

int run_train(const parallel::World& w, const TrainRun& run) {
  // Rank 0 picks the checkpoint; every rank learns which, and the first step.
  int64_t first = 0;
  std::string resume_from;
  if (!comm::run_on_root(
          MPI_COMM_WORLD,
          [&] {
            ckpt::ResumePoint p = ckpt::choose_checkpoint(w.config, run.resume, run.overwrite);
            first = p.first_step;
            warn_schedule_change(w.config, p);
            return p.path;
          },
          &resume_from)) {
    if (w.rank == 0) print_error(resume_from);
    return kExitBadInput;
  }
  MPI_CHECK(MPI_Bcast(&first, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  if (run.dump_step >= 0 && run.dump_step < first) {
    if (w.rank == 0)
      print_error(strf("--dump-step %lld: the run resumes at step %lld", (long long)run.dump_step,
                       (long long)first));
    return kExitBadInput;
  }
  const int64_t end = run.end(w.config);
  if (first >= end) {  // a finished run requeued, or --stop-at at or before the start
    if (w.rank == 0)
      LOG_INFO("nothing to train: %s, and the run stops before step %lld (%s)",
               resume_from.empty()
                   ? "a fresh run starts at step 0"
                   : strf("%s ends step %lld", resume_from.c_str(), (long long)first - 1).c_str(),
               (long long)end, end < w.config.run.steps ? "--stop-at" : "run.steps");
    return kExitOk;
  }
  // Before any role works: loaders tokenizing would slow the measurement.
  const double node_peak = node_sgemm_peak(w);
  parallel::start_finished();
  if (w.rank == 0) save_effective_config(w);
  parallel::start_watchdog(w.config.run.timeout);
  return run_role(
      w, [&] { return run_train_lead(w, run, resume_from); },
      [&] { return run_train_trainer(w, run, resume_from, node_peak); });
}

}  // namespace meshloom::runtime
