#include "runtime/resume.hpp"

#include <filesystem>
#include <fstream>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "ckpt/checkpoint.hpp"

namespace meshloom {

std::string checkpoint_dir(const config::Config& config) {
  return config.checkpoint.dir.empty() ? config.run.dir + "/checkpoints" : config.checkpoint.dir;
}

void reset_resume_attempts(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(dir + "/resume_attempts", ec);
}

std::string choose_checkpoint(const config::Config& config, const std::string& resume) {
  if (resume.empty()) return "";
  const std::string dir = checkpoint_dir(config);
  std::string chosen;
  if (resume != "auto") {
    std::string problem = ckpt::verify_checkpoint(resume);
    if (!problem.empty()) throw Error("--resume " + resume + ": " + problem);
    chosen = resume;
  } else {
    for (const auto& path : ckpt::list_checkpoints(dir)) {
      std::string problem = ckpt::verify_checkpoint(path);
      if (problem.empty()) {
        chosen = path;
        break;
      }
      LOG_WARN("skipping a bad checkpoint: %s (%s)", path.c_str(), problem.c_str());
    }
    if (chosen.empty()) {
      LOG_INFO("--resume auto: no good checkpoint in %s, starting from step 0", dir.c_str());
      return "";
    }
  }
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
  return chosen;
}

}  // namespace meshloom
