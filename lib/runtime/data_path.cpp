// Loaders, constructors and the trainers' receiving side of the data path.
#include "runtime/data_path.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <map>
#include <new>
#include <thread>

#include "base/bytes.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "comm/mpi_check.hpp"
#include "comm/p2p.hpp"
#include "runtime/data_workers.hpp"
#include "runtime/faults.hpp"

namespace meshloom {

int64_t peak_rss_kib() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss);
}

int64_t pss_kib(int pid) {
  const std::string path =
      pid > 0 ? strf("/proc/%d/smaps_rollup", pid) : std::string("/proc/self/smaps_rollup");
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return 0;
  char line[256];
  int64_t kib = 0;
  while (std::fgets(line, sizeof(line), f))
    if (std::sscanf(line, "Pss: %lld kB", reinterpret_cast<long long*>(&kib)) == 1) break;
  std::fclose(f);
  return kib;
}

// A colocated trainer's data worker processes (data.colocated_processes).
static std::unique_ptr<DataWorkerPool> data_workers;

void fill_memory(proto::Report* report) {
  report->rank = process_rank();
  report->peak_rss_kib = peak_rss_kib();
  report->worker_pss_kib = data_workers ? data_workers->pss_kib() : 0;
  report->pss_kib = pss_kib() + report->worker_pss_kib;
}

static double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// --- loader -----------------------------------------------------------------

// A loader tokenizes documents on worker threads and frees their tokens once
// served, and glibc keeps such free chunks in its per-thread arenas. When the
// loader has worked and is idle, at most twice a second, give those pages
// back to the system. (Measured on bench_data's 8 sources after 100 steps:
// within noise, the lean loader at 55-60 MiB.) Trainers do not do this: their
// next step would fault the pages in again.
namespace {
class IdleTrim {
 public:
  void worked() { dirty_ = true; }
  void maybe() {
    if (!dirty_ || seconds_since(last_) < 0.5) return;
    malloc_trim(0);
    dirty_ = false;
    last_ = std::chrono::steady_clock::now();
  }

 private:
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_{};
};
}  // namespace

