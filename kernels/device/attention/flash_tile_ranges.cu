// Per-tile (sample, position) ranges for skipping masked tiles, and what the
// attention launchers share: dimension checks, the kernel selection.
#include <cstdlib>
#include <string>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "kernels/device/attention/flash_attention.hpp"
#include "kernels/device/attention/flash_tiles.cuh"
#include "kernels/device/common/check.cuh"

namespace meshloom::cuda {
namespace flash {
namespace {

// One thread per tile: scans its (at most `tile`) rows.
__global__ void tile_ranges_kernel(const int32_t* sample, const int32_t* pos, int64_t n, int tile,
                                   int64_t n_tiles, TileRange* out) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n_tiles) return;
  const int64_t begin = t * tile;
  const int64_t end = begin + tile < n ? begin + tile : n;
  TileRange r = make_int4(sample[begin], sample[begin], pos[begin], pos[begin]);
  for (int64_t i = begin + 1; i < end; ++i) {
    r.x = min(r.x, sample[i]);
    r.y = max(r.y, sample[i]);
    r.z = min(r.z, pos[i]);
    r.w = max(r.w, pos[i]);
  }
  out[t] = r;
}

}  // namespace

TileRange* make_tile_ranges(const int32_t* sample, const int32_t* pos, int64_t n, int tile,
                            cudaStream_t stream) {
  const int64_t n_tiles = (n + tile - 1) / tile;
  TileRange* ranges = nullptr;
  const size_t count = n_tiles > 0 ? static_cast<size_t>(n_tiles) : 1;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ranges), count * sizeof(TileRange), stream));
  if (n_tiles > 0) {
    constexpr int kBlock = 128;
    const auto blocks = static_cast<unsigned>((n_tiles + kBlock - 1) / kBlock);
    tile_ranges_kernel<<<blocks, kBlock, 0, stream>>>(sample, pos, n, tile, n_tiles, ranges);
    CUDA_CHECK(cudaGetLastError());
  }
  return ranges;
}

void check_dims(int n_heads, int n_kv_heads, int head_dim) {
  ML_CHECK(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
           strf("bad attention heads: %d query, %d key/value", n_heads, n_kv_heads));
  ML_CHECK(flash_attention_supports_head_dim(head_dim),
           strf("flash attention is compiled for head_dim 64 and 128, not %d", head_dim));
}

namespace {

// The choice: MESHLOOM_FLASH_KERNEL until set_flash_kernel says otherwise.
FlashKernel initial_kernel() {
  const char* env = std::getenv("MESHLOOM_FLASH_KERNEL");
  if (env == nullptr || *env == '\0') return FlashKernel::automatic;
  const std::string name(env);
  if (name == "automatic") return FlashKernel::automatic;
  if (name == "wgmma") return FlashKernel::wgmma;
  if (name == "mma") return FlashKernel::mma;
  if (name == "wmma") return FlashKernel::wmma;
  throw Error(strf("MESHLOOM_FLASH_KERNEL=%s: expected automatic, wgmma, mma or wmma", env));
}

FlashKernel& selected() {
  static FlashKernel kernel = initial_kernel();
  return kernel;
}

}  // namespace

bool use_mma_kernels() { return selected() != FlashKernel::wmma; }

bool use_wgmma_kernels() {
  const FlashKernel k = selected();
  return (k == FlashKernel::automatic || k == FlashKernel::wgmma) && flash_wgmma_available();
}

}  // namespace flash

void set_flash_kernel(FlashKernel kernel) { flash::selected() = kernel; }

bool flash_wgmma_available() {
  // Asked per launch: cache the answer per device.
  constexpr int kMaxDevices = 64;
  static int known[kMaxDevices] = {};  // 0 unknown, 1 yes, 2 no
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) return false;
  if (known[device] == 0) {
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    known[device] = major == 9 && minor == 0 ? 1 : 2;  // sm_90a code runs on 9.0 only
  }
  return known[device] == 1;
}

bool flash_attention_supports_head_dim(int head_dim) { return head_dim == 64 || head_dim == 128; }

}  // namespace meshloom::cuda
