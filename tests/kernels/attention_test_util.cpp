// Host side of the flash-attention GPU tests: random blocks, the CPU
// reference (lib/model/attention.hpp in double), device copies, errors.
#include "tests/kernels/attention_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/device/common/check.cuh"
#include "model/attention.hpp"

namespace meshloom::cuda::test {
namespace {

model::AttnDims model_dims(const FlashDims& d) { return {d.n_heads, d.n_kv_heads, d.head_dim}; }

// Small tiles so the CPU reference exercises its own tiling on odd sizes too.
model::AttnOptions model_options() { return {16, 32, 1}; }

}  // namespace

Block make_packed(const FlashDims& dims, const std::vector<int>& docs, uint32_t seed,
                  bool round_bf16) {
  Block b;
  for (size_t d = 0; d < docs.size(); ++d) {
    for (int t = 0; t < docs[d]; ++t) {
      b.sample.push_back(static_cast<int32_t>(d));
      b.pos.push_back(t);
    }
  }
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto fill = [&](std::vector<double>& x, int64_t width) {
    x.resize(static_cast<size_t>(b.n() * width));
    for (double& e : x) {
      const double r = normal(rng);
      e = round_bf16 ? Elem<bf16>::decode(Elem<bf16>::encode(r)) : static_cast<float>(r);
    }
  };
  const int64_t qw = int64_t{dims.n_heads} * dims.head_dim;
  const int64_t kw = int64_t{dims.n_kv_heads} * dims.head_dim;
  fill(b.q, qw);
  fill(b.k, kw);
  fill(b.v, kw);
  fill(b.dout, qw);
  return b;
}

Block take_rows(const FlashDims& dims, const Block& all, const std::vector<int64_t>& rows) {
  const auto qw = static_cast<size_t>(dims.n_heads * dims.head_dim);
  const auto kw = static_cast<size_t>(dims.n_kv_heads * dims.head_dim);
  Block b;
  for (int64_t r : rows) {
    const auto i = static_cast<size_t>(r);
    b.sample.push_back(all.sample[i]);
    b.pos.push_back(all.pos[i]);
    b.q.insert(b.q.end(), all.q.begin() + i * qw, all.q.begin() + (i + 1) * qw);
    b.dout.insert(b.dout.end(), all.dout.begin() + i * qw, all.dout.begin() + (i + 1) * qw);
    b.k.insert(b.k.end(), all.k.begin() + i * kw, all.k.begin() + (i + 1) * kw);
    b.v.insert(b.v.end(), all.v.begin() + i * kw, all.v.begin() + (i + 1) * kw);
  }
  return b;
}

std::vector<double> random_floats(int64_t n, double scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> x(static_cast<size_t>(n));
  for (double& e : x) e = static_cast<float>(normal(rng));
  return x;
}

void cpu_forward(const FlashDims& dims, const Block& q, const Block& kv, std::vector<double>& out,
                 std::vector<double>& lse) {
  const int64_t qw = int64_t{dims.n_heads} * dims.head_dim;
  const int64_t kw = int64_t{dims.n_kv_heads} * dims.head_dim;
  out.assign(static_cast<size_t>(q.n() * qw), 0.0);
  lse.assign(static_cast<size_t>(q.n() * dims.n_heads), 0.0);
  model::QueryBlock<double> qb{q.q.data(), qw, q.sample.data(), q.pos.data(), q.n()};
  model::KvBlock<double> kb{kv.k.data(),      kv.v.data(),   kw,    kw,
                            kv.sample.data(), kv.pos.data(), kv.n()};
  model::AttnOut<double> res{out.data(), qw, lse.data()};
  model::attention_block_forward(model_dims(dims), qb, kb, res, model_options());
}

std::vector<double> cpu_delta(const FlashDims& dims, const Block& q,
                              const std::vector<double>& out) {
  const int64_t qw = int64_t{dims.n_heads} * dims.head_dim;
  std::vector<double> delta(static_cast<size_t>(q.n() * dims.n_heads));
  model::attention_delta(model_dims(dims), q.n(), out.data(), qw, q.dout.data(), qw, delta.data());
  return delta;
}

void cpu_backward(const FlashDims& dims, const Block& q, const Block& kv,
                  const std::vector<double>& lse, const std::vector<double>& delta,
                  std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  const int64_t qw = int64_t{dims.n_heads} * dims.head_dim;
  const int64_t kw = int64_t{dims.n_kv_heads} * dims.head_dim;
  model::QueryBlock<double> qb{q.q.data(), qw, q.sample.data(), q.pos.data(), q.n()};
  model::KvBlock<double> kb{kv.k.data(),      kv.v.data(),   kw,    kw,
                            kv.sample.data(), kv.pos.data(), kv.n()};
  model::QueryGrad<double> g{q.dout.data(), qw, lse.data(), delta.data(), dq.data(), qw};
  model::KvGrad<double> kg{dk.data(), dv.data(), kw, kw};
  model::attention_block_backward(model_dims(dims), qb, kb, g, kg, model_options());
}

double rel_error(const std::vector<double>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - ref[i]);
    // std::max(diff, NaN) keeps diff, so a NaN must be caught here, per entry.
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, d);
    scale = std::max(scale, std::abs(ref[i]));
  }
  if (scale == 0.0) return diff == 0.0 ? 0.0 : 1.0;
  return diff / scale;
}

