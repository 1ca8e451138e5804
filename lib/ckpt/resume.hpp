// Choosing the checkpoint to resume from (rank 0, before the roles start).
//
// --resume auto takes the newest checkpoint in the checkpoint folder that
// verifies (every dataset present, every checksum right), skipping torn ones
// with a warning; none means a fresh start. --resume PATH must verify.
// A job that keeps failing from the same checkpoint would restart forever
// under a scheduler's requeue: resume_attempts in the folder counts the
// resumes from one checkpoint, and past checkpoint.max_restarts the resume is
// refused with a clear message. Writing a newer checkpoint resets the count.
//
// A run never writes beside checkpoints it would not continue from: a fresh
// run refuses a folder holding checkpoints, and a resume from step S one
// holding checkpoints after S (they would be overwritten, or outrank the
// run's own when pruning). --overwrite moves them aside instead. Pruning
// only ever counts checkpoints of this run (written_by_this_run).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace meshloom::ckpt {

std::string checkpoint_dir(const config::Config& config);

struct ResumePoint {
  std::string path;         // "" for a fresh start
  int64_t first_step = 0;   // the step training continues at
  int64_t saved_steps = 0;  // the checkpoint's run.steps (0: a fresh start, or unknown)
};

// The checkpoint to load; throws meshloom::Error. A checkpoint is refused when
// the config differs from the one it was written with in what decides the
// model's function or which samples come next (model.*, run.seed, the
// sources' names, order, formats and tokenizers); other differences are
// listed in the log. Checkpoints in the way (above) are refused, or moved
// aside with `overwrite`.
ResumePoint choose_checkpoint(const config::Config& config, const std::string& resume,
                              bool overwrite);

// The checkpoints in `dir` a run starting at `first_step` would write over or
// be pruned for: throws meshloom::Error naming them, why and the ways out;
// with `overwrite`, moves them (and the resume-attempt count) into
// DIR/replaced-<UTC time>/ instead.
void clear_the_way(const std::string& dir, int64_t first_step, bool overwrite);

// Whether the checkpoint at `path` was written by a run of `config`: its
// config keeps every key a resume must keep. An unreadable file was not.
bool written_by_this_run(const std::string& path, const config::Config& config);

// The checkpoint's config against the current one: throws meshloom::Error
// naming the keys a resume must keep; logs the others. Pure but for the log.
void check_resume_config(const config::Config& saved, const config::Config& now,
                         const std::string& checkpoint);

// Forgets the resume attempts (after a newer checkpoint was written).
void reset_resume_attempts(const std::string& dir);

}  // namespace meshloom::ckpt
