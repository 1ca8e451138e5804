// Model weights without training state: what `meshloom import-hf` writes and
// model.init / `meshloom export-hf` read. One HDF5 file:
//
//   /meta/kind      string   "weights"
//   /meta/config    string   an effective config: its model section is the model's,
//                            the rest defaults
//   /model/<name>   float32  parameters, as in a checkpoint (ckpt/checkpoint.hpp)
//   /checksums/...  as in a format 2 checkpoint: block checksums for /model
//
// A format 2 checkpoint has the same /meta/config, /model and checksums, so
// WeightsReader takes either; the weights of a
// trained run can start another (model.init) or go to Hugging Face.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace meshloom::ckpt {

class H5File;

// Writes NAME.tmp tensor by tensor (one in memory at a time), then makes it
// durable and renames it to `path` in finish(). Destroyed unfinished, it
// removes the .tmp file.
class WeightsWriter {
 public:
  WeightsWriter(const std::string& path, const std::string& config_yaml);
  ~WeightsWriter();
  void add(const std::string& name, const std::vector<int64_t>& shape,
           const std::vector<float>& values);
  // Returns the bytes of the file.
  int64_t finish();

 private:
  std::string path_, tmp_;
  std::unique_ptr<H5File> file_;
};

struct WeightsMeta {
  bool weights_file = false;  // else a checkpoint
  std::string config;         // /meta/config
  // "model/<name>" -> its block checksum, and its shape.
  std::map<std::string, uint64_t> sums;
  std::map<std::string, std::vector<int64_t>> shapes;
};

// A weights file or a format 2 checkpoint, open for reading: its config and
// every /model tensor's checksum and shape are read and verified when it
// opens (anything else throws meshloom::Error naming the file; a format 1
// checkpoint has no block checksums), each tensor when it is asked for.
class WeightsReader {
 public:
  explicit WeightsReader(const std::string& path);
  ~WeightsReader();
  const WeightsMeta& meta() const { return meta_; }
  // One whole tensor ("layers.0.wq"), verified against its block checksum.
  std::vector<float> tensor(const std::string& name) const;

 private:
  std::string path_;
  std::unique_ptr<H5File> file_;
  WeightsMeta meta_;
};

}  // namespace meshloom::ckpt
