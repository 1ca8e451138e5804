// Thin HDF5 helpers: H5_CHECK and a small file handle with typed dataset
// writes and reads (serial access from one rank; the library is the parallel
// build, used here without MPI-IO).
//
// H5_CHECK fails with file:line, the rank and HDF5's own error stack message
// (H5Eget_msg of the innermost error), instead of HDF5's multi-line dump.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/check.hpp"

namespace meshloom::ckpt {

// HDF5's innermost error message ("unable to open file", ...).
std::string h5_error_string();

// What both file classes (H5File, H5ParallelFile) do the same way. Whether
// the dataset or group `name` exists in `file` (every level of its path).
bool h5_exists(hid_t file, const std::string& name);
// Opens dataset `name`; throws Error naming `path` and the dataset.
hid_t h5_open_dataset(hid_t file, const std::string& path, const std::string& name);
// The dimensions of dataset `name`; throws Error naming `path` and it.
std::vector<int64_t> h5_dims(hid_t file, const std::string& path, const std::string& name);

// Closes an HDF5 id at the end of its scope, error paths included (an id
// left open keeps its file open after H5Fclose).
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

}  // namespace meshloom::ckpt

#define H5_CHECK(call)                                                                   \
  ([&]() {                                                                               \
    auto ml_h5_rc_ = (call);                                                             \
    if (ml_h5_rc_ < 0)                                                                   \
      ::meshloom::fail(__FILE__, __LINE__, "HDF5",                                       \
                       std::string(#call) + ": " + ::meshloom::ckpt::h5_error_string()); \
    return ml_h5_rc_;                                                                    \
  }())

namespace meshloom::ckpt {

template <class T>
hid_t h5_type();
template <>
inline hid_t h5_type<int32_t>() {
  return H5T_NATIVE_INT32;
}
template <>
inline hid_t h5_type<int64_t>() {
  return H5T_NATIVE_INT64;
}
template <>
inline hid_t h5_type<uint64_t>() {
  return H5T_NATIVE_UINT64;
}
template <>
inline hid_t h5_type<float>() {
  return H5T_NATIVE_FLOAT;
}
template <>
inline hid_t h5_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <>
inline hid_t h5_type<uint8_t>() {
  return H5T_NATIVE_UINT8;
}

class H5File {
 public:
  // mode "w": create/truncate; "r": read only; "a": read and add to an
  // existing file. Throws meshloom::Error naming
  // the path when the file cannot be opened (a user's bad path is not fatal).
  H5File(const std::string& path, const char* mode);
  ~H5File();
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  // Writes a 1-D dataset (creating parent groups of "a/b/c").
  template <class T>
  void write(const std::string& name, const std::vector<T>& data) {
    write_raw(name, h5_type<T>(), data.data(), data.size(), false);
  }
  // An N-D dataset, row-major, dims multiplying to data.size().
  template <class T>
  void write(const std::string& name, const std::vector<T>& data,
             const std::vector<int64_t>& dims) {
    write_nd(name, h5_type<T>(), data.data(), data.size(), dims);
  }
  template <class T>
  void write_scalar(const std::string& name, T value) {
    write_raw(name, h5_type<T>(), &value, 1, true);
  }
  void write_string(const std::string& name, const std::string& text);

  bool exists(const std::string& name) const;
  // The names of a group's members, sorted by name; throws naming the
  // file when `group` is no group.
  std::vector<std::string> children(const std::string& group) const;
  // Reads never trust the file: a dataset's element count must match what is
  // read into (one for a scalar), and its stored bytes must hold its elements
  // (a 2^40-element dataset in a 1 KiB file fails, naming the file and the
  // dataset, before anything is allocated).
  template <class T>
  std::vector<T> read(const std::string& name) const {
    std::vector<T> out(stored_size_of(name));
    read_raw(name, h5_type<T>(), out.data());
    return out;
  }
  template <class T>
  T read_scalar(const std::string& name) const {
    const size_t n = stored_size_of(name);
    if (n != 1)
      throw Error("'" + path_ + "': dataset '" + name + "' holds " + std::to_string(n) +
                  " values where one is expected");
    T v{};
    read_raw(name, h5_type<T>(), &v);
    return v;
  }
  std::string read_string(const std::string& name) const;
  size_t size_of(const std::string& name) const;  // elements
  std::vector<int64_t> dims(const std::string& name) const;
  // size_of(), checked against the bytes the file stores for the dataset.
  size_t stored_size_of(const std::string& name) const;
  hid_t id() const { return file_; }
  void flush();

 private:
  void ensure_parents(const std::string& name);
  void write_raw(const std::string& name, hid_t type, const void* data, size_t n, bool scalar);
  void write_nd(const std::string& name, hid_t type, const void* data, size_t n,
                const std::vector<int64_t>& dims);
  void read_raw(const std::string& name, hid_t type, void* data) const;
  hid_t open_dataset(const std::string& name) const;  // throws naming file and dataset
  hid_t file_ = -1;
  std::string path_;
};

}  // namespace meshloom::ckpt
