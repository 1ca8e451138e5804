// The experiment config: typed sections with defaults, read from YAML.
//
// Every key is declared once, in its section's visit() (the model section's in
// model_config.hpp); see schema.hpp for how that one list drives reading,
// printing and the docs/config.md reference. Cross-key rules (d_model
// divisible by n_heads, schedule names known sources, ...) live in
// validate.cpp. Sizes that depend on the world (the trainer count) are
// checked by the runtime, which knows it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "config/model_config.hpp"
#include "config/schema.hpp"
#include "config/source_format.hpp"

namespace meshloom::config {

// The config's choices (EnumNames below gives each value's name in YAML).
enum class Backend { cpu, cuda };
enum class Precision { bf16, fp32 };
enum class GpuComm { automatic, nccl, mpi };
enum class DataMode { disaggregated, colocated };
enum class Planner { hdp, bytescale, naive, static_grid };
enum class Balance { dp, pp };
enum class CpAlgorithm { ring, ulysses, hybrid, automatic };
enum class FaultKind { crash, hang, slow, crash_writing };

template <>
struct EnumNames<Backend> {
  static constexpr std::array<const char*, 2> names{"cpu", "cuda"};
};
template <>
struct EnumNames<Precision> {
  static constexpr std::array<const char*, 2> names{"bf16", "fp32"};
};
template <>
struct EnumNames<GpuComm> {
  static constexpr std::array<const char*, 3> names{"auto", "nccl", "mpi"};
};
template <>
struct EnumNames<SourceFormat> {
  static constexpr std::array<const char*, 5> names = kSourceFormatNames;
};
template <>
struct EnumNames<DataMode> {
  static constexpr std::array<const char*, 2> names{"disaggregated", "colocated"};
};
template <>
struct EnumNames<Planner> {
  static constexpr std::array<const char*, 4> names{"hdp", "bytescale", "naive", "static"};
};
template <>
struct EnumNames<Balance> {
  static constexpr std::array<const char*, 2> names{"dp", "pp"};
};
template <>
struct EnumNames<CpAlgorithm> {
  static constexpr std::array<const char*, 4> names{"ring", "ulysses", "hybrid", "auto"};
};
template <>
struct EnumNames<FaultKind> {
  static constexpr std::array<const char*, 4> names{"crash", "hang", "slow", "crash_writing"};
};
template <>
struct EnumNames<LogLevel> {
  static constexpr std::array<const char*, 4> names{"debug", "info", "warn", "error"};
};

struct RunConfig {
  ML_CONFIG_SECTION;
  std::string name = "meshloom";
  std::string dir = "runs/meshloom";
  int64_t seed = 1234;
  int64_t steps = 100;
  Backend backend = Backend::cpu;
  Precision precision = Precision::bf16;
  GpuComm gpu_comm = GpuComm::automatic;
  int64_t gpu_group_cache_mib = 1024;
  int64_t threads = 0;
  double peak_gflops = 0;
  double timeout = 300.0;
  template <class V>
  void visit(V& v) {
    v.field("name", name, "Run name, used in logs and file names");
    v.field("dir", dir, "Run directory: effective config, metrics, checkpoints");
    v.field("seed", seed, "Seed of every random choice (data order, initialization)", at_least(0));
    v.field("steps", steps, "Number of optimizer steps", at_least(1));
    v.field("backend", backend, "Trainer backend");
    v.field("precision", precision,
            "CUDA backend: bf16 weights and activations with fp32 accumulation, or fp32 "
            "throughout (the CPU backend is always fp32)");
    v.field("gpu_comm", gpu_comm,
            "CUDA backend: how trainers sum gradients and pass ring blocks: nccl (GPU to GPU, "
            "one GPU per trainer), mpi (through host memory; trainers may share a GPU), auto "
            "(nccl where every trainer has its own GPU)");
    v.field("gpu_group_cache_mib", gpu_group_cache_mib,
            "CUDA backend over NCCL: device memory in MiB that the cached communicators of CP "
            "groups may hold, each measured at its split (least recently used out; the device "
            "memory check counts it)",
            in_range(1, 1 << 20));
    v.field("threads", threads, "Compute threads per trainer (0: cores per rank)",
            in_range(0, 1024));
    v.field("peak_gflops", peak_gflops,
            "Compute peak of one node's trainers in GFLOP/s that MFU is measured against "
            "(run.backend: cuda: of one trainer's GPU; 0: measured at start)",
            in_range(0.0, 1e9));
    v.field("timeout", timeout,
            "Watchdog: seconds any rank waits for another before the job is aborted",
            in_range(1.0, 86400.0));
  }
};

struct RolesConfig {
  ML_CONFIG_SECTION;
  // The layout counts ranks in int (as MPI does); a bound here names the key.
  static constexpr int64_t kMaxRanks = int64_t(1) << 20;
  int64_t constructors = 1;
  int64_t loaders = 1;
  template <class V>
  void visit(V& v) {
    v.field("constructors", constructors,
            "Data constructor ranks (rank 0 is the lead constructor and planner)",
            in_range(1, kMaxRanks));
    v.field("loaders", loaders, "Source loader ranks (0 only with data.mode: colocated)",
            in_range(0, kMaxRanks));
  }
};

struct ClusterConfig {
  ML_CONFIG_SECTION;
  RolesConfig roles;
  int64_t gpus_per_node = 0;
  template <class V>
  void visit(V& v) {
    v.field("roles", roles, "Role counts; every other rank is a trainer");
    v.field("gpus_per_node", gpus_per_node, "GPUs per node for the CUDA backend (0: CPU trainers)",
            in_range(0, 64));
  }
};

struct ParallelConfig {
  ML_CONFIG_SECTION;
  int64_t tp = 1;
  bool sequence_parallel = false;
  int64_t pp = 1;
  std::vector<int64_t> stage_layers;
  template <class V>
  void visit(V& v) {
    v.field("tp", tp,
            "Tensor-parallel degree: trainers form groups of tp consecutive ranks on one node, "
            "each group one HDP rank (must divide the trainers, n_heads, n_kv_heads, ffn_dim)",
            in_range(1, 1024));
    v.field("sequence_parallel", sequence_parallel,
            "With tp > 1: norms and the residual stream split by tokens over the TP group "
            "(reduce-scatter / all-gather instead of all-reduce; CPU backend); a no-op at tp 1");
    v.field("pp", pp,
            "Pipeline-parallel degree: an HDP rank becomes a pipeline of pp stages, each a TP "
            "group, run 1F1B (an HDP rank is tp x pp trainers)",
            in_range(1, 1024));
    v.field("stage_layers", stage_layers,
            "Layers per pipeline stage, pp entries summing to model.n_layers; empty: balanced "
            "by the cost model (embedding and LM head counted)");
  }
};

struct OptimConfig {
  ML_CONFIG_SECTION;
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup_steps = 10;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;
  bool zero1 = false;
  template <class V>
  void visit(V& v) {
    v.field("lr", lr, "Peak learning rate (AdamW)", in_range(0.0, 10.0));
    v.field("min_lr", min_lr, "Learning rate at the end of the cosine decay", in_range(0.0, 10.0));
    v.field("warmup_steps", warmup_steps, "Linear warmup steps", at_least(0));
    v.field("weight_decay", weight_decay, "Decoupled weight decay of matrices",
            in_range(0.0, 10.0));
    v.field("beta1", beta1, "AdamW beta1", in_range(0.0, 0.999999));
    v.field("beta2", beta2, "AdamW beta2", in_range(0.0, 0.999999));
    v.field("eps", eps, "AdamW epsilon", in_range(0.0, 1.0));
    v.field("grad_clip", grad_clip, "Global gradient norm clip (0: off)", at_least(0.0));
    v.field("zero1", zero1, "Shard optimizer state over trainers (ZeRO-1)");
  }
};

struct SourceConfig {
  ML_CONFIG_SECTION;
  std::string name;
  std::string path;
  SourceFormat format = SourceFormat::indexed;
  std::string tokenizer = "gpt2";
  double weight = 1.0;
  template <class V>
  void visit(V& v) {
    v.field("name", name, "Source name, used by the schedule and in reports", required());
    v.field("path", path,
            "Indexed dataset prefix (PREFIX.bin/.idx), a file or folder of text, or (webdataset) "
            "tar shards: a file, a folder or a glob such as shards/train-*.tar",
            required());
    v.field("format", format, "How the source is stored");
    v.field("tokenizer", tokenizer,
            "Tokenizer for raw text: byte, gpt2, tiktoken:NAME|FILE (cl100k_base, "
            "o200k_base or a rank file) or hf:FILE (a Hugging Face tokenizer.json); ignored "
            "for indexed");
    v.field("weight", weight,
            "Mixture weight when no schedule entry applies (0: never trained on, as an "
            "eval.sources source)",
            at_least(0.0));
  }
};

struct ScheduleEntry {
  ML_CONFIG_SECTION;
  int64_t step = 0;
  WeightMap weights;
  template <class V>
  void visit(V& v) {
    v.field("step", step, "Step at which these weights hold exactly", at_least(0));
    v.field("weights", weights, "Mixture weights by source name (linear between entries)");
  }
};

struct LongPolicyConfig {
  ML_CONFIG_SECTION;
  int64_t threshold = 0;
  double share = 0.0;
  template <class V>
  void visit(V& v) {
    v.field("threshold", threshold, "Length (tokens) above which a sample counts as long",
            at_least(0));
    v.field("share", share, "Target share of each step's tokens from long samples (0: off)",
            in_range(0.0, 1.0));
  }
};

// Images of image-text (webdataset) sources: lib/image/patches.hpp is the
// input function these keys parameterize.
struct ImageConfig {
  ML_CONFIG_SECTION;
  int64_t max_side = 512;
  int64_t patch = 16;
  int64_t max_pixels = 64'000'000;
  int64_t cache_mib = 256;
  template <class V>
  void visit(V& v) {
    v.field("max_side", max_side,
            "Images are resized (PIL's bilinear filter) so that their longer side is at most "
            "this, keeping the aspect ratio; never enlarged",
            in_range(1, 1 << 16));
    v.field("patch", patch, "Side p of the p x p x 3 patches an image is cut into (one token each)",
            in_range(1, 1024));
    v.field("max_pixels", max_pixels,
            "Larger images (width x height, from the header) are skipped and reported",
            at_least(1));
    v.field("cache_mib", cache_mib,
            "Decoded, resized images a loader keeps per image source (LRU), in MiB: what it "
            "prepared ahead waits there for the constructors",
            at_least(0));
  }
};

struct DataConfig {
  ML_CONFIG_SECTION;
  DataMode mode = DataMode::disaggregated;
  int64_t seq_len = 4096;
  int64_t tokens_per_step = 32768;
  int64_t prefetch = 2;
  int64_t workers = 2;
  int64_t colocated_processes = 0;
  int64_t rebalance_every = 20;
  bool shadows = true;
  int64_t cache_tokens = int64_t(1) << 20;
  std::vector<SourceConfig> sources;
  std::vector<ScheduleEntry> schedule;
  LongPolicyConfig long_policy;
  ImageConfig image;
  template <class V>
  void visit(V& v) {
    v.field("mode", mode, "Where sources are loaded: loader ranks, or every trainer itself");
    v.field("seq_len", seq_len, "Longest sample; longer documents continue in the next sample",
            in_range(2, int64_t(1) << 31));
    v.field("tokens_per_step", tokens_per_step, "Global batch size in tokens",
            in_range(2, int64_t(1) << 40));
    v.field("prefetch", prefetch, "Steps the data path runs ahead of the trainers",
            in_range(0, 64));
    v.field("workers", workers, "Worker threads per loader", in_range(1, 256));
    v.field("colocated_processes", colocated_processes,
            "Colocated mode: data worker processes per trainer, each with its own copy of every "
            "source, as PyTorch DataLoader workers (0: the trainer reads its sources itself)",
            in_range(0, 64));
    v.field("rebalance_every", rebalance_every,
            "Steps between loader re-partitioning by measured cost (0: never)", at_least(0));
    v.field("shadows", shadows,
            "Hot-standby shadows: each loader keeps the sources of the loader(s) it shadows "
            "(on another node when there is one) open and prepares what they prepared (memory "
            "for a faster failover)");
    v.field("cache_tokens", cache_tokens,
            "Tokens of tokenized documents a loader keeps per raw source (LRU)", at_least(0));
    v.field("sources", sources, "Data sources");
    v.field("schedule", schedule, "Curriculum: mixture weights at given steps");
    v.field("long_policy", long_policy, "Long/short policy");
    v.field("image", image, "Images of image-text (webdataset) sources");
  }
};

struct PlanConfig {
  ML_CONFIG_SECTION;
  Planner planner = Planner::hdp;
  Balance balance = Balance::dp;
  int64_t capacity = 4096;
  double slack = 0.02;
  bool offload = false;
  bool static_fallback = false;
  CpAlgorithm cp_algorithm = CpAlgorithm::ring;
  double flops = 2.0e10;
  double bandwidth = 5.0e9;
  double intra_bandwidth = 0;
  std::string calibration;
  template <class V>
  void visit(V& v) {
    v.field("planner", planner,
            "hdp (dynamic mesh), bytescale (ByteScale's Alg. 2), naive (Alg. 1) or static "
            "(fixed DP x CP grid)");
    v.field("balance", balance,
            "dp: plan.planner balances the HDP ranks' micro-batches; pp: ByteScale's "
            "PP-Balance, each HDP rank a pipeline: sequences longer than plan.capacity run in "
            "the rings hdp plans for them, the rest go to pipelines by length, similar lengths "
            "together and more micro-batches where they are cheaper (plan.planner unused)");
    v.field("capacity", capacity, "Tokens one trainer can hold in a micro-batch (C)",
            in_range(1, int64_t(1) << 31));
    v.field("slack", slack, "Balance scheduler slack: relative gap it tolerates",
            in_range(0.0, 1.0));
    v.field("offload", offload, "Selective activation offloading for long sequences");
    v.field("static_fallback", static_fallback,
            "hdp only: also plan the static DP x CP grid and use its plan for a step when the "
            "cost model predicts it faster (never slower than static, but a sequence that fits "
            "in C may then be split and communicate; off: ByteScale's data-aware sharding)");
    v.field("cp_algorithm", cp_algorithm,
            "How each split sequence's group runs attention: ring (ring attention, today's); "
            "ulysses (all-to-all over heads, degree the largest divisor of the group that "
            "divides a TP rank's heads, a ring across if that is less than the group); hybrid "
            "(Ulysses inside subgroups on one node, a ring of at least 2 across them); auto "
            "(the cheapest of these per group by the cost model, never predicted slower than "
            "ring). The groups are the planner's either way");
    v.field("flops", flops, "Cost model: effective FLOP/s of one trainer", above(0.0));
    v.field("bandwidth", bandwidth, "Cost model: bytes/s one trainer sends to another", above(0.0));
    v.field("intra_bandwidth", intra_bandwidth,
            "Cost model: bytes/s one trainer sends to another on the same node (the nodes are "
            "the trainers' host names; 0: plan.bandwidth)",
            at_least(0.0));
    v.field("calibration", calibration,
            "Cost model: CSV of measured micro-batches to fit (meshloom plan --calibrate)");
  }
};

struct CheckpointConfig {
  ML_CONFIG_SECTION;
  std::string dir;
  int64_t every = 0;
  int64_t keep = 3;
  int64_t full_every = 4;
  bool background = true;
  bool collective = true;
  int64_t max_restarts = 3;
  template <class V>
  void visit(V& v) {
    v.field("dir", dir, "Checkpoint folder (empty: <run.dir>/checkpoints)");
    v.field("every", every, "Checkpoint every N steps (0: never)", at_least(0));
    v.field("keep", keep,
            "Newest checkpoints kept on disk, plus the full one that the oldest kept delta "
            "builds on (full_every), so keep 3 may leave 4 files",
            at_least(1));
    v.field("full_every", full_every, "Loader state is full every K checkpoints, deltas between",
            at_least(1));
    v.field("background", background, "Write checkpoints while training continues");
    v.field("collective", collective,
            "Every trainer writes its own part of the state into the one file, and reads only "
            "its part on resume, whatever layout wrote it (parallel HDF5, format 2); false: "
            "trainer 0 gathers the whole state and writes it alone (format 1)");
    v.field("max_restarts", max_restarts,
            "Resumes from the same checkpoint before --resume auto gives up", at_least(1));
  }
};

struct FaultConfig {
  ML_CONFIG_SECTION;
  FaultKind kind = FaultKind::crash;
  int64_t rank = 0;
  int64_t step = 0;
  double seconds = 1.0;
  int64_t bytes = 0;
  template <class V>
  void visit(V& v) {
    v.field("kind", kind,
            "crash (the process kills itself), hang (stops answering), slow (sleeps each step "
            "or request), crash_writing (a trainer kills itself while writing its part of a "
            "checkpoint)");
    v.field("rank", rank, "World rank that fails", at_least(0));
    v.field("step", step, "First step at which it fails", at_least(0));
    v.field("seconds", seconds, "slow: seconds added per step (trainer) or request (loader)",
            at_least(0.0));
    v.field("bytes", bytes,
            "crash_writing: bytes of its part the trainer writes before it dies (in the first "
            "checkpoint at or after `step`)",
            at_least(0));
  }
};

struct FaultsConfig {
  ML_CONFIG_SECTION;
  double loader_timeout = 5.0;
  double straggler_factor = 1.5;
  int64_t straggler_steps = 3;
  std::vector<FaultConfig> inject;
  template <class V>
  void visit(V& v) {
    v.field("loader_timeout", loader_timeout,
            "Seconds without an answer after which a loader counts as dead and its shadow "
            "takes over",
            above(0.0));
    v.field("straggler_factor", straggler_factor,
            "A trainer this many times slower than the median is a straggler", above(1.0));
    v.field("straggler_steps", straggler_steps,
            "Consecutive slow steps before a straggler is named", at_least(1));
    v.field("inject", inject, "Faults to inject (tests, drills)");
  }
};

struct LogConfig {
  ML_CONFIG_SECTION;
  LogLevel level = LogLevel::info;
  bool all_ranks = false;
  int64_t every = 1;
  bool metrics = true;
  template <class V>
  void visit(V& v) {
    v.field("level", level, "Log level");
    v.field("all_ranks", all_ranks, "Every rank logs (default: rank 0 only)");
    v.field("every", every, "Print a step line every N steps", at_least(1));
    v.field("metrics", metrics, "Write per-rank timings to <run.dir>/metrics.jsonl");
  }
};

// Passkey retrieval (meshloom eval): dataplane/passkey.hpp.
struct PasskeyConfig {
  ML_CONFIG_SECTION;
  std::vector<int64_t> lengths;
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};
  int64_t trials = 4;
  int64_t decoys = 4;
  template <class V>
  void visit(V& v) {
    v.field("lengths", lengths,
            "Prompt lengths in tokens, at most data.seq_len (empty: no passkey test)");
    v.field("depths", depths, "Where the key sits in the text, 0 (start) to 1 (end)");
    v.field("trials", trials, "Prompts per length and depth, each with its own key",
            in_range(1, 1000));
    v.field("decoys", decoys, "Wrong keys the true one is ranked against", in_range(1, 99));
  }
};

