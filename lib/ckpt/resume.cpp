#include "ckpt/resume.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/checkpoint.hpp"
#include "config/diff.hpp"

namespace meshloom::ckpt {

std::string checkpoint_dir(const config::Config& config) {
  return config.checkpoint.dir.empty() ? config.run.dir + "/checkpoints" : config.checkpoint.dir;
}

void reset_resume_attempts(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(dir + "/resume_attempts", ec);
}

namespace {

namespace fs = std::filesystem;

// The keys that decide the model's function and which samples come next;
// everything else (optimizer, schedule, layout, folders, model.loss_chunk:
// memory, not the function) may change between attempts.
bool resume_must_keep(const std::string& key) {
  if (key == "model.loss_chunk") return false;
  if (key.rfind("model.", 0) == 0 || key == "run.seed" || key == "data.sources.size") return true;
  if (key.rfind("data.sources[", 0) != 0) return false;
  const std::string leaf = key.substr(key.find("].") + 2);
  return leaf == "name" || leaf == "format" || leaf == "tokenizer";
}

std::string file_names(const std::vector<std::string>& files) {
  auto name = [](const std::string& f) { return fs::path(f).filename().string(); };
  if (files.size() == 1) return name(files[0]);
  if (files.size() == 2) return name(files[0]) + " and " + name(files[1]);
  return strf("%zu files, %s to %s", files.size(), name(files.front()).c_str(),
              name(files.back()).c_str());
}

// A new folder inside `dir` for checkpoints moved aside: replaced-<UTC time>.
std::string aside_folder(const std::string& dir) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  std::string folder = dir + "/replaced-" + stamp;
  for (int n = 2; fs::exists(folder); ++n) folder = dir + "/replaced-" + stamp + strf("-%d", n);
  return folder;
}

// --overwrite: the files and the resume-attempt count go into a new folder
// beside them (nothing is deleted).
void move_aside(const std::string& dir, const std::vector<std::string>& files) {
  const std::string folder = aside_folder(dir);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw Error("--overwrite: cannot create " + folder + ": " + ec.message());
  std::vector<std::string> moving = files;
  if (fs::exists(dir + "/resume_attempts")) moving.push_back(dir + "/resume_attempts");
  for (const std::string& f : moving) {
    fs::rename(f, folder + "/" + fs::path(f).filename().string(), ec);
    if (ec) throw Error("--overwrite: cannot move " + f + " into " + folder + ": " + ec.message());
  }
  LOG_INFO("--overwrite: moved aside into %s: %s", folder.c_str(), file_names(files).c_str());
}

// Checkpoint files in `dir` of `first_step` or later, oldest first.
std::vector<std::string> checkpoints_from(const std::string& dir, int64_t first_step) {
  std::vector<std::string> out;
  for (const std::string& path : ckpt::list_checkpoints(dir))
    if (ckpt::checkpoint_step(path) >= first_step) out.insert(out.begin(), path);
  return out;
}

// The refusal: what is in the way, why, and the ways out.
Error checkpoints_in_the_way(const std::string& dir, const std::vector<std::string>& files,
                             int64_t first_step) {
  const bool fresh = first_step == 0;
  return Error(strf(
      "%s holds checkpoints of %s (%s): %s would write its own beside them, and pruning or a "
      "later --resume auto could keep theirs instead. %s, give this run another run.dir (or "
      "checkpoint.dir), or pass --overwrite to move them aside into %s/replaced-<time>/",
      dir.c_str(), fresh ? "an earlier run" : "later steps", file_names(files).c_str(),
      fresh ? "a fresh run" : strf("a run resuming at step %lld", (long long)first_step).c_str(),
      fresh ? "Continue that run with --resume auto" : "Resume from the newest with --resume auto",
      dir.c_str()));
}

}  // namespace

void clear_the_way(const std::string& dir, int64_t first_step, bool overwrite) {
  const std::vector<std::string> files = checkpoints_from(dir, first_step);
  if (files.empty()) return;
  if (!overwrite) throw checkpoints_in_the_way(dir, files, first_step);
  move_aside(dir, files);
}

