#include "ckpt/h5.hpp"

#include "base/strings.hpp"

namespace meshloom::ckpt {

namespace {
herr_t innermost(unsigned n, const H5E_error2_t* err, void* out) {
  if (n == 0) *static_cast<std::string*>(out) = err->desc ? err->desc : "";
  return 0;
}
}  // namespace

bool h5_exists(hid_t file, const std::string& name) {
  // Each level must exist for H5Lexists on the full path to be valid.
  std::string path;
  for (const std::string& part : split(name, '/')) {
    if (part.empty()) continue;
    path += "/" + part;
    if (H5Lexists(file, path.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

hid_t h5_open_dataset(hid_t file, const std::string& path, const std::string& name) {
  if (!h5_exists(file, name)) throw Error("'" + path + "' has no dataset '" + name + "'");
  const hid_t ds = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (ds < 0)
    throw Error("cannot open dataset '" + name + "' in '" + path + "': " + h5_error_string());
  return ds;
}

std::vector<int64_t> h5_dims(hid_t file, const std::string& path, const std::string& name) {
  const H5Id ds(h5_open_dataset(file, path, name), H5Dclose);
  const H5Id space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = space.get() < 0 ? -1 : H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw Error("'" + path + "': dataset '" + name + "' has no readable shape");
  std::vector<hsize_t> hd(size_t(rank), 0);
  H5Sget_simple_extent_dims(space.get(), hd.data(), nullptr);
  return std::vector<int64_t>(hd.begin(), hd.end());
}

std::string h5_error_string() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &msg);
  return msg.empty() ? "unknown HDF5 error" : msg;
}

H5File::H5File(const std::string& path, const char* mode) : path_(path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our messages, not HDF5's stack dumps
  // Closing the file closes every object still open in it: nothing of a
  // corrupt file outlives this handle (the next open of the same name would
  // otherwise find the old file's state).
  const H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  if (std::string(mode) == "w")
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  else
    file_ =
        H5Fopen(path.c_str(), std::string(mode) == "a" ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get());
  if (file_ < 0) throw Error("cannot open HDF5 file '" + path + "': " + h5_error_string());
}

H5File::~H5File() {
  if (file_ >= 0) H5Fclose(file_);
}

void H5File::flush() { H5_CHECK(H5Fflush(file_, H5F_SCOPE_GLOBAL)); }

void H5File::ensure_parents(const std::string& name) {
  std::vector<std::string> parts = split(name, '/');
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].empty()) continue;
    path += "/" + parts[i];
    if (H5Lexists(file_, path.c_str(), H5P_DEFAULT) > 0) continue;
    hid_t g = H5_CHECK(H5Gcreate2(file_, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Gclose(g);
  }
}

void H5File::write_raw(const std::string& name, hid_t type, const void* data, size_t n,
                       bool scalar) {
  ensure_parents(name);
  hsize_t dims[1] = {hsize_t(n)};
  hid_t space = H5_CHECK(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, nullptr));
  hid_t ds =
      H5_CHECK(H5Dcreate2(file_, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5_CHECK(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  H5Dclose(ds);
  H5Sclose(space);
}

void H5File::write_nd(const std::string& name, hid_t type, const void* data, size_t n,
                      const std::vector<int64_t>& dims) {
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  hsize_t total = 1;
  for (hsize_t d : hd) total *= d;
  ML_CHECK(total == n, "dataset '" + name + "': dims do not match the data");
  ensure_parents(name);
  hid_t space = H5_CHECK(H5Screate_simple(int(hd.size()), hd.data(), nullptr));
  hid_t ds =
      H5_CHECK(H5Dcreate2(file_, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5_CHECK(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  H5Dclose(ds);
  H5Sclose(space);
}

void H5File::write_string(const std::string& name, const std::string& text) {
  ensure_parents(name);
  hid_t type = H5_CHECK(H5Tcopy(H5T_C_S1));
  H5_CHECK(H5Tset_size(type, text.empty() ? 1 : text.size()));
  hid_t space = H5_CHECK(H5Screate(H5S_SCALAR));
  hid_t ds =
      H5_CHECK(H5Dcreate2(file_, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  std::string buf = text.empty() ? std::string(1, '\0') : text;
  H5_CHECK(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()));
  H5Dclose(ds);
  H5Sclose(space);
  H5Tclose(type);
}

bool H5File::exists(const std::string& name) const { return h5_exists(file_, name); }

std::vector<std::string> H5File::children(const std::string& group) const {
  const H5Id g(exists(group) ? H5Gopen2(file_, group.c_str(), H5P_DEFAULT) : -1, H5Gclose);
  H5G_info_t info{};
  if (g.get() < 0 || H5Gget_info(g.get(), &info) < 0)
    throw Error("'" + path_ + "': no readable group '" + group + "'");
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t m =
        H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (m < 0) throw Error("'" + path_ + "': cannot list group '" + group + "'");
    std::string name(size_t(m), '\0');
    H5_CHECK(H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                size_t(m) + 1, H5P_DEFAULT));
    out.push_back(name);
  }
  return out;
}

// Reading trusts nothing in the file: every failure throws Error naming the
// file and the dataset (a corrupt checkpoint is skipped by resume, not fatal).
hid_t H5File::open_dataset(const std::string& name) const {
  return h5_open_dataset(file_, path_, name);
}

size_t H5File::size_of(const std::string& name) const {
  const H5Id ds(open_dataset(name), H5Dclose);
  const H5Id space(H5Dget_space(ds.get()), H5Sclose);
  const hssize_t n = space.get() < 0 ? -1 : H5Sget_simple_extent_npoints(space.get());
  if (n < 0) throw Error("'" + path_ + "': dataset '" + name + "' has no readable shape");
  return size_t(n);
}

std::vector<int64_t> H5File::dims(const std::string& name) const {
  return h5_dims(file_, path_, name);
}

size_t H5File::stored_size_of(const std::string& name) const {
  const H5Id ds(open_dataset(name), H5Dclose);
  const H5Id space(H5Dget_space(ds.get()), H5Sclose);
  const H5Id type(H5Dget_type(ds.get()), H5Tclose);
  const hssize_t n = space.get() < 0 ? -1 : H5Sget_simple_extent_npoints(space.get());
  const size_t item = type.get() < 0 ? 0 : H5Tget_size(type.get());
  const hsize_t stored = H5Dget_storage_size(ds.get());
  if (n < 0 || item == 0)
    throw Error("'" + path_ + "': dataset '" + name + "' has no readable shape or type");
  if (item > 0 && uint64_t(n) > stored / item)
    throw Error("'" + path_ + "': dataset '" + name + "' declares " + std::to_string(n) +
                " values of " + std::to_string(item) + " bytes but stores " +
                std::to_string(stored) + " bytes (truncated or corrupt)");
  return size_t(n);
}

void H5File::read_raw(const std::string& name, hid_t type, void* data) const {
  const H5Id ds(open_dataset(name), H5Dclose);
  if (H5Dread(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    throw Error("cannot read '" + name + "' from '" + path_ + "': " + h5_error_string());
}

std::string H5File::read_string(const std::string& name) const {
  const H5Id ds(open_dataset(name), H5Dclose);
  const H5Id type(H5Dget_type(ds.get()), H5Tclose);
  const size_t n = type.get() < 0 ? 0 : H5Tget_size(type.get());
  // One fixed-length string (what write_string writes), stored in full;
  // anything else would be read past the buffer.
  const H5Id space(H5Dget_space(ds.get()), H5Sclose);
  const hssize_t points = space.get() < 0 ? -1 : H5Sget_simple_extent_npoints(space.get());
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0 ||
      points != 1 || n == 0 || H5Dget_storage_size(ds.get()) < n)
    throw Error("'" + path_ + "': dataset '" + name +
                "' is not one fixed-length string stored in full");
  std::string out(n, '\0');
  if (H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    throw Error("cannot read '" + name + "' from '" + path_ + "': " + h5_error_string());
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

}  // namespace meshloom::ckpt
