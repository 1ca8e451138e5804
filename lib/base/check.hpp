// Errors and checks: the rule is in docs/design.md ("Errors").
//
// - A typed Error for what a user or a file can cause (exit 2) and Timeout for
//   a wait past its deadline (exit 3): thrown, and turned into a message and
//   an exit code by failure_of() at the top of the process or the rank.
// - ML_CHECK / ML_FAIL for invariants (a bug in meshloom, exit 1), and the
//   library macros (MPI_CHECK, H5_CHECK, CUDA_CHECK, NCCL_CHECK) for foreign
//   calls. They do not unwind: fail() prints
//   "meshloom: error [rank R host H] file:line: LIB: message" and calls the
//   fatal handler. The default handler exits; the MPI runtime installs one
//   that calls MPI_Abort (a lone exiting rank would hang the others in a
//   collective), and tests install one that throws.
// - ML_TIMEOUT for a wait inside communication, where unwinding would block on
//   the dead peer (pending sends, NCCL streams): it ends the rank at once like
//   a failed check, with exit 3; the test handler throws Timeout.
//
// ML_CHECK is always on; ML_DCHECK only in debug builds. Never put side effects
// inside either.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace meshloom {

// Exit codes of every command and rank (the Slurm templates requeue only 1 and 3).
constexpr int kExitOk = 0;
constexpr int kExitFatal = 1;     // a runtime failure
constexpr int kExitBadInput = 2;  // a bad config, file or argument
constexpr int kExitTimeout = 3;   // a wait past its deadline (run.timeout, start-up)

// What a user or a file can cause: a bad config, file or argument (exit 2,
// the default), or a wait past its deadline (Timeout, exit 3). The test
// handler throws it for failed checks too, with exit code 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = kExitBadInput)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A wait past its deadline: a peer dead, hung or far behind (exit 3, which
// the Slurm templates requeue).
struct Timeout : Error {
  explicit Timeout(const std::string& message) : Error(message, kExitTimeout) {}
};

// How an exception ends a process or a rank.
struct Failure {
  std::string message;
  int exit_code;
};
// The one map from an exception to its message and exit code: an Error
// carries its own; std::bad_alloc names the settings that size memory; any
// other exception is a runtime failure (exit 1).
Failure failure_of(const std::exception_ptr& error);

using FatalHandler = void (*)(const std::string& message);

// Installs a new handler and returns the previous one.
FatalHandler set_fatal_handler(FatalHandler handler);
FatalHandler fatal_handler();  // the one installed
// A handler for tests: throws meshloom::Error with the message and the exit
// code (Timeout after ML_TIMEOUT).
void throwing_fatal_handler(const std::string& message);

// Identity printed in every error and log line; set by the runtime.
void set_process_identity(int world_rank, const std::string& role);
int process_rank();  // -1 before set
const std::string& process_role();
const std::string& host_name();

[[noreturn]] void fail(const char* file, int line, const char* lib, const std::string& message,
                       int exit_code = kExitFatal);
// A failure caught at the top (failure_of) is printed in the same format:
// "meshloom: error [rank R]: message", or "meshloom: error: message" where
// `rank` is empty (bad input, which rank 0 alone reports). Flushed.
void print_error(const std::string& message, const std::string& rank = "");
// The code the fatal handlers exit with: that of the last fail() (1, or 3
// after ML_TIMEOUT).
int fatal_exit_code();

}  // namespace meshloom

#define ML_CHECK(cond, msg)                                                                        \
  do {                                                                                             \
    if (!(cond)) ::meshloom::fail(__FILE__, __LINE__, "check", std::string(#cond) + ": " + (msg)); \
  } while (0)

#define ML_FAIL(msg) ::meshloom::fail(__FILE__, __LINE__, "meshloom", (msg))
#define ML_TIMEOUT(msg) \
  ::meshloom::fail(__FILE__, __LINE__, "meshloom", (msg), ::meshloom::kExitTimeout)

#ifdef NDEBUG
#define ML_DCHECK(cond, msg) \
  do {                       \
  } while (0)
#else
#define ML_DCHECK(cond, msg) ML_CHECK(cond, msg)
#endif
