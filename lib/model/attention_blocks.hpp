// The blocks attention works on, on the CPU (model/attention.hpp) and the GPU
// (kernels/device/attention/flash_attention.hpp) alike: plain pointers and
// leading dimensions, so that this header needs nothing but <cstdint> and
// nvcc-compiled code can include it.
#pragma once

#include <cstdint>

namespace meshloom::model {

// n query rows: q [n, n_heads·D] with leading dimension ld, and each row's
// sample id and position.
template <class T>
struct QueryBlock {
  const T* q = nullptr;
  int64_t ld = 0;
  const int32_t* sample = nullptr;
  const int32_t* pos = nullptr;
  int64_t n = 0;
};

// n key/value rows: k, v [n, n_kv_heads·D] with their leading dimensions,
// and each row's sample id and position.
template <class T>
struct KvBlock {
  const T* k = nullptr;
  const T* v = nullptr;
  int64_t ldk = 0;
  int64_t ldv = 0;
  const int32_t* sample = nullptr;
  const int32_t* pos = nullptr;
  int64_t n = 0;
};

// dK and dV of a key/value block, accumulated into.
template <class T>
struct KvGrad {
  T* dk = nullptr;
  T* dv = nullptr;
  int64_t lddk = 0;
  int64_t lddv = 0;
};

}  // namespace meshloom::model
