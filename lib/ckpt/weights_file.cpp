#include "ckpt/weights_file.hpp"

#include <fcntl.h>
#include <unistd.h>

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

std::string get_string(const H5File& f, const std::string& path, const std::string& name) {
  if (!f.exists(name)) throw Error("'" + path + "': no /" + name);
  const std::string text = f.read_string(name);
  const std::string sum = checksum_dataset(name);
  if (!f.exists(sum) || f.read_scalar<uint64_t>(sum) != checksum(text.data(), text.size()))
    throw Error("'" + path + "': /" + name + " does not match its checksum (the file is corrupt)");
  return text;
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
  const int fd = ::open(tmp_.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) throw Error("cannot rename " + tmp_ + " to " + path_ + ": " + ec.message());
  return int64_t(fs::file_size(path_, ec));
}

WeightsMeta read_weights_meta(const std::string& path) {
  const H5File f(path, "r");
  const bool weights = f.exists("meta/kind") && get_string(f, path, "meta/kind") == "weights";
  if (!weights && !(f.exists("meta/format") && f.read_scalar<int32_t>("meta/format") == 2))
    throw Error("'" + path +
                "': neither a weights file (meshloom import-hf) nor a format 2 checkpoint");
  WeightsMeta meta;
  meta.weights_file = weights;
  meta.config = get_string(f, path, "meta/config");
  for (const std::string& name : f.children("model")) {
    const std::string dataset = "model/" + name;
    const std::string sum = checksum_dataset(dataset);
    if (!f.exists(sum)) throw Error("'" + path + "': no checksum for /" + dataset);
    meta.sums[dataset] = f.read_scalar<uint64_t>(sum);
    meta.shapes[dataset] = f.dims(dataset);
  }
  return meta;
}

std::vector<float> read_weights_tensor(const std::string& path, const std::string& name) {
  const H5File f(path, "r");
  const std::string dataset = "model/" + name;
  if (!f.exists(dataset)) throw Error("'" + path + "': no tensor /" + dataset);
  const std::vector<float> values = f.read<float>(dataset);
  const std::vector<int64_t> dims = f.dims(dataset);
  const std::string sum = checksum_dataset(dataset);
  if (!f.exists(sum) ||
      f.read_scalar<uint64_t>(sum) != block_checksum(dims, Block::whole(dims), values.data()))
    throw Error("'" + path + "': /" + dataset +
                " does not match its checksum (the file is corrupt)");
  return values;
}

}  // namespace meshloom::ckpt