void run_loader(const World& w) {
  const auto& sources = w.config.data.sources;
  std::vector<std::unique_ptr<DocSource>> open(sources.size());
  auto source_at = [&](int32_t s) -> DocSource& {
    ML_CHECK(s >= 0 && size_t(s) < sources.size(), "request for an unknown source");
    if (!open[s])
      open[s] = open_doc_source(sources[s], w.config.data.cache_tokens,
                                w.config.model.vocab_size);  // a reassignment may bring new sources
    return *open[s];
  };
  proto::Report report;
  report.role = int(Role::loader);
  const double timeout = w.config.run.timeout;
  const InjectedFaults faults(w.config, w.rank);
  bool hung = false, slowed = false;
  int shadow = -1;  // where this loader mirrors what it prepares
  std::vector<PendingSend> mirrors;
  std::vector<proto::LengthRequest> to_mirror;  // deltas received as a shadow, not yet prepared
  // A fault fires on the first request for its step or later.
  auto inject = [&](int64_t step) {
    if (faults.crash_at(step)) {
      std::fprintf(stderr, "meshloom: fault injected: loader rank %d crashes at step %lld\n",
                   w.rank, (long long)step);
      std::fflush(stderr);
      std::raise(SIGKILL);  // a real death: no goodbye to anyone
    }
    if (faults.hang_at(step) && !hung) {
      std::fprintf(stderr, "meshloom: fault injected: loader rank %d hangs at step %lld\n", w.rank,
                   (long long)step);
      std::fflush(stderr);
      hung = true;
      ++report.faults_fired;
    }
    if (faults.slow_at(step) > 0) {
      if (!slowed) ++report.faults_fired;
      slowed = true;
      std::this_thread::sleep_for(std::chrono::duration<double>(faults.slow_at(step)));
    }
  };
  IdleTrim trim;
  int idle = 0;
  while (true) {
    int from = -1, tag = -1;
    if (!poll_message(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &from, &tag)) {
      // Idle: prepare what the loader this one shadows has prepared.
      if (!to_mirror.empty() && !hung) {
        proto::LengthRequest m = std::move(to_mirror.back());
        to_mirror.pop_back();
        source_at(m.source).prepare(m.docs, int(w.config.data.workers));
        trim.worked();
        continue;
      }
      if (idle == 200) trim.maybe();  // a few ms without a request
      backoff(&idle);
      continue;
    }
    idle = 0;
    std::string msg = recv_bytes(from, tag, MPI_COMM_WORLD, timeout, "a request");
    if (hung && tag != proto::kStop) continue;  // a hung loader answers nothing
    const auto busy = std::chrono::steady_clock::now();
    if (tag == proto::kAssign) {
      proto::Assign a = proto::decode_assign(msg, from);
      shadow = a.shadow;
      for (int32_t s : a.shadow_sources) source_at(s);  // hot standby: opened, indexes ready
      for (int32_t s : a.sources) {
        proto::LengthReply count;
        count.source = s;
        count.docs = {source_at(s).docs()};
        send_bytes(proto::encode(count), from, proto::kDocCount, MPI_COMM_WORLD);
      }
    } else if (tag == proto::kLengthReq) {
      proto::LengthRequest req = proto::decode_length_request(msg, from);
      inject(req.step);
      if (hung) continue;
      DocSource& src = source_at(req.source);
      src.prepare(req.docs, int(w.config.data.workers));
      proto::LengthReply rep;
      rep.source = req.source;
      rep.docs = req.docs;
      for (int64_t d : req.docs) rep.lengths.push_back(src.length(d));
      rep.seconds_per_token = src.seconds_per_token();
      send_bytes(proto::encode(rep), from, proto::kLengthRep, MPI_COMM_WORLD);
      // The shadow gets the delta: which documents this loader now holds ready.
      if (shadow >= 0 && shadow != w.rank) {
        mirrors.emplace_back(msg, shadow, proto::kMirror, MPI_COMM_WORLD);
        std::vector<PendingSend> still;
        for (auto& m : mirrors)
          if (!m.done()) still.push_back(std::move(m));
        mirrors = std::move(still);
      }
    } else if (tag == proto::kMirror) {
      to_mirror.push_back(proto::decode_length_request(msg, from));
    } else if (tag == proto::kTokenReq) {
      proto::TokenRequest req = proto::decode_token_request(msg, from);
      inject(req.step);
      if (hung) continue;
      std::vector<int32_t> tokens;
      for (const auto& r : req.ranges) source_at(r.source).read(r.doc, r.offset, r.length, &tokens);
      report.tokens += int64_t(tokens.size());
      ByteWriter out;
      out.put_vector(tokens);
      send_bytes(out.bytes(), from, proto::kTokenRep, MPI_COMM_WORLD);
    } else if (tag == proto::kStop) {
      break;
    } else {
      ML_FAIL(strf("loader got an unexpected message (tag %d) from rank %d", tag, from));
    }
    report.busy_seconds += seconds_since(busy);
    trim.worked();
  }
  // Mirrors to a dead shadow never complete: let them go.
  for (auto& m : mirrors) m.abandon();
  fill_memory(&report);
  send_bytes(proto::encode(report), 0, proto::kReport, MPI_COMM_WORLD);
}

// --- constructor ----------------------------------------------------------------

Constructor::Constructor(const World& w, LoaderRouter* router)
    : w_(w), own_router_(w), router_(router ? router : &own_router_) {}

