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
LogLevel log_level();

void log_printf(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace meshloom

#define LOG_DEBUG(...) ::meshloom::log_printf(::meshloom::LogLevel::debug, __VA_ARGS__)
#define LOG_INFO(...) ::meshloom::log_printf(::meshloom::LogLevel::info, __VA_ARGS__)
#define LOG_WARN(...) ::meshloom::log_printf(::meshloom::LogLevel::warn, __VA_ARGS__)
#define LOG_ERROR(...) ::meshloom::log_printf(::meshloom::LogLevel::error, __VA_ARGS__)
