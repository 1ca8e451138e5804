// A data worker of the colocated baseline: the constructor's local batch.
#include "roles/data_worker.hpp"

#include <memory>
#include <string>
#include <vector>

#include "roles/constructor.hpp"
#include "sources/data_workers.hpp"
#include "sources/doc_source.hpp"
#include "wire/protocol.hpp"

namespace meshloom::roles {

int run_data_worker(int fd, int rank, int index) {
  std::vector<std::unique_ptr<sources::DocSource>> local;  // opened on first use, kept
  return sources::serve_data_worker(
      fd, rank, index, [&](const config::Config& config, const std::string& msg) {
        return wire::encode(local_batch(config, wire::decode_step_work(msg), &local));
      });
}

}  // namespace meshloom::roles
