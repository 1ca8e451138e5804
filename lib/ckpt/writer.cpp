#include "ckpt/writer.hpp"

#include <chrono>
#include <filesystem>
#include <memory>

#include "base/check.hpp"

namespace meshloom::ckpt {

BackgroundWriter::BackgroundWriter(std::string dir, int64_t keep, IsOurs ours, bool background,
                                   std::function<void(const std::string&, int64_t, double)> done)
    : dir_(std::move(dir)),
      keep_(keep),
      ours_(std::move(ours)),
      done_(std::move(done)),
      jobs_(background) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("cannot create checkpoint folder " + dir_ + ": " + ec.message());
  // A job killed while writing (scancel, preemption) leaves NAME.h5.tmp: never
  // read, and in the way of nothing, but clutter; this writer is the only one.
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec))
    if (entry.path().string().ends_with(".h5.tmp")) std::filesystem::remove(entry.path(), ec);
}

void BackgroundWriter::write_one(const Checkpoint& c, Clock::time_point start) {
  const std::string path = checkpoint_path(dir_, c.step);
  // Format 2: the trainers wrote the tensors into NAME.tmp; this adds the rest.
  const int64_t bytes =
      c.format == 2 ? finish_checkpoint(path + ".tmp", path, c) : write_checkpoint(path, c);
  prune_checkpoints(dir_, keep_, ours_);
  if (done_) done_(path, bytes, std::chrono::duration<double>(Clock::now() - start).count());
}

void BackgroundWriter::write(Checkpoint c) {
  auto owned = std::make_shared<Checkpoint>(std::move(c));
  jobs_.submit([this, owned] { write_one(*owned, Clock::now()); });
}

void BackgroundWriter::write(std::function<Checkpoint()> make) {
  jobs_.submit([this, make = std::move(make)] {
    const Clock::time_point start = Clock::now();  // the trainers' part counts
    write_one(make(), start);
  });
}

}  // namespace meshloom::ckpt
