// What every fuzz harness shares. A harness is one LLVMFuzzerTestOneInput:
// linked with libFuzzer (clang, MESHLOOM_FUZZ=ON) it is a fuzzer; linked with
// replay_main.cpp (any compiler) it replays fuzz/corpus and fuzz/regressions
// as a plain unit test, so CI exercises every input without clang.
//
// The rule a harness checks: bad input is one meshloom::Error whose message
// names the file, key, offset or peer rank. Anything else (a crash, a
// sanitizer report, a leak, a timeout, an allocation the input cannot
// justify, another exception, an Error that names nothing) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "base/check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace meshloom::fuzz {

// Once per process (cheap after the first call): errors throw meshloom::Error
// (the tests' handler) instead of exiting, and logging says only errors.
void init();

// This process's own folder for the files a harness writes (under /dev/shm
// when it exists, else $TMPDIR or /tmp); removed at exit, or by a later
// harness when the process was ended without its exit handlers.
const std::string& scratch_dir();

// Writes `bytes` to scratch_dir()/name; returns the path.
std::string write_file(const std::string& name, std::string_view bytes);

// The bytes before the first NUL and those after it (empty if none).
std::pair<std::string_view, std::string_view> split_at_nul(std::string_view data);

// The input as a string_view.
inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A finding: prints `what` and aborts (libFuzzer saves the input).
[[noreturn]] void finding(const std::string& what);

// An expected error must name one of `names` (a file, a key, "rank N");
// otherwise it is a finding: the user could not tell what was wrong where.
void expect_names(const Error& e, std::initializer_list<std::string_view> names);

}  // namespace meshloom::fuzz
