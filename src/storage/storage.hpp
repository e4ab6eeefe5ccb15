#pragma once
// The interface every backend implements: local disk and remote servers (storage/remote/). A backend is get,
// put and remove on bytes: keys are lowercase hex digests, values are containers of
// core/entry_format.hpp, the same bytes in every backend. A backend reports failures as values, never
// by throwing: "error" or "timeout", so the caller (storage/layered.hpp) can switch that backend off
// for the rest of the compile and go on without it.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.hpp"

namespace kache::storage {

struct StorageFailure {
  enum class Kind { error, timeout };
  Kind kind = Kind::error;
  std::string message;
};

template <typename T>
using StorageResult = util::Result<T, StorageFailure>;
using StorageStatus = StorageResult<util::Done>;
// ok() and a value: a hit; ok() and nullopt: a miss.
using StorageLookup = StorageResult<std::optional<std::string>>;

class Storage {
 public:
  virtual ~Storage() = default;
  virtual std::string name() const = 0;
  // The bytes stored under key, as they were put (the caller checks and decodes them).
  virtual StorageLookup get(std::string_view key) = 0;
  // Publishes bytes under key atomically; a concurrent reader sees the old bytes, the new ones or none.
  virtual StorageStatus put(std::string_view key, std::string_view bytes) = 0;
  virtual StorageStatus remove(std::string_view key) = 0;
  // Adds this store's own counters (remote hits, errors, bytes, ...) for `kache -s`; none by default.
  virtual void add_counts(std::map<std::string, std::uint64_t>& counts) const { (void)counts; }
};

// What `kache --evict-older-than AGE` and `kache -c` ask of each configured store that keeps its own files
// (a shared directory): a server (Redis, HTTP, S3) evicts by itself and has nothing to do.
struct Maintenance {
  enum class Kind { evict_older_than, trim_to_max_size };
  Kind kind = Kind::trim_to_max_size;
  std::int64_t max_age_s = 0;  // evict_older_than: values not read or written for this long go
};

// What one store did of a Maintenance, for the command to print.
struct MaintenanceOutcome {
  std::string store;           // the store's name (a redacted URL)
  std::uint64_t removed = 0;   // values removed
  std::uint64_t max_size = 0;  // trim_to_max_size: the size it was trimmed to
  std::string error;           // set: the maintenance failed, and why (nothing of it is printed as done)
};

// A value made of a small head and a large body (a cache entry and its object), as a lookup hands it
// over: either {value = head, body_file holding the body} (a store that can put the body into a file
// without passing it through memory: a reflink, else an in-kernel copy; never a hard link, as a later
// write through it would change the cache) or {value = head + body, no file}. Callers handle both.
struct Parts {
  std::string value;
  std::string body_file;  // a new file in the requested directory, owned by the caller; empty if none
  std::uint64_t body_size = 0;
  const char* body_copied_by = nullptr;  // "reflink", "copy_file_range", "read/write" or "zstd stream"
};

}  // namespace kache::storage