bool written_by_this_run(const std::string& path, const config::Config& config) {
  try {
    const config::Config saved =
        config::parse_config(ckpt::read_checkpoint_config(path), path + ":/meta/config");
    for (const config::KeyChange& c : config::changed_keys(saved, config))
      if (resume_must_keep(c.key)) return false;
    return true;
  } catch (const std::exception&) {  // torn, or written by another version: not ours to prune
    return false;
  }
}

ResumePoint choose_checkpoint(const config::Config& config, const std::string& resume,
                              bool overwrite) {
  const std::string dir = checkpoint_dir(config);
  if (resume.empty()) {
    clear_the_way(dir, 0, overwrite);
    return {};
  }
  // Reading a checkpoint verifies it (every checksum): each candidate is read once.
  ckpt::Checkpoint meta;
  auto read = [&meta](const std::string& path) -> std::string {
    try {
      meta = ckpt::read_checkpoint(path, /*only_meta=*/true);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  };
  std::string chosen;
  if (resume != "auto") {
    std::string problem = read(resume);
    if (!problem.empty()) throw Error("--resume " + resume + ": " + problem);
    chosen = resume;
  } else {
    for (const auto& path : ckpt::list_checkpoints(dir)) {
      std::string problem = read(path);
      if (problem.empty()) {
        chosen = path;
        break;
      }
      LOG_WARN("skipping a bad checkpoint: %s (%s)", path.c_str(), problem.c_str());
    }
    if (chosen.empty()) {
      LOG_INFO("--resume auto: no good checkpoint in %s, starting from step 0", dir.c_str());
      return {};
    }
  }
  ResumePoint point{chosen, meta.step + 1};
  try {
    const config::Config saved = config::parse_config(meta.config, chosen + ":/meta/config");
    check_resume_config(saved, config, chosen);
    point.saved_steps = saved.run.steps;
  } catch (const config::ConfigError& e) {  // written by another version of meshloom
    LOG_WARN("cannot compare the config with %s's (%s): resuming without that check",
             chosen.c_str(), e.what());
  }
  // --resume auto took the newest good checkpoint: what lies after it is torn.
  if (resume != "auto") clear_the_way(dir, point.first_step, overwrite);
  if (point.first_step >= config.run.steps) return point;  // not an attempt: the run is done
  // Count resumes from this checkpoint.
  const std::string counter = dir + "/resume_attempts";
  std::string last;
  int64_t count = 0;
  {
    std::ifstream in(counter);
    in >> last >> count;
  }
  count = last == chosen ? count + 1 : 1;
  if (count > config.checkpoint.max_restarts)
    throw Error(
        strf("the job has already resumed %lld times from %s without getting past it; "
             "stopping instead of restarting forever (fix the cause, then delete %s)",
             (long long)(count - 1), chosen.c_str(), counter.c_str()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream(counter) << chosen << " " << count << "\n";
  LOG_INFO("resuming from %s (attempt %lld of %lld)", chosen.c_str(), (long long)count,
           (long long)config.checkpoint.max_restarts);
  return point;
}

void check_resume_config(const config::Config& saved, const config::Config& now,
                         const std::string& checkpoint) {
  std::string refused, listed;
  for (const config::KeyChange& c : config::changed_keys(saved, now)) {
    std::string& into = resume_must_keep(c.key) ? refused : listed;
    into += strf("%s%s %s -> %s", into.empty() ? "" : ", ", c.key.c_str(), c.before.c_str(),
                 c.after.c_str());
  }
  if (!refused.empty())
    throw Error(checkpoint + " was written by a run with another config: " + refused +
                ". A resume must keep the model, run.seed and the sources' names, order, "
                "formats and tokenizers (they decide the function and which samples come "
                "next); start a new run (another run.dir or checkpoint.dir) to change them");
  if (!listed.empty())
    LOG_INFO("resuming with keys changed since %s: %s", checkpoint.c_str(), listed.c_str());
}

}  // namespace meshloom::ckpt