struct EvalConfig {
  ML_CONFIG_SECTION;
  double holdout = 0;
  int64_t every = 0;
  int64_t tokens = 0;
  std::vector<int64_t> positions;
  std::vector<std::string> sources;
  PasskeyConfig passkey;
  template <class V>
  void visit(V& v) {
    v.field("holdout", holdout,
            "Share of each source's documents held out for evaluation, never trained on (by a "
            "hash of source name and document: the same for any loaders, layout or restart)",
            in_range(0.0, 0.5));
    v.field("sources", sources,
            "Sources (data.sources names, of weight 0) held out whole: evaluated, never "
            "trained on; with them the evaluation set comes from these alone");
    v.field("every", every, "Evaluate the held-out set every N steps and after the last (0: never)",
            at_least(0));
    v.field(
        "tokens", tokens,
        "Held-out tokens per evaluation, shared out by mixture weight (0: data.tokens_per_step)",
        at_least(0));
    v.field("positions", positions,
            "First positions of the loss-by-position buckets (default: 0 and powers of two "
            "below data.seq_len)");
    v.field("passkey", passkey, "Passkey retrieval in meshloom eval");
  }
};

struct Config {
  ML_CONFIG_SECTION;
  RunConfig run;
  ClusterConfig cluster;
  ParallelConfig parallel;
  ModelConfig model;
  OptimConfig optim;
  DataConfig data;
  PlanConfig plan;
  CheckpointConfig checkpoint;
  FaultsConfig faults;
  LogConfig log;
  EvalConfig eval;
  template <class V>
  void visit(V& v) {
    v.field("run", run, "The run: name, folder, seed, length");
    v.field("cluster", cluster, "How ranks split into roles");
    v.field("parallel", parallel, "Model parallelism inside each HDP rank");
    v.field("model", model, "The transformer's shape");
    v.field("optim", optim, "Optimizer and learning-rate schedule");
    v.field("data", data, "The data plane: sources, mixture, curriculum");
    v.field("plan", plan, "The per-step parallel plan");
    v.field("checkpoint", checkpoint, "HDF5 checkpoints");
    v.field("faults", faults, "Failure detection and injected faults");
    v.field("log", log, "Logging and metrics");
    v.field("eval", eval, "Evaluation: the held-out split and held-out loss");
  }
};

