// The machine's measured sgemm rate: the roofline that CPU MFU is quoted
// against (ENVIRONMENT.md: about 100 GFLOP/s per core with AVX-512).
#pragma once

#include "parallel/world.hpp"

namespace meshloom::runtime {

// FLOP/s of square sgemm products of size n on `threads` threads (the
// model's own parallel GEMM), the best repetition of about a second's worth.
double measure_sgemm_peak(int threads, int n = 1024);

// The CPU trainers' roofline, FLOP/s: on each node's first trainer the peak
// of all the node's trainers together (run.peak_gflops, or measured with
// their threads, capped at the cores); 0 on every other rank and with
// run.backend: cuda (a GPU trainer takes its device's peak). Collective over
// the world, before any role starts working: every rank of a node (loaders,
// constructors, trainers) waits asleep while its first trainer measures, so
// nothing else runs on the node's cores then.
double node_sgemm_peak(const parallel::World& w);

}  // namespace meshloom::runtime
