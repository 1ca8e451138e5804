#include "fuzz/harness.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/log.hpp"

namespace meshloom::fuzz {

namespace fs = std::filesystem;

namespace {

// A process that libFuzzer ends on a finding or a timeout (_Exit) never runs
// its atexit handlers: its folder stays. Folders are named after their
// process, so the next harness removes those whose process is gone.
void remove_orphans(const std::string& base) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "meshloom-fuzz-";
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::atol(name.c_str() + prefix.size());
    if (pid > 0 && pid != long(::getpid()) && !fs::exists("/proc/" + std::to_string(pid)))
      fs::remove_all(entry.path(), ec);
  }
}

std::string make_scratch_dir() {
  std::string base = "/tmp";
  if (fs::is_directory("/dev/shm"))
    base = "/dev/shm";
  else if (const char* t = std::getenv("TMPDIR"); t && *t)
    base = t;
  remove_orphans(base);
  std::string templ = base + "/meshloom-fuzz-" + std::to_string(::getpid()) + "-XXXXXX";
  if (!::mkdtemp(templ.data())) finding("cannot create a scratch folder under " + base);
  return templ;
}

void remove_scratch_dir() {
  std::error_code ec;
  fs::remove_all(scratch_dir(), ec);
}

}  // namespace

void init() {
  static const bool once = [] {
    set_fatal_handler(throwing_fatal_handler);
    set_log_level(LogLevel::error);
    scratch_dir();
    std::atexit(remove_scratch_dir);
    return true;
  }();
  (void)once;
}

const std::string& scratch_dir() {
  static const std::string dir = make_scratch_dir();
  return dir;
}

std::string write_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) finding("cannot write " + path);
  return path;
}

std::pair<std::string_view, std::string_view> split_at_nul(std::string_view data) {
  const size_t nul = data.find('\0');
  if (nul == std::string_view::npos) return {data, {}};
  return {data.substr(0, nul), data.substr(nul + 1)};
}

void finding(const std::string& what) {
  std::fprintf(stderr, "\nmeshloom fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void expect_names(const Error& e, std::initializer_list<std::string_view> names) {
  const std::string_view msg = e.what();
  for (std::string_view n : names)
    if (!n.empty() && msg.find(n) != std::string_view::npos) {
      // The regression tests read which check an input reached.
      if (std::getenv("MESHLOOM_FUZZ_SHOW_ERRORS"))
        std::fprintf(stderr, "fuzz: expected error: %s\n", e.what());
      return;
    }
  std::string list;
  for (std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  finding("an error that names none of [" + list + "]: " + std::string(msg));
}

}  // namespace meshloom::fuzz