// The whole token list of every sample that `trainers` touch.
static std::map<int32_t, std::vector<int32_t>> fetch_samples(
    const config::Config& config, const proto::StepWork& work,
    std::vector<std::unique_ptr<DocSource>>* local, LoaderRouter* router) {
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::vector<int32_t>> by_owner;  // owner rank -> sample indices
  for (const auto& t : work.trainers)
    for (const auto& mb : t.micro)
      for (const auto& seg : mb.segments) tokens[seg.sample];
  for (auto& [idx, unused] : tokens) {
    (void)unused;
    const proto::Sample& s = work.samples[size_t(idx)];
    if (local) {
      auto& src = (*local)[size_t(s.source)];
      if (!src)
        src = open_doc_source(config.data.sources[size_t(s.source)], config.data.cache_tokens,
                              config.model.vocab_size);
      src->read(s.doc, s.offset, s.length, &tokens[idx]);
    } else {
      by_owner[s.owner].push_back(idx);
    }
  }
  for (auto& [owner, idxs] : by_owner) {
    proto::TokenRequest req;
    req.step = work.step;
    for (int32_t idx : idxs) {
      const proto::Sample& s = work.samples[size_t(idx)];
      req.ranges.push_back({s.source, s.doc, s.offset, s.length});
    }
    int served = owner;
    std::string msg = router->request(owner, proto::kTokenReq, proto::encode(req), proto::kTokenRep,
                                      "a token request", &served);
    ByteReader r(msg, "token reply", served);
    std::vector<int32_t> all = r.get_vector<int32_t>();
    size_t at = 0;
    for (int32_t idx : idxs) {
      const int64_t n = work.samples[size_t(idx)].length;
      if (n < 0 || at + size_t(n) > all.size()) r.fail_corrupt("fewer tokens than asked");
      tokens[idx].assign(all.begin() + int64_t(at), all.begin() + int64_t(at) + n);
      at += size_t(n);
    }
    if (at != all.size()) r.fail_corrupt("more tokens than asked");
  }
  return tokens;
}

static proto::Batch pack(const proto::StepWork& work, const proto::TrainerWork& t,
                         const std::map<int32_t, std::vector<int32_t>>& tokens) {
  proto::Batch b;
  b.step = work.step;
  b.last = work.last;
  b.global_predictions = work.global_predictions;
  b.samples = proto::samples_for(work.samples, t);
  b.checkpoint = work.checkpoint;
  if (t.trainer == 0) b.ckpt_data = work.ckpt_data;
  for (const auto& mbw : t.micro) {
    proto::MicroBatch mb;
    for (const auto& seg : mbw.segments) {
      const std::vector<int32_t>& s = tokens.at(seg.sample);
      for (int64_t p = seg.begin; p < seg.begin + seg.length; ++p) {
        mb.tokens.push_back(s[size_t(p)]);
        mb.targets.push_back(p + 1 < int64_t(s.size()) ? s[size_t(p) + 1] : -1);
        mb.positions.push_back(int32_t(p));
      }
      mb.segments.push_back(seg);
    }
    mb.group = mbw.group;
    mb.member = mbw.member;
    mb.offload = mbw.offload;
    b.micro.push_back(std::move(mb));
  }
  return b;
}

proto::Batch local_batch(const config::Config& config, const proto::StepWork& work,
                         std::vector<std::unique_ptr<DocSource>>* local) {
  ML_CHECK(work.trainers.size() == 1, "colocated step work is for one trainer");
  if (local->empty()) local->resize(config.data.sources.size());
  return pack(work, work.trainers[0], fetch_samples(config, work, local, nullptr));
}

int64_t Constructor::construct(const proto::StepWork& work) {
  auto tokens = fetch_samples(w_.config, work, nullptr, router_);
  int64_t packed = 0;
  const int first_trainer = w_.layout.first_rank(Role::trainer);
  for (const auto& t : work.trainers) {
    proto::Batch b = pack(work, t, tokens);
    for (const auto& mb : b.micro) packed += int64_t(mb.tokens.size());
    in_flight_.emplace_back(proto::encode(b), first_trainer + t.trainer, proto::kBatch,
                            MPI_COMM_WORLD);
  }
  // Keep the list short: completed sends are dropped.
  std::vector<PendingSend> still;
  for (auto& s : in_flight_)
    if (!s.done()) still.push_back(std::move(s));
  in_flight_ = std::move(still);
  return packed;
}

void Constructor::drain() { in_flight_.clear(); }

