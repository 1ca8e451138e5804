#include "kernels/host/blas/gemm.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "base/strings.hpp"
#include "kernels/device/common/check.cuh"

#define CUBLAS_CHECK(call)                                                                \
  do {                                                                                    \
    cublasStatus_t ml_cublas_rc_ = (call);                                                \
    if (ml_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::meshloom::fail(__FILE__, __LINE__, "cuBLAS",                                      \
                       std::string(#call) + ": " + cublasGetStatusString(ml_cublas_rc_)); \
  } while (0)

namespace meshloom::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLAS's recommendation for Hopper

cudaDataType_t cuda_type(Dtype t) { return t == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F; }
cublasOperation_t cublas_op(Op op) { return op == Op::T ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

Blas::Blas(CUstream_st* stream) {
  CUBLAS_CHECK(cublasCreate(&handle_));
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  set_stream(stream);
}

Blas::~Blas() {
  if (handle_) cublasDestroy(handle_);
  if (workspace_) cudaFree(workspace_);
}

void Blas::set_stream(CUstream_st* stream) { CUBLAS_CHECK(cublasSetStream(handle_, stream)); }

void Blas::gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, Dtype in,
                Dtype out) {
  if (m == 0 || n == 0) return;
  // Row-major C (m×n) is column-major Cᵀ (n×m) = op(B)ᵀ·op(A)ᵀ: cuBLAS gets
  // the operands swapped, each with its own transpose flag unchanged. fp32
  // products stay fp32 (PEDANTIC: no TF32 even under NVIDIA_TF32_OVERRIDE):
  // the fp32 path is the one checked against the CPU.
  const cublasComputeType_t compute =
      in == Dtype::bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  CUBLAS_CHECK(cublasGemmEx(handle_, cublas_op(op_b), cublas_op(op_a), int(n), int(m), int(k),
                            &alpha, b, cuda_type(in), int(ldb), a, cuda_type(in), int(lda), &beta,
                            c, cuda_type(out), int(ldc), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace meshloom::cuda
