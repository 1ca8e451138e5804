// gpu_step_bench: one trainer's whole step on the GPU (kernels/host/model and
// kernels/host/train), the "CUDA backend" row of bench_step.sh --gpu: forward and
// backward of a packed micro-batch, the gradient norm and AdamW on the fp32
// master weights; model FLOPs over the step's wall time, against the GPU's
// bf16 dense peak (measured with a large cuBLAS product, and the published
// figure for H100 / H200 SXM, 989 TFLOP/s).
//
//   gpu_step_bench [tokens=32768] [d=2048] [layers=16] [heads=16] [kv_heads=16]
//                  [ffn=5504] [vocab=50257] [docs=16384,8192,...] [iters=5]
//                  [precision=bf16|fp32]
// Prints key=value lines; exits 0 with a message where there is no GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/device/device_info.hpp"
#include "kernels/device/ops/adamw.hpp"
#include "kernels/host/blas/gemm.hpp"
#include "kernels/host/device_buffer.hpp"
#include "kernels/host/model/transformer.hpp"
#include "kernels/host/train/device_adamw.hpp"
#include "model/transformer.hpp"

using namespace meshloom;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Uniform values in [-1, 1): products of zeros run faster than real data
// (13% on an H200), which would flatter the peak.
std::vector<__nv_bfloat16> random_bf16(size_t count, uint32_t seed) {
  std::vector<__nv_bfloat16> v(count);
  uint32_t x = seed;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = __float2bfloat16(float(x >> 8) / float(1u << 23) - 1.0f);
  }
  return v;
}

// bf16 dense peak of cuBLAS: the best of a few 8192³ products of random data.
double measured_peak(cudaStream_t stream) {
  const int64_t n = 8192;
  cuda::DeviceBuffer<__nv_bfloat16> a(random_bf16(size_t(n * n), 1)),
      b(random_bf16(size_t(n * n), 2)), c(size_t(n * n));
  cuda::Blas blas(stream);
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    cudaStreamSynchronize(stream);
    const auto t0 = std::chrono::steady_clock::now();
    blas.gemm(model::Op::N, model::Op::N, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
              n, cuda::Dtype::bf16, cuda::Dtype::bf16);
    cudaStreamSynchronize(stream);
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / seconds_since(t0));
  }
  return best;
}

struct Times {
  double step = 1e30;              // the whole step, best of the iterations
  double forward_backward = 1e30;  // of which forward and backward
  double forward = 1e30;           // of which forward (loss included)
};

