// model_bench: how close the CPU model comes to the machine's GEMM roofline.
//
// 1. Measures the sgemm peak (a 2048³ product, best of several runs before
//    and after the model's) on 1 thread and on `threads` threads, both with
//    OpenBLAS's own threading and with the model's sliced gemm_parallel.
// 2. Runs forward + backward of one micro-batch (by default d_model 512,
//    8 layers, 8 heads, 4096 tokens packed from several documents, GPT-2's
//    vocabulary) and reports time, model FLOPs (model_flops(): 3 × forward
//    matrix products, attention over visible pairs only) and
//    MFU = model FLOPs / time / measured peak at the same thread count,
//    with the time split by kind of work.
//
// Usage: model_bench [key=value ...] with keys tokens d layers heads kv_heads
// ffn vocab threads iters tile_q tile_k seed max_doc loss_chunk, and attention_only=1
// to time one layer's attention alone (for tuning the tiles).
//
// Every rate is given over wall time and over process CPU time / threads:
// on a machine shared with other work, the second is the one to trust.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/blas.hpp"
#include "model/transformer.hpp"

namespace {

using meshloom::model::Op;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of the whole process (all threads). On a shared machine,
// cpu / threads is the time the work would take with the cores to itself
// (barrier spinning included, so it only flatters preempted runs).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Rate {
  double wall = 0;  // best GFLOP/s over wall time
  double cpu = 0;   // best GFLOP/s over cpu time / threads
};

// Best GFLOP/s of `reps` runs of a size³ sgemm; `sliced` uses gemm_parallel.
Rate sgemm_gflops(int threads, bool sliced, int64_t size, int reps) {
  std::vector<float> a(size * size, 0.5f), b(size * size, 0.25f), c(size * size, 0.0f);
  Rate best;
  const double flops = 2.0 * static_cast<double>(size * size * size);
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    if (sliced) {
      meshloom::model::gemm_parallel<float>(threads, Op::N, Op::T, size, size, size, 1.0f, a.data(),
                                            size, b.data(), size, 0.0f, c.data(), size);
    } else {
      meshloom::model::gemm<float>(Op::N, Op::T, size, size, size, 1.0f, a.data(), size, b.data(),
                                   size, 0.0f, c.data(), size);
    }
    const double wall = seconds_since(t0), cpu = (cpu_seconds() - c0) / threads;
    if (r > 0) {  // r = 0 warms up
      best.wall = std::max(best.wall, flops / wall / 1e9);
      best.cpu = std::max(best.cpu, flops / cpu / 1e9);
    }
  }
  return best;
}

// Packed documents of random lengths in [64, max_doc] filling `n` tokens.
meshloom::model::Batch make_batch(int64_t n, int64_t vocab, int64_t max_doc, std::mt19937& rng) {
  std::vector<int32_t> lengths;
  for (int64_t left = n; left > 0;) {
    const int64_t len =
        std::min<int64_t>(left, std::uniform_int_distribution<int64_t>(64, max_doc)(rng));
    lengths.push_back(static_cast<int32_t>(len));
    left -= len;
  }
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  for (int32_t& t : tokens) t = pick(rng);
  return meshloom::model::Batch::pack(tokens, lengths);
}

