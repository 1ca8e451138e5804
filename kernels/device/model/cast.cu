#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/device/common/check.cuh"
#include "kernels/device/common/elem.cuh"
#include "kernels/device/common/vector_path.hpp"
#include "kernels/device/model/cast.hpp"

namespace meshloom::cuda {

namespace {

// V consecutive elements per step of a grid-stride loop over n / V groups.
template <class From, class To, int V>
__global__ void convert_kernel(const From* in, int64_t groups, To* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < groups;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v[V];
    load_vec<V>(in + i * V, v);
    store_vec<V>(out + i * V, v);
  }
}

template <class From, class To, int V>
void launch_convert(const From* in, int64_t groups, To* out, cudaStream_t stream) {
  if (groups <= 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((groups + threads - 1) / threads, 65535);
  convert_kernel<From, To, V><<<unsigned(blocks), threads, 0, stream>>>(in, groups, out);
  CUDA_CHECK(cudaGetLastError());
}

// One block per row, threads over the columns.
template <class From, class To>
__global__ void convert_rows_kernel(const From* src, int64_t lds, int64_t width, To* dst,
                                    int64_t ldd) {
  const int64_t i = blockIdx.x;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    dst[i * ldd + c] = from_f32<To>(to_f32(src[i * lds + c]));
}

template <class From>
__global__ void add_rows_kernel(const From* src, int64_t lds, int64_t width, float* dst,
                                int64_t ldd) {
  const int64_t i = blockIdx.x;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    dst[i * ldd + c] += float(src[i * lds + c]);
}

int threads_for(int64_t width) { return int(std::min<int64_t>(256, (width + 31) / 32 * 32)); }

}  // namespace

template <class From, class To>
void convert(const From* in, int64_t n, To* out, cudaStream_t stream) {
  if (n <= 0) return;
  // fp32 to bf16 (the weights' refresh, the attention gradients): 8 values
  // per access from aligned buffers, the last n % 8 one by one.
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, __nv_bfloat16>) {
    if (rows_vectorizable(8, sizeof(To), {in, out})) {
      const int64_t groups = n / 8;
      launch_convert<From, To, 8>(in, groups, out, stream);
      launch_convert<From, To, 1>(in + groups * 8, n - groups * 8, out + groups * 8, stream);
      return;
    }
  }
  launch_convert<From, To, 1>(in, n, out, stream);
}

template void convert<float, float>(const float*, int64_t, float*, cudaStream_t);
template void convert<float, __nv_bfloat16>(const float*, int64_t, __nv_bfloat16*, cudaStream_t);
template void convert<__nv_bfloat16, float>(const __nv_bfloat16*, int64_t, float*, cudaStream_t);

template <class From, class To>
void convert_rows(const From* src, int64_t lds, int64_t n, int64_t width, To* dst, int64_t ldd,
                  cudaStream_t stream) {
  if (n <= 0 || width <= 0) return;
  convert_rows_kernel<From, To>
      <<<unsigned(n), threads_for(width), 0, stream>>>(src, lds, width, dst, ldd);
  CUDA_CHECK(cudaGetLastError());
}

template <class From>
void add_rows(const From* src, int64_t lds, int64_t n, int64_t width, float* dst, int64_t ldd,
              cudaStream_t stream) {
  if (n <= 0 || width <= 0) return;
  add_rows_kernel<From><<<unsigned(n), threads_for(width), 0, stream>>>(src, lds, width, dst, ldd);
  CUDA_CHECK(cudaGetLastError());
}

template void add_rows<float>(const float*, int64_t, int64_t, int64_t, float*, int64_t,
                              cudaStream_t);
template void add_rows<__nv_bfloat16>(const __nv_bfloat16*, int64_t, int64_t, int64_t, float*,
                                      int64_t, cudaStream_t);

template void convert_rows<float, float>(const float*, int64_t, int64_t, int64_t, float*, int64_t,
                                         cudaStream_t);
template void convert_rows<float, __nv_bfloat16>(const float*, int64_t, int64_t, int64_t,
                                                 __nv_bfloat16*, int64_t, cudaStream_t);

}  // namespace meshloom::cuda
