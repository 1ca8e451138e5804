#include "runtime/preflight.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/resume.hpp"
#include "parallel/mesh.hpp"
#include "parallel/shadows.hpp"
#include "plan/cost/host_memory.hpp"
#include "sources/doc_source.hpp"
#include "train/backend.hpp"

namespace meshloom::runtime {

namespace {

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
void check_host_memory(const parallel::World& w) {
  if (w.config.run.backend != config::Backend::cpu) return;
  std::map<std::string, int> per_host;
  for (int t = 0; t < w.layout.trainers; ++t)
    ++per_host[w.hosts[size_t(w.layout.first_rank(parallel::Role::trainer) + t)]];
  const auto busiest =
      std::max_element(per_host.begin(), per_host.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  const double node = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  const double need = double(plan::host_memory_floor(w.config, w.layout.trainers));
  if (busiest == per_host.end() || node <= 0 || need * busiest->second <= node) return;
  throw Error(strf(
      "a trainer needs at least %s of memory (fp32 weights and gradients, AdamW moments%s, the "
      "logits of %lld tokens and the LM head's gradient), so the %d trainers on %s need %s, more "
      "than the node's %s: lower model.vocab_size, model.d_model, model.n_layers or "
      "model.ffn_dim, set optim.zero1, or launch on more nodes",
      human_bytes(need).c_str(), w.config.optim.zero1 ? " (a ZeRO-1 shard)" : "",
      (long long)plan::host_logit_tokens(w.config), busiest->second, busiest->first.c_str(),
      human_bytes(need * busiest->second).c_str(), human_bytes(node).c_str()));
}

// What the run will write, and the step options against run.steps. A fresh
// run refuses another run's checkpoints here already, so that a dry run
// says so too (a resume's are checked once its checkpoint is read).
void check_outputs(const config::Config& c, const TrainRun& a) {
  if (a.resume.empty() && !a.overwrite) ckpt::clear_the_way(ckpt::checkpoint_dir(c), 0, false);
  require_writable_dir(c.run.dir, "run.dir");
  if (c.checkpoint.every > 0)
    require_writable_dir(ckpt::checkpoint_dir(c),
                         c.checkpoint.dir.empty()
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

}  // namespace

void check_tp_groups(const parallel::World& w) {
  const std::string why =
      parallel::groups_across_nodes(w.mesh, w.layout.first_rank(parallel::Role::trainer), w.hosts);
  if (!why.empty()) throw Error(why);
}

void check_train_start(const parallel::World& w, const TrainRun& run) {
  check_tp_groups(w);
  check_host_memory(w);
  sources::check_sources(w.config);
  check_outputs(w.config, run);
}

// Writes the effective config into the run folder, so a run can be repeated.
void save_effective_config(const parallel::World& w) {
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

int print_dry_run(const parallel::World& w) {
  if (w.rank != 0) return kExitOk;
  std::printf("# meshloom dry run: effective config\n%s", w.config_text.c_str());
  std::printf("# layout: %d ranks\n%s", w.size, w.layout.describe(w.hosts).c_str());
  if (w.layout.loaders > 0 && w.config.data.mode != config::DataMode::colocated)
    std::printf("# %s\n", parallel::loader_shadows(w.layout, w.hosts).describe().c_str());
  std::printf("# trainers: %s\n", w.mesh.describe().c_str());
  std::printf("# backend: %s", config::enum_name(w.config.run.backend));
#ifdef MESHLOOM_HAVE_CUDA
  std::printf(" (built with CUDA: %s)\n", train::cuda_backend_summary().c_str());
#else
  std::printf(" (CPU-only build)\n");
#endif
  // The folder may hold a run's config.yaml: a dry run leaves it as it is.
  std::printf(
      "# dry run OK: config valid, roles fit, sources open, outputs writable; nothing trained "
      "or written (a run saves its effective config to %s/config.yaml)\n",
      w.config.run.dir.c_str());
  return kExitOk;
}

}  // namespace meshloom::runtime
