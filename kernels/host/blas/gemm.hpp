// Matrix products on the GPU through cuBLAS, with the CPU model's row-major
// convention (lib/model/blas.hpp): C = alpha·op(A)·op(B) + beta·C, op(A) of
// m×k, op(B) of k×n, every matrix row-major with its leading dimension.
//
// Element types: bf16 inputs with fp32 accumulation (the training path; C in
// bf16 or fp32, so gradients can accumulate in fp32), and fp32 throughout
// with true fp32 arithmetic (no TF32), the path the fp32 checks compare with
// the CPU backend.
#pragma once

#include <cstdint>
#include <type_traits>

#include "model/blas.hpp"

struct cublasContext;
struct CUstream_st;

namespace meshloom::cuda {

using model::Op;

// The element type of a buffer a product reads or writes. Not the training
// precision (config::Precision): a bf16 model's products write fp32 too (its
// gradients accumulate in fp32), so one product mixes both types.
enum class Dtype { f32, bf16 };

// The Dtype of a buffer of T (float or __nv_bfloat16).
template <class T>
constexpr Dtype dtype_of() {
  return std::is_same_v<T, float> ? Dtype::f32 : Dtype::bf16;
}

// One cuBLAS handle bound to a stream (RAII; not copyable).
class Blas {
 public:
  explicit Blas(CUstream_st* stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  void set_stream(CUstream_st* stream);

  // a, b of type `in` (both), c of type `out`; alpha, beta in fp32.
  void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
            int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, Dtype in,
            Dtype out);

 private:
  cublasContext* handle_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace meshloom::cuda
