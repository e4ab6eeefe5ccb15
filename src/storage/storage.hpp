#pragma once
// The storage interface every backend implements: local disk today, remote servers later.
// Keys are lowercase hex digests; values are opaque byte strings (serialized entries or manifests).
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
};

}  // namespace kache::storage
