#include "base/check.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace meshloom {
namespace {

int g_exit_code = kExitFatal;

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

void throwing_fatal_handler(const std::string& message) {
  if (g_exit_code == kExitTimeout) throw Timeout(message);
  throw Error(message, g_exit_code);
}

Failure failure_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.what(), e.exit_code()};
  } catch (const std::bad_alloc&) {
    return {
        "out of host memory (std::bad_alloc): the model or the batch is too large for this "
        "node (model.*, data.tokens_per_step, plan.capacity)",
        kExitFatal};
  } catch (const std::exception& e) {
    return {e.what(), kExitFatal};
  } catch (...) {
    return {"an exception of unknown type", kExitFatal};
  }
}

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

void print_error(const std::string& message, const std::string& rank) {
  const std::string where =
      rank.empty() ? "meshloom: error" : "meshloom: error [rank " + rank + "]";
  std::fprintf(stderr, "%s: %s\n", where.c_str(), message.c_str());
  std::fflush(stderr);
}

void fail(const char* file, int line, const char* lib, const std::string& message, int exit_code) {
  g_exit_code = exit_code;
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
