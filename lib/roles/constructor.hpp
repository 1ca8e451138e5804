// A constructor rank: packs the lead's step work into per-trainer micro-batch
// buffers (token ids, positions, document segments, CP chunk layout) with the
// tokens it fetches from the loaders, and sends each trainer its batch. Rank 0
// is a constructor too (the lead owns one); the others run run_constructor.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/p2p.hpp"
#include "config/config.hpp"
#include "parallel/world.hpp"
#include "roles/loader_router.hpp"
#include "sources/doc_source.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

// Packs the lead's step work into trainer batches until the lead says stop.
void run_constructor(const parallel::World& w);

// Colocated mode: the batch of `work` (for one trainer) read from sources this
// process opens itself (in *local, on first use).
wire::Batch local_batch(const config::Config& config, const wire::StepWork& work,
                        std::vector<std::unique_ptr<sources::DocSource>>* local);

// Fetches the tokens of `work` from the loaders (or from local sources in
// colocated mode) and sends each trainer its batch. Returns tokens packed.
class Constructor {
 public:
  // `router`: share the caller's view of dead loaders (the lead's), else own one.
  explicit Constructor(const parallel::World& w, LoaderRouter* router = nullptr);
  int64_t construct(const wire::StepWork& work);
  // Sends still in flight are completed (call before stopping).
  void drain();

 private:
  const parallel::World& w_;
  LoaderRouter own_router_;
  LoaderRouter* router_;
  std::vector<comm::PendingSend> in_flight_;
};

}  // namespace meshloom::roles
