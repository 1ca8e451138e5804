#include "ckpt/h5_parallel.hpp"

namespace meshloom::ckpt {

int64_t Block::numel() const {
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  return n;
}

Block Block::whole(const std::vector<int64_t>& dims) {
  return Block{std::vector<int64_t>(dims.size(), 0), dims};
}

std::vector<Block> range_blocks(const std::vector<int64_t>& dims, int64_t first, int64_t end) {
  ML_CHECK(!dims.empty() && 0 <= first && first <= end, "range_blocks: a bad range");
  if (first == end) return {};
  if (dims.size() == 1) return {Block{{first}, {end - first}}};
  const std::vector<int64_t> inner_dims(dims.begin() + 1, dims.end());
  int64_t inner = 1;
  for (int64_t d : inner_dims) inner *= d;
  // The blocks of [a, b) inside row `row`, that row prefixed.
  std::vector<Block> out;
  auto inside_row = [&](int64_t row, int64_t a, int64_t b) {
    for (Block block : range_blocks(inner_dims, a, b)) {
      block.start.insert(block.start.begin(), row);
      block.count.insert(block.count.begin(), 1);
      out.push_back(std::move(block));
    }
  };
  int64_t row = first / inner;
  const int64_t last_row = end / inner;
  if (row == last_row) {
    inside_row(row, first % inner, end % inner);
    return out;
  }
  if (first % inner != 0) inside_row(row++, first % inner, inner);
  if (last_row > row) {
    Block rows{{row}, {last_row - row}};
    rows.start.resize(dims.size(), 0);
    rows.count.insert(rows.count.end(), inner_dims.begin(), inner_dims.end());
    out.push_back(std::move(rows));
  }
  if (end % inner != 0) inside_row(last_row, 0, end % inner);
  return out;
}

H5ParallelFile::H5ParallelFile(const std::string& path, const char* mode, MPI_Comm comm)
    : path_(path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our messages, not HDF5's stack dumps
  const H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL));
  H5_CHECK(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG));
  // Metadata is read and written collectively too: no rank asks the file
  // system alone for what every rank needs.
  H5_CHECK(H5Pset_all_coll_metadata_ops(fapl.get(), true));
  H5_CHECK(H5Pset_coll_metadata_write(fapl.get(), true));
  if (std::string(mode) == "w")
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  else
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (file_ < 0) throw Error("cannot open HDF5 file '" + path + "': " + h5_error_string());
}

H5ParallelFile::~H5ParallelFile() {
  if (file_ >= 0) H5Fclose(file_);
}

void H5ParallelFile::close() {
  const hid_t file = file_;
  file_ = -1;
  if (file >= 0 && H5Fclose(file) < 0)
    throw Error("cannot close HDF5 file '" + path_ + "': " + h5_error_string());
}

bool H5ParallelFile::exists(const std::string& name) const { return h5_exists(file_, name); }

void H5ParallelFile::create_raw(const std::string& name, hid_t type,
                                const std::vector<int64_t>& dims) {
  const H5Id links(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5_CHECK(H5Pset_create_intermediate_group(links.get(), 1));
  ML_CHECK(!dims.empty(), "dataset '" + name + "': parallel datasets have at least one dimension");
  const std::vector<hsize_t> hd(dims.begin(), dims.end());
  const H5Id space(H5_CHECK(H5Screate_simple(int(hd.size()), hd.data(), nullptr)), H5Sclose);
  // Contiguous and allocated at creation: each rank's block lands at a fixed
  // offset, and a dataset no rank wrote reads as zeros (its checksum fails).
  const H5Id create(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5_CHECK(H5Pset_alloc_time(create.get(), H5D_ALLOC_TIME_EARLY));
  const H5Id ds(H5_CHECK(H5Dcreate2(file_, name.c_str(), type, space.get(), links.get(),
                                    create.get(), H5P_DEFAULT)),
                H5Dclose);
}

std::vector<int64_t> H5ParallelFile::dims(const std::string& name) const {
  return h5_dims(file_, path_, name);
}

void H5ParallelFile::transfer(const std::string& name, hid_t type, const std::vector<Block>& blocks,
                              void* data, bool write) {
  const H5Id ds(h5_open_dataset(file_, path_, name), H5Dclose);
  const H5Id file_space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(file_space.get());
  // HDF5 moves a union of hyperslabs in the file's row-major order.
  H5_CHECK(H5Sselect_none(file_space.get()));
  hsize_t n = 0;
  for (const Block& block : blocks) {
    ML_CHECK(rank == int(block.start.size()) && rank == int(block.count.size()),
             "dataset '" + name + "': a block of another rank than the dataset's");
    if (block.numel() == 0) continue;
    const std::vector<hsize_t> start(block.start.begin(), block.start.end());
    const std::vector<hsize_t> count(block.count.begin(), block.count.end());
    H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_OR, start.data(), nullptr,
                                 count.data(), nullptr));
    n += hsize_t(block.numel());
  }
  const H5Id memory(H5_CHECK(H5Screate_simple(1, &n, nullptr)), H5Sclose);
  if (n == 0) H5_CHECK(H5Sselect_none(memory.get()));
  const H5Id xfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5_CHECK(H5Pset_dxpl_mpio(xfer.get(), H5FD_MPIO_COLLECTIVE));
  const herr_t rc = write
                        ? H5Dwrite(ds.get(), type, memory.get(), file_space.get(), xfer.get(), data)
                        : H5Dread(ds.get(), type, memory.get(), file_space.get(), xfer.get(), data);
  if (rc < 0)
    throw Error(std::string("cannot ") + (write ? "write" : "read") + " '" + name + "' " +
                (write ? "to" : "from") + " '" + path_ + "': " + h5_error_string());
}

}  // namespace meshloom::ckpt
