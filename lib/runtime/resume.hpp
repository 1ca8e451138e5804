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

#include <string>

#include "config/config.hpp"

namespace meshloom {

std::string checkpoint_dir(const config::Config& config);

// The checkpoint to load ("" for a fresh start); throws meshloom::Error.
std::string choose_checkpoint(const config::Config& config, const std::string& resume);

// Forgets the resume attempts (after a newer checkpoint was written).
void reset_resume_attempts(const std::string& dir);

}  // namespace meshloom
