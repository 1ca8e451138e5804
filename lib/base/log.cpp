#include "base/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom {
namespace {
LogLevel g_level = LogLevel::info;
bool g_all_ranks = false;
std::mutex g_mutex;
}  // namespace

bool parse_log_level(const std::string& text, LogLevel* out) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; ++i) {
    if (text == names[i]) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void set_log_level(LogLevel level) { g_level = level; }
void set_log_all_ranks(bool all) { g_all_ranks = all; }

void log_printf(LogLevel level, const char* fmt, ...) {
  if (level < g_level) return;
  const int rank = process_rank();
  if (level < LogLevel::warn && !g_all_ranks && rank > 0) return;
  va_list args;
  va_start(args, fmt);
  std::string body = vstrf(fmt, args);
  va_end(args);
  std::string prefix;
  if (rank >= 0) prefix = "[r" + std::to_string(rank) + " " + process_role() + "] ";
  if (level == LogLevel::warn) prefix += "warn: ";
  if (level == LogLevel::error) prefix += "error: ";
  if (level == LogLevel::debug) prefix += "debug: ";
  std::lock_guard<std::mutex> lock(g_mutex);
  FILE* out = level >= LogLevel::warn ? stderr : stdout;
  std::fprintf(out, "%s%s\n", prefix.c_str(), body.c_str());
  std::fflush(out);
}

Progress::Progress(int fd) {
  const char* env = std::getenv("MESHLOOM_PROGRESS");
  const std::string choice = env ? env : "";
  if (choice == "redraw" || choice == "lines")
    redraw_ = choice == "redraw";
  else if (choice.empty())
    redraw_ = ::isatty(fd) == 1 && !std::getenv("OMPI_COMM_WORLD_SIZE");
  else
    throw Error("MESHLOOM_PROGRESS=" + choice + ": expected redraw or lines");
  interval_ = redraw_ ? 0.5 : 30.0;
}

bool Progress::due(double seconds, bool last) {
  if (!last && seconds - last_ < interval_) return false;
  last_ = seconds;
  return true;
}

}  // namespace meshloom
