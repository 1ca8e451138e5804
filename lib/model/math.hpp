// Scalar helpers that the elementwise loops of the model inline: an
// exponential that vectorizes, and the SiLU gate.
//
// fast_exp<float> is exact to about 2 ulp on [-87, 88] and returns 0 below
// -87 (so exp(-inf) = 0, which the masked softmax relies on). It uses only
// arithmetic, min/max and bit casts, so GCC turns loops over it into SIMD
// code; std::exp would stay a scalar library call per element.
// fast_exp<double> is std::exp: the double model is for checks, not speed.
//
// ML_SIMD_CLONES marks the hot elementwise kernels: GCC compiles each for
// baseline x86-64, x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) and picks one
// at load time for the CPU it runs on, so the build stays portable and still
// uses the wide vectors where they exist. Not in TSan builds: the clones'
// resolver runs while the dynamic loader relocates the executable, before
// TSan's runtime is up, and its instrumented code crashed there (every binary
// linking the model died before main).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define ML_SIMD_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define ML_SIMD_CLONES
#endif

namespace meshloom::model {

template <class T>
inline T fast_exp(T x);

template <>
inline double fast_exp<double>(double x) {
  return std::exp(x);
}

template <>
inline float fast_exp<float>(float x) {
  // exp(x) = 2^k · exp(r) with k = round(x / ln 2) and |r| <= ln(2)/2; ln 2 is
  // split into a head with trailing zero bits (k·head is exact) and a tail.
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Head = 0.693145751953125f;
  constexpr float kLn2Tail = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  const float xc = std::min(std::max(x, -87.0f), 88.0f);
  const float k = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - k * kLn2Head) - k * kLn2Tail;
  // Taylor series to degree 7: truncation error below 1e-8 on |r| <= 0.35.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  const float result = p * std::bit_cast<float>(bits);
  return x < -87.0f ? 0.0f : result;
}

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + fast_exp<T>(-x));
}

}  // namespace meshloom::model
