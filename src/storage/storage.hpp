#pragma once
// The storage interface every backend implements: local disk today, remote servers later.
// Keys are lowercase hex digests; values are opaque byte strings (serialized entries or manifests).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kache::storage {

class Storage {
 public:
  virtual ~Storage() = default;
  virtual std::string name() const = 0;
  // nullopt on a miss. A corrupt entry is detected, removed and reported as a miss (never thrown).
  // Throws only on an internal failure of the backend (the caller degrades to running the compiler).
  virtual std::optional<std::string> get(std::string_view key) = 0;
  // Publishes value under key atomically; a concurrent reader sees the old value, the new one or none.
  virtual void put(std::string_view key, std::string_view value) = 0;
  virtual void remove(std::string_view key) = 0;

  // A value made of a small head and a large body (a cache entry and its object), for backends that
  // can put the body into a file without passing it through memory: a reflink, else an in-kernel
  // copy; never a hard link (a later write through it would change the cache). get_parts(key) after
  // put_parts(key, h, b) gives either {value = h, body_file holding b} or {value = h + b, no file},
  // so callers handle both. The defaults store and return the whole value.
  struct Parts {
    std::string value;
    std::string body_file;  // a new file in the requested directory, owned by the caller; empty if none
    std::uint64_t body_size = 0;
    const char* body_copied_by = nullptr;  // "reflink", "copy_file_range" or "read/write"
  };
  virtual void put_parts(std::string_view key, std::string_view head, std::string_view body) {
    std::string value;
    value.reserve(head.size() + body.size());
    value.append(head);
    value.append(body);
    put(key, value);
  }
  // body_dir: where to create body_file (the directory of its final destination, so a rename
  // publishes it).
  virtual std::optional<Parts> get_parts(std::string_view key, const std::string& body_dir) {
    (void)body_dir;
    auto v = get(key);
    if (!v) return std::nullopt;
    return Parts{std::move(*v), "", 0, nullptr};
  }
};

}  // namespace kache::storage