// Attention alone (one layer's block forward + backward over the batch).
void bench_attention(const meshloom::model::Shape& s, const meshloom::model::Batch& batch,
                     const meshloom::model::AttnOptions& opt, long iters) {
  namespace m = meshloom::model;
  const int64_t n = batch.size(), H = s.n_heads, D = s.head_dim, kvd = s.kv_dim();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(n * H * D), k(n * kvd), v(n * kvd), dout(n * H * D);
  for (auto* x : {&q, &k, &v, &dout}) {
    for (float& e : *x) e = normal(rng);
  }
  std::vector<float> out(n * H * D), lse(n * H), delta(n * H), dq(n * H * D), dk(n * kvd),
      dv(n * kvd);
  const m::AttnDims dims{H, s.n_kv_heads, D};
  const m::QueryBlock<float> qb{q.data(), H * D, batch.samples.data(), batch.positions.data(), n};
  const m::KvBlock<float> kb{
      k.data(), v.data(), kvd, kvd, batch.samples.data(), batch.positions.data(), n};
  double visible = 0;
  for (int32_t p : batch.positions) visible += p + 1.0;
  const double fwd_flops = 4.0 * H * D * visible;
  Rate f, b;
  for (long it = 0; it < iters + 1; ++it) {
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    m::attention_block_forward(dims, qb, kb, m::AttnOut<float>{out.data(), H * D, lse.data()}, opt);
    const double fw = seconds_since(t0), fc = (cpu_seconds() - c0) / opt.threads;
    t0 = Clock::now();
    c0 = cpu_seconds();
    std::fill(dq.begin(), dq.end(), 0.0f);
    std::fill(dk.begin(), dk.end(), 0.0f);
    std::fill(dv.begin(), dv.end(), 0.0f);
    m::attention_delta(dims, n, out.data(), H * D, dout.data(), H * D, delta.data(), opt.threads);
    m::attention_block_backward(
        dims, qb, kb,
        m::QueryGrad<float>{dout.data(), H * D, lse.data(), delta.data(), dq.data(), H * D},
        m::KvGrad<float>{dk.data(), dv.data(), kvd, kvd}, opt);
    const double bw = seconds_since(t0), bc = (cpu_seconds() - c0) / opt.threads;
    if (it == 0) continue;
    f.wall = std::max(f.wall, fwd_flops / fw / 1e9);
    f.cpu = std::max(f.cpu, fwd_flops / fc / 1e9);
    b.wall = std::max(b.wall, 2 * fwd_flops / bw / 1e9);
    b.cpu = std::max(b.cpu, 2 * fwd_flops / bc / 1e9);
  }
  std::printf(
      "attention (tiles %lldx%lld, %d threads): forward %.1f GFLOP/s (cpu-time %.1f), "
      "backward %.1f GFLOP/s (cpu-time %.1f; counted as 2x forward, computed 2.5x)\n",
      static_cast<long long>(opt.tile_q), static_cast<long long>(opt.tile_k), opt.threads, f.wall,
      f.cpu, b.wall, b.cpu);
}

using Options = std::map<std::string, long>;

// key=value arguments over the defaults; false (after a message) on an unknown key.
bool parse_options(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || !opt->count(arg.substr(0, eq))) {
      std::fprintf(stderr, "model_bench: unknown argument '%s'\n", arg.c_str());
      return false;
    }
    (*opt)[arg.substr(0, eq)] = std::strtol(arg.c_str() + eq + 1, nullptr, 10);
  }
  return true;
}

meshloom::model::Shape shape_of(Options& opt) {
  meshloom::model::Shape s;
  s.vocab = opt["vocab"];
  s.d_model = opt["d"];
  s.n_layers = opt["layers"];
  s.n_heads = opt["heads"];
  s.n_kv_heads = opt["kv_heads"];
  s.head_dim = s.d_model / s.n_heads;
  s.ffn_dim = opt["ffn"];
  s.tied = true;
  return s;
}

// The best rates seen of one-thread, OpenBLAS-threaded and sliced sgemm.
struct Peaks {
  Rate one, native, sliced;
  void measure(int threads) {
    namespace m = meshloom::model;
    const Rate p1 = sgemm_gflops(1, false, 2048, 5);
    const Rate ps = sgemm_gflops(threads, true, 2048, 5);
    m::blas_set_native_threads(threads);
    const Rate pn = sgemm_gflops(threads, false, 2048, 5);
    m::blas_use_one_thread();
    for (auto [dst, src] : {std::pair{&one, p1}, std::pair{&native, pn}, std::pair{&sliced, ps}}) {
      dst->wall = std::max(dst->wall, src.wall);
      dst->cpu = std::max(dst->cpu, src.cpu);
    }
  }
};

// The fastest of `iters` forward+backward iterations after a warm-up.
struct Timing {
  double best = 1e30, best_cpu = 1e30, best_fwd = 0, loss = 0;
  meshloom::model::Profile profile;
};

