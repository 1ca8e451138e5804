// Worker threads shared by the raw and image sources of this process and
// kept for its lifetime. Tokenizers keep per-thread piece caches: threads
// that live on keep them warm and allocated, where threads started per
// request began cold and allocated (and faulted in) a fresh 3 MiB cache every
// time. One job at a time; never destroyed (idle workers just wait at exit).
#pragma once

#include <cstddef>
#include <functional>

namespace meshloom::sources {

// Runs fn(i) for every i in [0, n) on `threads` workers and waits; the first
// exception a call throws is rethrown here (the other workers stop taking
// items).
void run_on_workers(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace meshloom::sources
