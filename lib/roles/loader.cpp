#include "roles/loader.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "base/bytes.hpp"
#include "base/clock.hpp"
#include "base/memory.hpp"
#include "base/strings.hpp"
#include "comm/p2p.hpp"
#include "roles/faults.hpp"
#include "roles/report.hpp"
#include "sources/doc_source.hpp"
#include "wire/patch_wire.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

namespace {

// A loader: the sources it serves (and shadows), one handler per message.
class Loader {
 public:
  explicit Loader(const parallel::World& w)
      : w_(w),
        open_(w.config.data.sources.size()),
        faults_(w.config, w.rank),
        // Idle work goes in chunks of this many documents, so that a request that
        // arrives meanwhile waits for one chunk (a few images), not a whole batch.
        idle_chunk_(size_t(4 * std::max<int64_t>(1, w.config.data.workers))) {
    report_.role = int(parallel::Role::loader);
  }

  void run() {
    int idle = 0;
    while (true) {
      int from = -1, tag = -1;
      if (!comm::poll_message(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &from, &tag)) {
        if (idle_work()) continue;
        if (idle == 200) trim_.maybe();  // a few ms without a request
        comm::backoff(&idle);
        continue;
      }
      idle = 0;
      std::string msg =
          comm::recv_bytes(from, tag, MPI_COMM_WORLD, w_.config.run.timeout, "a request");
      if (hung_ && tag != wire::kStop) continue;  // a hung loader answers nothing
      if (tag == wire::kStop) break;
      const auto busy = Clock::now();
      if (tag == wire::kAssign) {
        on_assign(msg, from);
      } else if (tag == wire::kLengthReq) {
        on_length_request(msg, from);
      } else if (tag == wire::kMirror) {
        to_mirror_.push_back(wire::decode_length_request(msg, from));
      } else if (tag == wire::kTokenReq) {
        on_token_request(msg, from);
      } else {
        ML_FAIL(strf("loader got an unexpected message (tag %d) from rank %d", tag, from));
      }
      report_.busy_seconds += seconds_since(busy);
      trim_.worked();
    }
    finish();
  }

 private:
  sources::DocSource& source_at(int32_t s) {
    ML_CHECK(s >= 0 && size_t(s) < open_.size(), "request for an unknown source");
    if (!open_[s])  // a reassignment may bring new sources
      open_[s] = sources::open_doc_source(w_.config, size_t(s));
    return *open_[s];
  }

  // Idle: prepare what this loader sent lengths of, then what the loaders
  // this one shadows have prepared. False when there is nothing to do.
  bool idle_work() {
    if (hung_) return false;
    if (!to_prepare_.empty()) {
      prepare_chunk(&to_prepare_.front(), false);
      if (to_prepare_.front().docs.empty()) to_prepare_.pop_front();
    } else if (!to_mirror_.empty()) {
      prepare_chunk(&to_mirror_.back(), true);
      if (to_mirror_.back().docs.empty()) to_mirror_.pop_back();
    } else {
      return false;
    }
    trim_.worked();
    return true;
  }

  // Prepares the first documents of `m`. A shadow readies its loader's
  // documents for lengths only (captions, not images): decoding them too would
  // double the image sources' decode work for a standby that may never serve;
  // once it serves, it decodes on demand.
  void prepare_chunk(wire::LengthRequest* m, bool standby) {
    const auto end = m->docs.begin() + long(std::min(idle_chunk_, m->docs.size()));
    const std::vector<int64_t> chunk(m->docs.begin(), end);
    m->docs.erase(m->docs.begin(), end);
    sources::DocSource& src = source_at(m->source);
    if (standby)
      src.prepare_lengths(chunk, int(w_.config.data.workers));
    else
      src.prepare(chunk, int(w_.config.data.workers));
  }

  // A fault fires on the first request for its step or later.
  void inject(int64_t step) {
    if (faults_.crash_at(step)) {
      std::fprintf(stderr, "meshloom: fault injected: loader rank %d crashes at step %lld\n",
                   w_.rank, (long long)step);
      std::fflush(stderr);
      std::raise(SIGKILL);  // a real death: no goodbye to anyone
    }
    if (faults_.hang_at(step) && !hung_) {
      std::fprintf(stderr, "meshloom: fault injected: loader rank %d hangs at step %lld\n", w_.rank,
                   (long long)step);
      std::fflush(stderr);
      hung_ = true;
      ++report_.faults_fired;
    }
    if (faults_.slow_at(step) > 0) {
      if (!slowed_) ++report_.faults_fired;
      slowed_ = true;
      std::this_thread::sleep_for(std::chrono::duration<double>(faults_.slow_at(step)));
    }
  }

