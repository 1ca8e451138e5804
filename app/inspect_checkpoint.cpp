// `meshloom inspect CKPT.h5`: verify a checkpoint (every dataset present, every
// checksum right) and print what it holds.
#include <cstdio>
#include <filesystem>

#include "app/commands.hpp"
#include "base/strings.hpp"
#include "ckpt/checkpoint.hpp"
#include "dataplane/data_plane.hpp"

namespace meshloom::app {

int inspect_checkpoint(const std::string& path) {
  ckpt::Checkpoint c = ckpt::read_checkpoint(path);  // verifies; throws naming the problem
  int64_t params = 0;
  for (const auto& t : c.tensors) params += t.numel;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  std::printf("%s: checkpoint after step %lld (training resumes at step %lld)\n", path.c_str(),
              (long long)c.step, (long long)c.step + 1);
  std::printf("  verified    every dataset present, every checksum right (%s)\n",
              human_bytes(double(bytes)).c_str());
  std::printf("  written by  %d trainer(s), seed %lld\n", c.trainers, (long long)c.seed);
  std::printf("  model       %zu tensors, %lld parameters; AdamW step %lld\n", c.tensors.size(),
              (long long)params, (long long)c.adam_step);
  dataplane::DataPlane::State plane = dataplane::deserialize_state(c.plane);
  std::printf("  data plane  next step %lld, %zu source(s)\n", (long long)plane.step,
              plane.streams.size());
  for (size_t i = 0; i < plane.streams.size(); ++i)
    std::printf(
        "    source %zu: epoch %lld, short lane at %lld (+%lld tokens), long lane at "
        "%lld; %.0f tokens delivered\n",
        i, (long long)plane.streams[i].epoch, (long long)plane.streams[i].lanes[0].cursor,
        (long long)plane.streams[i].lanes[0].offset, (long long)plane.streams[i].lanes[1].cursor,
        plane.delivered[i]);
  int64_t known = 0;
  for (const auto& s : c.lengths) known += int64_t(s.docs.size());
  std::printf("  lengths     %s: %lld document lengths%s\n", c.lengths_full ? "full" : "delta",
              (long long)known, c.lengths_full ? "" : (" (base: " + c.lengths_base + ")").c_str());
  return kExitOk;
}

}  // namespace meshloom::app
