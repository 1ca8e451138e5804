// Matrix products and threading for the CPU model.
//
// One thread pool, OpenMP's, runs everything the model does. OpenBLAS is
// switched to one thread for the whole process (the first gemm() does it) and
// the model splits big products over its own threads: gemm_parallel() cuts
// the larger output dimension into fixed slices that its threads share. Two
// pools that both spin-wait (OpenBLAS's pthreads and OpenMP's) would fight
// over the cores; with one pool, the attention tiles (one small product per
// thread) and the big projections run on the same threads.
//
// Products are row-major, as in cblas: C = alpha·op(A)·op(B) + beta·C with
// op(A) of m×k and op(B) of k×n. float goes to sgemm, double to dgemm (the
// double model exists for gradient checks).
#pragma once

#include <cstdint>

namespace meshloom::model {

enum class Op { N, T };  // op(X) = X or Xᵀ

// On the calling thread only.
template <class T>
void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// Cut into an even number (≥ 2) of slices of at most ~256 output rows or
// columns (whichever dimension is larger) shared out over `threads` OpenMP
// threads (one thread inside a parallel region). The cut depends on the shape
// only, so the result does not depend on the thread count. Made for a few
// threads: with many, small outputs leave threads idle.
template <class T>
void gemm_parallel(int threads, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, T alpha,
                   const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// Threads the model uses when asked for `requested` (0: OpenMP's default,
// i.e. OMP_NUM_THREADS or the core count).
int resolve_threads(int requested);

// Makes OpenBLAS single-threaded (idempotent; called by gemm()).
void blas_use_one_thread();

// OpenBLAS's own threading, for the benchmark's peak measurement only:
// sets OpenBLAS to `threads` threads; call blas_use_one_thread() afterwards.
void blas_set_native_threads(int threads);

}  // namespace meshloom::model