// The model's patch dimension P = 3 p² (data.image.patch p) when a source
// holds images (format: webdataset), else 0: a text-only run's model has no
// patch_embed (design.md, "The model").
inline int64_t patch_dim(const Config& c) {
  for (const SourceConfig& s : c.data.sources)
    if (s.format == SourceFormat::webdataset) return 3 * c.data.image.patch * c.data.image.patch;
  return 0;
}

// Reads `file`, applies `overrides` ("a.b=c", YAML values), checks every key
// and every cross-key rule. Throws ConfigError naming file:line:column (or
// the --set) and the key path. Relative paths become absolute: those written
// in the file against its folder, --set ones and defaults against the
// working directory (paths.cpp).
Config load_config(const std::string& file, const std::vector<std::string>& overrides = {});
// The same from text already in memory (`name` is used in messages); its
// paths stay as written.
Config parse_config(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides = {});

// The `model:` section alone of a config's text (a checkpoint's or weights
// file's stored config), its keys checked; the other sections are ignored.
ModelConfig parse_model_section(const std::string& text, const std::string& name);

// The effective config as YAML (every key, defaults included).
std::string to_yaml(const Config& config);

// One row per key: path, type, default, allowed values, meaning.
std::vector<KeyDoc> reference_rows();
// The reference as a markdown table (what docs/config.md embeds).
std::string reference_markdown();

}  // namespace meshloom::config
