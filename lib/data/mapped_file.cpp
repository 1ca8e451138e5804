#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "base/check.hpp"
#include "base/strings.hpp"

namespace meshloom::data {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// A .bin truncated while mapped makes reads past its new end raise SIGBUS,
// which names nothing. The mapped .bin files are listed here (a fixed table:
// the handler may only read memory and call write/_exit), so the handler can
// name the file and exit 2 (bad input). A fault elsewhere goes to the handler
// that was there before (Open MPI's backtrace, or the default).
struct MappedBin {
  std::atomic<const std::byte*> begin{nullptr};
  size_t size = 0;
  char message[640] = {0};  // written before `begin` is published
};
MappedBin g_mapped[64];
std::mutex g_mapped_mutex;
struct sigaction g_previous_sigbus;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const std::byte* at = static_cast<const std::byte*>(info->si_addr);
  for (const MappedBin& m : g_mapped) {
    const std::byte* begin = m.begin.load(std::memory_order_acquire);
    if (begin != nullptr && at >= begin && at < begin + m.size) {
      ssize_t ignored = ::write(STDERR_FILENO, m.message, std::strlen(m.message));
      (void)ignored;
      ::_exit(2);
    }
  }
  // Not ours: the previous disposition handles it when the access faults again.
  ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
  (void)sig, (void)context;
}

}  // namespace

Mapping map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + errno_text(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error("cannot stat " + path + ": " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  Mapping m;
  m.size = static_cast<size_t>(st.st_size);
  if (m.size > 0) {
    void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error("cannot map " + path + ": " + errno_text(err));
    }
    m.data = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping stays valid
  return m;
}

void unmap_file(const std::byte* data, size_t size) {
  if (data != nullptr) ::munmap(const_cast<std::byte*>(data), size);
}

void watch_bin(const std::string& path, const std::byte* data, size_t size) {
  if (data == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mapped_mutex);
  struct sigaction current;
  if (::sigaction(SIGBUS, nullptr, &current) == 0 && current.sa_sigaction != on_sigbus) {
    // (Re)installed here, after MPI_Init has put its own handler in place.
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGBUS, &sa, &g_previous_sigbus) != 0) return;
  }
  for (MappedBin& m : g_mapped)
    if (m.begin.load(std::memory_order_relaxed) == nullptr) {
      const std::string who = process_rank() >= 0
                                  ? strf("meshloom: error [rank %d]: ", process_rank())
                                  : std::string("meshloom: error: ");
      std::snprintf(m.message, sizeof(m.message),
                    "%s%s: bus error reading it: the file was truncated or changed while this "
                    "job was reading it\n",
                    who.c_str(), path.c_str());
      m.size = size;
      m.begin.store(data, std::memory_order_release);
      return;
    }
}

void unwatch_bin(const std::byte* data) {
  if (data == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mapped_mutex);
  for (MappedBin& m : g_mapped)
    if (m.begin.load(std::memory_order_relaxed) == data) m.begin.store(nullptr);
}

}  // namespace meshloom::data
