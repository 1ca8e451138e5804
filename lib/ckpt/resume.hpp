// Choosing the checkpoint to resume from (rank 0, before the roles start).
//
// --resume auto takes the newest checkpoint in the checkpoint folder that
// verifies (every dataset present, every checksum right), skipping torn ones
// with a warning; none means a fresh start. --resume PATH must verify.
// A job that keeps failing from the same checkpoint would restart forever
// under a scheduler's requeue: resume_attempts in the folder counts the
// resumes from one checkpoint, and past checkpoint.max_restarts the resume is
// refused with a clear message. Writing a newer checkpoint resets the count.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace meshloom {

std::string checkpoint_dir(const config::Config& config);

struct ResumePoint {
  std::string path;        // "" for a fresh start
  int64_t first_step = 0;  // the step training continues at
};

// The checkpoint to load; throws meshloom::Error. A checkpoint is refused when
// the config differs from the one it was written with in what decides the
// model's function or which samples come next (model.*, run.seed, the
// sources' names, order, formats and tokenizers); other differences are
// listed in the log.
ResumePoint choose_checkpoint(const config::Config& config, const std::string& resume);

// The checkpoint's config against the current one: throws meshloom::Error
// naming the keys a resume must keep; logs the others. Pure but for the log.
void check_resume_config(const config::Config& saved, const config::Config& now,
                         const std::string& checkpoint);

// Forgets the resume attempts (after a newer checkpoint was written).
void reset_resume_attempts(const std::string& dir);

}  // namespace meshloom
