#include "base/strings.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace meshloom {

std::string vstrf(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  return out;
}

std::string strf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vstrf(fmt, args);
  va_end(args);
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Close enough: at most a third of the word's letters differ (and at least 2 allowed).
  size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? strf("%.0f B", bytes) : strf("%.1f %s", bytes, units[u]);
}

std::string human_seconds(double seconds) {
  if (seconds < 1e-3) return strf("%.0f us", seconds * 1e6);
  if (seconds < 1.0) return strf("%.0f ms", seconds * 1e3);
  if (seconds < 120.0) return strf("%.1f s", seconds);
  if (seconds < 7200.0) return strf("%dm%02ds", int(seconds) / 60, int(seconds) % 60);
  return strf("%dh%02dm", int(seconds) / 3600, (int(seconds) / 60) % 60);
}

std::string shortest_text(double value) {
  char fixed[400], sci[32];  // fixed notation of the largest double fits
  const auto f = std::to_chars(fixed, fixed + sizeof(fixed), value, std::chars_format::fixed);
  const auto e = std::to_chars(sci, sci + sizeof(sci), value, std::chars_format::scientific);
  // Plain decimals unless much longer: 0.0006 (not 6e-04), but 1e-08.
  if (f.ec == std::errc() && f.ptr - fixed <= e.ptr - sci + 2) return std::string(fixed, f.ptr);
  return std::string(sci, e.ptr);
}

std::string with_commas(unsigned long long value) {
  const std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string index_runs(const std::vector<int>& sorted) {
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? strf("%d", sorted[i]) : strf("%d-%d", sorted[i], sorted[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace meshloom
