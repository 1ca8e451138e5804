// Compact binary encoding for messages and state: fixed-width little-endian
// fields appended to a std::string, read back with bounds checks. A reader
// that runs past the end throws meshloom::Error (a torn message or file is an
// error, never undefined behaviour).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.hpp"

namespace meshloom {

class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put(uint64_t(v.size()));
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void put_string(const std::string& s) {
    put(uint64_t(s.size()));
    out_.append(s);
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  ByteReader(const char* data, size_t size, const char* what = "message")
      : data_(data), size_(size), what_(what) {}
  explicit ByteReader(const std::string& s, const char* what = "message")
      : ByteReader(s.data(), s.size(), what) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    if (n > (size_ - pos_) / (sizeof(T) ? sizeof(T) : 1)) fail_truncated();
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), data_ + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::string get_string() {
    const uint64_t n = get<uint64_t>();
    need(n);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n) {
    if (n > size_ - pos_) fail_truncated();
  }
  [[noreturn]] void fail_truncated() const {
    throw Error(std::string(what_) + " is truncated or corrupt");
  }
  const char* data_;
  size_t size_, pos_ = 0;
  const char* what_;
};

}  // namespace meshloom
