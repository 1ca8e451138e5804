// Helpers for the flash-attention GPU tests: host blocks of tokens with
// random Q/K/V/dO rounded to the element type, their CPU reference results
// (lib/model/attention in double), device copies with padded leading
// dimensions, and the normalized error the tolerances are stated in.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/device/attention/flash_attention.hpp"
#include "tests/kernels/elem_host.hpp"

namespace meshloom::cuda::test {

// Rows of one block: (sample, position) tags and dense values already
// rounded to the element type: q, dout [n, H·D]; k, v [n, Hk·D].
struct Block {
  std::vector<int32_t> sample, pos;
  std::vector<double> q, k, v, dout;
  int64_t n() const { return static_cast<int64_t>(sample.size()); }
};

// Packed documents of the given lengths (sample d, positions 0..L-1), values
// N(0, 1) rounded to bf16 (round_bf16) or float.
Block make_packed(const FlashDims& dims, const std::vector<int>& docs, uint32_t seed,
                  bool round_bf16);
// The given rows of a block, in that order.
Block take_rows(const FlashDims& dims, const Block& all, const std::vector<int64_t>& rows);
// Random values N(0, scale²) rounded to float.
std::vector<double> random_floats(int64_t n, double scale, uint32_t seed);

// CPU reference (double): forward of q's rows over kv's keys.
void cpu_forward(const FlashDims& dims, const Block& q, const Block& kv, std::vector<double>& out,
                 std::vector<double>& lse);
std::vector<double> cpu_delta(const FlashDims& dims, const Block& q,
                              const std::vector<double>& out);
// Adds this pair's share into dq, dk, dv given the final lse and delta.
void cpu_backward(const FlashDims& dims, const Block& q, const Block& kv,
                  const std::vector<double>& lse, const std::vector<double>& delta,
                  std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv);

// max |a - b| / max |ref| (1 when ref is all zeros and a is not).
double rel_error(const std::vector<double>& a, const std::vector<double>& ref);
// rel_error over the entries where ref is finite; counts entries where one
// side is -inf and the other is not.
double lse_error(const std::vector<double>& a, const std::vector<double>& ref, int64_t* mismatches);

// Device memory of n elements, freed on destruction.
template <class U>
class DeviceBuf {
 public:
  explicit DeviceBuf(int64_t n);
  ~DeviceBuf();
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  U* get() const { return p_; }
  void upload_bytes(const void* src);
  void download_bytes(void* dst) const;
  int64_t size() const { return n_; }

 private:
  U* p_ = nullptr;
  int64_t n_ = 0;
};

// A block on the device: q and dout with leading dimension H·D + pad, k and
// v as column slices of one [n, 2·Hk·D + pad] buffer (k first).
template <class T>
struct DeviceBlock {
  DeviceBlock(const FlashDims& dims, const Block& b, int pad);
  int64_t n, ldq, ldkv, kv_cols;
  DeviceBuf<T> q, kv, dout;
  DeviceBuf<int32_t> sample, pos;
  FlashQuery<T> query() const { return {q.get(), ldq, sample.get(), pos.get(), n}; }
  FlashKv<T> keys() const {
    return {kv.get(), kv.get() + kv_cols, ldkv, ldkv, sample.get(), pos.get(), n};
  }
};

// Dense device copies of host values: encode on upload, decode on download.
template <class T>
void upload(DeviceBuf<T>& buf, const std::vector<double>& x);
template <class T>
std::vector<double> download(const DeviceBuf<T>& buf);

}  // namespace meshloom::cuda::test
