// Fatal errors and checks.
//
// Every failure goes through one [[noreturn]] fail(), which prints
// "meshloom: error [rank R host H] file:line: LIB: message" and then calls the
// fatal handler. The default handler exits(1); the MPI runtime installs one
// that calls MPI_Abort (a lone exiting rank would hang the others in a
// collective), and tests install one that throws. Library-specific wrappers
// (MPI_CHECK, H5_CHECK, CUDA_CHECK, NCCL_CHECK) live beside their libraries and
// pass the library's own error string here.
//
// ML_CHECK is always on; ML_DCHECK only in debug builds. Never put side effects
// inside either.
#pragma once

#include <stdexcept>
#include <string>

namespace meshloom {

// Exit codes of every command and rank (the Slurm templates requeue only 1 and 3).
constexpr int kExitOk = 0;
constexpr int kExitFatal = 1;     // a runtime failure
constexpr int kExitBadInput = 2;  // a bad config, file or argument
constexpr int kExitTimeout = 3;   // a wait past its deadline (run.timeout, start-up)

// Thrown by the test handler, and by code that reports user errors upward.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using FatalHandler = void (*)(const std::string& message);

// Installs a new handler and returns the previous one.
FatalHandler set_fatal_handler(FatalHandler handler);
FatalHandler fatal_handler();  // the one installed
// A handler for tests: throws meshloom::Error with the message.
void throwing_fatal_handler(const std::string& message);

// Identity printed in every error and log line; set by the runtime.
void set_process_identity(int world_rank, const std::string& role);
int process_rank();  // -1 before set
const std::string& process_role();
const std::string& host_name();

[[noreturn]] void fail(const char* file, int line, const char* lib, const std::string& message);
// Errors that end a process without fail() use the same format:
// "meshloom: error [rank R]: message", or "meshloom: error: message" where
// `rank` is empty (bad input, which rank 0 alone reports). Flushed.
void print_error(const std::string& message, const std::string& rank = "");
// fail() for a wait that ran past its deadline (a peer dead or hung): the
// process exits with 3, the code the watchdog uses, not 1.
[[noreturn]] void fail_waited(const char* file, int line, const std::string& message);
// The code the fatal handlers exit with: 1, or 3 after fail_waited().
int fatal_exit_code();

}  // namespace meshloom

#define ML_CHECK(cond, msg)                                                                        \
  do {                                                                                             \
    if (!(cond)) ::meshloom::fail(__FILE__, __LINE__, "check", std::string(#cond) + ": " + (msg)); \
  } while (0)

#define ML_FAIL(msg) ::meshloom::fail(__FILE__, __LINE__, "meshloom", (msg))
#define ML_FAIL_WAITED(msg) ::meshloom::fail_waited(__FILE__, __LINE__, (msg))

#ifdef NDEBUG
#define ML_DCHECK(cond, msg) \
  do {                       \
  } while (0)
#else
#define ML_DCHECK(cond, msg) ML_CHECK(cond, msg)
#endif
