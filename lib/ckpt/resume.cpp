#include "ckpt/resume.hpp"

#include <filesystem>
#include <fstream>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/checkpoint.hpp"
#include "config/diff.hpp"

namespace meshloom {

std::string checkpoint_dir(const config::Config& config) {
  return config.checkpoint.dir.empty() ? config.run.dir + "/checkpoints" : config.checkpoint.dir;
}

void reset_resume_attempts(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(dir + "/resume_attempts", ec);
}

ResumePoint choose_checkpoint(const config::Config& config, const std::string& resume) {
  if (resume.empty()) return {};
  const std::string dir = checkpoint_dir(config);
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
    check_resume_config(config::parse_config(meta.config, chosen + ":/meta/config"), config,
                        chosen);
  } catch (const config::ConfigError& e) {  // written by another version of meshloom
    LOG_WARN("cannot compare the config with %s's (%s): resuming without that check",
             chosen.c_str(), e.what());
  }
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
  // What picks the function and the samples; everything else (optimizer,
  // schedule, layout, folders, model.loss_chunk: memory, not the function)
  // may change between attempts.
  auto must_keep = [](const std::string& key) {
    if (key == "model.loss_chunk") return false;
    if (key.rfind("model.", 0) == 0 || key == "run.seed" || key == "data.sources.size") return true;
    if (key.rfind("data.sources[", 0) != 0) return false;
    const std::string leaf = key.substr(key.find("].") + 2);
    return leaf == "name" || leaf == "format" || leaf == "tokenizer";
  };
  std::string refused, listed;
  for (const config::KeyChange& c : config::changed_keys(saved, now)) {
    std::string& into = must_keep(c.key) ? refused : listed;
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

}  // namespace meshloom