Timing time_model(meshloom::model::Transformer<float>& model, const meshloom::model::Batch& batch,
                  long iters, int threads) {
  namespace m = meshloom::model;
  Timing r;
  for (long it = 0; it < iters + 1; ++it) {
    model.zero_grads();
    model.reset_profile();
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    const m::LossSum ls = model.forward(batch);
    const double fwd = seconds_since(t0);
    model.backward(1.0 / static_cast<double>(ls.count));
    const double total = seconds_since(t0), cpu = (cpu_seconds() - c0) / threads;
    r.loss = ls.sum / static_cast<double>(ls.count);
    std::printf(
        "  iteration %ld%s: forward %.3f s, backward %.3f s, total %.3f s (cpu-time/threads "
        "%.3f s)\n",
        it, it == 0 ? " (warm-up)" : "", fwd, total - fwd, total, cpu);
    if (it == 0) continue;
    r.best_cpu = std::min(r.best_cpu, cpu);
    if (total < r.best) {
      r.best = total;
      r.best_fwd = fwd;
      r.profile = model.profile();
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = {{"tokens", 4096},  {"d", 512},           {"layers", 8},        {"heads", 8},
                 {"kv_heads", 8},   {"ffn", 1376},        {"vocab", 50257},     {"threads", 2},
                 {"iters", 3},      {"tile_q", 64},       {"tile_k", 128},      {"seed", 1},
                 {"max_doc", 1536}, {"loss_chunk", 1024}, {"attention_only", 0}};
  if (!parse_options(argc, argv, &opt)) return 2;
  const int threads = static_cast<int>(opt["threads"]);
  namespace m = meshloom::model;
  const m::Shape s = shape_of(opt);
  std::mt19937 rng(static_cast<uint32_t>(opt["seed"]));
  const m::Batch batch = make_batch(opt["tokens"], s.vocab, opt["max_doc"], rng);
  m::blas_use_one_thread();
  if (opt["attention_only"]) {
    bench_attention(s, batch, m::AttnOptions{opt["tile_q"], opt["tile_k"], threads}, opt["iters"]);
    return 0;
  }

  // 1. Roofline (measured again after the model runs; the best of both counts).
  Peaks peaks;
  peaks.measure(threads);

  // 2. The model.
  m::ModelOptions mo;
  mo.threads = threads;
  mo.attn_tile_q = opt["tile_q"];
  mo.attn_tile_k = opt["tile_k"];
  mo.loss_chunk = opt["loss_chunk"];
  m::Transformer<float> model(s, mo);
  model.init_params(static_cast<uint64_t>(opt["seed"]));
  const double flops = m::model_flops(s, batch);
  int64_t docs = 0;
  for (int64_t i = 0; i < batch.size(); ++i) docs += batch.positions[i] == 0 ? 1 : 0;
  std::printf(
      "model: V=%lld d=%lld layers=%lld heads=%lld/%lld ffn=%lld, %lld params; %lld tokens "
      "in %lld documents; %.3f TFLOP per forward+backward\n",
      static_cast<long long>(s.vocab), static_cast<long long>(s.d_model),
      static_cast<long long>(s.n_layers), static_cast<long long>(s.n_heads),
      static_cast<long long>(s.n_kv_heads), static_cast<long long>(s.ffn_dim),
      static_cast<long long>(model.layout().numel()), static_cast<long long>(batch.size()),
      static_cast<long long>(docs), flops / 1e12);

  const Timing t = time_model(model, batch, opt["iters"], threads);
  peaks.measure(threads);
  const Rate &peak1 = peaks.one, &native = peaks.native, &sliced = peaks.sliced;
  std::printf(
      "sgemm 2048^3 GFLOP/s, best before/after (wall | cpu-time): 1 thread %.1f | %.1f; "
      "%d threads: OpenBLAS %.1f | %.1f, sliced %.1f | %.1f\n",
      peak1.wall, peak1.cpu, threads, native.wall, native.cpu, sliced.wall, sliced.cpu);
  // The peak is the best rate seen by either clock: conservative for both MFUs
  // (a preempted run can only lower the wall-clock peak).
  const double peak = std::max({native.wall, sliced.wall, native.cpu, sliced.cpu});
  const m::Profile& p = t.profile;
  std::printf("best: forward %.3f s + backward %.3f s = %.3f s (loss %.4f)\n", t.best_fwd,
              t.best - t.best_fwd, t.best, t.loss);
  for (const auto& [what, k] : {std::pair{"wall", p.wall}, std::pair{"cpu-time/threads", p.cpu}}) {
    std::printf(
        "  by kind (%s): matmul %.3f s, attention %.3f s, LM head %.3f s, cross-entropy "
        "%.3f s, other %.3f s\n",
        what, k.matmul, k.attention, k.head, k.loss, k.other);
  }
  std::printf(
      "MFU (wall clock, best iteration): %.1f GFLOP/s = %.1f%% of the %d-thread sgemm "
      "peak %.1f\n",
      flops / t.best / 1e9, 100.0 * flops / t.best / 1e9 / peak, threads, peak);
  std::printf(
      "MFU (cpu-time based):             %.1f GFLOP/s = %.1f%% of the %d-thread sgemm "
      "peak %.1f\n",
      flops / t.best_cpu / 1e9, 100.0 * flops / t.best_cpu / 1e9 / peak, threads, peak);
  return 0;
}