  void on_assign(const std::string& msg, int from) {
    wire::Assign a = wire::decode_assign(msg, from);
    shadow_ = a.shadow;
    for (int32_t s : a.shadow_sources) source_at(s);  // hot standby: opened, indexes ready
    for (int32_t s : a.sources) {
      wire::LengthReply count;
      count.source = s;
      count.docs = {source_at(s).docs()};
      comm::send_bytes(wire::encode(count), from, wire::kDocCount, MPI_COMM_WORLD);
    }
  }

  void on_length_request(const std::string& msg, int from) {
    wire::LengthRequest req = wire::decode_length_request(msg, from);
    inject(req.step);
    if (hung_) return;
    sources::DocSource& src = source_at(req.source);
    const bool more = src.prepare_lengths(req.docs, int(w_.config.data.workers));
    wire::LengthReply rep;
    rep.source = req.source;
    rep.docs = req.docs;
    for (int64_t d : req.docs) rep.lengths.push_back(src.length(d));
    for (int64_t d : req.docs) rep.images.push_back(src.image_positions(d));
    if (std::all_of(rep.images.begin(), rep.images.end(), [](int64_t n) { return n == 0; }))
      rep.images.clear();  // text: nothing to say
    rep.seconds_per_token = src.seconds_per_token();
    comm::send_bytes(wire::encode(rep), from, wire::kLengthRep, MPI_COMM_WORLD);
    if (more) to_prepare_.push_back(req);
    mirror(msg);
  }

  // The shadow gets the delta: which documents this loader now holds ready.
  void mirror(const std::string& msg) {
    if (shadow_ < 0 || shadow_ == w_.rank) return;
    mirrors_.emplace_back(msg, shadow_, wire::kMirror, MPI_COMM_WORLD);
    std::vector<comm::PendingSend> still;
    for (auto& m : mirrors_)
      if (!m.done()) still.push_back(std::move(m));
    mirrors_ = std::move(still);
  }

  void on_token_request(const std::string& msg, int from) {
    wire::TokenRequest req = wire::decode_token_request(msg, from);
    inject(req.step);
    if (hung_) return;
    std::vector<int32_t> tokens;
    std::vector<float> patches;
    for (const auto& r : req.ranges) {
      sources::DocSource& src = source_at(r.source);
      src.read(r.doc, r.offset, r.length, &tokens);
      src.read_patches(r.doc, r.offset, r.length, &patches);
    }
    report_.tokens += int64_t(tokens.size());
    ByteWriter out;
    out.put_vector(tokens);
    wire::put_patches(out, patches);
    ++report_.replies;
    report_.reply_bytes += int64_t(out.bytes().size());
    comm::send_bytes(out.bytes(), from, wire::kTokenRep, MPI_COMM_WORLD);
  }

  void finish() {
    // Mirrors to a dead shadow never complete: let them go.
    for (auto& m : mirrors_) m.abandon();
    for (const auto& src : open_)
      if (src) {
        const sources::DocSource::DecodeStats d = src->decode_stats();
        report_.decodes += d.decodes;
        report_.decoded_docs += d.docs;
        report_.decodes_at_read += d.at_read;
        report_.decode_seconds += d.seconds;
      }
    send_final_report(report_);
  }

  const parallel::World& w_;
  std::vector<std::unique_ptr<sources::DocSource>> open_;
  const InjectedFaults faults_;
  const size_t idle_chunk_;
  wire::Report report_;
  bool hung_ = false, slowed_ = false;
  int shadow_ = -1;  // where this loader mirrors what it prepares
  std::vector<comm::PendingSend> mirrors_;
  std::vector<wire::LengthRequest> to_mirror_;  // deltas received as a shadow, not yet prepared
  // Documents whose lengths this loader sent but which it has not prepared
  // yet (image sources decode after the reply), oldest first: constructors
  // ask in that order.
  std::deque<wire::LengthRequest> to_prepare_;
  HeapTrim trim_;
};

}  // namespace

void run_loader(const parallel::World& w) { Loader(w).run(); }

// --- constructor ----------------------------------------------------------------

}  // namespace meshloom::roles
