#include "ckpt/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/strings.hpp"
#include "ckpt/block_checksum.hpp"
#include "ckpt/h5.hpp"

namespace meshloom::ckpt {

namespace fs = std::filesystem;

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

uint64_t checksum(const void* data, size_t n) {
  // FNV-1a over little-endian 64-bit words (the tail zero-padded), then the
  // length: 8x faster than byte-wise FNV on the hundreds of MB of a checkpoint.
  const auto* b = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ULL;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ULL;
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, b + i, n - i);
    h = (h ^ w) * 1099511628211ULL;
  }
  return (h ^ uint64_t(n)) * 1099511628211ULL;
}

std::string checksum_dataset(const std::string& dataset) {
  std::string s = dataset;
  std::replace(s.begin(), s.end(), '/', '|');
  return "checksums/" + s;
}

namespace {

uint64_t stored_checksum(const H5File& f, const std::string& path, const std::string& name) {
  const std::string c = checksum_dataset(name);
  if (!f.exists(c)) throw Error(path + ": no checksum for /" + name);
  return f.read_scalar<uint64_t>(c);
}

[[noreturn]] void corrupt(const std::string& path, const std::string& name) {
  throw Error(path + ": /" + name + " does not match its checksum (the file is corrupt)");
}

}  // namespace

std::string read_verified_string(const H5File& f, const std::string& path,
                                 const std::string& name) {
  std::string s = f.read_string(name);
  if (stored_checksum(f, path, name) != checksum(s.data(), s.size())) corrupt(path, name);
  return s;
}

std::vector<float> read_verified_tensor(const H5File& f, const std::string& path,
                                        const std::string& name) {
  std::vector<float> v = f.read<float>(name);
  const std::vector<int64_t> dims = f.dims(name);
  if (stored_checksum(f, path, name) != block_checksum(dims, Block::whole(dims), v.data()))
    corrupt(path, name);
  return v;
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  return dir + strf("/step_%08lld.h5", (long long)step);
}

