// Compact binary encoding for messages and state: fixed-width little-endian
// fields appended to a std::string, read back with bounds checks. A reader
// that runs past the end throws meshloom::Error (a torn message or file is an
// error, never undefined behaviour).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
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
  // LEB128: 7 bits a byte, low first; small counts take one byte.
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char(uint8_t(v) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(uint8_t(v)));
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // `peer`: the world rank the bytes came from (-1: a file or a local
  // buffer), named in the error of a truncated or corrupt message.
  ByteReader(const char* data, size_t size, const char* what = "message", int peer = -1)
      : data_(data), size_(size), what_(what), peer_(peer) {}
  explicit ByteReader(const std::string& s, const char* what = "message", int peer = -1)
      : ByteReader(s.data(), s.size(), what, peer) {}
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
    if (n > (size_ - pos_) / (sizeof(T) ? sizeof(T) : 1)) fail_count(n, sizeof(T));
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
  uint64_t get_varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto b = get<uint8_t>();
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail_corrupt("a varint longer than 10 bytes");
  }
  // The next n bytes, in place (valid while the reader's bytes are).
  std::string_view get_view(size_t n) {
    need(n);
    const std::string_view v(data_ + pos_, n);
    pos_ += n;
    return v;
  }
  void get_raw(void* out, size_t n) {
    need(n);
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
  }
  // A count of items that take at least `min_bytes` each on the wire: one
  // that the rest of the bytes cannot hold is corrupt (a length field of 2^60
  // must fail here, not allocate).
  uint64_t get_count(size_t min_bytes) {
    const uint64_t n = get<uint64_t>();
    if (n > (size_ - pos_) / (min_bytes ? min_bytes : 1)) fail_count(n, min_bytes);
    return n;
  }
  bool done() const { return pos_ == size_; }
  size_t offset() const { return pos_; }

  // Throws Error: "WHAT from rank PEER is corrupt at byte OFFSET of SIZE: why".
  [[noreturn]] void fail_corrupt(const std::string& why) const {
    throw Error(describe() + " is corrupt at byte " + std::to_string(pos_) + " of " +
                std::to_string(size_) + ": " + why);
  }

 private:
  void need(size_t n) {
    if (n > size_ - pos_) fail_truncated(n);
  }
  [[noreturn]] void fail_truncated(uint64_t wanted) const {
    throw Error(describe() + " is truncated or corrupt: " + std::to_string(wanted) +
                " bytes wanted at byte " + std::to_string(pos_) + " of " + std::to_string(size_));
  }
  [[noreturn]] void fail_count(uint64_t n, size_t each) const {
    throw Error(describe() + " is truncated or corrupt: a count of " + std::to_string(n) +
                " items of " + std::to_string(each) + " bytes at byte " + std::to_string(pos_ - 8) +
                " of " + std::to_string(size_));
  }
  std::string describe() const {
    return std::string(what_) + (peer_ >= 0 ? " from rank " + std::to_string(peer_) : "");
  }
  const char* data_;
  size_t size_, pos_ = 0;
  const char* what_;
  int peer_ = -1;
};

}  // namespace meshloom
