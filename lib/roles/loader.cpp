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

namespace meshloom {

void run_loader(const World& w) {
  const auto& sources = w.config.data.sources;
  std::vector<std::unique_ptr<sources::DocSource>> open(sources.size());
  auto source_at = [&](int32_t s) -> sources::DocSource& {
    ML_CHECK(s >= 0 && size_t(s) < sources.size(), "request for an unknown source");
    if (!open[s])
      open[s] =
          sources::open_doc_source(w.config, size_t(s));  // a reassignment may bring new sources
    return *open[s];
  };
  wire::Report report;
  report.role = int(Role::loader);
  const double timeout = w.config.run.timeout;
  const InjectedFaults faults(w.config, w.rank);
  bool hung = false, slowed = false;
  int shadow = -1;  // where this loader mirrors what it prepares
  std::vector<PendingSend> mirrors;
  std::vector<wire::LengthRequest> to_mirror;  // deltas received as a shadow, not yet prepared
  // Documents whose lengths this loader sent but which it has not prepared yet
  // (image sources decode after the reply), oldest first: constructors ask in
  // that order.
  std::deque<wire::LengthRequest> to_prepare;
  // Idle work goes in chunks of this many documents, so that a request that
  // arrives meanwhile waits for one chunk (a few images), not a whole batch.
  const size_t idle_chunk = size_t(4 * std::max<int64_t>(1, w.config.data.workers));
  // A shadow readies its loader's documents for lengths only (captions, not
  // images): decoding them too would double the image sources' decode work
  // for a standby that may never serve; once it serves, it decodes on demand.
  auto prepare_chunk = [&](wire::LengthRequest* m, bool standby) {  // its first documents
    const auto end = m->docs.begin() + long(std::min(idle_chunk, m->docs.size()));
    const std::vector<int64_t> chunk(m->docs.begin(), end);
    m->docs.erase(m->docs.begin(), end);
    sources::DocSource& src = source_at(m->source);
    if (standby)
      src.prepare_lengths(chunk, int(w.config.data.workers));
    else
      src.prepare(chunk, int(w.config.data.workers));
  };
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
  HeapTrim trim;
  int idle = 0;
  while (true) {
    int from = -1, tag = -1;
    if (!poll_message(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &from, &tag)) {
      // Idle: prepare what this loader sent lengths of, then what the
      // loaders this one shadows have prepared.
      if (!to_prepare.empty() && !hung) {
        prepare_chunk(&to_prepare.front(), false);
        if (to_prepare.front().docs.empty()) to_prepare.pop_front();
        trim.worked();
        continue;
      }
      if (!to_mirror.empty() && !hung) {
        prepare_chunk(&to_mirror.back(), true);
        if (to_mirror.back().docs.empty()) to_mirror.pop_back();
        trim.worked();
        continue;
      }
      if (idle == 200) trim.maybe();  // a few ms without a request
      backoff(&idle);
      continue;
    }
    idle = 0;
    std::string msg = recv_bytes(from, tag, MPI_COMM_WORLD, timeout, "a request");
    if (hung && tag != wire::kStop) continue;  // a hung loader answers nothing
    const auto busy = Clock::now();
    if (tag == wire::kAssign) {
      wire::Assign a = wire::decode_assign(msg, from);
      shadow = a.shadow;
      for (int32_t s : a.shadow_sources) source_at(s);  // hot standby: opened, indexes ready
      for (int32_t s : a.sources) {
        wire::LengthReply count;
        count.source = s;
        count.docs = {source_at(s).docs()};
        send_bytes(wire::encode(count), from, wire::kDocCount, MPI_COMM_WORLD);
      }
    } else if (tag == wire::kLengthReq) {
      wire::LengthRequest req = wire::decode_length_request(msg, from);
      inject(req.step);
      if (hung) continue;
      sources::DocSource& src = source_at(req.source);
      const bool more = src.prepare_lengths(req.docs, int(w.config.data.workers));
      wire::LengthReply rep;
      rep.source = req.source;
      rep.docs = req.docs;
      for (int64_t d : req.docs) rep.lengths.push_back(src.length(d));
      for (int64_t d : req.docs) rep.images.push_back(src.image_positions(d));
      if (std::all_of(rep.images.begin(), rep.images.end(), [](int64_t n) { return n == 0; }))
        rep.images.clear();  // text: nothing to say
      rep.seconds_per_token = src.seconds_per_token();
      send_bytes(wire::encode(rep), from, wire::kLengthRep, MPI_COMM_WORLD);
      if (more) to_prepare.push_back(req);
      // The shadow gets the delta: which documents this loader now holds ready.
      if (shadow >= 0 && shadow != w.rank) {
        mirrors.emplace_back(msg, shadow, wire::kMirror, MPI_COMM_WORLD);
        std::vector<PendingSend> still;
        for (auto& m : mirrors)
          if (!m.done()) still.push_back(std::move(m));
        mirrors = std::move(still);
      }
    } else if (tag == wire::kMirror) {
      to_mirror.push_back(wire::decode_length_request(msg, from));
    } else if (tag == wire::kTokenReq) {
      wire::TokenRequest req = wire::decode_token_request(msg, from);
      inject(req.step);
      if (hung) continue;
      std::vector<int32_t> tokens;
      std::vector<float> patches;
      for (const auto& r : req.ranges) {
        sources::DocSource& src = source_at(r.source);
        src.read(r.doc, r.offset, r.length, &tokens);
        src.read_patches(r.doc, r.offset, r.length, &patches);
      }
      report.tokens += int64_t(tokens.size());
      ByteWriter out;
      out.put_vector(tokens);
      wire::put_patches(out, patches);
      ++report.replies;
      report.reply_bytes += int64_t(out.bytes().size());
      send_bytes(out.bytes(), from, wire::kTokenRep, MPI_COMM_WORLD);
    } else if (tag == wire::kStop) {
      break;
    } else {
      ML_FAIL(strf("loader got an unexpected message (tag %d) from rank %d", tag, from));
    }
    report.busy_seconds += seconds_since(busy);
    trim.worked();
  }
  // Mirrors to a dead shadow never complete: let them go.
  for (auto& m : mirrors) m.abandon();
  for (const auto& src : open)
    if (src) {
      const sources::DocSource::DecodeStats d = src->decode_stats();
      report.decodes += d.decodes;
      report.decoded_docs += d.docs;
      report.decodes_at_read += d.at_read;
      report.decode_seconds += d.seconds;
    }
  send_final_report(report);
}

// --- constructor ----------------------------------------------------------------

}  // namespace meshloom
