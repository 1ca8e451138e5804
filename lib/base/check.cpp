#include "base/check.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace meshloom {
namespace {

int g_exit_code = 1;

void exiting_fatal_handler(const std::string&) { std::exit(g_exit_code); }

FatalHandler g_handler = exiting_fatal_handler;
// Atomic: mpi_start's start-up guard thread reads it while MPI_Init returns.
std::atomic<int> g_rank{-1};
std::string g_role;

}  // namespace

FatalHandler set_fatal_handler(FatalHandler handler) {
  FatalHandler old = g_handler;
  g_handler = handler ? handler : exiting_fatal_handler;
  return old;
}

FatalHandler fatal_handler() { return g_handler; }

void throwing_fatal_handler(const std::string& message) { throw Error(message); }

void set_process_identity(int world_rank, const std::string& role) {
  g_rank = world_rank;
  g_role = role;
}
int process_rank() { return g_rank; }
const std::string& process_role() { return g_role; }

const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("?");
    return std::string(buf);
  }();
  return name;
}

int fatal_exit_code() { return g_exit_code; }

void fail_waited(const char* file, int line, const std::string& message) {
  g_exit_code = 3;
  fail(file, line, "meshloom", message);
}

void print_error(const std::string& message, const std::string& rank) {
  const std::string where =
      rank.empty() ? "meshloom: error" : "meshloom: error [rank " + rank + "]";
  std::fprintf(stderr, "%s: %s\n", where.c_str(), message.c_str());
  std::fflush(stderr);
}

void fail(const char* file, int line, const char* lib, const std::string& message) {
  std::string where = "meshloom: error";
  if (g_rank >= 0) where += " [rank " + std::to_string(g_rank) + " " + host_name() + "]";
  std::string text = where + " " + file + ":" + std::to_string(line) + ": ";
  if (std::string(lib) != "meshloom") text += std::string(lib) + ": ";  // MPI, HDF5, CUDA, check
  text += message;
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  g_handler(text);
  std::abort();  // a handler that returns is a bug; never continue after a fatal error
}

}  // namespace meshloom
