#pragma once
// A tiny length-prefixed binary encoding for kache's own records (entries, manifests, memos).
// Chosen over JSON because a hit decodes a manifest of ~2000 files and must stay in the microseconds.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "util/fs.hpp"

namespace kache::util {

class Writer {
 public:
  void u8(std::uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void i64(std::int64_t v) { raw(&v, sizeof v); }
  void str(std::string_view s) {
    u64(s.size());
    buf_.append(s.data(), s.size());
  }
  void bytes(const void* p, std::size_t n) { raw(p, n); }
  std::string take() { return std::move(buf_); }
  const std::string& data() const { return buf_; }

 private:
  void raw(const void* p, std::size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;
};

// Throws std::runtime_error on truncated or malformed input, which callers treat as corruption.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(*take(1)); }
  std::uint32_t u32() { return pod<std::uint32_t>(); }
  std::uint64_t u64() { return pod<std::uint64_t>(); }
  std::int64_t i64() { return pod<std::int64_t>(); }
  std::string str() { return std::string(str_view()); }
  // A view into the data being read (valid as long as that data is).
  std::string_view str_view() {
    const std::uint64_t n = u64();
    if (n > data_.size() - pos_) throw std::runtime_error("truncated record");
    return std::string_view(take(n), n);
  }
  void bytes(void* p, std::size_t n) { std::memcpy(p, take(n), n); }
  // A u32 record count, checked against the bytes left (each record takes at least min_size), so a
  // damaged count fails here instead of making the caller allocate gigabytes first.
  std::uint32_t count(std::size_t min_size) {
    const std::uint32_t n = u32();
    if (n > remaining() / min_size) throw std::runtime_error("record count exceeds the data");
    return n;
  }
  bool done() const { return pos_ == data_.size(); }
  std::size_t remaining() const { return data_.size() - pos_; }

 private:
  template <typename T>
  T pod() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const char* take(std::size_t n) {
    if (n > data_.size() - pos_) throw std::runtime_error("truncated record");
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::string_view data_;
  std::size_t pos_ = 0;
};

// A file identity as the manifest and the toolchain memo store it; `with_dir` adds the directory flag
// (the manifest's absent-path groups need it, the toolchain memo's files are never directories).
inline void write_identity(Writer& w, const FileIdentity& id, bool with_dir) {
  w.u64(id.dev);
  w.u64(id.ino);
  w.i64(id.size);
  w.i64(id.mtime_ns);
  w.i64(id.ctime_ns);
  if (with_dir) w.u8(id.is_dir ? 1 : 0);
}
inline FileIdentity read_identity(Reader& r, bool with_dir) {
  FileIdentity id;
  id.dev = r.u64();
  id.ino = r.u64();
  id.size = r.i64();
  id.mtime_ns = r.i64();
  id.ctime_ns = r.i64();
  if (with_dir) id.is_dir = r.u8() != 0;
  return id;
}

}  // namespace kache::util
