// Rank-prefixed logging with levels.
//
// Lines look like "[r0 constructor] message" (info) or "[r3 trainer] warn: ...".
// By default only world rank 0 prints; log.all_ranks turns every rank on.
// Errors and warnings always print, from every rank.
#pragma once

#include <cstdarg>
#include <string>

namespace meshloom {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

// Parses "debug|info|warn|error"; returns false on anything else.
bool parse_log_level(const std::string& text, LogLevel* out);

void set_log_level(LogLevel level);
void set_log_all_ranks(bool all);

void log_printf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// How long work shows its progress on a stream: `redraw` rewrites one line in
// place (\r) for a person at a terminal, about every 0.5 s; `lines` prints a
// plain line about every 30 s, for log files. Open MPI's mpirun gives its
// ranks a pseudo-terminal even when its own output goes to a file (a Slurm
// log), so ranks it launched print lines. MESHLOOM_PROGRESS=redraw|lines
// overrides; any other value is an error.
class Progress {
 public:
  explicit Progress(int fd);
  bool redraw() const { return redraw_; }
  // Whether an update is due at `seconds` (always for the last one); an update
  // that is due is counted as shown.
  bool due(double seconds, bool last);
  // "\r\033[K" when redrawing, else "": put before every update.
  const char* begin() const { return redraw_ ? "\r\033[K" : ""; }
  // "" when redrawing (the next update overwrites the line), else "\n".
  const char* end() const { return redraw_ ? "" : "\n"; }

 private:
  bool redraw_ = false;
  double interval_ = 30.0, last_ = 0;
};

}  // namespace meshloom

#define LOG_DEBUG(...) ::meshloom::log_printf(::meshloom::LogLevel::debug, __VA_ARGS__)
#define LOG_INFO(...) ::meshloom::log_printf(::meshloom::LogLevel::info, __VA_ARGS__)
#define LOG_WARN(...) ::meshloom::log_printf(::meshloom::LogLevel::warn, __VA_ARGS__)
#define LOG_ERROR(...) ::meshloom::log_printf(::meshloom::LogLevel::error, __VA_ARGS__)