int64_t checkpoint_step(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (!starts_with(name, "step_") || !name.ends_with(".h5")) return -1;
  const std::string digits = name.substr(5, name.size() - 8);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

namespace {

// Writes a dataset and its checksum.
class Writer {
 public:
  explicit Writer(H5File& f) : f_(f) {}
  template <class T>
  void put(const std::string& name, const std::vector<T>& data,
           const std::vector<int64_t>& dims = {}) {
    if (dims.empty())
      f_.write(name, data);
    else
      f_.write(name, data, dims);
    sum(name, data.data(), data.size() * sizeof(T));
  }
  template <class T>
  void put_scalar(const std::string& name, T v) {
    f_.write_scalar(name, v);
    sum(name, &v, sizeof(T));
  }
  void put_string(const std::string& name, const std::string& s) {
    f_.write_string(name, s);
    sum(name, s.data(), s.size());
  }
  // A dataset written by others, and its checksum.
  void put_checksum(const std::string& name, uint64_t value) {
    f_.write_scalar(checksum_dataset(name), value);
  }

 private:
  void sum(const std::string& name, const void* p, size_t n) {
    f_.write_scalar(checksum_dataset(name), checksum(p, n));
  }
  H5File& f_;
};

// Reads datasets, verifying each against its checksum.
class Reader {
 public:
  Reader(const H5File& f, const std::string& path) : f_(f), path_(path) {}
  void set_format(int32_t format) { format_ = format; }
  // A model or optimizer tensor: format 2 verifies it by its block checksum.
  std::vector<float> get_tensor(const std::string& name) {
    return format_ == 1 ? get<float>(name) : read_verified_tensor(f_, path_, name);
  }
  // The checksum stored for dataset `name`.
  uint64_t stored(const std::string& name) { return stored_checksum(f_, path_, name); }
  template <class T>
  std::vector<T> get(const std::string& name) {
    std::vector<T> v = f_.read<T>(name);
    check(name, v.data(), v.size() * sizeof(T));
    return v;
  }
  template <class T>
  T get_scalar(const std::string& name) {
    T v = f_.read_scalar<T>(name);
    check(name, &v, sizeof(T));
    return v;
  }
  std::string get_string(const std::string& name) { return read_verified_string(f_, path_, name); }

 private:
  void check(const std::string& name, const void* p, size_t n) {
    if (stored(name) != checksum(p, n)) corrupt(path_, name);
  }
  const H5File& f_;
  std::string path_;
  int32_t format_ = 1;
};

std::vector<float> slice(const std::vector<float>& flat, const Tensor& t) {
  return std::vector<float>(flat.begin() + t.offset, flat.begin() + t.offset + t.numel);
}

// Everything but the tensors: what one process owns.
void write_rest(Writer& w, const Checkpoint& c) {
  w.put_scalar("meta/format", c.format);
  w.put_scalar("meta/step", c.step);
  w.put_scalar("meta/trainers", c.trainers);
  w.put_scalar("meta/seed", c.seed);
  w.put_string("meta/config", c.config);
  w.put_scalar("optim/step", c.adam_step);
  w.put("data/plane", std::vector<uint8_t>(c.plane.begin(), c.plane.end()));
  w.put_string("data/lengths/kind", c.lengths_full ? "full" : "delta");
  w.put_string("data/lengths/base", c.lengths_base);
  for (const auto& s : c.lengths) {
    w.put("data/lengths/" + s.source + "/docs", s.docs);
    w.put("data/lengths/" + s.source + "/lengths", s.lengths);
    if (!s.images.empty()) w.put("data/lengths/" + s.source + "/images", s.images);
  }
  std::vector<int32_t> members;
  std::vector<int64_t> ends;
  for (const auto& set : c.group_sets) {
    members.insert(members.end(), set.begin(), set.end());
    ends.push_back(int64_t(members.size()));
  }
  w.put("data/group_sets/members", members);
  w.put("data/group_sets/ends", ends);
}

}  // namespace

int64_t make_durable(const std::string& tmp, const std::string& path) {
  int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return int64_t(fs::file_size(path, ec));
}

int64_t write_checkpoint(const std::string& path, const Checkpoint& c) {
  ML_CHECK(c.format == 1, "write_checkpoint writes format 1 (one writer holding the state)");
  const std::string tmp = path + ".tmp";
  {
    H5File f(tmp, "w");
    Writer w(f);
    write_rest(w, c);
    for (const Tensor& t : c.tensors) {
      w.put("model/" + t.name, slice(c.params, t), t.shape);
      w.put("optim/m/" + t.name, slice(c.m, t), t.shape);
      w.put("optim/v/" + t.name, slice(c.v, t), t.shape);
    }
    f.flush();
  }
  return make_durable(tmp, path);
}

int64_t finish_checkpoint(const std::string& tmp, const std::string& path, const Checkpoint& c) {
  ML_CHECK(c.format == 2, "finish_checkpoint finishes format 2 (the trainers wrote the tensors)");
  {
    H5File f(tmp, "a");
    Writer w(f);
    write_rest(w, c);
    for (const auto& [name, sum] : c.tensor_sums) w.put_checksum(name, sum);
    f.flush();
  }
  return make_durable(tmp, path);
}

namespace {

// What a read keeps and verifies: everything; the meta data with every
// dataset verified; or the meta data alone (the tensors are verified by
// whoever reads them: train/state_file.hpp).
enum class Read { all, meta_verified, meta };

Checkpoint read_file(const std::string& path, Read what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("checkpoint " + path + " does not exist");
  if (fs::is_directory(path, ec))
    throw Error("checkpoint " + path + " is a folder; give a checkpoint file in it (or auto)");
  Checkpoint c;
  try {
    H5File f(path, "r");
    Reader r(f, path);
    c.format = r.get_scalar<int32_t>("meta/format");
    if (c.format != 1 && c.format != 2)
      throw Error(path +
                  strf(": checkpoint format %d, not one this build reads (1 or 2)", c.format));
    r.set_format(c.format);
    c.step = r.get_scalar<int64_t>("meta/step");
    c.trainers = r.get_scalar<int32_t>("meta/trainers");
    c.seed = r.get_scalar<int64_t>("meta/seed");
    c.config = r.get_string("meta/config");
    c.adam_step = r.get_scalar<int64_t>("optim/step");
    std::vector<uint8_t> plane = r.get<uint8_t>("data/plane");
    c.plane.assign(plane.begin(), plane.end());
    c.lengths_full = r.get_string("data/lengths/kind") == "full";
    c.lengths_base = r.get_string("data/lengths/base");
    // Sources and tensors are found by listing the groups.
    auto children = [&](const std::string& group) {
      std::vector<std::string> names;
      if (!f.exists(group)) return names;
      hid_t g = H5Gopen2(f.id(), group.c_str(), H5P_DEFAULT);
      if (g < 0) throw Error(path + ": cannot open group /" + group);
      hsize_t n = 0;
      H5Gget_num_objs(g, &n);
      for (hsize_t i = 0; i < n; ++i) {
        char name[1024];
        if (H5Gget_objname_by_idx(g, i, name, sizeof(name)) < 0) {  // name would be unset
          H5Gclose(g);
          throw Error(path + ": cannot list group /" + group);
        }
        names.emplace_back(name);
      }
      H5Gclose(g);
      return names;
    };
    for (const auto& s : children("data/lengths")) {
      if (s == "kind" || s == "base") continue;
      SourceLengths sl;
      sl.source = s;
      sl.docs = r.get<int64_t>("data/lengths/" + s + "/docs");
      sl.lengths = r.get<int64_t>("data/lengths/" + s + "/lengths");
      if (f.exists("data/lengths/" + s + "/images"))
        sl.images = r.get<int64_t>("data/lengths/" + s + "/images");
      if (sl.docs.size() != sl.lengths.size() ||
          (!sl.images.empty() && sl.images.size() != sl.docs.size()))
        throw Error(path + ": lengths of " + s + " torn");
      c.lengths.push_back(std::move(sl));
    }
    if (f.exists("data/group_sets/ends")) {  // absent in older checkpoints: no preference
      const std::vector<int32_t> members = r.get<int32_t>("data/group_sets/members");
      const std::vector<int64_t> ends = r.get<int64_t>("data/group_sets/ends");
      int64_t at = 0;
      for (int64_t end : ends) {
        if (end < at || end > int64_t(members.size())) throw Error(path + ": group sets torn");
        c.group_sets.emplace_back(members.begin() + at, members.begin() + end);
        at = end;
      }
    }
    if (c.format == 2)
      for (const auto& name : children("model"))
        for (const char* part : {"model/", "optim/m/", "optim/v/"})
          c.tensor_sums[part + name] = r.stored(part + name);
    if (what == Read::meta) return c;
    if (what == Read::meta_verified) {
      // Still verify the large datasets, one at a time, without keeping them.
      for (const auto& name : children("model"))
        for (const char* part : {"model/", "optim/m/", "optim/v/"}) r.get_tensor(part + name);
      return c;
    }
    for (const auto& name : children("model")) {
      Tensor t;
      t.name = name;
      t.numel = int64_t(f.size_of("model/" + name));
      c.tensors.push_back(t);
    }
    int64_t at = 0;
    for (auto& t : c.tensors) {
      std::vector<float> p = r.get_tensor("model/" + t.name);
      std::vector<float> m = r.get_tensor("optim/m/" + t.name);
      std::vector<float> v = r.get_tensor("optim/v/" + t.name);
      if (m.size() != p.size() || v.size() != p.size())
        throw Error(path + ": optimizer state of " + t.name + " has the wrong size");
      t.offset = at;
      at += t.numel;
      c.params.insert(c.params.end(), p.begin(), p.end());
      c.m.insert(c.m.end(), m.begin(), m.end());
      c.v.insert(c.v.end(), v.begin(), v.end());
    }
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find(path) == std::string::npos) msg = path + ": " + msg;
    throw Error(msg);
  }
  return c;
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path, bool only_meta) {
  return read_file(path, only_meta ? Read::meta_verified : Read::all);
}

Checkpoint read_checkpoint_meta(const std::string& path) { return read_file(path, Read::meta); }

std::string read_checkpoint_config(const std::string& path) {
  H5File f(path, "r");
  return Reader(f, path).get_string("meta/config");
}

std::string verify_checkpoint(const std::string& path) {
  try {
    read_checkpoint(path, /*only_meta=*/true);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (checkpoint_step(name) >= 0) out.push_back(e.path().string());
  }
  std::sort(out.rbegin(), out.rend());  // zero-padded step numbers sort by name
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep, const IsOurs& ours) {
  std::vector<std::string> all;
  for (const auto& p : list_checkpoints(dir))
    if (ours(p)) all.push_back(p);
  std::set<std::string> needed;
  for (size_t i = 0; i < all.size() && int64_t(i) < keep; ++i) {
    needed.insert(all[i]);
    // A kept delta needs its full-lengths base.
    try {
      H5File f(all[i], "r");
      std::string base = f.read_string("data/lengths/base");
      if (!base.empty()) needed.insert((fs::path(dir) / base).string());
    } catch (const Error&) {
    }
  }
  std::error_code ec;
  for (const auto& p : all)
    if (!needed.count(p)) fs::remove(p, ec);
}

}  // namespace meshloom::ckpt
