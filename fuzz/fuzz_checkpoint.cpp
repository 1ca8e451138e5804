// The checkpoint reader (lib/ckpt, HDF5): the input is the .h5 file's bytes.
// Runs what `meshloom inspect` runs (read_checkpoint, which verifies every
// checksum, then the data plane's state) and what resume's verification runs
// (verify_checkpoint: only_meta, every checksum; then the stored config).
// An input that is not an HDF5 file (no "\x89HDF" signature) is fed to the
// data plane's state decoder instead: inside a file, the checksum of
// /data/plane keeps mutated bytes from ever reaching it.
#include <string>

#include "ckpt/checkpoint.hpp"
#include "config/config.hpp"
#include "dataplane/data_plane.hpp"
#include "fuzz/harness.hpp"

using namespace meshloom;

// HDF5 1.10.8 asks malloc for sizes read from the file's metadata (13 PB or
// 4 GiB for a corrupt entry, in H5C_protect) and handles a NULL answer as an
// error: ASan answers NULL above 2 GiB rather than report (or spend seconds
// poisoning 4 GiB of shadow), and the open fails with an Error naming the
// file. C++ `new` still reports any size it cannot allocate, so meshloom's
// own allocations stay checked.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=2048";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::init();
  const std::string_view in = fuzz::bytes(data, size);
  if (!in.starts_with("\x89HDF")) {
    try {
      (void)dataplane::deserialize_state(std::string(in));
    } catch (const Error& e) {
      fuzz::expect_names(e, {"data plane state"});
    }
    return 0;
  }
  const std::string path = fuzz::write_file("step_00000001.h5", in);
  // resume: which checkpoint is good
  const std::string problem = ckpt::verify_checkpoint(path);
  if (!problem.empty() && problem.find(path) == std::string::npos)
    fuzz::finding("a checkpoint problem that does not name the file: " + problem);
  // inspect
  try {
    const ckpt::Checkpoint c = ckpt::read_checkpoint(path);
    if (!problem.empty()) fuzz::finding("verify_checkpoint failed but read_checkpoint read it");
    if (c.params.size() != c.m.size() || c.params.size() != c.v.size())
      fuzz::finding("parameters and optimizer moments differ in size");
    int64_t numel = 0;
    for (const auto& t : c.tensors) numel += t.numel;
    if (numel != int64_t(c.params.size())) fuzz::finding("tensors do not cover the parameters");
    try {
      (void)dataplane::deserialize_state(c.plane);
    } catch (const Error& e) {
      fuzz::expect_names(e, {"data plane", "state", path});
    }
    try {
      (void)config::parse_config(c.config, path + ":/meta/config");
    } catch (const Error& e) {
      fuzz::expect_names(e, {path});
    }
  } catch (const Error& e) {
    fuzz::expect_names(e, {path});
  }
  return 0;
}