void run_constructor(const World& w) {
  Constructor c(w);
  proto::Report report;
  report.role = int(Role::constructor);
  while (true) {
    int from = -1;
    int tag = -1;
    int idle = 0;
    while (!poll_message(0, MPI_ANY_TAG, MPI_COMM_WORLD, &from, &tag)) backoff(&idle);
    std::string msg = recv_bytes(0, tag, MPI_COMM_WORLD, w.config.run.timeout, "step work");
    if (tag == proto::kStop) break;
    ML_CHECK(tag == proto::kStepWork, strf("constructor got tag %d", tag));
    const auto busy = std::chrono::steady_clock::now();
    report.tokens += c.construct(proto::decode_step_work(msg, 0));
    report.busy_seconds += seconds_since(busy);
  }
  c.drain();
  fill_memory(&report);
  send_bytes(proto::encode(report), 0, proto::kReport, MPI_COMM_WORLD);
}

namespace {
// One message, the code in the exit file, and the job ends (a lone exiting
// rank would leave the others waiting).
[[noreturn]] void leave(int rank, int code, const std::string& message) {
  std::fprintf(stderr, "meshloom: error [rank %d]: %s\n", rank, message.c_str());
  std::fflush(stderr);
  record_exit(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}
}  // namespace

int run_role(const World& w, const std::function<int()>& lead,
             const std::function<int()>& trainer) {
  int code = 0;
  try {
    switch (w.role) {
      case Role::loader:
        run_loader(w);
        break;
      case Role::trainer:
        code = trainer();
        break;
      case Role::constructor:
        if (w.rank == 0)
          code = lead();
        else
          run_constructor(w);
        break;
    }
  } catch (const Error& e) {
    leave(w.rank, 2, e.what());
  } catch (const std::bad_alloc&) {
    leave(w.rank, 1,
          "out of host memory (std::bad_alloc): the model or the batch is too large for this "
          "node (model.*, data.tokens_per_step, plan.capacity)");
  } catch (const std::exception& e) {
    leave(w.rank, 1, e.what());
  }
  return code;
}

// --- trainer side -------------------------------------------------------------------

proto::Batch receive_batch(const World& w, double* wait_seconds) {
  const auto start = std::chrono::steady_clock::now();
  proto::Batch b;
  if (w.config.data.mode == "colocated" && w.config.data.colocated_processes > 0) {
    // DataLoader-style: worker processes build the batches. Keep each busy
    // with a step the lead has already sent (the lead runs data.prefetch
    // steps ahead), as a DataLoader prefetches.
    if (!data_workers) data_workers = std::make_unique<DataWorkerPool>(w.config, w.rank);
    const double timeout = w.config.run.timeout;
    int from = -1, tag = -1;
    while (data_workers->in_flight() == 0 ||
           (data_workers->in_flight() < data_workers->size() &&
            poll_message(0, proto::kStepWork, MPI_COMM_WORLD, &from, &tag)))
      data_workers->submit(
          recv_bytes(0, proto::kStepWork, MPI_COMM_WORLD, timeout, "step work from the lead"));
    b = proto::decode_batch(data_workers->take(timeout));
  } else if (w.config.data.mode == "colocated") {
    // Per-rank data loading: this trainer opens every source itself.
    static std::vector<std::unique_ptr<DocSource>> local;
    b = local_batch(
        w.config,
        proto::decode_step_work(recv_bytes(0, proto::kStepWork, MPI_COMM_WORLD,
                                           w.config.run.timeout, "step work from the lead"),
                                0),
        &local);
  } else {
    const int constructor = w.role_index % w.layout.constructors;
    b = proto::decode_batch(recv_bytes(constructor, proto::kBatch, MPI_COMM_WORLD,
                                       w.config.run.timeout, "a batch from its constructor"),
                            constructor);
  }
  if (wait_seconds) *wait_seconds = seconds_since(start);
  return b;
}

void send_ack(const proto::Ack& ack) {
  send_bytes(proto::encode(ack), 0, proto::kAck, MPI_COMM_WORLD);
}

}  // namespace meshloom