// One trainer's whole step, as run.backend: cuda runs it: forward and
// backward, the gradient norm (read by the host for clipping), AdamW on the
// fp32 master weights and the refresh of the working copy. One GPU, so no
// reduction.
template <class T>
Times run(const model::Shape& s, const model::Batch& batch, int iters, cudaStream_t stream,
          double* loss) {
  cuda::Transformer<T> m(s, stream);
  const model::ParamLayout& layout = m.layout();
  const int64_t n = layout.numel();
  model::Transformer<float> host(s, {.threads = 1});
  host.init_params(1234);
  cuda::DeviceAdamW opt(n, n, 0, n, cuda::AdamWHyper{}, layout.decay_ranges(), stream);
  opt.load(host.params(), {}, {}, 0);
  m.set_params_device(opt.master());
  cuda::DeviceBuffer<double> sum_sq(1);
  double host_sum_sq = 0;
  const double scale = 1.0 / double(std::max<int64_t>(1, batch.predictions()));
  Times best;
  for (int it = 0; it < iters + 1; ++it) {  // the first is the warm-up
    m.zero_grads();
    cudaStreamSynchronize(stream);
    const auto t0 = std::chrono::steady_clock::now();
    const model::LossSum ls = m.forward(batch);  // synchronizes for the loss
    const double f = seconds_since(t0);
    m.backward(scale);
    cudaStreamSynchronize(stream);
    const double fb = seconds_since(t0);
    cuda::grad_sum_squares(m.grads(), n, sum_sq.data(), stream);
    cudaMemcpyAsync(&host_sum_sq, sum_sq.data(), sizeof(double), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    opt.update(m.grads(), 1e-4, std::min(1.0, 1.0 / (std::sqrt(host_sum_sq) + 1e-6)));
    m.set_params_device(opt.master());
    cudaStreamSynchronize(stream);
    if (it > 0) {
      best.step = std::min(best.step, seconds_since(t0));
      best.forward_backward = std::min(best.forward_backward, fb);
      best.forward = std::min(best.forward, f);
    }
    *loss = ls.sum / double(std::max<int64_t>(1, ls.count));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "gpu_step_bench: arguments are key=value, not '%s'\n", argv[i]);
      return 2;
    }
    kv[a.substr(0, eq)] = a.substr(eq + 1);
  }
  auto get = [&](const char* k, int64_t def) {
    return kv.count(k) ? std::atoll(kv[k].c_str()) : def;
  };
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("gpu_step_bench: no GPU (%s); nothing to measure\n", why.c_str());
    return 0;
  }
  model::Shape s;
  s.vocab = get("vocab", 50257);
  s.d_model = get("d", 2048);
  s.n_layers = get("layers", 16);
  s.n_heads = get("heads", 16);
  s.n_kv_heads = get("kv_heads", 16);
  s.head_dim = s.d_model / s.n_heads;
  s.ffn_dim = get("ffn", 5504);
  s.tied = false;
  const int64_t tokens = get("tokens", 32768);
  const int iters = int(get("iters", 5));
  const std::string precision = kv.count("precision") ? kv["precision"] : "bf16";

  // Documents: the given lengths, or a long-tail mix that fills `tokens`.
  std::vector<int32_t> lengths;
  if (kv.count("docs")) {
    for (size_t p = 0; p < kv["docs"].size();) {
      const size_t q = std::min(kv["docs"].find(',', p), kv["docs"].size());
      lengths.push_back(int32_t(std::atoll(kv["docs"].substr(p, q - p).c_str())));
      p = q + 1;
    }
  } else {
    int64_t left = tokens;
    for (int64_t L = tokens / 2; left > 0; L = std::max<int64_t>(L / 2, 256)) {
      lengths.push_back(int32_t(std::min(L, left)));
      left -= lengths.back();
    }
  }
  const int64_t n = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  std::mt19937 rng(7);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = int32_t(rng() % uint32_t(s.vocab));
  const model::Batch batch = model::Batch::pack(ids, lengths);

  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const std::string name = prop.name;
  const double published =
      name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ? 989.4e12
                                                                                       : 0;
  const double peak = measured_peak(stream);
  double loss = 0;
  const Times t = precision == "fp32" ? run<float>(s, batch, iters, stream, &loss)
                                      : run<__nv_bfloat16>(s, batch, iters, stream, &loss);
  const double secs = t.step;
  const double flops = model::model_flops(s, batch);
  const model::ParamLayout layout(s);
  std::printf("device=%s\n", cuda::summary().c_str());
  std::printf("params=%.3fB tokens=%lld documents=%zu precision=%s\n", double(layout.numel()) / 1e9,
              (long long)n, lengths.size(), precision.c_str());
  std::printf(
      "step_seconds=%.4f forward_backward_seconds=%.4f forward_seconds=%.4f "
      "optimizer_seconds=%.4f\n",
      secs, t.forward_backward, t.forward, secs - t.forward_backward);
  std::printf("tflops=%.1f loss=%.4f\n", flops / secs / 1e12, loss);
  std::printf("measured_peak_tflops=%.1f mfu_measured_peak=%.3f\n", peak / 1e12,
              flops / secs / peak);
  if (published > 0)
    std::printf("published_peak_tflops=%.1f mfu=%.3f\n", published / 1e12,
                flops / secs / published);
  cudaStreamDestroy(stream);
  return 0;
}
