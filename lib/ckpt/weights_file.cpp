#include "ckpt/weights_file.hpp"

#include <filesystem>

#include "base/check.hpp"
#include "ckpt/block_checksum.hpp"
#include "ckpt/checkpoint.hpp"
#include "ckpt/h5.hpp"

namespace meshloom::ckpt {

namespace {

namespace fs = std::filesystem;

void put_string(H5File& f, const std::string& name, const std::string& text) {
  f.write_string(name, text);
  f.write_scalar(checksum_dataset(name), checksum(text.data(), text.size()));
}

}  // namespace

WeightsWriter::WeightsWriter(const std::string& path, const std::string& config_yaml)
    : path_(path), tmp_(path + ".tmp"), file_(std::make_unique<H5File>(tmp_, "w")) {
  put_string(*file_, "meta/kind", "weights");
  put_string(*file_, "meta/config", config_yaml);
}

WeightsWriter::~WeightsWriter() {
  if (!file_) return;
  file_.reset();
  std::error_code ec;
  fs::remove(tmp_, ec);
}

void WeightsWriter::add(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<float>& values) {
  ML_CHECK(file_, "WeightsWriter::add after finish");
  const std::string dataset = "model/" + name;
  file_->write(dataset, values, shape);
  file_->write_scalar(checksum_dataset(dataset),
                      block_checksum(shape, Block::whole(shape), values.data()));
}

int64_t WeightsWriter::finish() {
  file_->flush();
  file_.reset();
  return make_durable(tmp_, path_);
}

WeightsReader::WeightsReader(const std::string& path)
    : path_(path), file_(std::make_unique<H5File>(path, "r")) {
  const H5File& f = *file_;
  const bool weights =
      f.exists("meta/kind") && read_verified_string(f, path, "meta/kind") == "weights";
  if (!weights && !(f.exists("meta/format") && f.read_scalar<int32_t>("meta/format") == 2))
    throw Error("'" + path +
                "': neither a weights file (meshloom import-hf) nor a format 2 checkpoint");
  meta_.weights_file = weights;
  meta_.config = read_verified_string(f, path, "meta/config");
  for (const std::string& name : f.children("model")) {
    const std::string dataset = "model/" + name;
    const std::string sum = checksum_dataset(dataset);
    if (!f.exists(sum)) throw Error("'" + path + "': no checksum for /" + dataset);
    meta_.sums[dataset] = f.read_scalar<uint64_t>(sum);
    meta_.shapes[dataset] = f.dims(dataset);
  }
}

WeightsReader::~WeightsReader() = default;

std::vector<float> WeightsReader::tensor(const std::string& name) const {
  const std::string dataset = "model/" + name;
  if (!meta_.shapes.count(dataset)) throw Error("'" + path_ + "': no tensor /" + dataset);
  return read_verified_tensor(*file_, path_, dataset);
}

}  // namespace meshloom::ckpt
