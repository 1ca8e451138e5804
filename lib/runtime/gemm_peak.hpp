// The machine's measured sgemm rate: the roofline that CPU MFU is quoted
// against (ENVIRONMENT.md: about 100 GFLOP/s per core with AVX-512).
#pragma once

namespace meshloom {

// FLOP/s of square sgemm products of size n on `threads` threads (the
// model's own parallel GEMM), the best repetition of about a second's worth.
double measure_sgemm_peak(int threads, int n = 1024);

}  // namespace meshloom