double lse_error(const std::vector<double>& a, const std::vector<double>& ref,
                 int64_t* mismatches) {
  std::vector<double> fa, fr;
  *mismatches = 0;
  for (size_t i = 0; i < std::min(a.size(), ref.size()); ++i) {
    const bool ia = std::isinf(a[i]) && a[i] < 0, ir = std::isinf(ref[i]) && ref[i] < 0;
    if (ia != ir) ++*mismatches;
    if (!ia && !ir) {
      fa.push_back(a[i]);
      fr.push_back(ref[i]);
    }
  }
  if (a.size() != ref.size()) ++*mismatches;
  return rel_error(fa, fr);
}

template <class U>
DeviceBuf<U>::DeviceBuf(int64_t n) : n_(n) {
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_),
                        static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(U)));
}

template <class U>
DeviceBuf<U>::~DeviceBuf() {
  cudaFree(p_);
}

template <class U>
void DeviceBuf<U>::upload_bytes(const void* src) {
  if (n_ == 0) return;
  CUDA_CHECK(cudaMemcpy(p_, src, static_cast<size_t>(n_) * sizeof(U), cudaMemcpyHostToDevice));
}

template <class U>
void DeviceBuf<U>::download_bytes(void* dst) const {
  if (n_ == 0) return;
  CUDA_CHECK(cudaMemcpy(dst, p_, static_cast<size_t>(n_) * sizeof(U), cudaMemcpyDeviceToHost));
}

template <class T>
void upload(DeviceBuf<T>& buf, const std::vector<double>& x) {
  static_assert(sizeof(typename Elem<T>::Bits) == sizeof(T));
  std::vector<typename Elem<T>::Bits> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = Elem<T>::encode(x[i]);
  ML_CHECK(static_cast<int64_t>(x.size()) == buf.size(), "upload size");
  buf.upload_bytes(bits.data());
}

template <class T>
std::vector<double> download(const DeviceBuf<T>& buf) {
  std::vector<typename Elem<T>::Bits> bits(static_cast<size_t>(buf.size()));
  buf.download_bytes(bits.data());
  std::vector<double> x(bits.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = Elem<T>::decode(bits[i]);
  return x;
}

// Copies dense rows of `width` values into columns [col, col + width) of a
// buffer with `ld` columns (the rest stays zero).
template <class T>
static void upload_strided(DeviceBuf<T>& buf, int64_t n, int64_t ld,
                           const std::vector<std::pair<int64_t, const std::vector<double>*>>& parts,
                           int64_t width) {
  std::vector<double> x(static_cast<size_t>(n * ld), 0.0);
  for (const auto& [col, src] : parts) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < width; ++c) {
        x[static_cast<size_t>(i * ld + col + c)] = (*src)[static_cast<size_t>(i * width + c)];
      }
    }
  }
  upload(buf, x);
}

template <class T>
DeviceBlock<T>::DeviceBlock(const FlashDims& dims, const Block& b, int pad)
    : n(b.n()),
      ldq(int64_t{dims.n_heads} * dims.head_dim + pad),
      ldkv(2 * int64_t{dims.n_kv_heads} * dims.head_dim + pad),
      kv_cols(int64_t{dims.n_kv_heads} * dims.head_dim),
      q(n * ldq),
      kv(n * ldkv),
      dout(n * ldq),
      sample(n),
      pos(n) {
  const int64_t qw = int64_t{dims.n_heads} * dims.head_dim;
  upload_strided(q, n, ldq, {{0, &b.q}}, qw);
  upload_strided(dout, n, ldq, {{0, &b.dout}}, qw);
  upload_strided(kv, n, ldkv, {{0, &b.k}, {kv_cols, &b.v}}, kv_cols);
  sample.upload_bytes(b.sample.data());
  pos.upload_bytes(b.pos.data());
}

template class DeviceBuf<float>;
template class DeviceBuf<bf16>;
template class DeviceBuf<int32_t>;
template struct DeviceBlock<float>;
template struct DeviceBlock<bf16>;
template void upload<float>(DeviceBuf<float>&, const std::vector<double>&);
template void upload<bf16>(DeviceBuf<bf16>&, const std::vector<double>&);
template std::vector<double> download<float>(const DeviceBuf<float>&);
template std::vector<double> download<bf16>(const DeviceBuf<bf16>&);

}  // namespace meshloom::cuda::test
