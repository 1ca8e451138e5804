// Small string helpers shared by the whole code base.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>
#include <vector>

namespace meshloom {

// printf into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrf(const char* fmt, va_list args);

std::vector<std::string> split(const std::string& text, char sep);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
bool starts_with(const std::string& text, const std::string& prefix);

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest to `word`, or "" when none is reasonably close.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// "1.5 GiB", "12.0 KiB"; "3.2 s", "41 ms".
std::string human_bytes(double bytes);
std::string human_seconds(double seconds);
// Sorted distinct indices as runs: {0, 1, 2, 5, 7, 8} -> "0-2,5,7-8".
std::string index_runs(const std::vector<int>& sorted);
// 1234567 -> "1,234,567".
std::string with_commas(unsigned long long value);
// The shortest text that reads back as the same double ("0.006", not
// "0.0060000000000000001").
std::string shortest_text(double value);

}  // namespace meshloom
